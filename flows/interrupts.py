"""Ctrl-C and SIGTERM during ``fdp release``: end promptly, and say what the ledger holds.

:func:`interrupts` turns SIGINT and SIGTERM into :class:`Interrupted` (so no ``KeyboardInterrupt``
traceback is printed; the CLI catches it and prints the crash-table next step for the state the
ledger reached, docs/audit.md). Prefect replaces the SIGTERM handler while a flow runs (its own
raises ``TerminationSignal``, which the CLI treats the same way).

A Python signal handler runs only when the main thread next executes Python code; a release stuck
in one long NumPy/LAPACK call would ignore the signal until the call returns. So a watchdog thread
listens on :func:`signal.set_wakeup_fd`, which the interpreter's C-level handler writes at once: if
the process has not ended :data:`GRACE_SECONDS` after a signal, the watchdog prints the same
guidance and ends the process with the conventional code (130 for SIGINT, 143 for SIGTERM). The
ledger needs no clean-up: every state a release can be in is a row of the crash table.

Before that, :func:`stop_on_signals` (called first thing by the ``fdp`` console script,
:mod:`fdp.flows.console`) makes the two signals raise :class:`Interrupted` during the imports too. A
signal the process was started with ignored stays ignored throughout (POSIX: a non-interactive shell
starts background jobs, ``fdp release ... &`` in a script, with SIGINT ignored; ``kill PID`` sends SIGTERM).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType

__all__ = ["GRACE_SECONDS", "Interrupted", "exit_code", "finish_quietly", "interrupts", "signal_name", "stop_on_signals"]

#: Seconds the main thread gets to unwind after a signal before the watchdog ends the process.
GRACE_SECONDS = 10.0


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived; ``signum`` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def exit_code(exc: BaseException) -> int | None:
    """128 + signal number for an interrupt (``KeyboardInterrupt``, :class:`Interrupted`, Prefect's ``TerminationSignal``), else None."""
    signum = getattr(exc, "signum", None) or getattr(exc, "signal", None)
    if isinstance(signum, int) and type(exc).__name__ in ("Interrupted", "TerminationSignal"):
        return 128 + signum
    if isinstance(exc, KeyboardInterrupt):
        return 128 + signal.SIGINT
    return None


def signal_name(signum: int) -> str:
    """The signal as the messages name it.

    >>> signal_name(2), signal_name(15)
    ('SIGINT (Ctrl-C)', 'SIGTERM')
    """
    return "SIGINT (Ctrl-C)" if signum == signal.SIGINT else signal.Signals(signum).name


#: Set by :func:`finish_quietly`: once a release is complete, a signal is noted (once) instead of raised.
_QUIET: list[Callable[[int], str]] = []
_NOTED: list[int] = []


def _raise(signum: int, frame: FrameType | None) -> None:
    if _QUIET:
        _note(signum)
        return
    raise Interrupted(signum)


def _note(signum: int) -> None:
    if not _NOTED:
        _NOTED.append(signum)
        with contextlib.suppress(Exception):
            sys.stderr.write(_QUIET[0](signum) + "\n")
            sys.stderr.flush()


def _handled() -> tuple[signal.Signals, ...]:
    """SIGINT and SIGTERM, except one this process was started with ignored (it stays ignored)."""
    return tuple(s for s in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(s) is not signal.SIG_IGN)


def stop_on_signals() -> None:
    """From now on SIGINT and SIGTERM raise :class:`Interrupted` in the main thread (a signal ignored at start stays ignored)."""
    _QUIET.clear()
    _NOTED.clear()
    for s in _handled():
        signal.signal(s, _raise)


def finish_quietly(note: Callable[[int], str]) -> None:
    """After a release has published: SIGINT/SIGTERM print ``note(signum)`` once and let the process end normally.

    What is left (closing the temporary Prefect server, the interpreter's exit) changes nothing recorded, so a signal
    then must neither kill the process silently with 143 nor raise in an ``atexit`` callback (trial J, L1): the
    release is complete and the process exits 0 once its shutdown is done. A signal ignored at start stays ignored.
    Every handler of this module then notes instead of raising, so a release block (:func:`interrupts`) that
    restores its predecessor's handler on the way out cannot turn a signal back into 143 (trial L's CI race: a
    SIGTERM right after the summary, before the block ended).
    """
    _QUIET[:] = [note]
    for s in _handled():
        signal.signal(s, _raise)


@contextlib.contextmanager
def interrupts(advice: Callable[[int], str]) -> Iterator[None]:
    """Within the block, SIGINT/SIGTERM raise :class:`Interrupted`; a watchdog ends the process with ``advice(signum)`` on stderr if it has not ended :data:`GRACE_SECONDS` after the signal.

    Only from the main thread (elsewhere the block runs unchanged).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _QUIET.clear()  # a new release: signals raise again until it completes
    _NOTED.clear()
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    done = threading.Event()
    old = {s: signal.signal(s, _raise) for s in _handled()}
    old_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)

    def watch() -> None:
        signum = 0
        while signum not in (signal.SIGINT, signal.SIGTERM):
            try:
                data = reader.recv(1)
            except OSError:
                return
            if not data:
                return  # the block ended
            signum = data[0]
        if done.wait(GRACE_SECONDS) or _QUIET:  # ended, or the release completed meanwhile (noted, not killed)
            return
        with contextlib.suppress(Exception):
            sys.stderr.write(f"fdp: error: stopped by {signal.Signals(signum).name}\n{advice(signum)}\n")
            sys.stderr.flush()
        os._exit(128 + signum)

    watchdog = threading.Thread(target=watch, name="fdp-interrupt-watchdog", daemon=True)
    watchdog.start()
    try:
        yield
    finally:
        done.set()
        signal.set_wakeup_fd(old_fd)
        for s, handler in old.items():
            signal.signal(s, handler)
        writer.close()  # wakes the watchdog (recv returns b"")
        reader.close()
