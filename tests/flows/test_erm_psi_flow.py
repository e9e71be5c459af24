"""``psi: auto`` end to end (issue 16, ridge ERM on faithful-like data): ``fdp init`` writes it, ``fdp plan`` shows the
psi it picks per epsilon with a 'with bias' column and 'relative' over label_bound, a release records the rule."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from fdp.flows.cli import main
from fdp.flows.config import load_config
from flow_support import release

from fdpcore.privacy.formulas import FORMULAS
from fdpcore.summaries.erm import PSI_RULE_FORMULA

INIT = ["--unit", "eruption_id", "--time", "eruptions", "--value", "waiting", "--time-domain", "1.5", "5.5",
        "--summary", "erm", "--loss", "ridge", "--value-offset", "70", "--label-bound", "40"]


def _faithful_like(tmp_path: Path, n: int = 272) -> Path:
    """Bimodal eruption lengths (minutes), waiting time linear-ish in them plus noise (synthetic; like R's faithful)."""
    rng = np.random.default_rng(272)
    short = rng.uniform(size=n) < 0.35
    x = np.clip(np.where(short, rng.normal(2.0, 0.3, n), rng.normal(4.3, 0.4, n)), 1.6, 5.4)
    y = 33.5 + 10.7 * x + rng.normal(0.0, 6.0, n)
    path = tmp_path / "faithful_like.parquet"
    pd.DataFrame({"eruption_id": np.arange(n), "eruptions": x, "waiting": y}).to_parquet(path, index=False)
    return path


def test_init_writes_psi_auto_and_plan_shows_the_chosen_psi_with_bias_and_relative_to_label_bound(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _faithful_like(tmp_path)
    cfg = tmp_path / "f.yaml"
    assert main(["init", str(data), *INIT, "--out", str(cfg)]) == 0
    capsys.readouterr()
    text = cfg.read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("psi:"))
    assert line.startswith("psi: auto ") and "tuning.erm.psi.risk_prior@1" in line and "fdp plan" in line
    config = load_config(cfg)
    assert config.psi == "auto" and config.label_bound == 40.0 and config.label_offset == 70.0
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert main(["plan", str(cfg), "--json", "--epsilon", "0.5", "--epsilon", "1", "--epsilon", "5",
                 "--ledger", ledger]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    psis = [r["tuning"]["psi"] for r in rows]
    assert psis[0] > psis[1] > psis[2] and all(r["tuning"]["psi_rule"] == "risk_prior" for r in rows)
    assert all(r["tuning"]["psi_formula"] == PSI_RULE_FORMULA for r in rows)
    biased = [r["expected_l2_error_with_bias"] for r in rows]
    assert biased[0] > biased[1] > biased[2]
    for r in rows:
        assert r["expected_l2_error_with_bias"] > r["expected_l2_error"]
        assert r["relative_error"] == pytest.approx(r["expected_l2_error_scaled"] / 40.0)
        assert r["relative_error"] == pytest.approx(r["expected_l2_error"] / math.sqrt(4.0) / 40.0)
        assert "over label_bound = 40" in r["relative_note"]
        assert r["relative_error"] < 0.5  # the issue: psi 0.01 gave 930 over the domain, "4.16e+04%" of one minute
    assert main(["plan", str(cfg), "--epsilon", "1", "--ledger", ledger]) == 0
    out = capsys.readouterr().out
    assert "with bias" in out and "psi_rule=risk_prior" in out and f"psi={psis[1]:.4g}" in out
    assert "relative: the root mean square of the noise over the domain, over label_bound = 40" in out
    assert "with bias: sqrt(E L2 error^2 + smoothing bias^2 + sampling variance) for a regression function of L2 " \
           "size 20 (0.5 x label_bound)" in out


def test_numeric_psi_still_plans_as_before_and_shows_the_prior_error(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """psi: 0.01 (the old default) keeps its noise; the plan now shows how far above the rule's error it is."""
    data = _faithful_like(tmp_path)
    cfg = tmp_path / "f.yaml"
    assert main(["init", str(data), *INIT, "--out", str(cfg)]) == 0
    raw = yaml.safe_load(cfg.read_text())
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    errors = {}
    for psi in ("auto", 0.01):
        raw["psi"] = psi
        path = tmp_path / f"c-{psi}.yaml"
        path.write_text(yaml.safe_dump(raw))
        capsys.readouterr()
        assert main(["plan", str(path), "--json", "--epsilon", "1", "--ledger", ledger]) == 0
        (row,) = json.loads(capsys.readouterr().out)["rows"]
        errors[psi] = row
    fixed = errors[0.01]
    assert fixed["tuning"]["psi"] == 0.01 and fixed["tuning"]["psi_rule"] == "fixed"
    assert fixed["expected_l2_error"] > 100.0  # the order of magnitude (noise over the 4-minute domain)
    assert errors["auto"]["expected_l2_error_with_bias"] < fixed["expected_l2_error_with_bias"] / 10.0


def test_release_with_psi_auto_records_the_rule_and_the_plan_psi(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    data = _faithful_like(tmp_path)
    cfg = tmp_path / "f.yaml"
    assert main(["init", str(data), *INIT, "--grid-size", "40", "--epsilon", "2", "--out", str(cfg)]) == 0
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    capsys.readouterr()
    assert main(["plan", str(cfg), "--json", "--epsilon", "2", "--ledger", ledger]) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert release(cfg, tmp_path / "out", ledger, "faithful-auto") == 0
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    par = m["parameters"]
    assert par["psi"] == row["tuning"]["psi"] and par["psi_rule"] == "risk_prior"
    assert par["psi_formula"] == PSI_RULE_FORMULA and par["psi_prior"]["signal_l2"] == 20.0
    assert par["psi_prior"]["rms_error_with_bias"] * math.sqrt(4.0) == pytest.approx(row["expected_l2_error_with_bias"])
    assert PSI_RULE_FORMULA in m["formulas"] and set(m["formulas"]) <= set(FORMULAS)
    assert m["noise"]["expected_l2_error"] == pytest.approx(row["expected_l2_error"], rel=1e-6)
    # trial M: the plan's `with bias` is the manifest's too, in the same source units, with the same note
    assert m["noise"]["expected_l2_error_with_bias"] == pytest.approx(row["expected_l2_error_with_bias"], rel=1e-12)
    assert m["noise"]["expected_l2_error_with_bias_note"] == row["with_bias_note"]
    values = pd.read_parquet(tmp_path / "out" / "release.parquet")["value"]
    assert values.between(70.0 - 40.0 - 5 * m["noise"]["band_half_width_max"],
                          70.0 + 40.0 + 5 * m["noise"]["band_half_width_max"]).all()


def test_plan_of_an_erm_config_imports_no_prefect(tmp_path: Path) -> None:
    """The ERM rows' extra columns come from the plan's public parameters: `fdp plan` still loads no Prefect."""
    data = _faithful_like(tmp_path)
    cfg = tmp_path / "f.yaml"
    assert main(["init", str(data), *INIT, "--out", str(cfg)]) == 0
    code = (
        "import contextlib, io, sys, json\n"
        "from fdp.flows.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    rc = main(['plan', {str(cfg)!r}, '--ledger', 'sqlite:///{tmp_path / 'l.sqlite'}'])\n"
        "print(json.dumps([rc, sorted(m for m in sys.modules if m.split('.')[0] in ('prefect', 'fastapi'))]))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == [0, []]
