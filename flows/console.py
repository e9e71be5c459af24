"""The ``fdp`` console script (``[project.scripts]`` in pyproject.toml): Ctrl-C and SIGTERM from the first line.

``fdp`` spends its first second or two importing (NumPy, PyArrow, SQLAlchemy, Pydantic) before a command
runs. This module imports only :mod:`fdp.flows.interrupts` (the standard library) before it makes SIGINT
and SIGTERM raise :class:`~fdp.flows.interrupts.Interrupted`, so a signal during those imports ends
``fdp`` with one line and the conventional exit code (130 / 143) instead of a ``KeyboardInterrupt``
traceback or a silent exit: nothing has been read or charged yet. Later signals are handled by
:func:`fdp.flows.cli.main` and, during a release, by :func:`fdp.flows.interrupts.interrupts`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from typing import NoReturn

from fdp.flows.interrupts import Interrupted, signal_name, stop_on_signals


def main() -> int:
    """Entry point of the ``fdp`` command; the process ends in :func:`end` (:func:`fdp.flows.cli.main` does the work)."""
    stop_on_signals()
    try:
        from fdp.flows.cli import main as cli_main
    except Interrupted as exc:
        sys.stderr.write(f"fdp: error: stopped by {signal_name(exc.signum)} before anything was read or charged\n")
        return 128 + exc.signum
    return end(cli_main())


def end(code: int) -> NoReturn:
    """End the process with ``code`` once its shutdown work is done, skipping the interpreter's final teardown.

    What a normal exit does that matters is done here, in the interpreter's order: ``threading._shutdown`` (the
    callbacks of ``threading._register_atexit`` — Prefect's log and event drains, while the temporary server still
    runs — then the non-daemon threads), the ``atexit`` callbacks (the temporary server's stop, logging's shutdown),
    then a flush of stdout and stderr. Then ``os._exit``: the teardown that follows a normal exit would first restore the default
    SIGINT/SIGTERM handlers — a signal then, after a published release, ended the process with 143 and no note
    (trial L) — and then tear down native libraries, whose threads can abort the process (PyArrow's: exit 134 after a
    completed ``fdp init``, trial J). Neither changes anything recorded, so neither may change the exit code.
    """
    threading._shutdown()  # type: ignore[attr-defined]  # what a normal exit runs first (Prefect's queue drains)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a reader that has gone (a closed pipe) changes nothing recorded
            stream.flush()
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover - `python -m fdp.flows.console`
    sys.exit(main())
