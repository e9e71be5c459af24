#!/usr/bin/env python3
"""Set up fdp's virtual environment and run it: the Quick-start commands and the results report.

    python3 dev.py demo            # set up .venv (first time) and run a demo release
    python3 dev.py test [ARGS]     # set up .venv (first time) and run the whole test suite (as root on
                                   # Debian it first installs the postgresql and chromium packages, if missing)
    python3 dev.py results [ARGS]  # set up .venv (first time) and regenerate docs/results.md
                                   # (python -m experiments.report ARGS, e.g. --reps 100 --only fpca_table1)
    python3 dev.py docs [serve]    # set up .venv (first time) and build the manual into site/ (strict),
                                   # or serve it on http://127.0.0.1:8000

Only python3 (>= 3.11) is needed on the machine; everything else is installed into
./.venv from pyproject.toml. The install is redone when pyproject.toml changes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".fdp-install-stamp"


def ensure_env() -> Path:
    """Create .venv and install fdp with its test extras if pyproject.toml changed since the last install."""
    if sys.version_info < (3, 11):
        sys.exit(f"fdp needs Python >= 3.11; this is {sys.version.split()[0]}")
    python = BIN / "python"
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if python.exists() and STAMP.exists() and STAMP.read_text().strip() == want:
        return python
    if not python.exists():
        print("dev.py: creating .venv", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    print("dev.py: installing fdp and its dependencies into .venv", flush=True)
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "--upgrade", "pip", "setuptools>=69", "wheel"], check=True)
    subprocess.run([*pip, "-e", f"{ROOT}[test]"], check=True)
    STAMP.write_text(want)
    return python


#: Debian packages some tests use, each with the test it is for and whether the machine already has it.
SYSTEM_PACKAGES = {
    "postgresql": ("the ledger's PostgreSQL tests (a throw-away server)",
                   lambda: any(Path("/usr/lib/postgresql").glob("*/bin/initdb"))),
    "chromium": ("the Prefect UI's headless-browser test",
                 lambda: bool(shutil.which("chromium") or shutil.which("chromium-browser"))),
}


def ensure_system_packages() -> None:
    """Install the missing :data:`SYSTEM_PACKAGES` with apt-get when this is root on a machine that has it.

    Anywhere else, or if apt-get fails, the tests that need them are skipped, each with its reason, and this says so.
    """
    missing = [name for name, (_, present) in SYSTEM_PACKAGES.items() if not present()]
    if not missing:
        return
    if not shutil.which("apt-get") or not hasattr(os, "geteuid") or os.geteuid() != 0:
        for name in missing:
            print(f"dev.py: Debian's {name} is not installed (apt-get install {name}, as root): "
                  f"{SYSTEM_PACKAGES[name][0]} will be skipped", flush=True)
        return
    print(f"dev.py: installing Debian's {', '.join(missing)} (apt-get) for the tests", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing]
    failure = _apt(install, env)
    if failure:  # the package lists may be missing or stale: update them and try once more
        failure = _apt(["apt-get", "update", "-q"], env) or _apt(install, env)
    if failure:
        print(f"dev.py: {failure}\ndev.py: the tests that need {', '.join(missing)} will be skipped", flush=True)


def _apt(command: list[str], env: dict[str, str]) -> str:
    """Run one apt-get command; what went wrong, or "" when it succeeded."""
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, check=False)
    except subprocess.TimeoutExpired:
        return f"{' '.join(command)} took over 900 s"
    return "" if done.returncode == 0 else f"{' '.join(command)} failed (exit {done.returncode}): {done.stderr.strip()[-400:]}"


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"demo", "test", "results", "docs", "setup"}:
        print(__doc__)
        return 2
    python = ensure_env()
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    if argv[0] == "setup":
        return 0
    if argv[0] == "demo":
        return subprocess.run([str(BIN / "fdp"), "demo", *argv[1:]], env=env, check=False).returncode
    if argv[0] == "docs":
        env["NO_MKDOCS_2_WARNING"] = "1"
        args = ["serve", *argv[2:]] if argv[1:2] == ["serve"] else ["build", "--strict", *argv[1:]]
        os.chdir(ROOT)  # mkdocs replaces this process, so Ctrl-C and SIGTERM reach it, not a parent that kills it
        os.execve(str(BIN / "mkdocs"), [str(BIN / "mkdocs"), *args], env)
    if argv[0] == "results":
        return subprocess.run([str(python), "-m", "experiments.report", *argv[1:]], cwd=ROOT, env=env,
                              check=False).returncode
    ensure_system_packages()
    return subprocess.run([str(python), "-m", "pytest", *argv[1:]], cwd=ROOT, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
