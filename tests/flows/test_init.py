"""``fdp init``: a commented config from column names, types and the unit count only (issue 16)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pandas as pd
import pytest
from fdp.flows.cli import main
from fdp.flows.config import load_config
from flow_support import release

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "examples" / "data" / "electricity_monday.parquet"
ARGS = ["--unit", "monday_index", "--time", "half_hour", "--value", "demand_mw", "--time-domain", "1", "48"]


def _init(data: Path, out: Path, *extra: str) -> int:
    return main(["init", str(data), *ARGS, "--out", str(out), *extra])


@pytest.mark.parametrize("summary", ["mean", "covariance", "fpca"])
def test_init_writes_a_commented_config_that_validates_plans_and_releases(
        summary: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.yaml"
    assert _init(DATA, cfg, "--summary", summary, "--value-offset", "1500", "--value-scale", "1000") == 0
    assert "508 privacy units" in capsys.readouterr().out
    text = cfg.read_text()
    for field in ("time_domain", "value_offset", "value_scale", "tau", "size"):
        line = next(ln for ln in text.splitlines() if ln.strip().startswith(f"{field}:"))
        assert "# PUBLIC" in line or (field == "tau" and "auto   # BOUGHT" in line), line
    config = load_config(cfg)
    assert config.summary == summary and config.dataset.value_scale == 1000.0
    assert main(["plan", str(cfg), "--json", "--epsilon", "1", "--ledger", f"sqlite:///{tmp_path / 'l.sqlite'}"]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == 508
    assert release(cfg, tmp_path / "out", f"sqlite:///{tmp_path / 'l.sqlite'}", "r") == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["n"] == 508
    # tau: auto is a named budget split charged with the release, first (508 curves at epsilon 1 can buy it)
    assert [s["name"] for s in manifest["budget_splits"]] == ["tau", summary]
    assert manifest["parameters"]["public_choices"][0]["formula"] == "tuning.tau.dp_norm_quantile@1"


def test_init_never_fills_a_value_from_the_data(tmp_path: Path) -> None:
    df = pd.read_parquet(DATA)
    texts = []
    for i, (factor, shift) in enumerate([(1.0, 0.0), (1e-3, 5.0), (250.0, -1e6)]):
        d = tmp_path / f"d{i}"
        d.mkdir()
        changed = df.assign(demand_mw=df["demand_mw"] * factor + shift, half_hour=df["half_hour"] * (i + 1))
        changed.to_parquet(d / "data.parquet", index=False)
        assert _init(d / "data.parquet", d / "c.yaml") == 0
        texts.append((d / "c.yaml").read_text())
    assert texts[0] == texts[1] == texts[2]  # values and times changed; the config did not


def test_init_names_a_missing_column_and_refuses_to_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(DATA), "--unit", "monday_index", "--time", "hour", "--value", "demand_mw",
                 "--time-domain", "0", "1"]) == 2
    assert "missing column(s) ['hour']" in capsys.readouterr().err
    cfg = tmp_path / "c.yaml"
    cfg.write_text("x")
    assert _init(DATA, cfg) == 2
    assert "exists" in capsys.readouterr().err and cfg.read_text() == "x"
    points = REPO / "examples" / "data" / "erm_points.parquet"
    erm = ["init", str(points), "--unit", "customer_id", "--time", "x1", "--time-domain", "0", "10", "--summary", "erm"]
    assert main([*erm, "--out", str(tmp_path / "e.yaml")]) == 2
    assert "--value COLUMN: the label" in capsys.readouterr().err
    assert main([*erm, "--value", "response", "--loss", "ridge", "--out", str(tmp_path / "e.yaml")]) == 2
    assert "--label-bound B" in capsys.readouterr().err


def test_readme_new_data_walkthrough_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    text = (REPO / "docs" / "getting-started.md").read_text()
    block = re.search(r"<!-- walkthrough: new-data -->\n```bash\n(.*?)```", text, re.S)
    assert block is not None
    commands = [shlex.split(ln) for ln in block.group(1).replace("\\\n", " ").splitlines()
                if ln.strip() and not ln.lstrip().startswith("#")]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FDP_LEDGER_URL", f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    (tmp_path / "examples").symlink_to(REPO / "examples")
    outputs = []
    for words in commands:
        assert words[0] == ".venv/bin/fdp", words
        assert main(words[1:]) == 0, (words, capsys.readouterr().err)
        outputs.append(capsys.readouterr().out)
    assert "nothing charged" in outputs[1]
    assert json.loads(outputs[2])["rows"][0]["epsilon"] == 0.5 and (tmp_path / "my-plan.png").is_file()
    assert "already published — files re-written, nothing charged" in outputs[4]
    assert (tmp_path / "releases" / "my-first" / "release.png").is_file()


POINTS = {
    "kde": (REPO / "examples" / "data" / "kde_points_1d.parquet",
            ["--unit", "person_id", "--time", "score", "--time-domain", "0", "10"], 2000),
    "erm": (REPO / "examples" / "data" / "erm_points.parquet",
            ["--unit", "customer_id", "--time", "x1", "--value", "label", "--time-domain", "0", "10"], 1000),
}


@pytest.mark.parametrize("summary", ["kde", "erm"])
def test_init_writes_point_configs_that_plan_and_release(summary: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """KDE and ERM (issue 16): the domain comes from the options, never from the points; the config plans and releases."""
    data, args, n = POINTS[summary]
    cfg = tmp_path / "p.yaml"
    assert main(["init", str(data), *args, "--summary", summary, "--out", str(cfg)]) == 0
    assert f"{n} privacy units" in capsys.readouterr().out
    text = cfg.read_text()
    assert "domain: [[0.0, 10.0]]   # PUBLIC" in text and "size: 50           # PUBLIC" in text
    config = load_config(cfg)
    assert config.summary == summary and list(config.dataset.domain) == [(0.0, 10.0)]
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert main(["plan", str(cfg), "--json", "--epsilon", "1", "--ledger", ledger]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == n
    assert release(cfg, tmp_path / "out", ledger, "r") == 0
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["n"] == n
    moved = tmp_path / "moved.parquet"  # other values, same columns and units: the same config
    frame = pd.read_parquet(data)
    frame[args[3]] = frame[args[3]] * 7.0 - 3.0
    frame.to_parquet(moved, index=False)
    assert main(["init", str(moved), *args, "--summary", summary, "--out", str(tmp_path / "q.yaml")]) == 0

    def _no_names(s: str) -> list[str]:  # the file's name and path differ; everything else must not
        return [ln for ln in s.splitlines()[1:] if not ln.strip().startswith(("path:", "id:"))]

    assert _no_names((tmp_path / "q.yaml").read_text()) == _no_names(text)
