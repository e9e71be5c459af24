"""The accuracy a release states is the noise's only, and says so before and after the charge (issue 16).

A new user on unseen data measured errors 1.7-5x the stated ``expected L2 error of the noise``: with ``tau: auto``
at small n * epsilon the DP quantile targets the median norm, so about half the records are shrunk to tau. The
release line, the release note, ``fdp plan`` and the plots now say what the figure leaves out; FoSR says its figure
is T2's noise and prints the plan's safe-inverse warning before the charge. Everything here is public: the level
comes from n and the split, never from the data.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from fdp.flows.cli import main
from fdp.flows.plan_command import plan_report
from fdp.tasks._plots import (
    NOISE_BAND_LABEL,
    T2_BAND_LABEL,
    curves_png,
    error_vs_epsilon_png,
    labels_of,
    legend_of,
    title_of,
)
from flow_support import REPO, artifacts, release, small_csv_release, write_config

NOISE_ONLY = "the NOISE part only: clipping and smoothing add a bias that is not included"


def _auto(tmp_path: Path, name: str, epsilon: float, **clipping: object) -> Path:
    """The 30-unit CSV release with ``tau: auto`` (n * epsilon small: the quantile targets a low level)."""
    cfg = small_csv_release(tmp_path, name)
    raw = yaml.safe_load(cfg.read_text())
    raw["clipping"] = {"tau": "auto", **clipping}
    raw["privacy"]["epsilon"] = epsilon
    cfg.write_text(yaml.safe_dump(raw))
    return cfg


def test_a_mean_with_tau_bought_at_the_median_says_so_before_and_after_the_charge(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _auto(tmp_path, "median", 2.0)
    import fdp.flows.plan_command as plan_command

    def counted_again(*_: object) -> int:
        raise AssertionError("the pre-flight read n already: the data file's units are not counted again")

    monkeypatch.setattr(plan_command, "count_config_units", counted_again)
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert release(cfg, tmp_path / "out", ledger, "med-1") == 0
    out, err = capsys.readouterr()
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    (choice,) = m["parameters"]["public_choices"]
    level = choice["quantile_level"]
    assert choice["epsilon"] > 0 and level < 0.9  # the premise: tau bought at a low level
    aimed = f"a DP estimate aimed at the {level:.3g} quantile of the record norms: about {1 - level:.0%} of the records"
    # the level is the quantile's target, not a count: a draw can land below every record (trial H, F3)
    anywhere = ("but a DP draw can land away from its target — at small n * epsilon occasionally below every record, "
                "so that all of them")
    # before the charge (stderr, ahead of the progress line that says the budget was charged)
    warning = next(x for x in err.splitlines() if x.startswith("fdp: warning: tau will be a DP estimate"))
    assert warning.startswith(f"fdp: warning: tau will be {aimed} are expected above it and will be shrunk to it, "
                              f"{anywhere} are shrunk")
    assert "levers: more epsilon, a public clipping.tau" in warning and "reference curve" in warning
    assert err.index(warning) < err.index("budget charged")
    # after it: the release line names the noise as the noise only, and the clipping bias of the level
    lines = out.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("  accuracy:  "))
    assert lines[at].endswith(f"— {NOISE_ONLY}")
    # trial H, F4: the plan's 'with bias' at the released tau, from the manifest, labelled as a typical release's
    noise = m["noise"]
    tau = m["parameters"]["tau"]
    assert noise["expected_l2_error_with_bias"] > noise["expected_l2_error"]
    assert lines[at + 2] == (
        f"             with bias {noise['expected_l2_error_with_bias']:.4g}: sqrt(E||noise||^2 + bias^2), the bias being "
        f"the smoothing bias of a typical mean of norm signal_fraction x tau = 0.5 x {tau:.6g} (rescaled units) under "
        "the risk_prior prior (tuning.risk.iclp_qr.prior@2) at the released (eta, psi): a typical release's error, not "
        "this data's; the clipping bias (records shrunk to tau) is not included")
    assert noise["expected_l2_error_with_bias_note"] in lines[at + 2]
    assert lines[at + 3] == (
        f"             tau is {aimed} are expected to have been above it and shrunk to it, {anywhere} were shrunk; "
        "clipping shortens each shrunk record's deviation from value_offset = 0 "
        "(the constant the curves are centred on), the largest the most, so the release is biased in a direction set by "
        "the data — not necessarily towards that centre: on skewed data (a few large records shrunk hard) the mean can "
        "end up on the other side of it; the error can be several times the figure")
    assert "pulls the release towards" not in out + err  # trial H, F5: the bias need not lie between truth and centre
    # the release note says the same, and its plot's band is labelled as the noise's, not a confidence interval
    (note,) = [n for n in artifacts("median-mean-release-note") if "`med-1`" in n]
    assert "they are the NOISE part only — clipping and smoothing add a bias that is not included" in note
    assert "the band is not a confidence interval" in note
    assert f"Also: tau is {aimed} are expected to have been above it and shrunk to it, {anywhere} were shrunk" in note
    png = (tmp_path / "out" / "release.png").read_bytes()
    assert NOISE_BAND_LABEL in legend_of(png) and NOISE_BAND_LABEL == "noise-only 95% band (not a confidence interval)"
    # trial H, F6: the published plot states epsilon and the (bought) tau, and that the bias is outside the band
    assert title_of(png).endswith(f"(not a confidence interval) ε = 2, τ = {tau:.4g} (rescaled units, DP-bought); "
                                  "clipping and smoothing bias not in the band")
    assert labels_of(png) == "x: t | y: value (source units)"


def test_a_fixed_tau_states_the_noise_only_without_the_clipping_level(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = small_csv_release(tmp_path, "fixed")
    assert release(cfg, tmp_path / "out", f"sqlite:///{tmp_path / 'l.sqlite'}", "fx-1") == 0
    out, err = capsys.readouterr()
    assert "fdp: warning" not in err
    (line,) = [x for x in out.splitlines() if x.startswith("  accuracy:  ")]
    assert line.endswith(f"— {NOISE_ONLY}")
    assert "quantile of the record norms" not in out
    # the plan's 'with bias' is in the manifest and on the release line: a typical mean's, as `fdp plan` states it
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    [row] = plan_report(cfg, [m["privacy"]["epsilon"]], None)["rows"]
    assert m["noise"]["expected_l2_error_with_bias"] == pytest.approx(row["expected_l2_error_with_bias"], rel=1e-12)
    assert f"\n             with bias {row['expected_l2_error_with_bias']:.4g}: " in out


def test_plan_warns_per_epsilon_where_the_tau_level_is_low_and_not_where_it_is_high(tmp_path: Path) -> None:
    """electricity (n = 508): at epsilon 0.2 the quantile can only target the median; at 40 it targets above 0.9."""
    cfg = write_config(tmp_path, REPO / "examples" / "electricity_mean_auto.yaml")
    report = plan_report(cfg, [0.2, 40.0], None)
    levels = {r["epsilon"]: r["bought"][0]["quantile_level"] for r in report["rows"]}
    assert levels[0.2] < 0.9 <= levels[40.0]
    [warning] = report["warnings"]
    assert warning.startswith(f"at epsilon 0.2: tau will be a DP estimate aimed at the {levels[0.2]:.3g} quantile of the "
                              f"record norms: about {1 - levels[0.2]:.0%} of the records are expected above it and will "
                              "be shrunk to it, but a DP draw can land away from its target")
    assert ("clipping shortens each shrunk record's deviation from value_offset = 1500 (the constant the curves are "
            "centred on), the largest the most, so the release is biased in a direction set by the data — not "
            "necessarily towards that centre") in warning
    assert "several times the expected L2 error `fdp plan` states" in warning
    # the alternative a user can choose before spending: tau fixed at the range's upper end, with its own noise
    fixed = write_config(tmp_path, REPO / "examples" / "electricity_mean_auto.yaml", clipping={"tau": 1.0})
    [row] = plan_report(fixed, [0.2], None)["rows"]
    even = next(r for r in report["rows"] if r["epsilon"] == 0.2)["tau_break_even"]
    assert warning.endswith(f"the alternative, clipping.tau: 1 fixed (the upper end of tau_range: the whole epsilon, no "
                            f"split, and no clipping bias if no record's norm exceeds it), has E L2 error "
                            f"{row['expected_l2_error']:.4g}: buying wins only if the tau it releases is below "
                            f"{even:.3g} and the shrunk records' bias stays small")
    # a public reference curve is the centre whose deviations clipping shortens, when there is one
    ref = {"time": [0.5, 48.5], "value": [1200.0, 1300.0], "source": "a public profile (test)"}
    centred = write_config(tmp_path, REPO / "examples" / "electricity_mean_auto.yaml", centering=ref)
    [warning] = plan_report(centred, [0.2], None)["warnings"]
    assert "clipping shortens each shrunk record's deviation from the public reference curve" in warning


def test_plan_says_the_low_level_warning_once_for_all_its_epsilons(tmp_path: Path) -> None:
    """Five epsilons of one plan printed the same long paragraph five times; it is one warning listing them."""
    cfg = write_config(tmp_path, REPO / "examples" / "electricity_mean_auto.yaml")
    report = plan_report(cfg, [0.2, 0.5, 40.0], None)
    rows = {r["epsilon"]: r for r in report["rows"]}
    levels = [rows[e]["bought"][0]["quantile_level"] for e in (0.2, 0.5)]
    assert levels[0] < levels[1] < 0.9 <= rows[40.0]["bought"][0]["quantile_level"]
    low = [w for w in report["warnings"] if "quantile of the record norms" in w]
    assert len(low) == 1 and low[0].count("a DP draw can land away from its target") == 1
    assert low[0].startswith(f"at epsilon 0.2, 0.5: tau will be a DP estimate aimed at the {levels[0]:.3g}, "
                             f"{levels[1]:.3g} quantile of the record norms: about {1 - levels[0]:.0%}, "
                             f"{1 - levels[1]:.0%} of the records")
    assert low[0].endswith(f"buying wins only if the tau it releases is below {rows[0.2]['tau_break_even']:.3g}, "
                           f"{rows[0.5]['tau_break_even']:.3g} and the shrunk records' bias stays small")


def test_plan_explains_an_e_l2_error_that_rises_with_epsilon(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """n = 30, tau_range up to 0.5: at epsilon 1.5 tau is a priori (the whole epsilon for the noise), at 2 half of it
    buys tau; both rows are priced at tau = 1, so the column rises although the release's noise scales down."""
    cfg = _auto(tmp_path, "rise", 2.0, tau_range=[0.01, 0.5])
    rows = {r["epsilon"]: r for r in plan_report(cfg, [1.5, 2.0], None)["rows"]}
    assert rows[2.0]["expected_l2_error"] > rows[1.5]["expected_l2_error"]  # the premise
    assert rows[1.5]["bought"][0]["a_priori"] and not rows[2.0]["bought"][0]["a_priori"]
    assert main(["plan", str(cfg), "--epsilon", "1.5", "--epsilon", "2"]) == 0
    text = capsys.readouterr().out
    (note,) = [x for x in text.splitlines() if x.startswith("  E L2 error rises with epsilon")]
    assert note.startswith("  E L2 error rises with epsilon at 1.5 -> 2: ")
    assert "the whole epsilon goes to the noise and the release uses the a-priori tau = 0.5" in note
    assert "every row is priced at tau = 1" in note
    # a column that falls with epsilon has no such note
    fixed = write_config(tmp_path, REPO / "examples" / "electricity_mean.yaml")
    falling = [r["expected_l2_error"] for r in plan_report(fixed, [1.0, 4.0], None)["rows"]]
    assert falling[1] < falling[0]
    assert main(["plan", str(fixed), "--epsilon", "1", "--epsilon", "4"]) == 0
    assert "rises with epsilon" not in capsys.readouterr().out


def test_a_fosr_release_prints_the_plans_warning_before_the_charge_and_names_its_figure_as_t2_noise(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(tmp_path, REPO / "examples" / "growth_fosr.yaml")
    floor = plan_report(cfg, [1.0], None)["rows"][0]["tuning"]["safe_inverse_floor"]
    assert release(cfg, tmp_path / "out", f"sqlite:///{tmp_path / 'l.sqlite'}", "fosr-1") == 0
    out, err = capsys.readouterr()
    warning = next(x for x in err.splitlines() if x.startswith("fdp: warning: the coefficients are"))
    assert f"rho = {floor:.3g}" in warning and f"rho x n = {floor * 93:.3g} of the 93 units" in warning
    assert "at risk up to about twice that" in warning  # trial N: a level at 1.4 rho x n kept 5 %
    assert err.index(warning) < err.index("budget charged")
    (line,) = [x for x in out.splitlines() if x.startswith("  accuracy:  ")]
    assert "expected L2 error of the T2 (cross-moment) noise" in line
    assert line.endswith("— T2 noise; the coefficients' error is larger (the inverse of T1 amplifies it), and clipping "
                         "and smoothing add a bias that is not included")
    assert T2_BAND_LABEL in legend_of((tmp_path / "out" / "release.png").read_bytes())
    assert T2_BAND_LABEL == "T2 noise band (not a confidence interval)"
    # the plan's 'with bias' of T2 is in the manifest (public: the plan's function of public inputs) and printed
    noise = json.loads((tmp_path / "out" / "manifest.json").read_text())["noise"]
    planned = plan_report(cfg, [1.0], None)["rows"][0]["expected_l2_error_with_bias"]
    assert noise["expected_l2_error_with_bias"] == pytest.approx(planned, rel=1e-12)
    assert "typical cross-moment curves T2 of norm signal_fraction x tau_y each" in noise["expected_l2_error_with_bias_note"]
    assert f"\n             with bias {planned:.4g}: " in out


def test_a_covariance_with_tau_bought_at_a_low_level_says_so_in_its_line_and_note(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(tmp_path, REPO / "examples" / "electricity_covariance.yaml", prefix="cov",
                       clipping__tau="auto", privacy__epsilon=0.5, release__name="honest-cov")
    assert release(cfg, tmp_path / "out", f"sqlite:///{tmp_path / 'l.sqlite'}", "cov-1") == 0
    out, err = capsys.readouterr()
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    level = m["parameters"]["public_choices"][0]["quantile_level"]
    assert level < 0.9
    assert "fdp: warning: tau will be a DP estimate" in err
    clause = (f"about {1 - level:.0%} of the records are expected to have been above it and shrunk to it, but a DP draw "
              "can land away from its target")
    assert ("clipping shortens each shrunk record's deviation from value_offset = 1500 (the constant the curves are "
            "centred on), the largest the most, so the surface shrinks") in out
    assert clause in out
    (note,) = [n for n in artifacts("honest-cov-release-note") if "`cov-1`" in n]
    assert "Clipping and smoothing bias the surface, and that bias is not in the noise figure" in note
    # the manifest carries the plan's 'with bias' at the released tau; the release line prints it
    assert m["noise"]["expected_l2_error_with_bias"] > m["noise"]["expected_l2_error"]
    assert (f"a typical surface of size signal_fraction x tau^2 = 0.5 x {m['parameters']['tau'] ** 2:.6g}"
            in m["noise"]["expected_l2_error_with_bias_note"])
    assert f"with bias {m['noise']['expected_l2_error_with_bias']:.4g}: " in out
    assert clause in note


def test_every_band_label_says_noise_only_and_not_a_confidence_interval() -> None:
    """The plot functions store their legend in the PNG (``legend_of``): the band of a curve and plan's band line."""
    png = curves_png(np.arange(3.0), {"m": np.ones(3)}, xlabel="t", ylabel="y", title="t",
                     band=(np.zeros(3), np.full(3, 2.0)))
    assert legend_of(png) == f"legend: {NOISE_BAND_LABEL} | m"
    report = {"summary": "mean", "dataset_id": "d", "n": 10, "config_epsilon": 1.0,
              "rows": [{"epsilon": e, "expected_l2_error": 1.0 / e, "band_half_width_max": 2.0 / e} for e in (1.0, 2.0)]}
    legend = legend_of(error_vs_epsilon_png(report))
    assert f"widest {NOISE_BAND_LABEL} (pointwise)" in legend
    assert "expected L2 error of the noise (noise only: bias not included)" in legend
