"""``fdp serve`` before it serves: restartable on its out-root, never a silent takeover, honest advice.

``prefect.serve`` (the runner loop that runs until stopped) is replaced by a recorder; everything before it — the
checks, the deployments and their automations on the session's Prefect test server — is real.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sqlite3
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import prefect
import pytest
from fdp.flows import cli
from fdp.flows.cli import main
from fdp.flows.config import config_sha256, load_config
from fdp.flows.scheduled import scheduled_release
from prefect.client.orchestration import get_client
from prefect.exceptions import ObjectNotFound
from prefect.settings import PREFECT_API_URL, temporary_settings

from fdpcore.ledger import Ledger, current_period


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[list[Any]]:
    """The deployments each ``fdp serve`` would have run (it returns at once instead of serving until stopped)."""
    calls: list[list[Any]] = []
    monkeypatch.setattr(prefect, "serve", lambda *deployments, **_: calls.append(list(deployments)))
    return calls


def _series() -> str:
    return f"serve-{uuid.uuid4().hex[:10]}"  # the session's Prefect server keeps every deployment


def _deployment(series: str) -> Any:
    with get_client(sync_client=True) as client:
        return client.read_deployment_by_name(f"scheduled-release/{series}")


def test_serve_restarts_on_an_out_root_holding_its_published_releases(
        make_config, tmp_path: Path, served: list[list[Any]], capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    series = _series()
    config = make_config(release={"name": series})
    ledger, root = f"sqlite:///{tmp_path / 'ledger.sqlite'}", tmp_path / "srv" / "releases"
    command = ["serve", str(config), "--ledger", ledger, "--out-root", str(root)]
    assert main(command) == 0, capsys.readouterr().err
    # a run publishes the month, as the served deployment runs it: <out-root>/<series>/<YYYY-MM>/
    scheduled_release(config_path=str(config), series=series, ledger_url=ledger, out_root=str(root),
                      config_sha256_served=config_sha256(load_config(config)))
    month = root / series / current_period()
    assert json.loads((month / "manifest.json").read_text())["release_id"] == f"{series}-{current_period()}"
    # what else an operator's out-root holds: a manual re-run of the month (docs/operations.md) and a note
    (root / series / f"{current_period()}-b").mkdir()
    (root / series / f"{current_period()}-b" / "manifest.json").write_text("{}")
    (root / "README.txt").write_text("published releases\n")
    capsys.readouterr()

    assert main(command) == 0, capsys.readouterr().err  # the restart (reboot, deploy) on the same --out-root
    assert re.match(rf"serving 1 scheduled release series on '0 6 1 \* \*' \(UTC; first run \d{{4}}-\d\d-01 06:00 "
                    rf"UTC\): scheduled-release/{re.escape(series)}", capsys.readouterr().out)
    assert len(served) == 2
    assert Ledger(ledger).get(f"{series}-{current_period()}").state == "published"


@pytest.mark.parametrize("damage", ["series-file", "junk-in-month", "root-is-a-release"])
def test_serve_refuses_an_out_root_a_run_could_not_publish_into_and_names_out_root(
        damage: str, make_config, tmp_path: Path, served: list[list[Any]],  # noqa: ANN001
        capsys: pytest.CaptureFixture[str]) -> None:
    series = _series()
    config = make_config(release={"name": series})
    root = tmp_path / "releases"
    root.mkdir()
    if damage == "series-file":
        (root / series).write_text("not a folder")
    elif damage == "junk-in-month":
        (root / series / current_period()).mkdir(parents=True)
        (root / series / current_period() / "notes.txt").write_text("mine")
    else:
        (root / "manifest.json").write_text("{}")
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    assert main(["serve", str(config), "--ledger", ledger, "--out-root", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fdp: error: --out-root: ") and "--out:" not in err, err
    assert served == [] and not (tmp_path / "ledger.sqlite").exists()
    with pytest.raises(ObjectNotFound):
        _deployment(series)


def test_serve_refuses_a_served_series_under_another_ledger_and_changes_nothing(
        make_config, tmp_path: Path, served: list[list[Any]], monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
        capsys: pytest.CaptureFixture[str]) -> None:
    series = _series()
    config = make_config(release={"name": series})
    first, second = tmp_path / "ledger.sqlite", tmp_path / "other.sqlite"
    out = ["--out-root", str(tmp_path / "releases")]
    assert main(["serve", str(config), "--ledger", f"sqlite:///{first}", *out]) == 0
    capsys.readouterr()

    assert main(["serve", str(config), "--ledger", f"sqlite:///{second}", *out]) == 2
    err = capsys.readouterr().err
    assert f"scheduled-release/{series}" in err and f"sqlite:///{first}" in err and f"sqlite:///{second}" in err
    assert "charged in two ledgers" in err and "Nothing was changed" in err
    assert _deployment(series).parameters["ledger_url"] == f"sqlite:///{first}"  # not taken over
    assert not second.exists() and len(served) == 1

    monkeypatch.chdir(tmp_path)  # the same ledger, spelled as a relative path: the same deployment, served again
    assert main(["serve", str(config), "--ledger", "sqlite:///ledger.sqlite", *out]) == 0, capsys.readouterr().err
    assert len(served) == 2


def test_serve_refuses_a_series_another_live_serve_is_polling_and_changes_nothing(
        make_config, tmp_path: Path, served: list[list[Any]], monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
        capsys: pytest.CaptureFixture[str]) -> None:
    """From an operator's trial: a second `fdp serve` of a served series shared its deployment, and stopping
    either paused the schedule for both. A live serve polls the server for its deployments' runs; while the one its
    deployment names is alive (or on another host, has polled within three intervals) a second is refused (exit 2)
    before anything changes. Once that process is gone (kill -9), the series can be served again at once."""
    other = subprocess.Popen(["sleep", "120"])  # the first `fdp serve`'s process, alive
    try:
        series = _series()
        config = make_config(release={"name": series})
        command = ["serve", str(config), "--ledger", f"sqlite:///{tmp_path / 'ledger.sqlite'}",
                   "--out-root", str(tmp_path / "releases")]
        with monkeypatch.context() as m:
            m.setattr(cli, "_serve_owner_tag", lambda: f"served-by:{other.pid}@{socket.gethostname()}")
            assert main(command) == 0, capsys.readouterr().err
        deployment = _deployment(series)
        assert deployment.last_polled is None and f"served-by:{other.pid}@{socket.gethostname()}" in deployment.tags
        with get_client(sync_client=True) as client:  # what that serve's runner does every 10 s
            client.get_scheduled_flow_runs_for_deployments([deployment.id])
        for _ in range(100):  # the server records the poll in the background
            if _deployment(series).last_polled is not None:
                break
            time.sleep(0.1)
        before = _deployment(series)
        capsys.readouterr()

        assert main(command) == 2
        err = capsys.readouterr().err
        assert f"series {series!r} is being served by another live `fdp serve`" in err and "Nothing was changed" in err
        after = _deployment(series)
        assert (after.updated, after.paused, after.tags, len(served)) == (before.updated, before.paused, before.tags, 1)
    finally:
        other.kill()
        other.wait()
    assert main(command) == 0, capsys.readouterr().err  # its process is gone: served again at once, by this one
    assert f"served-by:{os.getpid()}@{socket.gethostname()}" in _deployment(series).tags and len(served) == 2


def test_serve_with_its_prefect_server_down_says_to_start_one_not_to_unset_the_url(
        make_config, tmp_path: Path, served: list[list[Any]], capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    config = make_config(release={"name": _series()})
    with temporary_settings(updates={PREFECT_API_URL: f"http://127.0.0.1:{port}/api"}):
        code = main(["serve", str(config), "--ledger", f"sqlite:///{tmp_path / 'l.sqlite'}",
                     "--out-root", str(tmp_path / "releases")])
    err = capsys.readouterr().err
    assert code == 1 and f"the Prefect API at http://127.0.0.1:{port}/api cannot be reached" in err
    assert "prefect server start --host 127.0.0.1 --port 4200" in err and "runs no scheduler" in err
    assert "unset PREFECT_API_URL" not in err and "temporary local server to" not in err
    assert served == [] and not (tmp_path / "l.sqlite").exists()


# --- read-only commands on a ledger that does not exist yet ------------------------------------------------------


@pytest.mark.parametrize("command", [["budget", "show"], ["calendar"]])
@pytest.mark.parametrize("kind", ["missing", "empty-database"])
def test_read_only_commands_on_no_ledger_say_so_and_create_nothing(
        command: list[str], kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "state" / "ledger.sqlite"
    path.parent.mkdir()
    if kind != "missing":
        path.touch()
    if kind == "empty-database":  # a real SQLite database (header written) with no tables
        sqlite3.connect(path).execute("PRAGMA user_version = 0").connection.commit()
    before = path.stat() if path.exists() else None
    url = f"sqlite:///{path}"
    assert main([*command, "--ledger", url]) == 0
    out, err = capsys.readouterr()
    assert out == (f"no fdp ledger at {url} yet: it is created by the first `fdp budget set` or `fdp release` "
                   "(check --ledger / FDP_LEDGER_URL if you expected one); nothing was created\n"), (out, err)
    assert main([*command, "--json", "--ledger", url]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) in ({}, []) and "no fdp ledger at" in err
    assert main([*command, "--dataset", "ds", "--ledger", url]) == 2
    assert "dataset 'ds' is not in the ledger: no fdp ledger at" in capsys.readouterr().err
    assert main(["audit", "verify", "--ledger", url]) == 1  # nothing to verify is not a verified chain
    assert "no fdp ledger at" in capsys.readouterr().err
    if before is None:
        assert not path.exists()
    else:
        assert path.stat().st_size == before.st_size and path.stat().st_mtime_ns == before.st_mtime_ns


@pytest.mark.parametrize("command", [["budget", "show"], ["calendar"]])
def test_read_only_commands_refuse_an_empty_ledger_file_and_leave_it_as_it_is(
        command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Trial U, H1: an empty file is not "no ledger yet" (fdp never leaves one): a ledger emptied by a redirect or a
    failed restore must not look like a new one."""
    path = tmp_path / "ledger.sqlite"
    path.touch()
    before = path.stat()
    assert main([*command, "--ledger", f"sqlite:///{path}"]) == 1
    assert "is an empty file (0 bytes)" in capsys.readouterr().err
    assert path.stat().st_size == 0 and path.stat().st_mtime_ns == before.st_mtime_ns


def test_read_only_commands_refuse_a_ledger_in_a_missing_directory_as_writing_ones_do(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Trial R: `budget show` said "no ledger yet: created by the first `fdp budget set`", which then refused (exit 2)."""
    url = f"sqlite:///{tmp_path / 'no' / 'such' / 'ledger.sqlite'}"
    for command in (["budget", "show"], ["calendar"], ["budget", "set", "ds", "--epsilon", "1"]):
        assert main([*command, "--ledger", url]) == 2, command
        err = capsys.readouterr().err
        assert f"ledger directory {str(tmp_path / 'no' / 'such')!r} does not exist" in err and "yet" not in err
    assert not (tmp_path / "no").exists()


def test_read_only_commands_on_an_empty_database_of_each_back_end_say_no_ledger_yet(
        ledger_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["budget", "show", "--ledger", ledger_url]) == 0
    assert "no fdp ledger at" in capsys.readouterr().out
    assert main(["calendar", "--ledger", ledger_url]) == 0
    assert "no fdp ledger at" in capsys.readouterr().out
    assert main(["audit", "list", "--ledger", ledger_url]) == 1
    assert "no fdp ledger at" in capsys.readouterr().err
    assert Ledger(ledger_url).budgets() == []  # still empty: the writing open creates it now


def test_a_database_with_other_tables_is_still_not_an_fdp_ledger(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "app.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER)")
    assert main(["budget", "show", "--ledger", f"sqlite:///{path}"]) == 1
    assert "not an fdp ledger" in capsys.readouterr().err


@pytest.mark.parametrize(("cron", "said"), [
    ("0 6 31 2 *", "never fires (no time matches it within 5 years)"),
    ("*/61 * * * *", "the step /61 of the minute field is larger than its range (0-59)"),
    ("", "is not a cron schedule (five fields"),
    ("61 * * * *", "is not a cron schedule (five fields"),
    ("0 6 1 * * *", "is not a cron schedule (five fields"),
])
def test_serve_refuses_a_cron_that_never_fires_or_is_not_one_and_serves_nothing(
        make_config, tmp_path: Path, served: list[list[Any]], capsys: pytest.CaptureFixture[str],  # noqa: ANN001
        cron: str, said: str) -> None:
    """Trial I: ``--cron "0 6 31 2 *"`` (31 February) and ``*/61`` were served (a series that never runs), ``""`` failed
    with Prefect's validation text. Refused with exit 2 before anything is read, deployed or served."""
    series = _series()
    config = make_config(release={"name": series})
    ledger = tmp_path / "ledger.sqlite"
    assert main(["serve", str(config), "--ledger", f"sqlite:///{ledger}", "--out-root", str(tmp_path / "r"),
                 "--cron", cron]) == 2
    err = capsys.readouterr().err
    assert f"--cron {cron!r}" in err and said in err, err
    assert served == [] and not ledger.exists()
    with pytest.raises(ObjectNotFound):
        _deployment(series)


def test_serve_states_when_its_cron_first_fires(make_config, tmp_path: Path, served: list[list[Any]],  # noqa: ANN001
                                                capsys: pytest.CaptureFixture[str]) -> None:
    config = make_config(release={"name": _series()})
    assert main(["serve", str(config), "--ledger", f"sqlite:///{tmp_path / 'l.sqlite'}", "--out-root",
                 str(tmp_path / "r"), "--cron", "0 6 1 * *"]) == 0
    line = capsys.readouterr().out
    first = re.search(r"first run (\d{4}-\d{2}-01 06:00) UTC", line)
    assert first is not None, line
    assert time.strptime(first.group(1), "%Y-%m-%d %H:%M") > time.gmtime()


def test_serve_of_an_edited_config_names_both_hashes_and_a_fix_that_works(
        make_config, tmp_path: Path, served: list[list[Any]], capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    """Trial I: after an edit the refusal named the same file as "another config" and advised only deleting the
    deployment, which the ledger then refuses too when the series has releases."""
    series = _series()
    config = make_config(release={"name": series})
    command = ["serve", str(config), "--ledger", f"sqlite:///{tmp_path / 'l.sqlite'}", "--out-root", str(tmp_path / "r")]
    assert main(command) == 0, capsys.readouterr().err
    before = config_sha256(load_config(config))
    config.write_text(config.read_text().replace("epsilon: 1.0", "epsilon: 0.9", 1))
    after = config_sha256(load_config(config))
    assert after != before
    capsys.readouterr()
    assert main(command) == 2
    err = capsys.readouterr().err
    assert f"config sha256 {before[:12]}..." in err and f"config sha256 {after[:12]}... now" in err, err
    assert "`release: {name: ...}`" in err and "if the series has no releases yet" in err
    assert _deployment(series).parameters["config_sha256_served"] == before  # nothing was replaced
