"""Shared test configuration: isolated state directories, the `slow` marker, ledger back ends.

PostgreSQL tests start a throw-away server from Debian's binaries when ``/usr/lib/postgresql/*/bin``
exists (``python3 dev.py test`` installs the ``postgresql`` package when it can); otherwise they are skipped
with the reason, and the same tests run on SQLite.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--runslow", action="store_true", default=False, help="also run tests marked slow")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test gets its own fdp state directory (ledger) and no inherited ledger URL."""
    monkeypatch.setenv("FDP_STATE_DIR", str(tmp_path / "fdp-state"))
    monkeypatch.delenv("FDP_LEDGER_URL", raising=False)
    yield


PG_BINS = sorted(glob.glob("/usr/lib/postgresql/*/bin"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _postgres_server() -> Iterator[str]:
    """Start a server on a Unix socket in a temporary directory; yield its admin URL; stop it."""
    if not PG_BINS:
        pytest.skip("PostgreSQL is not installed here (Debian package 'postgresql'); the same tests ran on SQLite")
    if importlib.util.find_spec("psycopg") is None:
        pytest.skip("the psycopg driver is not installed (pip install 'psycopg[binary]')")
    bindir = PG_BINS[-1]
    home = tempfile.mkdtemp(prefix="fdp-pg-")
    os.chmod(home, 0o777)
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    data = os.path.join(home, "data")
    port = _free_port()
    subprocess.run([*as_user, f"{bindir}/initdb", "-D", data, "-A", "trust", "-U", "fdp", "--no-sync"],
                   check=True, capture_output=True)
    subprocess.run(
        [*as_user, f"{bindir}/pg_ctl", "-D", data, "-l", os.path.join(home, "server.log"), "-w", "-o",
         f"-p {port} -k {home} -c listen_addresses='' -c fsync=off -c max_connections=60", "start"],
        check=True, capture_output=True,
    )
    try:
        yield f"postgresql+psycopg://fdp@/postgres?host={home}&port={port}"
    finally:
        subprocess.run([*as_user, f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


def _fresh_database(admin_url: str) -> str:
    """Create an empty database on the server and return its URL."""
    name = f"fdp_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return admin_url.replace("/postgres?", f"/{name}?")


@pytest.fixture(scope="session")
def postgres_admin_url() -> Iterator[str]:
    """A PostgreSQL server for the whole session (skipped with the reason when not installed)."""
    yield from _postgres_server()


@pytest.fixture
def postgres_url(postgres_admin_url: str) -> str:
    """A fresh, empty PostgreSQL database (skipped with the reason when PostgreSQL is not installed)."""
    return _fresh_database(postgres_admin_url)


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty ledger database on each back end (one code path, SQLAlchemy)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    return _fresh_database(request.getfixturevalue("postgres_admin_url"))
