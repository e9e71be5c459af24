"""Provenance facts about the running code (version, git commit)."""

from __future__ import annotations

import getpass
import socket
import subprocess
from pathlib import Path

__all__ = ["git_sha", "operator_host"]


def git_sha() -> str | None:
    """The git commit of the fdp checkout this code runs from, or None if not a checkout."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    sha = out.stdout.strip()
    return sha if out.returncode == 0 and len(sha) == 40 else None


def operator_host() -> tuple[str, str]:
    """The OS user running fdp and the host name (recorded in the ledger, never in public files)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return user, socket.gethostname()
