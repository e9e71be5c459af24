"""Ledger semantics on SQLite and PostgreSQL through the same code path.

Each test runs once per back end (the ``ledger_url`` fixture); PostgreSQL runs on a throw-away
server when Debian's binaries are installed, and is skipped with the reason otherwise.
"""

from __future__ import annotations

import multiprocessing as mp
import shutil
import sqlite3
import subprocess
import sys

import pytest
import sqlalchemy as sa

from fdpcore.errors import BudgetExceededError, LedgerError, ReleaseConflictError
from fdpcore.ledger import Ledger

KW = dict(delta=0.0, config_sha256="0" * 64, summary="mean", mechanism="iclp_qr", sensitivity_formula="s",
          budget_splits=[{"name": "mean", "epsilon": 1.0, "delta": 0.0}], provenance={}, internal={})


def test_release_lifecycle_on_each_backend(ledger_url: str) -> None:
    led = Ledger(ledger_url)
    led.set_budget("ds", 2.5, period="month", epsilon_per_period=2.0)
    first = led.reserve(release_id="r", dataset_id="ds", epsilon=1.0, **KW)
    assert first.charged and not first.published and first.record.period
    assert not led.reserve(release_id="r", dataset_id="ds", epsilon=1.0, **KW).charged  # resumed, not charged twice
    led.mark_noised("r")
    with pytest.raises(ReleaseConflictError, match="drew its noise"):
        led.reserve(release_id="r", dataset_id="ds", epsilon=1.0, **KW)
    stored = led.publish("r", {"manifest": {"release_id": "r"}})
    seq, head = stored["manifest"]["audit_commitment"]["seq"], stored["manifest"]["audit_commitment"]["head"]
    assert (seq, head) == (3, led.chain_hashes()[2])  # the entry before its own release.published (entry 4)
    again = led.reserve(release_id="r", dataset_id="ds", epsilon=1.0, **KW)
    assert again.published and not again.charged and again.record.public == stored
    with pytest.raises(ReleaseConflictError, match="different config"):
        led.reserve(release_id="r", dataset_id="ds", epsilon=1.0, **{**KW, "config_sha256": "1" * 64})
    led.reserve(release_id="s", dataset_id="ds", epsilon=1.0, **KW)
    led.cancel("s")  # before noise: given back
    with pytest.raises(LedgerError, match="cannot go from 'reserved' to 'noised'"):
        led.mark_noised("s")  # a cancelled reservation can never draw noise
    with pytest.raises(BudgetExceededError, match=r"allowance of period .*Remaining: epsilon=1"):
        led.reserve(release_id="t", dataset_id="ds", epsilon=1.5, **KW)
    b = led.budgets("ds")[0]
    assert (b.spent, b.n_releases, b.current.spent if b.current else None) == ((1.0, 0.0), 1, (1.0, 0.0))
    assert led.verify() == []
    assert [e["event"] for e in led.audit_events("r")] == ["release.reserved", "release.noised", "release.published"]


def test_tampering_is_detected_on_each_backend(ledger_url: str) -> None:
    led = Ledger(ledger_url)
    led.set_budget("ds", 5.0)
    led.reserve(release_id="r", dataset_id="ds", epsilon=1.0, **KW)
    led.mark_noised("r")
    assert led.verify() == []
    with led.engine.begin() as conn:
        conn.execute(sa.text("UPDATE fdp_releases SET epsilon='0.5' WHERE release_id='r'"))
    assert led.verify() == ["release 'r': row differs from its audit trail (edited out of band)"]
    with led.engine.begin() as conn:
        conn.execute(sa.text("UPDATE fdp_releases SET epsilon='1.0' WHERE release_id='r'"))
        conn.execute(sa.text("DELETE FROM fdp_audit WHERE seq = 2"))
    problems = led.verify()
    assert problems and problems[0].startswith("audit entry 3: expected entry 2")


def _race(url: str, rid: str, barrier) -> str:  # noqa: ANN001
    led = Ledger(url)
    barrier.wait()
    try:
        led.reserve(release_id=rid, dataset_id="ds", epsilon=1.0, **KW)
        return "ok"
    except BudgetExceededError:
        return "refused"


@pytest.mark.parametrize("ledger_url", ["postgresql"], indirect=True)  # SQLite: tests/flows/test_ledger_crash_and_race.py
def test_sixteen_processes_racing_for_a_budget_that_fits_three(ledger_url: str) -> None:
    Ledger(ledger_url).set_budget("ds", 3.0)
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(16)
        with ctx.Pool(16) as pool:
            results = pool.starmap(_race, [(ledger_url, f"r{i}", barrier) for i in range(16)])
    assert (results.count("ok"), results.count("refused")) == (3, 13)
    led = Ledger(ledger_url)
    assert led.budgets("ds")[0].spent == (3.0, 0.0)
    assert len(led.releases()) == 3 and led.verify() == []


def test_a_plain_postgresql_url_uses_the_installed_driver(postgres_admin_url: str) -> None:
    plain = postgres_admin_url.replace("postgresql+psycopg://", "postgresql://")
    led = Ledger(plain)
    led.set_budget("plain-url", 1.0)
    assert led.engine.dialect.name == "postgresql" and led.budgets("plain-url")[0].total == (1.0, 0.0)


def test_ledger_id_is_made_once_and_differs_between_ledgers(ledger_url: str, tmp_path) -> None:
    first = Ledger(ledger_url).ledger_id
    assert first == Ledger(ledger_url).ledger_id  # reopening keeps it
    other = Ledger(f"sqlite:///{tmp_path / 'other.sqlite'}").ledger_id
    assert len({first, other}) == 2 and all(len(i) == 36 for i in (first, other))


def _read_only_engine(path):  # noqa: ANN001, ANN202 - the SQLite file opened read-only, as a ledger that cannot be written
    import sqlite3

    uri = f"{path.resolve().as_uri()}?mode=ro"
    return lambda url, read_only=False: sa.create_engine("sqlite://", creator=lambda: sqlite3.connect(uri, uri=True))


READ_ONLY_MESSAGE = ("is read-only for this process (file or directory permissions, or an immutable file): nothing was "
                     "written or charged; make it writable or point --ledger at a writable ledger")


@pytest.mark.parametrize("how", ["read-only-uri", "chmod-444", "chmod-555-directory", "chattr-immutable",
                                 "chattr-immutable-directory"])
def test_a_read_only_sqlite_ledger_is_named_as_read_only_and_left_unchanged(tmp_path, monkeypatch, how: str) -> None:  # noqa: ANN001
    """Finding 6 (trial G): the cause is permissions, not a mistyped URL, and the raw SQLAlchemy text is not shown."""
    import hashlib
    import os
    import shutil
    import subprocess

    from fdpcore.ledger import _store

    path = tmp_path / "ledger.sqlite"
    url = f"sqlite:///{path}"
    ledger = Ledger(url)
    ledger.ensure_dataset("ds", 1.0, 0.0)
    ledger.engine.dispose()  # closed, as after an earlier run (an open WAL file could still be written)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    if how == "read-only-uri":  # works as root too: SQLite itself refuses the write (SQLITE_READONLY)
        monkeypatch.setattr(_store, "_engine", _read_only_engine(path))
    elif how.startswith("chmod"):
        if os.geteuid() == 0:
            pytest.skip("root writes a mode-444 file or into a mode-555 directory anyway (docs/operations.md says so)")
        (path.chmod(0o444) if how == "chmod-444" else tmp_path.chmod(0o555))
    else:
        target = path if how == "chattr-immutable" else tmp_path  # a directory: SQLite cannot create its journal
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(target)], capture_output=True).returncode:
            pytest.skip("chattr +i is not available here (needs root and a file system that supports it)")
    try:
        with pytest.raises(LedgerError) as info:  # the open refuses (a file), or the first write (a directory)
            Ledger(url).ensure_dataset("other", 1.0, 0.0)
    finally:
        if how.startswith("chattr"):
            subprocess.run(["chattr", "-i", str(target)], check=True)
        tmp_path.chmod(0o755)
    message = str(info.value)
    assert message == f"ledger {url} {READ_ONLY_MESSAGE}"
    assert "OperationalError" not in message and "FDP_LEDGER_URL" not in message
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def _open_fresh(url: str, name: str, barrier) -> str:  # noqa: ANN001
    barrier.wait()
    try:
        Ledger(url).set_budget(name, 1.0)
        return "ok"
    except LedgerError as exc:
        return str(exc)


def test_processes_opening_a_new_ledger_at_once_all_succeed_and_make_one_schema(ledger_url: str) -> None:
    """CI at f4936ea: a process opening the SQLite ledger while another was creating it read 'not an fdp ledger (it has
    no schema version)' (SQLite ran each CREATE TABLE in its own transaction, before the version row). Creation is one
    transaction now, serialised between openers on both back ends."""
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(8)
        with ctx.Pool(8) as pool:
            results = pool.starmap(_open_fresh, [(ledger_url, f"ds{i}", barrier) for i in range(8)])
    assert results == ["ok"] * 8
    led = Ledger(ledger_url)
    assert sorted(b.dataset_id for b in led.budgets()) == [f"ds{i}" for i in range(8)]
    with led.engine.connect() as conn:
        keys = [r[0] for r in conn.execute(sa.text("SELECT key FROM fdp_meta ORDER BY key"))]
    assert keys.count("schema_version") == 1 and keys.count("ledger_id") == 1 and led.verify() == []


def test_an_interrupted_writes_journal_is_named_as_such_by_a_read_only_command(tmp_path) -> None:  # noqa: ANN001
    """Trial U, L4: a writer killed mid-transaction leaves `ledger.sqlite-journal`; read-only commands then said the
    ledger was "read-only for this process (file or directory permissions …)". They now name the journal and the way
    out, and the remedy they print (one read-write open) rolls the write back: the ledger verifies again."""
    live, copy = tmp_path / "live", tmp_path / "copy"
    live.mkdir()
    copy.mkdir()
    led = Ledger(f"sqlite:///{live / 'ledger.sqlite'}")
    led.set_budget("d", 5.0)
    led.engine.dispose()
    conn = sqlite3.connect(live / "ledger.sqlite", isolation_level=None)
    conn.execute("PRAGMA cache_size=1")  # spill the open transaction's pages to the file: its journal holds the originals
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany("INSERT INTO fdp_meta(key, value) VALUES (?, ?)", [(f"k{i}", "x" * 500) for i in range(2000)])
    for name in ("ledger.sqlite", "ledger.sqlite-journal"):  # what a kill -9 at this point leaves on disk
        shutil.copy(live / name, copy / name)
    conn.execute("ROLLBACK")
    conn.close()
    url = f"sqlite:///{copy / 'ledger.sqlite'}"
    with pytest.raises(LedgerError, match="a write was interrupted .* left its rollback journal 'ledger.sqlite-journal'") as info:
        Ledger(url, read_only=True)
    remedy = str(info.value).split("to do only that: ")[1].split(" (docs/")[0]
    assert remedy.startswith("python3 -c ")
    subprocess.run([sys.executable, "-c", remedy.removeprefix("python3 -c ").strip('"')], check=True)
    assert not (copy / "ledger.sqlite-journal").exists()
    assert Ledger(url, read_only=True).verify() == []
