"""CLI commands other than release: schema, budget show, demo wiring."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fdp.flows.cli import main
from fdpcore.ledger import Ledger


def test_schema_prints_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "release-config"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert {"dataset", "grid", "kernel", "clipping", "privacy", "budget"} <= set(schema["properties"])


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
    assert "remaining 99" in capsys.readouterr().out


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
    assert "below what is already spent" in capsys.readouterr().err
    assert main(["budget", "set", "ds", "--epsilon", "-1", "--ledger", url]) == 2
    assert "epsilon" in capsys.readouterr().err
    assert led.budgets("ds")[0].total == (3.0, 0.0)
    assert main(["budget", "set", "ds", "--epsilon", "5", "--ledger", url]) == 0
    assert led.budgets("ds")[0].remaining == (3.0, 0.0)
