"""tau: auto and value_offset: auto through the mean_release flow: one charge, before the draws; manifest = ledger."""

from __future__ import annotations

import json
from pathlib import Path

import fdp.tasks.mean as mean_tasks
import pytest
from fdp.flows.cli import main

from fdpcore.ledger import Ledger


def _release(config: Path, out: Path, ledger: str, release_id: str) -> int:
    return main(["release", str(config), "--out", str(out), "--ledger", ledger, "--release-id", release_id])


def test_auto_tau_and_offset_charge_once_before_the_draws_and_agree(make_config, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    states: list[tuple[str, str | None, float | None]] = []
    original = mean_tasks.draw_public_choice

    def spy(choice, values):  # type: ignore[no-untyped-def]
        record = Ledger(ledger).get("auto-1")
        states.append((choice.name, record.state if record else None, record.epsilon if record else None))
        return original(choice, values)

    monkeypatch.setattr(mean_tasks, "draw_public_choice", spy)
    cfg = make_config(clipping__tau="auto", tuning={}, dataset__value_offset="auto",
                      dataset__value_offset_range=[0.0, 4000.0], privacy__epsilon=2.0)
    out = tmp_path / "out"
    assert _release(cfg, out, ledger, "auto-1") == 0
    # the centre first, then tau; both drawn after the whole cost was charged and marked noised
    assert states == [("value_offset", "noised", 2.0), ("tau", "noised", 2.0)]

    manifest = json.loads((out / "manifest.json").read_text())
    splits = manifest["budget_splits"]
    assert [s["name"] for s in splits] == ["value_offset", "tau", "mean"]
    assert sum(s["epsilon"] for s in splits) == pytest.approx(manifest["privacy"]["epsilon"], abs=0) == 2.0
    choices = {c["name"]: c for c in manifest["parameters"]["public_choices"]}
    assert manifest["parameters"]["tau"] == choices["tau"]["value"] > 0
    assert manifest["parameters"]["value_offset"] == choices["value_offset"]["value"]
    assert 0.0 <= choices["value_offset"]["value"] <= 4000.0
    for name in ("value_offset", "tau"):
        assert choices[name]["epsilon"] == next(s["epsilon"] for s in splits if s["name"] == name)
        assert f"buys {name} = " in manifest["privacy"]["guarantee"]
    assert manifest["parameters"]["tuning"]["rule"] == "risk_prior"
    assert {"tuning.tau.dp_norm_quantile@2", "preprocess.centre.dp_median@1",
            "tuning.tau.quantile_level@3"} <= set(manifest["formulas"])

    led = Ledger(ledger)
    rows = led.releases()
    assert [(r.release_id, r.state, r.epsilon) for r in rows] == [("auto-1", "published", 2.0)]
    assert led.budgets("adelaide-electricity-monday")[0].spent == (2.0, 0.0)
    assert [e["event"] for e in led.audit_events("auto-1")] == ["release.reserved", "release.noised", "release.published"]

    # a re-run of the published id draws nothing and charges nothing
    states.clear()
    assert _release(cfg, tmp_path / "again", ledger, "auto-1") == 0
    assert states == []
    assert led.budgets("adelaide-electricity-monday")[0].spent == (2.0, 0.0)
    assert json.loads((tmp_path / "again" / "manifest.json").read_text()) == manifest


def test_auto_tau_with_too_small_n_epsilon_clips_at_the_public_upper_end_and_charges_only_the_mean(
        make_config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Below the DP quantile's floor nothing is bought: tau is the range's upper end, no data read for it."""
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    read: list[int] = []
    original = mean_tasks.draw_public_choice

    def spy(choice, values):  # type: ignore[no-untyped-def]
        read.append(len(values))
        return original(choice, [])  # the a-priori choice must not need the norms

    monkeypatch.setattr(mean_tasks, "draw_public_choice", spy)
    cfg = make_config(clipping__tau="auto", tuning={}, privacy__epsilon=0.05)
    assert _release(cfg, tmp_path / "out", ledger, "auto-small") == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["budget_splits"] == [{"name": "mean", "epsilon": 0.05, "delta": 0.0}]
    (choice,) = manifest["parameters"]["public_choices"]
    assert choice["name"] == "tau" and choice["epsilon"] == 0.0 and choice["formula"] == "tuning.tau.a_priori_fallback@2"
    assert manifest["parameters"]["tau"] == choice["value"] == 1.0  # [0.01, 1] x sqrt(|T|) on [0, 1]
    assert "public upper end of its range" in manifest["privacy"]["guarantee"]
    assert not {"tuning.tau.quantile_level@2", "tuning.tau.quantile_level@3"} & set(manifest["formulas"])
    # the bound is not a record's size: the tuning's prior mean is a tenth of it (tuning.risk.signal_default@1)
    tuning = manifest["parameters"]["tuning"]
    assert (tuning["signal_fraction"], tuning["signal_fraction_formula"]) == (0.1, "tuning.risk.signal_default@1")
    assert "tuning.risk.signal_default@1" in manifest["formulas"]
    (row,) = Ledger(ledger).releases()
    assert (row.epsilon, row.budget_splits) == (0.05, [{"name": "mean", "epsilon": 0.05, "delta": 0.0}])


def test_a_stated_mean_size_is_recorded_with_the_fraction_of_the_released_tau_it_made(
        make_config, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """tuning.signal_rms (tuning.risk.signal_stated@1): the manifest states the public size, the fraction of the tau the
    release used (here the a-priori bound, 1 on [0, 1]) and the formula; the default's formula is not cited."""
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    cfg = make_config(clipping__tau="auto", tuning={"signal_rms": 0.3}, privacy__epsilon=0.05)
    assert _release(cfg, tmp_path / "out", ledger, "sized") == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    tuning = manifest["parameters"]["tuning"]
    assert manifest["parameters"]["tau"] == 1.0
    assert (tuning["signal_rms"], tuning["signal_fraction"], tuning["signal_fraction_formula"]) == (
        0.3, pytest.approx(0.3), "tuning.risk.signal_stated@1")
    assert "tuning.risk.signal_stated@1" in manifest["formulas"]
    assert "tuning.risk.signal_default@1" not in manifest["formulas"]
    # where tau is bought the fraction is of the tau released, and the accuracy line does not call it plan x tau
    bought = make_config(clipping__tau="auto", tuning={"signal_rms": 0.3}, privacy__epsilon=2.0)
    capsys.readouterr()
    assert _release(bought, tmp_path / "bought", ledger, "sized-bought") == 0
    out = capsys.readouterr().out
    m2 = json.loads((tmp_path / "bought" / "manifest.json").read_text())
    assert m2["parameters"]["tuning"]["signal_fraction"] == pytest.approx(min(1.0, 0.3 / m2["parameters"]["tau"]))
    assert "with the smoothing re-chosen there for the stated signal_rms (not that figure scaled)" in out


def test_a_stated_mean_size_near_the_bound_takes_the_bound_says_why_and_charges_only_the_mean(
        make_config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """tuning.tau.bound_pays@1: a stated mean of norm 0.8 on [0, 1] puts tau's lowest candidate at 0.8, within the
    dither's factor 1.26 of the bound 1, so no split of epsilon can pay for the quantile: tau is the bound, no norm is
    read, the whole epsilon goes to the mean, and the plan, manifest and guarantee give this reason (not n * epsilon)."""
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    read: list[int] = []
    original = mean_tasks.draw_public_choice

    def spy(choice, values):  # type: ignore[no-untyped-def]
        read.append(len(values))
        return original(choice, [])

    monkeypatch.setattr(mean_tasks, "draw_public_choice", spy)
    cfg = make_config(clipping__tau="auto", tuning={"signal_rms": 0.8}, privacy__epsilon=2.0)
    assert main(["plan", str(cfg), "--epsilon", "2"]) == 0
    out = capsys.readouterr().out
    assert "tau at epsilon 2: with the mean's size stated, buying it could not pay for its split" in out
    assert "n * epsilon is too small to buy it" not in out
    assert main(["plan", str(cfg), "--epsilon", "0.05", "--epsilon", "2"]) == 0  # each epsilon with its own reason
    out = capsys.readouterr().out
    assert "tau at epsilon 0.05, 2: n * epsilon is too small to buy it (at 0.05); with the mean's size stated" in out
    assert "tuning.tau.bound_pays@1) (at 2), so it is the public upper end of tau_range, 1" in out
    assert _release(cfg, tmp_path / "out", ledger, "bound") == 0
    assert len(read) == 1  # the draw was made without the norms (the spy passes none)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["budget_splits"] == [{"name": "mean", "epsilon": 2.0, "delta": 0.0}]
    (choice,) = manifest["parameters"]["public_choices"]
    assert (choice["epsilon"], choice["formula"], choice["value"]) == (0.0, "tuning.tau.bound_pays@1", 1.0)
    assert "could not pay for its split" in choice["mechanism"]
    assert "could not pay for its split" in manifest["privacy"]["guarantee"]
    assert "tuning.tau.bound_pays@1" in manifest["formulas"]
    assert manifest["parameters"]["tuning"]["signal_fraction"] == pytest.approx(0.8)
    (row,) = Ledger(ledger).releases()
    assert (row.epsilon, row.budget_splits) == (2.0, [{"name": "mean", "epsilon": 2.0, "delta": 0.0}])


def test_auto_offset_refused_before_any_charge_when_n_epsilon_is_too_small(make_config, tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    cfg = make_config(clipping__tau=1.0, tuning={}, dataset__value_offset="auto",
                      dataset__value_offset_range=[0.0, 4000.0], privacy__epsilon=0.05)
    assert _release(cfg, tmp_path / "out", ledger, "auto-small") == 2
    err = capsys.readouterr().err
    assert "privacy.epsilon (0.05) is too small for this release with n = 508 privacy units: value_offset: auto buys" in err
    assert "raise privacy.epsilon to at least 0.131" in err  # n * epsilon >= 66.4 for the centre's DP median
    assert Ledger(ledger).releases() == []
    assert not (tmp_path / "out" / "manifest.json").exists()


@pytest.fixture
def few_units(make_config, electricity, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A config that buys value_offset and tau for 44 Mondays (n * epsilon too small for both at epsilon 1)."""
    data = tmp_path / "monday44.parquet"
    electricity[electricity["monday_index"] < 44].to_parquet(data)
    return make_config(clipping={"tau": "auto"}, tuning={}, dataset__value_offset="auto",
                       dataset__value_offset_range=[0.0, 4000.0], dataset__path=str(data))


def test_too_small_epsilon_for_the_bought_choices_states_the_least_epsilon_the_plan_accepts(few_units) -> None:
    """The stated least epsilon is the plan's own boundary: valid there, not valid one step (0.01) below it."""
    import re

    from fdp.flows.config import load_config
    from fdp.tasks.planning import build_plan, least_epsilon

    from fdpcore.errors import PrivacyParameterError

    config = load_config(few_units)

    def at(eps: float):  # type: ignore[no-untyped-def]
        return config.model_copy(update={"privacy": config.privacy.model_copy(update={"epsilon": eps})})

    least = least_epsilon(config, 44)
    assert least == 2.45  # value_offset takes half of epsilon, tau its floor 1.22: the mean is left 0.005 at 2.45
    plan = build_plan(at(least), 44)
    assert [s["name"] for s in plan.budget_splits] == ["value_offset", "tau", "mean"]
    assert plan.budget_splits[-1]["epsilon"] > 0
    for below in (1.0, 1.52, 2.0, 2.44):  # the old message said 1.509; 1.52 and 2 were then refused in other words
        with pytest.raises(PrivacyParameterError, match=r"least epsilon that covers them all is 2\.45 ") as info:
            build_plan(at(below), 44)
        text = str(info.value)
        assert "exact-decimal" not in text and "of which half" not in text
        assert "raise privacy.epsilon to at least 2.45" in text
        assert re.search(r"give dataset.value_offset a fixed public value \(then epsilon [\d.]+ suffices\)", text)
        assert f"give clipping.tau a fixed public value (then epsilon {max(below, 1.51):g} suffices)" in text
    # the two alternatives it names are true: value_offset alone is valid from 1.51, tau alone at epsilon 1
    only_offset = config.model_copy(update={"clipping": config.clipping.model_copy(update={"tau": 1.0})})
    assert least_epsilon(only_offset.model_copy(update={"privacy": at(1.0).privacy}), 44) == 1.51
    fixed_offset = at(1.0).model_copy(update={"dataset": config.dataset.model_copy(update={"value_offset": 1500.0})})
    assert build_plan(fixed_offset, 44).budget_splits[-1]["name"] == "mean"


def test_release_refuses_a_too_small_epsilon_for_the_bought_choices_before_any_prefect_server(
        few_units, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import fdp.flows.cli as cli

    started: list[str] = []
    monkeypatch.setattr(cli, "start_temporary_server", lambda: started.append("server"))  # type: ignore[func-returns-value]
    monkeypatch.setattr(cli, "_check_prefect_api", lambda: started.append("api"))
    ledger = tmp_path / "ledger.sqlite"
    assert _release(few_units, tmp_path / "out", f"sqlite:///{ledger}", "few-1") == 2
    err = capsys.readouterr().err
    assert started == []  # refused in the pre-flight: no Prefect server, no flow run, no Prefect ERROR lines
    assert "privacy.epsilon (1) is too small for this release with n = 44 privacy units" in err
    assert "least epsilon that covers them all is 2.45" in err and "ERROR" not in err
    assert not ledger.exists() and not (tmp_path / "out" / "manifest.json").exists()
