"""``fdp plan``: the numbers a release will publish, stated before anything is spent (issue 16).

The plan of every example config equals the manifest of a real release of it (same code path:
fdp.tasks.planning); plan writes nothing to the ledger and imports no Prefect.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from fdp.flows.cli import main
from fdp.flows.plan_command import epsilon_ladder, plan_report
from fdp.tasks._plots import tau_pricing_text
from flow_support import artifacts, release, small_csv_release, write_config

from fdpcore.ledger import Ledger
from fdpcore.summaries.fosr import fosr_moments

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


def _plan_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["plan", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_plan_equals_the_manifest_of_a_real_release(example: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(tmp_path, example)
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    eps = float(__import__("yaml").safe_load(example.read_text())["privacy"]["epsilon"])
    planned = _plan_json(capsys, str(cfg), "--epsilon", str(eps), "--ledger", ledger)
    assert not (tmp_path / "l.sqlite").exists()  # plan never creates a ledger
    row = planned["rows"][0]
    assert release(cfg, tmp_path / "out", ledger, "r1") == 0
    printed = capsys.readouterr().out
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    _assert_release_states_the_accuracy_as_planned(printed, row, m, cfg)
    assert planned["n"] == m["n"]
    assert row["epsilon"] == m["privacy"]["epsilon"]
    summary = planned["summary"]
    if summary == "fosr":
        assert row["sensitivity"] == m["sensitivity"]["T2"]["value"]
        assert row["noise_scale"] == m["noise"]["whitened_scale_T2"]
        assert row["expected_l2_error"] == m["noise"]["expected_l2_error_T2"]
        assert row["tuning"]["gamma"] == m["parameters"]["gamma"]
    elif summary == "fpca":
        assert row["sensitivity"] == m["sensitivity"]["value"]
        assert row["tuning"]["prior_strength"] == m["parameters"]["base_measure"]["prior_strength"]
        assert row["expected_l2_error"] is None
        tau = m["parameters"]["tau"]  # a bought tau: the plan is priced at tau = 1 and the figure scales as tau^2
        assert row["expected_energy_shortfall"] * tau**2 == pytest.approx(m["sampler"]["expected_energy_shortfall"],
                                                                         rel=1e-12)
        assert m["sampler"]["expected_energy_shortfall"] > 0
        assert "accuracy.fpca.energy_shortfall@1" in m["formulas"]
    elif row["expected_l2_error_range"] is not None:  # dp_select: parameters chosen after the charge
        assert m["parameters"]["tuning"]["rule"] == "dp_select"
        assert row["tuning"]["candidates"] == m["parameters"]["selection"]["candidates"]
        low, high = row["expected_l2_error_range"]  # the release's noise is that of one candidate: stated before
        assert low <= m["noise"]["expected_l2_error"] <= high == row["expected_l2_error"]
    elif any(not b["a_priori"] for b in row.get("bought") or ()):  # tau: auto: the plan is priced at tau = 1
        tau = m["parameters"]["tau"]  # the released tau; a mean's sensitivity, scale and noise are linear in it
        assert [s["name"] for s in m["budget_splits"]] == [b["name"] for b in row["bought"]] + ["mean"]
        for key, value in (("sensitivity", m["sensitivity"]["value"]), ("noise_scale", m["noise"]["whitened_scale"]),
                           ("expected_l2_error", m["noise"]["expected_l2_error"])):
            assert row[key] * tau == pytest.approx(value, rel=1e-12)
        for key in ("eta", "psi"):
            assert row["tuning"][key] == m["parameters"][key]
    else:
        assert row["sensitivity"] == m["sensitivity"]["value"]
        assert row["noise_scale"] == m["noise"]["whitened_scale"]
        assert row["expected_l2_error"] == m["noise"]["expected_l2_error"]
        assert row["expected_l2_error_scaled"] == m["noise"]["expected_l2_error_scaled"]
        if "band_half_width_max" in m["noise"]:  # a Monte Carlo quantile of the noise law with a public seed
            assert row["band_half_width_max"] == m["noise"]["band_half_width_max"]
        for key in ("eta", "psi", "bandwidth"):
            if key in m["parameters"]:
                assert row["tuning"][key] == m["parameters"][key]
    # after the release, plan reads the ledger read-only: what is left is the ledger's remaining budget
    after = _plan_json(capsys, str(cfg), "--epsilon", str(eps), "--ledger", ledger)
    assert after["budget"]["source"] == "ledger"


def _assert_release_states_the_accuracy_as_planned(printed: str, row: dict, m: dict, cfg: Path) -> None:
    """``fdp release`` prints the expected error with the units and norm of ``fdp plan``'s note (FPCA: its shortfall)."""
    from fdp.flows.config import load_config
    from fdp.tasks._publish import artifact_prefix, noise_only_text

    lines = printed.splitlines()
    (at,) = [i for i, x in enumerate(lines) if x.startswith("  accuracy:  ")]
    line = lines[at]
    if m["summary"] == "fpca":  # no additive noise: the expected captured-energy shortfall of the manifest
        shortfall = m["sampler"]["expected_energy_shortfall"]
        assert line.startswith(f"  accuracy:  expected captured-energy shortfall {shortfall:.4g} per record")
        assert "(source units squared;" in line
        return
    bought = any(c["name"] == "tau" and c["epsilon"] > 0 for c in m["parameters"].get("public_choices") or ())
    tail = ("`fdp plan` stated it at tau = 1: this is that figure at the tau released" if bought
            else "as `fdp plan` stated")
    # the figure is named as the noise's only, what it leaves out is said (issue 16), and then how plan stated it
    match = re.fullmatch(r"  accuracy:  expected L2 error of .+? (\d[\d.e+-]*) \((.+)\) — "
                         + re.escape(noise_only_text(m["summary"])), line)
    assert match is not None, line
    assert lines[at + 1] == "             " + tail
    key = "expected_l2_error_T2" if m["summary"] == "fosr" else "expected_l2_error"
    assert float(match.group(1)) == pytest.approx(m["noise"][key], rel=1e-3)
    norm = match.group(2)
    assert norm in row["note"]  # the same units and norm as the plan's note
    units = {"covariance": "units: source units squared", "kde": "units: density per source unit",
             "erm": "units: "}.get(m["summary"], "units: source units")
    assert units in norm
    assert "(source units;" not in line
    if m["summary"] == "covariance":
        assert norm in m["noise"]["expected_l2_error_note"]
    if m["summary"] in ("mean", "kde", "erm", "covariance"):  # the release note says it too
        assert any(norm in note for note in artifacts(f"{artifact_prefix(load_config(cfg))}-release-note"))


def test_plan_notes_state_the_norm_and_domain_of_the_error_and_what_relative_divides_by(tmp_path: Path) -> None:
    """Mean/covariance: L2 over the grid domain (on [0, 1] the RMS over time); KDE/ERM: over the source domain."""
    from fdp.flows.config import load_config
    from fdp.tasks.planning import accuracy, build_plan

    def row(example: str, **overrides: object) -> dict:
        config = load_config(write_config(tmp_path, REPO / "examples" / example, **overrides))
        n = 508 if config.summary in ("mean", "covariance") else 1000
        return accuracy(config, build_plan(config, n), n, band=False).as_dict()

    mean = row("electricity_mean.yaml")
    assert "the L2 norm over the grid domain T = [0, 1] onto which time_domain [0.5, 48.5] is mapped, i.e. the root " \
           "mean square of the noise over time; units: source units" in mean["note"]
    assert mean["relative_note"] == "the root mean square of the noise over time, over value_scale"
    assert mean["relative_error"] == pytest.approx(mean["expected_l2_error"] / 1000.0)  # value_scale 1000, |T| = 1
    wide = row("electricity_mean.yaml", grid__domain=[0.0, 2.0])
    assert "grid domain T = [0, 2]" in wide["note"] and "i.e. sqrt(2) x the root mean square" in wide["note"]
    assert wide["relative_error"] == pytest.approx(wide["expected_l2_error"] / 1000.0 / math.sqrt(2.0))
    cov = row("electricity_covariance.yaml")
    assert "units: source units squared" in cov["note"] and "over pairs of times" in cov["note"]
    assert cov["relative_note"] == "the root mean square of the noise over pairs of times, over value_scale^2"
    # KDE on days 1-366: sqrt(365) x the RMS over the days; relative: that RMS over the uniform density 1/365
    kde = row("kde_1d.yaml", dataset__domain=[[1.0, 366.0]])
    assert "the L2 norm over the source domain [1, 366], i.e. sqrt(365) x the root mean square of the noise over it; " \
           "units: density per source unit of the domain" in kde["note"]
    assert kde["relative_note"] == ("the root mean square of the noise over the domain, over the uniform density on it "
                                    "(1/365 per source unit)")
    rms = kde["expected_l2_error"] / math.sqrt(365.0)
    assert kde["relative_error"] == pytest.approx(rms / (1.0 / 365.0))
    erm = row("erm_ridge.yaml")
    assert "source domain [0, 10], i.e. sqrt(10) x the root mean square" in erm["note"]
    assert "units: units of response" in erm["note"]  # the label column, by name
    assert erm["relative_note"] == ("the root mean square of the noise over the domain, over label_bound = 1.5 (the "
                                    "public bound on |response - label_offset|)")  # a new user: '1 label unit' meant nothing
    assert erm["relative_error"] == pytest.approx(erm["expected_l2_error"] / math.sqrt(10.0) / 1.5)
    assert erm["expected_l2_error_with_bias"] > erm["expected_l2_error"]  # psi: auto's prior error, noise included
    for r in (kde, erm):
        assert "value scale" not in r["relative_note"] and "value_scale" not in r["relative_note"]


def test_plan_default_ladder_png_and_no_ledger_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    example = REPO / "examples" / "electricity_mean.yaml"
    cfg = write_config(tmp_path, example)
    ledger_path = tmp_path / "l.sqlite"
    ledger = f"sqlite:///{ledger_path}"
    assert main(["budget", "set", "adelaide-electricity-monday", "--epsilon", "3", "--ledger", ledger]) == 0
    capsys.readouterr()
    before = sqlite3.connect(ledger_path).iterdump()
    before_dump = "\n".join(before)
    png = tmp_path / "plan.png"
    report = _plan_json(capsys, str(cfg), "--ledger", ledger, "--out", str(png))
    assert [r["epsilon"] for r in report["rows"]] == epsilon_ladder(1.0) == [0.25, 0.5, 1.0, 2.0, 4.0]
    assert report["budget"]["remaining_epsilon"] == 3.0
    assert [r["budget_remaining_epsilon_after"] for r in report["rows"]] == [2.75, 2.5, 2.0, 1.0, -1.0]
    assert [r["fits_budget"] for r in report["rows"]] == [True, True, True, True, False]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "\n".join(sqlite3.connect(ledger_path).iterdump()) == before_dump
    assert main(["plan", str(cfg), "--ledger", ledger]) == 0
    text = capsys.readouterr().out
    assert "nothing charged" in text and "n = 508" in text and "(over budget: epsilon)" in text
    assert [r["budget_short"] for r in report["rows"]] == [[], [], [], [], ["epsilon"]]
    # trial M: a delta the dataset no longer has is over budget too, and the row says which
    gp = tmp_path / "gp.yaml"
    raw = yaml.safe_load(cfg.read_text())
    raw["estimator"], raw["privacy"]["delta"] = "gp", 1e-5
    gp.write_text(yaml.safe_dump(raw))
    short = _plan_json(capsys, str(gp), "--ledger", ledger, "--epsilon", "1")["rows"][0]  # the set left delta 0
    assert (short["fits_budget"], short["budget_short"]) == (False, ["delta"])
    # the public alignment rule in source units (half-hours 1..48 on [0.5, 48.5], one grid step 1)
    assert "aligned when its readings reach from at most 2 to at least 47" in text
    # the error with the smoothing bias of a typical mean falls with epsilon and is never below the noise alone
    with_bias = [r["expected_l2_error_with_bias"] for r in report["rows"]]
    assert all(a > b for a, b in zip(with_bias, with_bias[1:], strict=False)), with_bias
    assert all(w >= r["expected_l2_error"] for w, r in zip(with_bias, report["rows"], strict=True))
    assert "with bias" in text


def test_plan_with_bias_is_the_noise_plus_the_prior_bias_of_the_chosen_tuning(tmp_path: Path) -> None:
    """The column adds exactly prior_sq_bias at the row's (eta, psi) and signal_fraction * tau to the noise, under the
    mean's prior (tuning.risk.iclp_qr.prior@2: smooth, power from the kernel's decay rate)."""
    from fdp.flows.config import load_config
    from fdp.tasks.planning import accuracy, mean_plan

    from fdpcore.privacy.tuning import prior_sq_bias, smooth_prior_power

    config = load_config(REPO / "examples" / "electricity_mean.yaml")
    plan = mean_plan(config, 508)
    row = accuracy(config, plan, 508, band=False)
    bias = float(prior_sq_bias(plan.basis.eigenvalues, plan.eta, plan.psi, signal=plan.signal_fraction * plan.tau,
                               prior="smooth", power=smooth_prior_power(plan.beta)))
    assert bias > 0
    scale = config.dataset.value_scale
    assert row.expected_l2_error_with_bias == pytest.approx(math.sqrt((row.expected_l2_error / scale) ** 2 + bias) * scale)


@pytest.mark.parametrize("example", ["electricity_covariance.yaml", "growth_fosr.yaml"])
def test_covariance_and_fosr_plans_state_the_error_with_the_prior_bias_and_it_falls_with_epsilon(
        example: str, tmp_path: Path) -> None:
    """Under risk_prior the noise alone can rise with epsilon (less smoothing); noise + the prior bias of the chosen
    (eta, psi) is what the rule minimises: it is stated, it is exactly that sum, and it falls strictly."""
    from fdp.flows.config import load_config
    from fdp.tasks.planning import accuracy, build_plan

    from fdpcore.privacy.tuning import prior_sq_bias

    cfg = write_config(tmp_path, REPO / "examples" / example, tuning__rule="risk_prior")
    config = load_config(cfg)
    rows = plan_report(cfg, [0.25, 0.5, 1.0, 2.0, 4.0, 16.0], None)["rows"]
    with_bias = [r["expected_l2_error_with_bias"] for r in rows]
    assert all(a > b for a, b in zip(with_bias, with_bias[1:], strict=False)), with_bias
    assert all(w > r["expected_l2_error"] for w, r in zip(with_bias, rows, strict=True))
    n = rows[0]["n"]
    plan = build_plan(config, n)
    row = accuracy(config, plan, n, band=False)
    lam = plan.basis.eigenvalues
    if config.summary == "covariance":  # shrunk eigenvalues lambda_j^2, a surface of size s tau^2; source units^2
        bias, unit = float(prior_sq_bias(lam * lam, plan.eta, plan.psi, signal=0.5 * plan.tau**2, prior="paths")), \
            config.dataset.value_scale**2
    else:  # p cross-moment curves of norm s tau_y
        bias, unit = plan.p * float(prior_sq_bias(lam, plan.eta, plan.psi, signal=0.5 * plan.tau_y, prior="paths")), \
            config.dataset.value_scale
    assert row.expected_l2_error_with_bias == pytest.approx(math.sqrt((row.expected_l2_error / unit) ** 2 + bias) * unit)


@pytest.mark.parametrize(("example", "key"), [("electricity_mean.yaml", "expected_l2_error_with_bias"),
                                            ("growth_fosr.yaml", "expected_l2_error_with_bias"),
                                            ("electricity_covariance.yaml", "expected_l2_error_with_bias")])
def test_plan_tau_break_even_is_where_the_bought_tau_prices_like_the_fixed_upper_end(
        example: str, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """tau: auto rows state the released tau at which the release's error equals that of tau fixed at the range's top.

    Checked against a second plan of the same config at that fixed tau and against the auto plan priced at the
    break-even tau itself (the error scales as tau, tau^2 for a covariance); rows that buy nothing state none.
    """
    from fdp.flows.config import load_config
    from fdp.tasks.planning import (
        accuracy,
        build_plan,
        count_config_units,
        covariance_plan,
        fosr_plan,
        mean_plan,
        tau_search_range,
    )

    auto = write_config(tmp_path, REPO / "examples" / example, clipping__tau="auto")
    config = load_config(auto)
    hi = tau_search_range(config)[1]
    fixed = write_config(tmp_path, REPO / "examples" / example, clipping__tau=hi)
    eps = [0.01, 1.0, 4.0]
    rows = {r["epsilon"]: r for r in plan_report(auto, eps, None)["rows"]}
    fixed_rows = {r["epsilon"]: r for r in plan_report(fixed, eps, None)["rows"]}
    assert rows[0.01]["tau_break_even"] is None  # n * epsilon too small: tau is the fixed upper end already
    power = 2 if "covariance" in example else 1
    for e in (1.0, 4.0):
        t = rows[e]["tau_break_even"]
        assert 0 < t < hi
        assert rows[e][key] * t**power == pytest.approx(fixed_rows[e][key], rel=1e-9)
        assert fixed_rows[e]["tau_break_even"] is None  # a fixed tau buys nothing
    # the auto plan priced at the break-even tau (its split kept) has exactly the fixed plan's error
    from dataclasses import replace

    from fdpcore.noise.quantiles import draw_public_choice

    cfg = config.model_copy(update={"privacy": config.privacy.model_copy(update={"epsilon": 4.0})})
    n = count_config_units(cfg, str(auto.parent))
    (choice,) = build_plan(cfg, n).public_choices
    t = rows[4.0]["tau_break_even"]
    drawn = replace(draw_public_choice(choice, [1.0] * n), value=t)  # as if the quantile had released t
    plan_at = {"mean": mean_plan, "covariance": covariance_plan, "fosr": fosr_plan}[cfg.summary]
    at_t = accuracy(cfg, plan_at(cfg, n, t, (drawn,)), n).as_dict()
    assert at_t[key] == pytest.approx(fixed_rows[4.0][key], rel=1e-6)
    assert main(["plan", str(auto), "--epsilon", "1", "--epsilon", "4"]) == 0
    assert f"if the tau it releases is below {rows[1.0]['tau_break_even']:.3g} at epsilon 1" in capsys.readouterr().out


def test_plan_rejects_bad_epsilon_and_reports_invalid_ladder_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(tmp_path, REPO / "examples" / "electricity_mean_dp_select.yaml")
    assert main(["plan", str(cfg), "--epsilon", "-1"]) == 2
    assert "--epsilon (-1.0) must be a positive finite number" in capsys.readouterr().err
    report = plan_report(cfg, [0.05, 1.0], f"sqlite:///{tmp_path / 'none.sqlite'}")
    assert "select_epsilon" in report["rows"][0]["error"]  # 0.05 leaves nothing after the selection share
    assert "error" not in report["rows"][1]


def test_plan_imports_no_prefect(tmp_path: Path) -> None:
    code = (
        "import contextlib, io, sys, json\n"
        "from fdp.flows.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    rc = main(['plan', {str(REPO / 'examples' / 'electricity_mean.yaml')!r}, '--ledger', "
        f"'sqlite:///{tmp_path / 'l.sqlite'}'])\n"
        "print(json.dumps([rc, sorted(m for m in sys.modules if m.split('.')[0] in ('prefect', 'fastapi'))]))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == [0, []]


def test_release_lists_every_file_says_when_a_rerun_charged_nothing_and_budget_shows_delta(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(tmp_path, REPO / "examples" / "electricity_mean.yaml")
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert release(cfg, tmp_path / "out", ledger, "r1") == 0
    captured = capsys.readouterr()
    first = captured.out
    assert "fdp: [ 70%] r1: budget charged" in captured.err and "fdp: [100%] r1: published" in captured.err
    for name in ("release.parquet", "release.png", "manifest.json"):
        assert str(tmp_path / "out" / name) in first
    assert "already published" not in first
    assert "spent epsilon 1, delta 0; remaining epsilon 99, delta 0" in first
    assert release(cfg, tmp_path / "again", ledger, "r1") == 0
    second = capsys.readouterr().out
    assert "r1: mean of adelaide-electricity-monday (n = 508): already published — files re-written, nothing charged" in second
    assert "charged:   period " in first and "(by the run that published it; nothing now)" not in first
    assert "(by the run that published it; nothing now)" in second
    assert (tmp_path / "again" / "release.png").is_file()
    assert "remaining epsilon 99," in second
    assert main(["budget", "show", "--ledger", ledger]) == 0
    table = capsys.readouterr().out.splitlines()
    assert "delta spent" in table[0] and "delta left" in table[0]


def test_a_release_whose_id_another_run_published_meanwhile_says_it_charged_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The other run published after this run's first look (simulated: that look saw nothing): the charge step
    finds it published, re-writes the files and the header says so, with the note (it used to read as a release)."""
    import importlib

    mean_flow = importlib.import_module("fdp.flows.mean_release")  # the module (the package exports the flow)
    cfg = small_csv_release(tmp_path, "race")
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert release(cfg, tmp_path / "out", ledger, "r1") == 0
    capsys.readouterr()
    monkeypatch.setattr(mean_flow, "already_published", lambda *a: None)
    assert release(cfg, tmp_path / "again", ledger, "r1") == 0
    out = capsys.readouterr().out
    assert "r1: mean of race (n = 30): already published — files re-written, nothing charged" in out
    assert "note: another run of release r1 published it at the same time" in out
    assert Ledger(ledger).budgets("race")[0].spent == (1.0, 0.0)
    assert json.loads((tmp_path / "again" / "manifest.json").read_text()) == Ledger(ledger).get("r1").public["manifest"]


def test_covariance_on_a_private_mean_warns_in_plan_and_release_when_the_mean_noise_dominates(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    mean_cfg = write_config(tmp_path, REPO / "examples" / "electricity_mean.yaml", privacy__epsilon=0.25)
    assert release(mean_cfg, tmp_path / "mean", ledger, "m1") == 0
    mean_err = json.loads((tmp_path / "mean" / "manifest.json").read_text())["noise"]["expected_l2_error"]
    capsys.readouterr()
    cov = write_config(tmp_path, REPO / "examples" / "electricity_covariance.yaml",
                       centering={"kind": "private_mean", "release_id": "m1"})
    loud = _plan_json(capsys, str(cov), "--epsilon", "10", "--ledger", ledger)
    quiet = _plan_json(capsys, str(cov), "--epsilon", "0.1", "--ledger", ledger)
    cov_err = {r["epsilon"]: r["expected_l2_error"] for r in loud["rows"] + quiet["rows"]}
    assert cov_err[10.0] < mean_err**2 < cov_err[0.1]  # the premise: the centre dominates only the high-epsilon surface
    [warning] = loud["warnings"]
    assert "would dominate" in warning and "sample_mean" in warning and "public" in warning
    assert quiet["warnings"] == [] or "would dominate" not in quiet["warnings"][0]
    cov10 = write_config(tmp_path, REPO / "examples" / "electricity_covariance.yaml", privacy__epsilon=10.0,
                         centering={"kind": "private_mean", "release_id": "m1"})
    assert release(cov10, tmp_path / "cov", ledger, "c1") == 0
    assert "fdp: warning: the private mean 'm1'" in capsys.readouterr().err


def test_fosr_plan_states_where_the_safe_inverse_shrinks_coefficients(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The coefficient curves' main bias is public: eigenvalues of the released T1 below rho are raised to it, so a
    one-hot level held by fewer than rho x n units is shrunk; the plan names rho and rho x n per epsilon."""
    cfg = write_config(tmp_path, REPO / "examples" / "growth_fosr.yaml")
    rows = plan_report(cfg, [1.0, 4.0], None)["rows"]
    floors = [r["tuning"]["safe_inverse_floor"] for r in rows]
    assert floors[1] < floors[0]  # more epsilon, a lower floor
    assert main(["plan", str(cfg), "--epsilon", "1", "--epsilon", "4"]) == 0
    text = capsys.readouterr().out
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("coefficients:"))
    assert f"{floors[0]:.3g} at epsilon 1" in line and f"{floors[0] * 93:.3g}, {floors[1] * 93:.3g} of 93" in line
    # growth_fosr codes sex -1/+1: T1 = [[1, m], [m, 1]] has smallest eigenvalue 1 - |m| = 2 x the smaller group / n
    assert f"fewer than rho x n / 2 units ({floors[0] * 93 / 2:.3g}, {floors[1] * 93 / 2:.3g}:" in line
    z = np.array([1.0] * 39 + [-1.0] * 54)
    t1, _ = fosr_moments(np.column_stack([np.ones_like(z), z]), np.zeros((93, 1)))
    assert np.linalg.eigvalsh(t1)[0] == pytest.approx(2 * 39 / 93)


def test_kde_plan_with_bandwidth_auto_says_it_is_bought_and_states_the_noise_over_the_candidates(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(tmp_path, REPO / "examples" / "kde_1d.yaml", grid__size=50, bandwidth="auto")
    report = _plan_json(capsys, str(cfg), "--epsilon", "0.5", "--epsilon", "2")
    for row in report["rows"]:
        assert [s["name"] for s in row["budget_splits"]] == ["bandwidth", "kde"]
        (bought,) = row["bought"]
        assert bought["name"] == "bandwidth" and not bought["a_priori"] and bought["epsilon"] == row["budget_splits"][0]["epsilon"]
        widest, narrowest = row["expected_l2_error_range"]
        assert widest < row["expected_l2_error"] < narrowest  # the normal_reference h lies inside the candidates
        assert "normal_reference bandwidth" in row["note"]
    lo, hi = report["rows"][0]["expected_l2_error_range"], report["rows"][1]["expected_l2_error_range"]
    assert hi[1] < lo[1]  # more epsilon, less noise at the narrowest candidate
    assert any("bandwidth: auto" in a for a in report["assumptions"])
    assert main(["plan", str(cfg), "--epsilon", "1"]) == 0
    printed = capsys.readouterr().out
    assert "bought with budget: bandwidth (DP quartiles of each coordinate), epsilon 0.1328 of 1" in printed
    assert "(widest) and" in printed and "(narrowest) at epsilon 1" in printed and "tau at epsilon" not in printed


def test_fosr_plan_says_t2_is_re_chosen_after_t1_only_for_risk_prior(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """tuning.fosr.t2_given_t1@1: the plan prices T2 at T1 = I and says the release re-chooses the pair (risk_prior)."""
    default = write_config(tmp_path, REPO / "examples" / "growth_fosr.yaml", tuning={})
    assert main(["plan", str(default)]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("T2's smoothing:"))
    assert "tuning.fosr.t2_given_t1@1" in line and "tr((T1~^+)^2)/p" in line
    pss = write_config(tmp_path, REPO / "examples" / "growth_fosr.yaml")  # the example fixes tuning.rule: exact_free
    assert main(["plan", str(pss)]) == 0
    assert "T2's smoothing:" not in capsys.readouterr().out


def test_fosr_plan_prices_the_coefficients_at_a_balanced_design_of_the_public_levels(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Trial J (M2): with categorical covariates the plan states the coefficient curves' error before spending, at a
    design whose public levels occur equally often (not the data), and which coefficients the floor would shrink."""
    from fdp.flows.config import load_config
    from fdp.tasks.planning import fosr_balanced_t1

    pm1 = write_config(tmp_path, REPO / "examples" / "growth_fosr.yaml")  # sex {M: 1, F: -1}
    assert np.allclose(fosr_balanced_t1(load_config(pm1)), np.eye(2))
    onehot = write_config(tmp_path, REPO / "examples" / "growth_fosr.yaml", tuning={}, covariates=[
        {"name": "sex", "encoding": "one_hot", "levels": ["F", "M"], "reference": "F"}])
    assert np.allclose(fosr_balanced_t1(load_config(onehot)), [[1.0, 0.5], [0.5, 0.5]])
    rows = plan_report(onehot, [0.5, 2.0, 8.0], None)["rows"]
    coef = [r["coefficients_balanced"] for r in rows]
    biased = [c["expected_l2_error_with_bias"] for c in coef]
    assert biased[0] > biased[1] > biased[2] and all(c["expected_l2_error"] <= b for c, b in zip(coef, biased, strict=True))
    assert coef[0]["pass_through"][1] < coef[2]["pass_through"][1] <= 1.0  # more epsilon, a lower floor: less shrunk
    assert main(["plan", str(onehot), "--epsilon", "0.5", "--epsilon", "8"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("coefficients, if every"))
    assert f"{coef[0]['expected_l2_error_with_bias']:.4g} at epsilon 0.5" in line
    assert "beta_sex=M (keeps" in line and "cannot be told from 0" in line
    numeric = write_config(tmp_path, REPO / "examples" / "growth_fosr.yaml", covariates=[{"name": "sex", "encoding": {
        "M": 1, "F": -1}}, {"name": "age_at_entry"}])
    assert fosr_balanced_t1(load_config(numeric)) is None  # a numeric covariate: its distribution is not public


def test_fosr_plan_prices_the_coefficients_at_public_level_shares(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Trial S: a level held by 7 % of the units was priced as if it held half of them (the balanced design), so the
    plan's coefficient error was 1.8 x too small. A-priori shares (covariates[].shares, e.g. a census figure) set the
    planned design: with the data's own shares it is the data's T1 exactly, and each coefficient's T2 noise is stated
    as the release will state its T2 part (accuracy.fosr.coefficient_noise@1) at that T1 and pair."""
    from fdp.flows.config import load_config
    from fdp.tasks.planning import fosr_balanced_t1, fosr_plan

    from fdpcore.summaries.fosr import fosr_coefficient_noise, given_t1

    frame = pd.read_parquet(REPO / "examples" / "data" / "berkeley_growth.parquet").groupby("child_id").first()
    shares = frame["sex"].value_counts(normalize=True).to_dict()  # this test knows the data; a user writes a priori
    cfg = write_config(tmp_path, REPO / "examples" / "growth_fosr.yaml", covariates=[
        {"name": "sex", "encoding": "one_hot", "levels": ["F", "M"], "reference": "F", "shares": shares}])
    config = load_config(cfg)
    t1 = fosr_balanced_t1(config)
    male = float((frame["sex"] == "M").mean())
    assert np.allclose(t1, [[1.0, male], [male, male]], rtol=1e-12)  # the data's own design moments T1
    [row] = plan_report(cfg, [1.0], None)["rows"]
    planned = row["coefficients_balanced"]
    drawn = given_t1(fosr_plan(config, 93), t1)
    t2_part, _ = fosr_coefficient_noise(drawn, t1, np.zeros((2, drawn.basis.grid.size)))
    assert planned["coefficient_t2_noise"] == pytest.approx(list(np.sqrt(t2_part) * 10.0), rel=1e-9)  # value_scale 10
    assert planned["shares"] == "public"
    assert main(["plan", str(cfg), "--epsilon", "1"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("coefficients, at the "))
    assert f"beta_sex=M {planned['coefficient_t2_noise'][1]:.3g}" in line
    bad = write_config(tmp_path, REPO / "examples" / "growth_fosr.yaml", covariates=[
        {"name": "sex", "encoding": {"M": 1, "F": -1}, "shares": {"M": 0.9, "F": 0.2}}])
    assert main(["plan", str(bad)]) == 2
    assert "shares of 'sex' must be between 0 and 1 and sum to 1 (they sum to 1.1)" in capsys.readouterr().err


def test_rows_where_tau_falls_back_to_the_a_priori_bound_are_marked(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Trial J (M5): an a-priori-tau row and a bought-tau row (priced at tau = 1) can show the same figure; the table
    marks the first and says the second scales with the tau released."""
    cfg = write_config(tmp_path, REPO / "examples" / "growth_fosr.yaml", clipping={"tau": "auto"})
    assert main(["plan", str(cfg), "--epsilon", "0.5", "--epsilon", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(ln.split()[:1] == ["0.5*"] for ln in lines) and any(ln.split()[:1] == ["2"] for ln in lines)
    note = next(ln for ln in lines if ln.strip().startswith("tau at epsilon 0.5:"))
    assert "rows marked * are on that footing" in note and "times the tau they release" in note


def test_a_mean_row_at_the_a_priori_tau_assumes_a_tenth_of_it_and_says_so(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Trial V: at the a-priori tau (n * epsilon too small to buy it) the default tuning assumes a mean of 0.1 x tau
    (tuning.risk.signal_default@1); the plan says so under the table, and a stated signal_fraction replaces it."""
    cfg = write_config(tmp_path, REPO / "examples" / "electricity_mean_auto.yaml")
    rows = plan_report(cfg, [0.05, 1.0], None)["rows"]
    assert [r["tuning"]["signal_fraction"] for r in rows] == [0.1, 0.5]
    assert main(["plan", str(cfg), "--epsilon", "0.05", "--epsilon", "1"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("tuning at epsilon"))
    assert line.strip().startswith("tuning at epsilon 0.05: with tau at that bound the smoothing assumes a mean of norm "
                                   "0.1 x tau, i.e. a mean curve whose root mean square distance from value_offset is 0.1 "
                                   "x value_scale")
    assert "state it as tuning.signal_rms" in line and "in units of value_scale" in line
    stated = write_config(tmp_path, REPO / "examples" / "electricity_mean_auto.yaml", tuning={"signal_fraction": 0.5})
    stated_rows = plan_report(stated, [0.05], None)["rows"]
    assert stated_rows[0]["tuning"]["signal_fraction"] == 0.5 and stated_rows[0]["tuning"]["psi"] < rows[0]["tuning"]["psi"]
    assert main(["plan", str(stated), "--epsilon", "0.05"]) == 0
    assert "tuning at epsilon" not in capsys.readouterr().out
    # the mean's size stated a priori (tuning.risk.signal_stated@1): a fraction of the row's tau, no default to explain
    sized = write_config(tmp_path, REPO / "examples" / "electricity_mean_auto.yaml", tuning={"signal_rms": 0.05})
    sized_rows = plan_report(sized, [0.05, 1.0], None)["rows"]
    assert [(r["tuning"]["signal_rms"], r["tuning"]["signal_fraction"]) for r in sized_rows] == [(0.05, 0.05)] * 2
    assert main(["plan", str(sized), "--epsilon", "0.05"]) == 0
    assert "tuning at epsilon" not in capsys.readouterr().out


def test_with_a_stated_mean_size_the_break_even_tau_is_solved_not_scaled(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Trial X, F1: with tuning.signal_rms the smoothing is re-chosen at the tau released, so the errors priced at
    tau = 1 do not scale linearly with it. The break-even tau is solved: a bought tau t with the rest of epsilon faces
    the same problem as tau = 1 with the whole epsilon exactly when t / epsilon_rest = 1 / epsilon (the noise scales as
    tau / epsilon, the stated mean does not), so it is the share of epsilon left — here 0.75 of it, where scaling the
    tau = 1 figure linearly says otherwise. The plan and its plot say the figures do not scale. The stated size also
    raises the lower end of tau's search range to the mean's norm."""
    cfg = write_config(tmp_path, REPO / "examples" / "electricity_mean_auto.yaml", tuning={"signal_rms": 0.2})
    report = plan_report(cfg, [1.0], None)
    (row,) = report["rows"]
    (bought,) = [b for b in row["bought"] if b["name"] == "tau"]
    split = bought["epsilon"]
    assert report["tuning_follows_tau"]
    assert row["tau_break_even"] == pytest.approx(1.0 - split, rel=1e-6)
    linear = plan_report(write_config(tmp_path, REPO / "examples" / "electricity_mean_auto.yaml"), [1.0], None)
    assert not linear["tuning_follows_tau"]
    # no candidate below the stated mean's norm (0.2 on [0, 1]): fewer candidates, a cheaper quantile
    (unstated,) = [b for b in linear["rows"][0]["bought"] if b["name"] == "tau"]
    assert bought["candidates"][0] == pytest.approx(0.2) and unstated["candidates"][0] == pytest.approx(0.01)
    assert split < unstated["epsilon"] == 0.25
    assert main(["plan", str(cfg), "--epsilon", "1"]) == 0
    out = capsys.readouterr().out
    assert "the smoothing is re-chosen at the tau released" in out and "scale linearly" not in out
    assert tau_pricing_text(report) is not None and "re-chosen" in str(tau_pricing_text(report))


def test_the_resolution_is_the_domain_over_the_components_kept_at_least_half_and_printed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Trial L (H1): a mean's period-3 cycle over 1,460 readings came out flat with an 11 % stated error; the plan
    now states the shortest feature the release keeps (|time_domain| / L, L = components kept at least half)."""
    import yaml
    from fdp.flows.config import load_config
    from fdp.tasks.planning import mean_plan, resolution

    from fdpcore.summaries.mean import iclp_qr_shrinkage

    example = REPO / "examples" / "electricity_mean.yaml"
    cfg = write_config(tmp_path, example)
    config = load_config(cfg)
    a, b = config.dataset.time_domain
    got = []
    for eps in (0.5, 2.0):
        plan = mean_plan(config.model_copy(update={"privacy": config.privacy.model_copy(update={"epsilon": eps})}), 508)
        kept = int(np.sum(iclp_qr_shrinkage(plan.basis.eigenvalues, plan.eta, plan.psi) >= 0.5))
        assert 1 <= kept < plan.basis.eigenvalues.size
        assert resolution(config, plan) == pytest.approx((b - a) / kept)
        got.append(resolution(config, plan))
    assert got[1] < got[0]  # more epsilon, less smoothing: finer features kept
    raw = yaml.safe_load(cfg.read_text())
    raw["kernel"]["rho"] = 0.02  # a shorter length scale keeps more components
    short = tmp_path / "short.yaml"
    short.write_text(yaml.safe_dump(raw))
    assert resolution(load_config(short), mean_plan(load_config(short), 508)) < resolution(config, mean_plan(config, 508))
    report = _plan_json(capsys, str(cfg), "--epsilon", "1")
    assert report["rows"][0]["resolution"] == pytest.approx(resolution(config, mean_plan(config, 508)))
    assert main(["plan", str(cfg), "--epsilon", "1"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("  resolution: "))
    assert f"{report['rows'][0]['resolution']:.3g} at epsilon 1 " in line and "half_hour's units" in line


def test_plan_warns_when_an_iclp_erm_eta_is_not_above_one_plus_one_over_beta(tmp_path: Path) -> None:
    """Trial M L5: eta 1.1 with a Matern-3/2 kernel (beta 4) was accepted without a word (MATH.md §9)."""
    def warnings(**overrides: object) -> list[str]:
        return plan_report(write_config(tmp_path, REPO / "examples" / "erm_ridge.yaml", **overrides), [1.0],
                           None)["warnings"]

    low = [w for w in warnings(eta=1.1) if w.startswith("eta 1.1 is at most 1 + 1/beta")]
    assert len(low) == 1 and "= 1.25 (matern kernel: beta 4)" in low[0] and "private" in low[0]
    assert [w for w in warnings(eta=1.25) if w.startswith("eta 1.25 is at most")]  # the boundary: tr C^0.25 ~ log K
    assert not [w for w in warnings(eta=1.3) if w.startswith("eta ")]
    assert not [w for w in warnings(eta=1.1, mechanism="gp", privacy__delta=1e-6) if w.startswith("eta ")]


def test_fpca_plan_states_the_basis_resolution_and_warns_when_the_shortfall_exceeds_a_records_energy(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Trial N: the default 5-function basis held a daily shape 22 degrees off its principal components while 'E
    shortfall' (against the basis) looked small, and k = 11 of m = 12 planned 397 % of tau^2 without a word."""
    cfg = write_config(tmp_path, REPO / "examples" / "growth_fpca.yaml")
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert main(["plan", str(cfg), "--epsilon", "1", "--ledger", ledger]) == 0
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if ln.strip().startswith("resolution:")]
    assert "basis's 5 functions" in line and "about 3.4 in age_years's units" in line  # ages 1-18 over 5 functions
    assert "expected energy shortfall is" not in out
    report = _plan_json(capsys, str(cfg), "--epsilon", "1", "--epsilon", "0.25", "--ledger", ledger)
    assert [r["resolution"] for r in report["rows"]] == [pytest.approx(17 / 5)] * 2
    wide = write_config(tmp_path, REPO / "examples" / "growth_fpca.yaml", n_components=3, basis__n_basis=12)
    report = _plan_json(capsys, str(wide), "--epsilon", "0.25", "--epsilon", "4", "--ledger", ledger)
    rel = {r["epsilon"]: r["relative_error"] for r in report["rows"]}
    assert rel[0.25] >= 1.0 > rel[4.0]  # k (m - k) tau^2 / (n epsilon_step): 27 / (93 x ~0.2) against 27 / (93 x ~3.9)
    (warned,) = [w for w in report["warnings"] if "expected energy shortfall is" in w]
    assert warned.startswith("at epsilon 0.25: the expected energy shortfall is") and "3 components" in warned


def test_a_fosr_config_without_shares_keeps_the_hash_of_its_earlier_releases() -> None:
    """`shares` (plan-only) came after FoSR releases were published: a config without it must keep its config_sha256,
    or a re-run of a published id would be refused as another config. The hash below is the one the ledger recorded
    for releases of examples/growth_fosr.yaml made before the field existed (session 30); with shares it changes."""
    from fdp.flows.config import config_sha256, load_config

    config = load_config(REPO / "examples" / "growth_fosr.yaml")
    assert config_sha256(config) == "7d7dc1a4423b55f096d87191c1e39793314b4a5848f5ed31940e9fe547b89471"
    with_shares = config.model_copy(update={"covariates": [
        config.covariates[0].model_copy(update={"shares": {"M": 0.5, "F": 0.5}})]})
    assert config_sha256(with_shares) != config_sha256(config)


def test_a_means_with_bias_legend_warns_of_the_ends_unless_centred_on_a_reference(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Trial Z (H1): the smoothing pulls a trending mean towards value_offset most at the ends of time_domain (life
    expectancy 2007: -4.9 years against an RMS-over-time figure of 1.8), so the plan's 'with bias' legend says the figure
    is an average over time and names the remedy; centred on a public reference curve the line is not printed."""
    example = REPO / "examples" / "electricity_mean.yaml"
    plain = write_config(tmp_path, example)
    centred = write_config(tmp_path, example, centering={"time": [0.5, 48.5], "value": [1400.0, 1600.0],
                                                         "source": "a straight line through two public figures"})
    assert main(["plan", str(plain), "--epsilon", "1"]) == 0
    legend = next(ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("with bias:"))
    assert "an average over time" in legend and "ends of time_domain" in legend and "straight line" in legend
    assert main(["plan", str(centred), "--epsilon", "1"]) == 0
    legend = next(ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("with bias:"))
    assert "ends of time_domain" not in legend
    assert _plan_json(capsys, str(centred), "--epsilon", "1")["centred_on_reference"] is True
    assert _plan_json(capsys, str(plain), "--epsilon", "1")["centred_on_reference"] is False
