"""CLI commands other than release: schema, budget show, demo wiring."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shlex
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa
from fdp.flows.cli import main

from fdpcore.ledger import Ledger


def test_schema_prints_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "release-config"]) == 0
    schema = json.loads(capsys.readouterr().out)
    mean = schema["$defs"][schema["discriminator"]["mapping"]["mean"].rsplit("/", 1)[1]]
    assert {"dataset", "grid", "kernel", "clipping", "privacy", "budget"} <= set(mean["properties"])


def test_schema_states_the_real_default_tuning_rule_of_each_estimator(capsys: pytest.CaptureFixture[str]) -> None:
    """risk_prior for iclp_qr and gp, the tightened PSS rule for the others (fdpcore.privacy.tuning.DEFAULT_RULES)."""
    from fdp.flows.config import load_config
    from fdp.tasks.planning import mean_plan

    from fdpcore.privacy.tuning import DEFAULT_RULES

    assert main(["schema", "release-config"]) == 0
    schema = json.loads(capsys.readouterr().out)
    rule = schema["$defs"]["TuningSpec"]["properties"]["rule"]["description"]
    tuning = schema["$defs"][schema["discriminator"]["mapping"]["mean"].rsplit("/", 1)[1]]["properties"]["tuning"]
    assert DEFAULT_RULES["iclp_qr"] == DEFAULT_RULES["gp"] == "risk_prior"
    for text in (rule, tuning["description"], schema["$defs"]["TuningSpec"]["description"]):
        assert "tightened PSS rule)" not in text and "default the\ntightened one" not in text
    for estimator, default in DEFAULT_RULES.items():
        assert f"{estimator}: {default}" in rule and f"{estimator}: {default}" in tuning["description"]
    # what the schema says is what a config without a rule gets
    example = load_config(Path(__file__).resolve().parents[2] / "examples" / "electricity_mean.yaml")
    raw = example.model_dump(mode="json")
    raw["tuning"] = {}
    config = type(example).model_validate(raw)
    assert mean_plan(config, 508).tuning == DEFAULT_RULES[config.estimator] == "risk_prior"


def test_budget_show_json_reports_total_spent_remaining(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    led = Ledger(url)
    led.ensure_dataset("ds", 2.0, 0.0)
    led.reserve(release_id="r", dataset_id="ds", epsilon=0.5, delta=0.0, config_sha256="0" * 64, summary="mean",
                mechanism="iclp_qr", sensitivity_formula="sensitivity.mean.iclp_qr.exact_l2@1", budget_splits=[],
                provenance={}, internal={})
    assert main(["budget", "show", "--json", "--ledger", url]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ds"]["total"]["epsilon"] == 2.0
    assert data["ds"]["spent"]["epsilon"] == 0.5
    assert data["ds"]["remaining"]["epsilon"] == 1.5
    assert main(["budget", "show", "--dataset", "nope", "--ledger", url]) == 2


def test_missing_config_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["release", str(tmp_path / "none.yaml"), "--ledger", f"sqlite:///{tmp_path / 'l.sqlite'}"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_unreachable_ledger_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["budget", "show", "--ledger", f"sqlite:///{blocker}/sub/l.sqlite"]) == 1
    assert "ledger" in capsys.readouterr().err


def test_demo_releases_the_shipped_example(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert main(["demo", "--out", str(tmp_path / "demo"), "--ledger", url]) == 0
    manifest = json.loads((tmp_path / "demo" / "manifest.json").read_text())
    assert manifest["dataset_id"] == "adelaide-electricity-monday" and manifest["n"] == 508
    # the defaults a user gets: tau bought first, then the mean with the risk_prior tuning
    assert [s["name"] for s in manifest["budget_splits"]] == ["tau", "mean"]
    assert manifest["parameters"]["tuning"]["rule"] == "risk_prior"
    assert "remaining epsilon 99" in capsys.readouterr().out


def test_budget_set_is_authoritative_and_never_below_spent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert main(["budget", "set", "ds", "--epsilon", "3", "--ledger", url]) == 0
    led = Ledger(url)
    assert led.ensure_dataset("ds", 100.0) is False  # a config's proposal does not override the officer's value
    assert led.budgets("ds")[0].total == (3.0, 0.0)
    led.reserve(release_id="r", dataset_id="ds", epsilon=2.0, delta=0.0, config_sha256="0" * 64, summary="mean",
                mechanism="iclp_qr", sensitivity_formula="s", budget_splits=[], provenance={}, internal={})
    capsys.readouterr()
    assert main(["budget", "set", "ds", "--epsilon", "1", "--ledger", url]) == 2
    err = capsys.readouterr().err
    assert "below what is already spent" in err
    # trial U, L4: the amounts are named as what they are (not "Requested" / "Remaining")
    assert "Already spent: epsilon=2, delta=0; the new total: epsilon=1, delta=0" in err and "Requested" not in err
    assert main(["budget", "set", "ds", "--epsilon", "-1", "--ledger", url]) == 2
    assert "epsilon" in capsys.readouterr().err
    assert led.budgets("ds")[0].total == (3.0, 0.0)
    assert main(["budget", "set", "ds", "--epsilon", "5", "--ledger", url]) == 0
    assert led.budgets("ds")[0].remaining == (3.0, 0.0)


def _ledger_with_history(url: str) -> Ledger:
    led = Ledger(url)
    led.set_budget("ds", 2.0)
    kw = dict(dataset_id="ds", delta=0.0, config_sha256="0" * 64, summary="mean", mechanism="iclp_qr",
              sensitivity_formula="sensitivity.mean.iclp_qr.exact_l2@1", budget_splits=[], provenance={}, internal={})
    led.reserve(release_id="r1", epsilon=0.5, **kw)
    led.mark_noised("r1")
    led.publish("r1", {"manifest": {"n": 10}})
    led.reserve(release_id="r2", epsilon=0.25, **kw)
    led.cancel("r2")
    return led


def test_audit_verify_passes_on_an_intact_ledger(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    _ledger_with_history(url)
    assert main(["audit", "verify", "--ledger", url]) == 0
    assert "intact (6 entries" in capsys.readouterr().out
    assert main(["audit", "list", "--json", "--ledger", url]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["kind"], r["release_id"] or r["summary"], r["state"]) for r in rows] == [
        ("policy", "dataset.created", "unsigned"), ("release", "r1", "published"), ("release", "r2", "cancelled")]
    assert main(["audit", "show", "r1", "--ledger", url]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [e["event"] for e in shown["audit_events"]] == ["release.reserved", "release.noised", "release.published"]
    assert main(["audit", "export", "--format", "csv", "--ledger", url]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("seq,at,actor")


def test_audit_list_follows_the_chain_when_a_release_was_stamped_before_its_dataset(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Trial Z (L3): a first release is created in the transaction that creates its dataset and its row's timestamp
    can precede the dataset.created entry's; the list follows the hash chain's order, not the clock's."""
    import sqlite3

    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    _ledger_with_history(url)
    with sqlite3.connect(tmp_path / "l.sqlite") as conn:  # the row's stamp a moment before every chain entry
        conn.execute("UPDATE fdp_releases SET created_at = '2000-01-01T00:00:00.000000+00:00' WHERE release_id = 'r1'")
    assert main(["audit", "list", "--json", "--ledger", url]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["release_id"] or r["summary"] for r in rows] == ["dataset.created", "r1", "r2"]
    assert [r["seq"] for r in rows] == sorted(r["seq"] for r in rows)


def test_audit_list_and_export_give_an_auditors_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import fdpcore.ledger._store as ledger_store

    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    led = Ledger(url)
    with monkeypatch.context() as m:  # a policy set in 2026-09 that lets a late run go back to 2026-10
        m.setattr(ledger_store, "_now", lambda: "2026-09-01T00:00:00.000000+00:00")
        led.set_budget("ds", 2.0, max_late_periods=1200)
    led.reserve(release_id="r1", dataset_id="ds", epsilon=0.5, delta=0.0, config_sha256="c" * 64, summary="covariance",
                mechanism="laplace", sensitivity_formula="s", budget_splits=[], internal={}, period="2026-10",
                provenance={"operator": "alice", "git_sha": "a" * 40})
    led.set_budget("ds", 3.0)
    assert main(["audit", "list", "--json", "--ledger", url]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["kind"], r["summary"], r["epsilon"], r["period"], r["state"], r["operator"], r["git_sha"]) for r in rows] == [
        ("policy", "dataset.created", 2.0, None, "unsigned", rows[0]["operator"], None),
        ("release", "covariance", 0.5, "2026-10", "reserved", "alice", "a" * 40),
        ("policy", "budget.set", 3.0, None, "unsigned", rows[2]["operator"], None)]
    assert main(["audit", "list", "--ledger", url]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].split()[:4] == ["time", "(UTC)", "release", "/"] and "git sha" in text[0]
    assert "2026-10" in text[2] and "covariance" in text[2] and "alice" in text[2] and "a" * 12 in text[2]
    assert main(["audit", "export", "--format", "json", "--ledger", url]) == 0
    reserved = [e for e in json.loads(capsys.readouterr().out) if e["event"] == "release.reserved"][0]
    assert (reserved["epsilon"], reserved["period"], reserved["config_sha256"], reserved["git_sha"], reserved["state"],
            reserved["summary"]) == ("0.5", "2026-10", "c" * 64, "a" * 40, "reserved", "covariance")
    assert main(["audit", "export", "--format", "csv", "--ledger", url]) == 0
    lines = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert (lines[1]["epsilon"], lines[1]["period"], lines[1]["git_sha"]) == ("0.5", "2026-10", "a" * 40)


@pytest.mark.parametrize(
    ("tamper", "message"),
    [
        ("UPDATE fdp_releases SET epsilon='0.1' WHERE release_id='r1'", "release 'r1': row differs"),
        ("UPDATE fdp_audit SET payload='{}' WHERE seq=2", "audit entry 2: content does not match"),
        ("DELETE FROM fdp_audit WHERE seq=3", "audit entry 4: expected entry 3"),
        ("DELETE FROM fdp_audit WHERE seq=6", "truncated"),
        ("UPDATE fdp_datasets SET epsilon_total='9.0'", "dataset 'ds': budget differs"),
        ("DELETE FROM fdp_releases WHERE release_id='r2'", "release 'r2': audited but its row is missing"),
        ("UPDATE fdp_releases SET public_json='{\"manifest\": {\"n\": 11}}' WHERE release_id='r1'", "published outputs differ"),
    ],
)
def test_audit_verify_names_the_first_bad_entry(tmp_path: Path, capsys: pytest.CaptureFixture[str], tamper: str, message: str) -> None:
    db = tmp_path / "l.sqlite"
    url = f"sqlite:///{db}"
    _ledger_with_history(url)
    with sqlite3.connect(db) as conn:
        conn.execute(tamper)
    assert main(["audit", "verify", "--ledger", url]) == 1
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("name", ["release-config", "manifest", "budget", "ledger-entry"])
def test_every_kept_record_exports_a_versioned_closed_json_schema(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", name]) == 0
    schema = json.loads(capsys.readouterr().out)
    members = [schema["$defs"][m["$ref"].rsplit("/", 1)[1]] for m in schema["oneOf"]] if "oneOf" in schema else [schema]
    for member in members:
        assert member["additionalProperties"] is False  # extra="forbid"
        assert "schema_version" in member["properties"]


def test_audit_show_prints_a_ledger_entry_with_provenance(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    led = Ledger(url)
    led.set_budget("ds", 2.0, period="month", epsilon_per_period=1.0)
    led.reserve(release_id="r", dataset_id="ds", epsilon=0.5, delta=0.0, config_sha256="0" * 64, summary="mean",
                mechanism="iclp_qr", sensitivity_formula="sensitivity.mean.iclp_qr.exact_l2@1",
                budget_splits=[{"name": "mean", "epsilon": 0.5, "delta": 0.0}], internal={"counts": {"n_clipped": 2}},
                provenance={"code_version": "0.1.0", "git_sha": None, "created_at": "2026-11-01T00:00:00+00:00",
                            "config_sha256": "0" * 64, "flow_run_id": None, "operator": "alice", "host": "h1"})
    assert main(["audit", "show", "r", "--ledger", url]) == 0
    entry = json.loads(capsys.readouterr().out)
    assert entry["provenance"]["operator"] == "alice" and entry["period"] == entry["created_at"][:7]
    assert entry["internal"]["counts"] == {"n_clipped": 2}
    assert set(entry["internal"]) == {"counts", "reserved_by"}  # the process that reserved it (host, pid): auditor-only
    assert entry["internal"]["reserved_by"]["pid"] == os.getpid()
    assert [e["event"] for e in entry["audit_events"]] == ["release.reserved"]
    assert main(["budget", "show", "--dataset", "ds", "--ledger", url]) == 0
    out = capsys.readouterr().out
    assert "of 1 allowed, remaining 0.5" in out


def test_budget_set_below_a_months_spending_exits_2_and_grant_adds_to_that_month(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fdpcore.ledger import current_period

    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert main(["budget", "set", "ds", "--epsilon", "12", "--period", "month", "--per-period", "1", "--ledger", url]) == 0
    Ledger(url).reserve(release_id="r", dataset_id="ds", epsilon=1.0, delta=0.0, config_sha256="0" * 64, summary="mean",
                        mechanism="iclp_qr", sensitivity_formula="s", budget_splits=[], provenance={}, internal={})
    capsys.readouterr()
    assert main(["budget", "set", "ds", "--epsilon", "12", "--period", "month", "--per-period", "0.5",
                 "--ledger", url]) == 2
    err = capsys.readouterr().err
    assert f"must be at least what period {current_period()} has spent (epsilon 1, delta 0)" in err
    assert main(["budget", "grant", "ds", "--period", current_period(), "--epsilon", "0.5", "--ledger", url]) == 0
    assert "allowance is now epsilon 1.5" in capsys.readouterr().out
    assert main(["budget", "show", "--json", "--ledger", url]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ds"]["current_period"]["granted"] == {"epsilon": 0.5, "delta": 0.0}
    assert main(["budget", "grant", "ds", "--period", "2026-13", "--epsilon", "1", "--ledger", url]) == 2


def test_calendar_lists_series_by_month_with_state_cost_and_flow_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import fdpcore.ledger._store as ledger_store

    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    led = Ledger(url)
    with monkeypatch.context() as m:  # a policy in force since 1999 that lets late runs go back to 2000-01
        m.setattr(ledger_store, "_now", lambda: "1999-12-01T00:00:00.000000+00:00")
        led.set_budget("elec", 12.0, period="month", epsilon_per_period=3.0, delta_per_period=0.0,
                       max_late_periods=1200)
    kw = dict(dataset_id="elec", delta=0.0, config_sha256="0" * 64, summary="mean", mechanism="iclp_qr",
              sensitivity_formula="s", budget_splits=[], internal={})
    led.reserve(release_id="elec-mean-2000-01", epsilon=1.0, provenance={"flow_run_id": "run-a"}, period="2000-01", **kw)
    led.reserve(release_id="elec-covariance-2000-01", epsilon=1.0, provenance={"flow_run_id": "run-b"},
                period="2000-01", **kw)
    led.mark_noised("elec-covariance-2000-01")
    led.reserve(release_id="elec-covariance-2000-01-b", epsilon=0.5, provenance={"flow_run_id": "run-c"},
                period="2000-01", **kw)
    led.record_flow_run("elec-mean-2000-01", "run-d")
    led.reserve(release_id="k-term-1", epsilon=0.5, provenance={"flow_run_id": "run-e"}, period="2000-01", **kw)
    led.cancel("k-term-1")  # given back: it spent nothing, and the calendar says so (trial I showed epsilon 1)
    capsys.readouterr()
    assert main(["calendar", "--json", "--ledger", url]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["series"], r["month"], r["state"], r["epsilon"], r["release_id"], r["flow_run_id"]) for r in rows] == [
        ("(manual)", "2000-01", "cancelled", 0.0, "k-term-1", "run-e"),
        ("elec-covariance", "2000-01", "noised", 1.0, "elec-covariance-2000-01", "run-b"),
        ("elec-covariance", "2000-01", "reserved", 0.5, "elec-covariance-2000-01-b", "run-c"),
        ("elec-mean", "2000-01", "reserved", 1.0, "elec-mean-2000-01", "run-d"),
    ]
    assert rows[3]["flow_runs"] == ["run-a", "run-d"] and rows[0]["period_charged"] is None
    assert main(["calendar", "--dataset", "elec", "--ledger", url]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0].split() == ["series", "month", "state", "epsilon", "delta", "release", "id", "flow", "run"]
    assert "elec-mean" in text and "run-d" in text


def test_calendar_shows_the_months_a_known_series_missed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A month with no ledger entry (the run failed before its charge, or never ran) is listed, not silently absent."""
    import fdpcore.ledger._store as ledger_store
    from fdpcore.ledger import current_period

    def month(back: int) -> str:
        y, m = divmod(int(current_period()[:4]) * 12 + int(current_period()[5:]) - 1 - back, 12)
        return f"{y:04d}-{m + 1:02d}"

    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    led = Ledger(url)
    with monkeypatch.context() as m:  # a policy in force for two years that lets late runs go back that far
        m.setattr(ledger_store, "_now", lambda: f"{month(24)}-01T00:00:00.000000+00:00")
        led.set_budget("elec", 99.0, period="month", epsilon_per_period=3.0, delta_per_period=0.0,
                       max_late_periods=1200)
    kw = dict(dataset_id="elec", delta=0.0, config_sha256="0" * 64, summary="mean", mechanism="iclp_qr",
              sensitivity_formula="s", budget_splits=[], internal={}, provenance={}, epsilon=1.0)
    led.reserve(release_id=f"elec-mean-{month(3)}", period=month(3), **kw)
    led.reserve(release_id=f"elec-mean-{month(1)}", period=month(1), **kw)
    led.reserve(release_id=f"elec-old-{month(13)}", period=month(13), **kw)  # retired: no entry for 12 months
    led.reserve(release_id=f"elec-new-{month(11)}", period=month(11), **kw)
    led.reserve(release_id="by-hand", period=month(2), **kw)  # not a series id: no expectations
    capsys.readouterr()
    assert main(["calendar", "--json", "--ledger", url]) == 0
    rows = [(r["series"], r["month"], r["state"], r["release_id"]) for r in json.loads(capsys.readouterr().out)]
    assert rows == [
        ("(manual)", month(2), "reserved", "by-hand"),
        ("elec-mean", month(3), "reserved", f"elec-mean-{month(3)}"),
        ("elec-mean", month(2), "missing", f"elec-mean-{month(2)}"),
        ("elec-mean", month(1), "reserved", f"elec-mean-{month(1)}"),
        ("elec-mean", month(0), "due", f"elec-mean-{month(0)}"),
        ("elec-new", month(11), "reserved", f"elec-new-{month(11)}"),
        *[("elec-new", month(b), "missing", f"elec-new-{month(b)}") for b in range(10, 0, -1)],
        ("elec-new", month(0), "due", f"elec-new-{month(0)}"),
        ("elec-old", month(13), "reserved", f"elec-old-{month(13)}"),
    ]
    assert main(["calendar", "--ledger", url]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if f"elec-mean-{month(2)}" in x)
    assert line.split() == ["elec-mean", month(2), "missing", "0", "0", f"elec-mean-{month(2)}", "-"]


def test_a_prefect_server_error_is_named_as_the_server_s_not_as_a_bug_in_fdp() -> None:
    """An HTTP 5xx from an overloaded Prefect server (seen with 16 racing releases on a busy machine) says so."""
    import httpx
    from fdp.flows.cli import _unexpected
    from prefect.exceptions import PrefectHTTPStatusError

    request = httpx.Request("POST", "http://127.0.0.1:4200/api/flow_runs/")
    err = PrefectHTTPStatusError("Server error '500 Internal Server Error'", request=request,
                                 response=httpx.Response(500, request=request))
    text = _unexpected(err)
    assert "the Prefect server answered HTTP 500" in text and "bug in fdp" not in text and "fdp audit show" in text
    client = PrefectHTTPStatusError("Client error '422'", request=request, response=httpx.Response(422, request=request))
    assert "bug in fdp" in _unexpected(client)  # a 4xx is a request fdp made wrongly


def test_a_read_only_ledger_exits_1_saying_so_and_nothing_is_charged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Finding 6 (trial G): permissions, not a typo; docs/cli.md's exit 1 for a ledger that cannot be used."""
    import sqlalchemy as sa

    from fdpcore.ledger import _store

    path = tmp_path / "l.sqlite"
    url = f"sqlite:///{path}"
    Ledger(url).ensure_dataset("ds", 2.0, 0.0)
    uri = f"{path.resolve().as_uri()}?mode=ro"  # SQLite refuses every write, as for a chattr +i file (also as root)
    monkeypatch.setattr(_store, "_engine", lambda u, read_only=False: sa.create_engine(
        "sqlite://", creator=lambda: sqlite3.connect(uri, uri=True)))
    assert main(["budget", "set", "ds", "--epsilon", "5", "--ledger", url]) == 1
    err = capsys.readouterr().err
    assert f"ledger {url} is read-only for this process" in err and "nothing was written or charged" in err
    assert "OperationalError" not in err and "check --ledger" not in err
    monkeypatch.undo()
    assert Ledger(url).budgets("ds")[0].total == (2.0, 0.0)


@pytest.mark.parametrize("ledger_exists", [True, False])
def test_audit_show_refuses_an_invalid_release_id_before_reading_the_ledger(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], ledger_exists: bool) -> None:
    """Finding 9 (trial G): an id no release can have is invalid (exit 2), not "not in the ledger"; unknown ids exit 2
    and a missing ledger 1, as docs/cli.md says."""
    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    if ledger_exists:
        Ledger(url)
    assert main(["audit", "show", "bad id/..", "--ledger", url]) == 2
    err = capsys.readouterr().err
    assert "release id ('bad id/..') must be 1-128 letters, digits" in err and "not in the ledger" not in err
    assert (tmp_path / "l.sqlite").exists() == ledger_exists  # nothing created
    assert main(["audit", "show", "no-such-release", "--ledger", url]) == (2 if ledger_exists else 1)
    err = capsys.readouterr().err
    assert ("is not in the ledger" if ledger_exists else "no fdp ledger at") in err


def test_budget_cancel_refuses_an_invalid_release_id_before_opening_the_ledger(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """As `fdp audit show` (trial G): an id no release can have is invalid (exit 2), and no ledger is created."""
    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert main(["budget", "cancel", "bad id/..", "--ledger", url]) == 2
    err = capsys.readouterr().err
    assert "release id ('bad id/..') must be 1-128 letters, digits" in err and "not in the ledger" not in err
    assert not (tmp_path / "l.sqlite").exists()


def test_audit_backup_copies_a_live_sqlite_ledger_that_verifies_and_never_overwrites(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Trial Y: "restore the ledger from its backup" had no command behind it. `fdp audit backup` copies a SQLite
    ledger with SQLite's online backup (consistent while releases write), owner-only, checks that the copy verifies,
    never overwrites; a damaged ledger's copy is written but exits 1; PostgreSQL is pointed at pg_dump (exit 2)."""
    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    led = Ledger(url)
    led.set_budget("ds", 3.0)
    led.reserve(release_id="r", dataset_id="ds", epsilon=1.0, delta=0.0, config_sha256="0" * 64, summary="mean",
                mechanism="iclp_qr", sensitivity_formula="s", budget_splits=[], provenance={}, internal={})
    out = tmp_path / "backup.sqlite"
    assert main(["audit", "backup", "--ledger", url, "--out", str(out)]) == 0
    assert "it verifies" in capsys.readouterr().out
    copy = Ledger(f"sqlite:///{out}", read_only=True)
    assert (copy.head(), copy.ledger_id, copy.verify()) == (led.head(), led.ledger_id, [])
    assert out.stat().st_mode & 0o777 == 0o600 and not list(tmp_path.glob(".backup.sqlite.*"))
    assert main(["audit", "backup", "--ledger", url, "--out", str(out)]) == 2
    assert "a backup never overwrites a file" in capsys.readouterr().err
    with sa.create_engine(url).begin() as conn:  # a damaged ledger: the copy is kept for forensics, exit 1
        conn.execute(sa.text("UPDATE fdp_releases SET epsilon = '0.5'"))
    assert main(["audit", "backup", "--ledger", url, "--out", str(tmp_path / "damaged.sqlite")]) == 1
    assert "does not verify" in capsys.readouterr().err and (tmp_path / "damaged.sqlite").is_file()
    assert main(["audit", "backup", "--ledger", "postgresql://u@localhost/x", "--out", str(tmp_path / "x")]) == 2
    assert "pg_dump" in capsys.readouterr().err


def test_the_manuals_backup_line_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """docs/operations.md, "Backing up the ledger": its command, run as written on the default ledger."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    block = re.search(r"<!-- backup -->\n```bash\n(.*?)```", text, re.S)
    assert block is not None
    words = shlex.split(block.group(1).split("#")[0])
    assert words[:3] == [".venv/bin/fdp", "audit", "backup"]
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    monkeypatch.setenv("FDP_LEDGER_URL", url)
    monkeypatch.chdir(tmp_path)
    Ledger(url).set_budget("ds", 3.0)
    assert main(words[1:]) == 0, capsys.readouterr().err
    assert Ledger(f"sqlite:///{tmp_path / words[-1]}", read_only=True).verify() == []
