"""MkDocs hook: let mkdocstrings find ``fdp.schemas`` under the name it is installed as.

The ``fdp`` namespace maps ``fdp.schemas`` to the folder ``schemas/`` (pyproject's package-dir), which a
static reader cannot follow through the editable install; a link tree ``fdp/schemas -> schemas`` in a
temporary folder on ``sys.path`` shows it where an import would find it (tests/test_lint.py does the same for mypy).
"""

from __future__ import annotations

import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
_TREE = tempfile.TemporaryDirectory(prefix="fdp-docs-")


def on_startup(command: str = "build", **_: Any) -> None:
    """Lay out the link tree once per MkDocs process; ``mkdocs serve`` ends on SIGTERM as on Ctrl-C.

    Python's default SIGTERM ends the process at once, leaving ``mkdocs serve``'s temporary site and this link
    tree in /tmp (trial R); raised as ``KeyboardInterrupt``, it takes the server's own way out, which removes
    its site and calls :func:`on_shutdown`.
    """
    if command == "serve":
        signal.signal(signal.SIGTERM, signal.default_int_handler)
    fdp = Path(_TREE.name) / "fdp"
    if not fdp.exists():
        fdp.mkdir()
        (fdp / "schemas").symlink_to(_ROOT / "schemas")
    if _TREE.name not in sys.path:
        sys.path.insert(0, _TREE.name)


def on_shutdown(**_: Any) -> None:
    """Remove the link tree (its finaliser would too, but not when the process is ended by a signal)."""
    _TREE.cleanup()
