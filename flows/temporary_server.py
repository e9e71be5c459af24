"""Prefect's temporary API server for a CLI run without ``PREFECT_API_URL``, started early.

When no Prefect API is configured, Prefect starts a temporary local API server (its "ephemeral" mode)
the first time a flow is called, and stops it when the process exits. Left to Prefect, a cold
``fdp release`` pays three costs one after the other: the release's own imports, importing Prefect's
server package into the CLI process (only to launch the server, ~3 s), and the server process's
start (its own imports and database check, ~4 s). :func:`start_temporary_server` launches the
same server — the same command and environment as Prefect 3.9's
``prefect.server.api.server.SubprocessASGIServer`` (UI off, ephemeral services; checked against 3.9.1) — as soon as the
CLI knows no API is configured, so the server boots on the other core while the CLI imports the
summary's flow; :meth:`TemporaryServer.settings` then points the flow at it.

Settings applied to the flow run, only for this temporary server and only as defaults (a value the
user set wins): ``PREFECT_FLOWS_HEARTBEAT_FREQUENCY`` unset (heartbeats let a server mark a run
whose process died as crashed; a temporary server dies with that process, and stopping the
heartbeat thread costs up to 1 s at the end of every run) and ``PREFECT_UI_URL`` empty (the
temporary server serves no UI, so no "View at" link is printed, as with Prefect's own).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import Any

__all__ = ["TemporaryServer", "start_temporary_server"]

#: uvicorn exits with this code when its port was taken in the meantime; Prefect then retries on another port.
_PORT_IN_USE = 3
_CURRENT: TemporaryServer | None = None
#: prctl(2) option: the signal the kernel sends this process when its parent thread exits (Linux).
_PR_SET_PDEATHSIG = 1


class TemporaryServer:
    """A Prefect API server in a subprocess, stopped when this process exits.

    Its life is tied to this process: ``atexit`` stops it on a normal exit, and on Linux the kernel kills
    it when this process dies any other way (``kill -9``, out of memory), through ``PR_SET_PDEATHSIG``.
    """

    def __init__(self, env: dict[str, str]) -> None:
        self._env = env
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        # The server's own output goes to a private file, shown only when it fails to start (or with FDP_DEBUG):
        # stopping it at exit makes its event services print cancellation tracebacks that are no error of the run.
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        self._launch()
        atexit.register(self.stop)  # after Prefect's own exit handlers (atexit is last in, first out)

    @property
    def api_url(self) -> str:
        """The server's API URL (``http://127.0.0.1:<port>/api``)."""
        return f"http://127.0.0.1:{self.port}/api"

    def _launch(self) -> None:
        self.port = _free_port()
        spec = find_spec("prefect")
        assert spec is not None and spec.origin is not None
        parent, prctl = os.getpid(), _prctl()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--app-dir", str(Path(spec.origin).parent.parent), "--factory",
             "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(self.port),
             "--log-level", "error", "--lifespan", "on"],
            env=self._env, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in the terminal reaches fdp, which stops the server itself
            preexec_fn=lambda: _die_with(parent, prctl),  # noqa: PLW1509 - async-signal-safe: one prctl call
        )

    def wait_until_healthy(self, timeout: float) -> None:
        """Block until ``/api/health`` answers 200.

        Raises:
            RuntimeError: the server exited or did not answer within ``timeout`` seconds.
        """
        logging.getLogger("prefect").info(  # Prefect's own words; its logging is set up by now
            "Starting temporary server on http://127.0.0.1:%d\nSee https://www.prefect.io/docs/v3/concepts/server"
            "#how-to-guides for more information on running a dedicated Prefect server.", self.port)
        deadline = time.monotonic() + timeout
        while True:
            assert self.process is not None
            code = self.process.poll()
            if code == _PORT_IN_USE:
                self._launch()
            elif code is not None:
                raise RuntimeError(f"the temporary Prefect server exited with code {code} before it answered; its "
                                   f"output ends:\n{self._output_tail()}")
            try:
                with urllib.request.urlopen(f"{self.api_url}/health", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the temporary Prefect server did not answer within {timeout:g} s; raise "
                    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS or start one (`prefect server start`)")
            time.sleep(0.1)

    @contextlib.contextmanager
    def settings(self) -> Iterator[None]:
        """Prefect settings for a flow run against this server (see the module docstring)."""
        from prefect.settings import (
            PREFECT_API_URL,
            PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
            PREFECT_UI_URL,
            temporary_settings,
        )

        with temporary_settings(updates={PREFECT_API_URL: self.api_url},
                                set_defaults={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None, PREFECT_UI_URL: ""}):
            yield

    def _output_tail(self, limit: int = 4000) -> str:
        if getattr(self, "_log", None) is None or self._log.closed:
            return "(not captured)"
        self._log.flush()
        self._log.seek(0, os.SEEK_END)
        size = self._log.tell()
        self._log.seek(max(0, size - limit))
        return self._log.read().decode(errors="replace")

    def stop(self) -> None:
        """Terminate the server (idempotent); its output is discarded unless ``FDP_DEBUG`` is set."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            logging.getLogger("prefect").info("Stopping temporary server on http://127.0.0.1:%d", self.port)
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log = getattr(self, "_log", None)
        if log is not None and not log.closed:
            if os.environ.get("FDP_DEBUG"):
                sys.stderr.write(self._output_tail())
            log.close()


def start_temporary_server() -> TemporaryServer | None:
    """Launch Prefect's temporary API server now when Prefect would start one for a flow run, else None.

    That is when no ``PREFECT_API_URL`` is configured (environment, profile or ``prefect.toml``) and
    ephemeral mode is allowed (Prefect's default profile); the server inherits the current Prefect
    settings as environment variables, as Prefect's own launch does.
    """
    global _CURRENT
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED, get_current_settings

    if PREFECT_API_URL.value() or not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
        return None
    if _CURRENT is not None and _CURRENT.process is not None and _CURRENT.process.poll() is None:
        return _CURRENT  # one server per process, as Prefect's own
    settings: Any = get_current_settings()
    env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1",
           **settings.to_environment_variables(exclude_unset=True)}
    _CURRENT = TemporaryServer(env)
    return _CURRENT


def _prctl() -> Any:
    """Libc's ``prctl``, looked up in the parent (the child between fork and exec only calls it), or None."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: atexit alone stops the server
        return None


def _die_with(parent: int, prctl: Any) -> None:
    """In the server's child process, before exec: ask Linux to send SIGKILL when fdp dies (even by ``kill -9``, when ``atexit`` never runs), so no orphaned server keeps its port and database."""
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # fdp died before the request took effect
        os._exit(1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
