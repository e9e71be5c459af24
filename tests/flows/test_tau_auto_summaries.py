"""``clipping: {tau: auto}`` through the covariance, FoSR and FPCA flows (issue 16).

Per summary: one atomic charge that holds the ``tau`` split and equals ``privacy.epsilon``; the charge is final
(``noised``) before the quantile is drawn; the quantile reads the norms of exactly the records the clip applies to
(centred by a public reference, or raw for a sample-mean covariance); the released ``tau`` is a public candidate;
manifest, guarantee text and ledger agree; ``fdp plan`` prices the config.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fdp.tasks.mean as mean_tasks
import numpy as np
import pytest
from fdp.flows.cli import main
from fdp.flows.config import load_config
from fdp.flows.plan_command import plan_report
from fdp.tasks.covariance import covariance_center
from fdp.tasks.fosr import fosr_reference
from fdp.tasks.fpca import plan_fpca
from fdp.tasks.planning import release_grid, tau_search_range
from flow_support import REPO, artifacts, assert_claims_agree, release, write_config

from fdpcore.ledger import Ledger
from fdpcore.noise.quantiles import record_norms, tau_candidates

COVARIANCE = REPO / "examples" / "electricity_covariance.yaml"
FOSR = REPO / "examples" / "growth_fosr.yaml"
FPCA = REPO / "examples" / "growth_fpca.yaml"
#: a public reference curve of the electricity data (source units): the centred curves differ from the raw ones
REFERENCE = {"time": [0.5, 12.0, 24.0, 36.0, 48.5], "value": [1200.0, 1100.0, 1700.0, 1800.0, 1300.0],
             "source": "a public load profile (test)"}


class Spy:
    """Record, at each quantile draw, the ledger state and charge and the values the quantile reads."""

    def __init__(self, ledger: str, release_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, str | None, float | None]] = []
        self.values: list[np.ndarray] = []
        original = mean_tasks.draw_public_choice

        def spy(choice, values):  # type: ignore[no-untyped-def]
            record = Ledger(ledger).get(release_id)
            self.calls.append((choice.name, record.state if record else None, record.epsilon if record else None))
            self.values.append(np.asarray(values))
            return original(choice, values)

        monkeypatch.setattr(mean_tasks, "draw_public_choice", spy)


def _raw_curves(cfg: Path) -> tuple[Any, np.ndarray]:
    config = load_config(cfg)
    return config, mean_tasks.load_curves.fn(config, str(cfg.parent)).data_matrix


def _check_release(cfg: Path, out: Path, ledger: str, release_id: str, spy: Spy, eps: float,
                   mechanism_splits: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """Release ``cfg`` (``tau: auto``) and check charge, draw order, splits, candidates, claims and ``fdp plan``."""
    assert release(cfg, out, ledger, release_id) == 0
    assert spy.calls == [("tau", "noised", eps)]  # drawn once, after the whole cost was charged and made final
    manifest = json.loads((out / "manifest.json").read_text())
    splits = manifest["budget_splits"]
    assert [s["name"] for s in splits] == ["tau", *mechanism_splits]
    assert sum(s["epsilon"] for s in splits) == manifest["privacy"]["epsilon"] == eps
    (choice,) = manifest["parameters"]["public_choices"]
    assert choice["name"] == "tau" and choice["epsilon"] == splits[0]["epsilon"] > 0
    config = load_config(cfg)
    candidates = tau_candidates(*tau_search_range(config))
    assert choice["value"] in candidates and choice["candidates"]["count"] == len(candidates)
    assert f"buys tau = {choice['value']:.6g}" in manifest["privacy"]["guarantee"]
    assert {"tuning.tau.dp_norm_quantile@2", "tuning.tau.summary_level@1"} <= set(manifest["formulas"])
    led = Ledger(ledger)
    assert_claims_agree(manifest, led.get(release_id))
    assert [e["event"] for e in led.audit_events(release_id)] == ["release.reserved", "release.noised",
                                                                  "release.published"]
    assert led.budgets(config.dataset.id)[0].spent == (eps, 0.0)
    # fdp plan prices the same config (at tau = 1) with the same named splits, and charges nothing
    capsys.readouterr()
    assert main(["plan", str(cfg), "--epsilon", str(eps), "--ledger", ledger, "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["rows"][0]
    assert row["budget_splits"] == splits and row["bought"][0]["name"] == "tau"
    assert row["bought"][0]["quantile_level"] == choice["quantile_level"]
    assert led.budgets(config.dataset.id)[0].spent == (eps, 0.0)
    return manifest


def test_covariance_tau_auto_reads_the_centred_norms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    cfg = write_config(tmp_path, COVARIANCE, prefix="cov", clipping={"tau": "auto"},
                       centering={"kind": "public", "reference": REFERENCE})
    spy = Spy(ledger, "cov-auto", monkeypatch)
    m = _check_release(cfg, tmp_path / "out", ledger, "cov-auto", spy, 1.0, ["covariance"], capsys)
    assert m["parameters"]["tau"] == m["parameters"]["public_choices"][0]["value"]
    config, raw = _raw_curves(cfg)
    center, _ = covariance_center.fn(config, ledger)
    weights = release_grid(config).weights
    centred = record_norms(raw - center[None, :], weights)
    assert np.array_equal(spy.values[0], centred)  # exactly the norms the clip applies to
    assert not np.allclose(centred, record_norms(raw, weights))


def test_covariance_tau_auto_with_sample_mean_centring_reads_the_raw_norms(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Sample-mean centring clips the raw curves: the quantile reads their norms, each a function of one record."""
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    cfg = write_config(tmp_path, COVARIANCE, prefix="cov", clipping={"tau": "auto", "tau_share": 0.3},
                       centering={"kind": "sample_mean"})  # above the raise's cap (a quarter): the share itself
    spy = Spy(ledger, "cov-smp", monkeypatch)
    m = _check_release(cfg, tmp_path / "out", ledger, "cov-smp", spy, 1.0, ["covariance"], capsys)
    assert m["budget_splits"][0]["epsilon"] == 0.3 and m["sensitivity"]["bound"] == "sensitivity.cov.sample_mean_center@1"
    config, raw = _raw_curves(cfg)
    weights = release_grid(config).weights
    assert np.array_equal(spy.values[0], record_norms(raw, weights))
    assert not np.allclose(spy.values[0], record_norms(raw - raw.mean(axis=0), weights))  # never the data's own mean


def test_fosr_tau_auto_reads_the_centred_response_norms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    cfg = write_config(tmp_path, FOSR, prefix="fosr", clipping={"tau": "auto"}, privacy__epsilon=2.0)
    spy = Spy(ledger, "fosr-auto", monkeypatch)
    m = _check_release(cfg, tmp_path / "out", ledger, "fosr-auto", spy, 2.0,
                       ["T1 (design moments)", "T2 (cross-moment curves)"], capsys)
    assert m["parameters"]["tau_y"] == m["parameters"]["public_choices"][0]["value"]
    t1, t2 = m["budget_splits"][1]["epsilon"], m["budget_splits"][2]["epsilon"]
    assert t1 == pytest.approx(m["parameters"]["gamma"] * (t1 + t2))  # gamma splits what tau leaves
    config, raw = _raw_curves(cfg)
    assert np.array_equal(spy.values[0], record_norms(raw - fosr_reference(config)[None, :], release_grid(config).weights))


def test_fpca_tau_auto_is_a_dp_median_of_the_centred_norms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    cfg = write_config(tmp_path, FPCA, prefix="fpca", clipping={"tau": "auto"}, privacy__epsilon=2.0,
                       release={"name": "fpca-auto-series"})
    spy = Spy(ledger, "fpca-auto", monkeypatch)
    m = _check_release(cfg, tmp_path / "out", ledger, "fpca-auto", spy, 2.0, ["fpca"], capsys)
    choice = m["parameters"]["public_choices"][0]
    assert choice["quantile_level"] == 0.5
    # half the records are shrunk to the median: the note says what that does to the components (no error factor:
    # the FPCA figure is an energy shortfall), and fdp plan warns once for every epsilon that buys tau
    (note,) = artifacts("fpca-auto-series-release-note")
    assert "about 50% of the records are expected to have been above it and shrunk to it" in note
    assert ("shrunk; clipping changes what the components describe: each "
            "shrunk record weighs as if its norm were tau") in note and "several times" not in note
    warnings = plan_report(cfg, [1.0, 2.0], None)["warnings"]
    [warning] = [w for w in warnings if w.startswith("at epsilon")]  # the tau warning, once for both epsilons
    assert all("have a norm more than 1 % above" in w for w in warnings if w != warning)  # and the shipped data's out-of-scale one
    assert warning.startswith("at epsilon 1, 2: tau will be a DP estimate aimed at the 0.5 quantile of the record norms")
    assert warning.endswith("(FPCA's tau: auto always targets the median); lever: a public clipping.tau if a tight "
                            "a-priori bound on the norms is known")
    assert m["sensitivity"]["value"] == pytest.approx(choice["value"] ** 2)  # tau^2 at the released tau
    rest = m["budget_splits"][1]["epsilon"]
    assert m["parameters"]["base_measure"]["prior_strength"] == pytest.approx(rest / 2)  # c = epsilon/2 of the mechanism
    assert f"({rest:g}/2 each" in m["privacy"]["guarantee"]
    config, raw = _raw_curves(cfg)
    centred = raw - plan_fpca.fn(config, raw.shape[0]).reference[None, :]  # the public reference, as the flow centres
    assert np.array_equal(spy.values[0], record_norms(centred, release_grid(config).weights))


@pytest.mark.parametrize(("example", "prefix"), [(FPCA, "fpca"), (FOSR, "fosr")])
def test_tau_auto_with_too_small_n_epsilon_clips_at_the_public_upper_end_and_buys_nothing(
        example: Path, prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """93 curves at epsilon 0.5: no DP quantile is affordable; tau is the range's upper end, no norm is read for it."""
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    cfg = write_config(tmp_path, example, prefix=prefix, clipping={"tau": "auto"}, privacy__epsilon=0.5)
    read: list[int] = []
    original = mean_tasks.draw_public_choice
    monkeypatch.setattr(mean_tasks, "draw_public_choice", lambda c, v: (read.append(len(v)), original(c, []))[1])
    assert release(cfg, tmp_path / "out", ledger, f"{prefix}-small") == 0
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    (choice,) = m["parameters"]["public_choices"]
    assert choice["epsilon"] == 0.0 and choice["formula"] == "tuning.tau.a_priori_fallback@2"
    assert choice["value"] == tau_search_range(load_config(cfg))[1]
    assert "tau" not in [s["name"] for s in m["budget_splits"]]
    assert sum(s["epsilon"] for s in m["budget_splits"]) == pytest.approx(0.5, abs=0)
    assert "public upper end of its range" in m["privacy"]["guarantee"]
    assert_claims_agree(m, Ledger(ledger).get(f"{prefix}-small"))
