"""The ``fdp`` console script (``[project.scripts]`` in pyproject.toml): Ctrl-C and SIGTERM from the first line.

``fdp`` spends its first second or two importing (NumPy, PyArrow, SQLAlchemy, Pydantic) before a command
runs. This module imports only :mod:`fdp.flows.interrupts` (the standard library) before it makes SIGINT
and SIGTERM raise :class:`~fdp.flows.interrupts.Interrupted`, so a signal during those imports ends
``fdp`` with one line and the conventional exit code (130 / 143) instead of a ``KeyboardInterrupt``
traceback or a silent exit: nothing has been read or charged yet. Later signals are handled by
:func:`fdp.flows.cli.main` and, during a release, by :func:`fdp.flows.interrupts.interrupts`.
"""

from __future__ import annotations

import sys

from fdp.flows.interrupts import Interrupted, signal_name, stop_on_signals


def main() -> int:
    """Entry point of the ``fdp`` command; returns the exit code (:func:`fdp.flows.cli.main` does the work)."""
    stop_on_signals()
    try:
        from fdp.flows.cli import main as cli_main
    except Interrupted as exc:
        sys.stderr.write(f"fdp: error: stopped by {signal_name(exc.signum)} before anything was read or charged\n")
        return 128 + exc.signum
    return cli_main()


if __name__ == "__main__":  # pragma: no cover - `python -m fdp.flows.console`
    sys.exit(main())
