"""`fdp release` end to end for every mean mechanism's shipped example config (MATH.md §4-5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from fdp.flows.cli import main

from fdpcore.ledger import Ledger
from fdpcore.privacy.formulas import FORMULAS

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "examples" / "data" / "electricity_monday.parquet"

CASES = {
    "electricity_mean_gp.yaml": ("gp", "sensitivity.mean.gp.cm_exact@1", "Gaussian"),
    "electricity_mean_frl.yaml": ("frl", "sensitivity.mean.frl.exact@1", "first M KL coefficients"),
    "electricity_mean_iclp_ar.yaml": ("iclp_ar", "sensitivity.mean.iclp_ar.l2@1", "active set"),
    "electricity_mean_bernstein.yaml": ("bernstein", "sensitivity.mean.bernstein.sup_upper@1", "Bernstein lattice"),
    "electricity_mean_dp_select.yaml": ("iclp_qr", "sensitivity.mean.iclp_qr.exact_l2@1", "ICLP"),
}


def _config(tmp_path: Path, name: str, **changes: dict) -> Path:
    cfg = yaml.safe_load((REPO / "examples" / name).read_text())
    cfg["dataset"]["path"] = str(DATA)
    for section, values in changes.items():
        cfg[section] = values
    path = tmp_path / f"{name}-{len(list(tmp_path.glob('*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _release(cfg: Path, tmp_path: Path, rid: str) -> tuple[int, str]:
    ledger = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    code = main(["release", str(cfg), "--out", str(tmp_path / rid), "--ledger", ledger, "--release-id", rid])
    return code, ledger


@pytest.mark.parametrize("name", sorted(CASES))
def test_example_release_for_each_mechanism(name: str, tmp_path: Path) -> None:
    mechanism, bound, noise_words = CASES[name]
    code, ledger = _release(_config(tmp_path, name), tmp_path, "r1")
    assert code == 0
    manifest = json.loads((tmp_path / "r1" / "manifest.json").read_text())
    assert manifest["mechanism"] == mechanism
    assert manifest["sensitivity"]["bound"] == bound
    assert manifest["sensitivity"]["value"] > 0 and manifest["sensitivity"]["paper_bound"] > 0
    assert noise_words in manifest["noise"]["distribution"]
    assert set(manifest["formulas"]) <= set(FORMULAS)
    assert bound in manifest["formulas"] and manifest["sensitivity"]["paper_formula"] in FORMULAS
    splits = manifest["budget_splits"]
    assert sum(s["epsilon"] for s in splits) == manifest["privacy"]["epsilon"]
    row = Ledger(ledger).releases()[0]
    assert row.state == "published" and row.mechanism == mechanism
    assert [s["name"] for s in row.budget_splits] == [s["name"] for s in splits]
    if mechanism == "gp":
        assert manifest["privacy"]["delta"] == 1e-5 and "analytic Gaussian" in manifest["privacy"]["guarantee"]
        assert row.rho == pytest.approx(manifest["parameters"]["rho"]) and row.rho > 0
        assert "make_gaussian" in manifest["noise"]["sampler"]
    else:
        assert row.rho is None and "make_laplace" in manifest["noise"]["sampler"]
    if name == "electricity_mean_dp_select.yaml":
        assert [s["name"] for s in splits] == ["tuning", "mean"]
        sel = manifest["parameters"]["selection"]
        assert sel["method"] == "dp_select" and sel["epsilon"] == splits[0]["epsilon"]
        assert "exponential mechanism" in manifest["privacy"]["guarantee"]
        assert [e["event"] for e in Ledger(ledger).audit_events("r1")] == [
            "release.reserved", "release.noised", "release.published"]
    if mechanism == "bernstein":
        assert manifest["parameters"]["lattice_k"] == 20 and manifest["sensitivity"]["value"] == pytest.approx(2 * 1.5 * 21 / 508)
        # issue 17 finding 4: 2BL/n is not attained under the L2 clip tau = 1 < B = 1.5, so it is no EXACT value
        assert manifest["sensitivity"]["status"] == "UPPER" and FORMULAS[bound].status == "UPPER"
    else:
        assert manifest["sensitivity"]["status"] == FORMULAS[bound].status


def test_pcv_is_refused_unless_marked_non_private_and_then_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    refused = _config(tmp_path, "electricity_mean_frl.yaml", tuning={"rule": "pcv"})
    code, ledger = _release(refused, tmp_path, "p0")
    assert code == 2 and "non_private" in capsys.readouterr().err
    assert Ledger(ledger).releases() == []
    allowed = _config(tmp_path, "electricity_mean_frl.yaml", tuning={"rule": "pcv", "non_private": True})
    code, _ = _release(allowed, tmp_path, "p1")
    assert code == 0
    manifest = json.loads((tmp_path / "p1" / "manifest.json").read_text())
    assert manifest["privacy"]["guarantee"].startswith("NOT differentially private")
    assert manifest["parameters"]["non_private"] is True


def test_a_non_private_release_is_recorded_as_such_and_never_feeds_a_private_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """issue 17 finding 1: a PCV mean is charged as kind 'non_private' (not an epsilon that looks private),
    `budget show`/`audit list` say so, and a covariance centred on it is refused before any charge."""
    allowed = _config(tmp_path, "electricity_mean_frl.yaml", tuning={"rule": "pcv", "non_private": True})
    code, ledger = _release(allowed, tmp_path, "pcv-mean")
    assert code == 0
    record = Ledger(ledger).get("pcv-mean")
    assert record is not None and record.charge_kind == "non_private" and record.non_private
    reserved = [e for e in Ledger(ledger).audit_events("pcv-mean") if e["event"] == "release.reserved"]
    assert reserved[0]["payload"]["charge_kind"] == "non_private"
    assert Ledger(ledger).verify() == []
    capsys.readouterr()
    assert main(["budget", "show", "--ledger", ledger]) == 0
    assert "1 NON-PRIVATE release" in capsys.readouterr().out
    assert main(["budget", "show", "--json", "--ledger", ledger]) == 0
    assert json.loads(capsys.readouterr().out)[record.dataset_id]["non_private_releases"] == 1
    assert main(["audit", "list", "--ledger", ledger]) == 0
    assert "NON-PRIVATE" in capsys.readouterr().out
    assert main(["audit", "show", "pcv-mean", "--ledger", ledger]) == 0
    assert json.loads(capsys.readouterr().out)["charge_kind"] == "non_private"

    cov = yaml.safe_load((REPO / "examples" / "electricity_covariance.yaml").read_text())
    cov["dataset"]["path"] = str(DATA)
    cov["centering"] = {"kind": "private_mean", "release_id": "pcv-mean"}
    cfg = tmp_path / "cov.yaml"
    cfg.write_text(yaml.safe_dump(cov))
    spent = Ledger(ledger).budgets(record.dataset_id)[0].spent
    code, _ = _release(cfg, tmp_path, "cov-on-pcv")
    assert code == 2 and "NON-PRIVATE" in capsys.readouterr().err
    assert Ledger(ledger).get("cov-on-pcv") is None
    assert Ledger(ledger).budgets(record.dataset_id)[0].spent == spent
    assert not (tmp_path / "cov-on-pcv" / "manifest.json").exists()


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"privacy": {"epsilon": 1.0, "delta": 0.0}}, "privacy.delta"),
        ({"privacy": {"epsilon": 2.0, "delta": 1e-5, "calibration": "classical"}}, "privacy.epsilon"),
        ({"tuning": {"eta": 0.5, "psi": 0.01}}, "tuning.eta"),
    ],
    ids=["gp-delta-0", "classical-eps-2", "ar-eta-below-1"],
)
def test_invalid_mechanism_configs_exit_2_naming_the_field(changes: dict, field: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    name = "electricity_mean_iclp_ar.yaml" if field == "tuning.eta" else "electricity_mean_gp.yaml"
    code, _ = _release(_config(tmp_path, name, **changes), tmp_path, "bad")
    assert code == 2 and field in capsys.readouterr().err
