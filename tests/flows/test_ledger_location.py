"""A mistyped ledger location never opens a new, empty ledger silently (fdpcore.ledger.LedgerURLError).

A new user's ``--ledger sqlite:////…/nope/ledger.db`` (a folder that did not exist) created the folder and a fresh
ledger, took the budget from the config's proposal and published, bypassing the policy in the real ledger. Now a
missing directory is refused (exit 2, nothing created) by every command that writes, and a release that creates
its ledger file says so before it charges.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fdp.flows.cli import main
from flow_support import REPO, release

from fdpcore.ledger import EmptyLedgerFileError, Ledger, LedgerURLError, state_dir

EXAMPLE = REPO / "examples" / "electricity_mean.yaml"


def test_a_ledger_in_a_missing_directory_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    with pytest.raises(LedgerURLError, match="ledger directory .*nope.* does not exist"):
        Ledger(f"sqlite:///{tmp_path / 'nope' / 'ledger.db'}")
    assert not (tmp_path / "nope").exists()
    # fdp's own state directory is created for the default ledger (conftest points FDP_STATE_DIR at a new path)
    assert not state_dir().exists()
    Ledger(f"sqlite:///{state_dir() / 'ledger.sqlite'}")
    assert (state_dir() / "ledger.sqlite").is_file()


@pytest.mark.parametrize("command", [
    ["release", str(EXAMPLE), "--release-id", "typo-1"],
    ["budget", "set", "adelaide-electricity-monday", "--epsilon", "5"],
])
def test_commands_that_write_refuse_a_mistyped_ledger_directory_with_exit_2(
        command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    started = []  # trial R: refused only after Prefect's temporary server had started (6 s, its log lines first)
    monkeypatch.setattr("fdp.flows.cli.start_temporary_server", lambda: started.append(1))
    url = f"sqlite:///{tmp_path / 'nope' / 'ledger.db'}"
    assert main([*command, "--ledger", url, *(["--out", str(tmp_path / "out")] if command[0] == "release" else [])]) == 2
    err = capsys.readouterr().err
    assert f"ledger directory {str(tmp_path / 'nope')!r} does not exist" in err and "check --ledger" in err
    assert not (tmp_path / "nope").exists() and not (tmp_path / "out" / "manifest.json").exists()
    assert not started


def test_a_new_ledger_file_is_created_whole_and_an_emptied_one_is_refused_by_every_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial U, H1: a ledger cut to 0 bytes was taken for "no ledger yet": `budget show` exited 0 and a release started
    a new budget in it, forgetting every charge. fdp now creates a ledger whole (schema in a hidden file, then linked
    in), so an empty file is never its own and every command refuses it, before Prefect starts."""
    path = tmp_path / "ledger.sqlite"
    Ledger(f"sqlite:///{path}")
    assert path.stat().st_size > 0 and [p.name for p in tmp_path.iterdir()] == ["ledger.sqlite"]  # no leftovers
    path.write_bytes(b"")  # a `>` redirect, a failed restore
    for read_only in (False, True):
        with pytest.raises(EmptyLedgerFileError, match="is an empty file .*Restore the ledger from its backup"):
            Ledger(f"sqlite:///{path}", read_only=read_only)
    started = []
    monkeypatch.setattr("fdp.flows.cli.start_temporary_server", lambda: started.append(1))
    url = f"sqlite:///{path}"
    for command in (["budget", "show"], ["audit", "verify"], ["budget", "set", "adelaide-electricity-monday",
                    "--epsilon", "5"], ["release", str(EXAMPLE), "--release-id", "e-1", "--out", str(tmp_path / "out")]):
        assert main([*command, "--ledger", url]) == 1, command
        assert "is an empty file (0 bytes)" in capsys.readouterr().err
    assert path.stat().st_size == 0 and not started and not (tmp_path / "out").exists()


def test_a_release_is_refused_before_the_charge_when_the_ledger_disk_is_nearly_full(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial U, M2: with 32-64 KiB free the charge fitted and the record of the published outputs did not: epsilon
    spent, nothing published. Below 16 MiB free a release is refused first (exit 1), before Prefect starts."""
    import shutil as real

    path = tmp_path / "ledger.sqlite"
    Ledger(f"sqlite:///{path}")
    before = path.read_bytes()
    usage = real.disk_usage(tmp_path)
    monkeypatch.setattr("fdp.flows.config.shutil.disk_usage", lambda _p: usage._replace(free=64 * 1024))
    started = []
    monkeypatch.setattr("fdp.flows.cli.start_temporary_server", lambda: started.append(1))
    assert main(["release", str(EXAMPLE), "--release-id", "full-1", "--out", str(tmp_path / "out"),
                 "--ledger", f"sqlite:///{path}"]) == 1
    err = capsys.readouterr().err
    assert "only 0.0625 MiB free where it lives" in err and "nothing was charged" in err
    assert path.read_bytes() == before and not started and not (tmp_path / "out").exists()


def test_a_release_that_creates_its_ledger_file_says_so_and_a_rerun_does_not(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger = f"sqlite:///{tmp_path / 'new.sqlite'}"
    assert release(EXAMPLE, tmp_path / "out", ledger, "new-1") == 0
    err = capsys.readouterr().err
    note = f"fdp: note: no ledger at {tmp_path / 'new.sqlite'} yet: this release creates it"
    assert note in err and "from the config's `budget:` proposal" in err
    assert err.index(note) < err.index("budget charged")  # said before anything is charged
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["release_id"] == "new-1"
    assert release(EXAMPLE, tmp_path / "out2", ledger, "new-2") == 0
    assert "no ledger at" not in capsys.readouterr().err


def test_a_release_that_creates_its_ledger_in_an_empty_postgresql_database_says_so_and_a_rerun_does_not(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], postgres_url: str) -> None:
    """Trial P (M2): a URL without its database name (the server's default database) or a fresh database got a ledger
    with the config's budget proposal without a word, while a new SQLite file was announced."""
    url = postgres_url
    assert release(EXAMPLE, tmp_path / "out", url, "pg-new-1") == 0
    err = capsys.readouterr().err
    note = "fdp: note: no ledger in the database postgresql+psycopg://fdp@/fdp_"
    assert note in err and "yet: this release creates it" in err and "(the database name)" in err
    assert err.index(note) < err.index("budget charged")  # said before anything is charged
    assert release(EXAMPLE, tmp_path / "out2", url, "pg-new-2") == 0
    assert "no ledger in the database" not in capsys.readouterr().err


@pytest.mark.parametrize("command", [["budget", "show"], ["release", str(EXAMPLE)]])
def test_a_postgresql_database_that_does_not_exist_is_a_mistyped_url_with_exit_2(
        command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], postgres_url: str) -> None:
    """Trial P (L2): a missing PostgreSQL database exited 1, a missing SQLite folder 2; both are a mistyped URL."""
    url = postgres_url.replace("/fdp_", "/fdp_nope_", 1)
    out = ["--out", str(tmp_path / "o")] if command[0] == "release" else []
    assert main([*command, "--ledger", url, *out]) == 2
    err = capsys.readouterr().err
    assert "the database does not exist on the server; check --ledger / FDP_LEDGER_URL for a typo" in err
    assert not (tmp_path / "o" / "manifest.json").exists()


@pytest.mark.parametrize("command", [["budget", "show"], ["audit", "list"], ["release", str(EXAMPLE)]])
def test_a_ledger_url_of_another_database_says_which_ones_fdp_supports(
        command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--ledger mysql://x/y` said "cannot be used: No module named 'MySQLdb'" (exit 1)."""
    assert main([*command, "--ledger", "mysql://x/y", *(["--out", str(tmp_path / "o")] if command[0] == "release"
                                                         else [])]) == 2
    err = capsys.readouterr().err
    assert "names a mysql database: a ledger lives in SQLite (sqlite:///path/to/ledger.sqlite) or PostgreSQL" in err
    assert "MySQLdb" not in err
