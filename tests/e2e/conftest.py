"""One real ``prefect server start`` on loopback for the end-to-end tests (scheduler and UI included)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest
from e2e_support import BIN, free_port, stop, wait_http


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """``prefect server start`` on a free loopback port, as docs/operations.md step 1; its log is kept."""
    root = tmp_path_factory.mktemp("prefect-server")
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_HOME": str(root / "prefect-home"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_UI_API_URL": api}  # the UI's own API address (it assumes port 4200 otherwise)
    env.pop("PREFECT_API_URL", None)
    log = (root / "server.log").open("wb")
    server = subprocess.Popen([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                              env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_http(f"{api}/health", 180)
        yield {"api": api, "env": env, "log": root / "server.log"}
    finally:
        stop(server)
        log.close()
