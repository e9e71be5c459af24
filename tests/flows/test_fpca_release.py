"""End-to-end: `fdp release` through the fpca_release flow on the shipped Berkeley growth data."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from fdp.tasks._plots import legend_of, title_of
from flow_support import REPO, artifacts, release, write_config

from fdpcore.basis.grids import grid_from_nodes
from fdpcore.ledger import Ledger
from fdpcore.privacy.formulas import FORMULAS

EXAMPLE = REPO / "examples" / "growth_fpca.yaml"
DATA = REPO / "examples" / "data" / "berkeley_growth.parquet"


def _config(tmp_path: Path, data: Path = DATA, **overrides: object) -> Path:
    return write_config(tmp_path, EXAMPLE, data=data, prefix="fpca", **overrides)


def test_fpca_release_publishes_components_manifest_ledger_and_artifacts(tmp_path: Path) -> None:
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    out = tmp_path / "out"
    assert release(_config(tmp_path), out, ledger, "growth-pca-1") == 0

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["summary"] == "fpca" and manifest["n"] == 93
    assert manifest["privacy"]["epsilon"] == 1.0 and manifest["privacy"]["delta"] == 0.0
    assert manifest["privacy"]["adjacency"] == "replace-one"
    assert manifest["sensitivity"] == {"norm": "utility", "value": 1.0, "bound": "sensitivity.fpca.projection_energy@1"}
    assert manifest["budget_splits"] == [{"name": "fpca", "epsilon": 1.0, "delta": 0.0}]
    sampler = manifest["sampler"]
    # issue 17 finding 3: k = 2 is drawn exactly by deflation (epsilon/2 per component), no chain
    assert sampler["exact"] is True and sampler["kind"] == "deflation" and sampler["burn_in"] is None
    assert sampler["released_states"] == 1 and "deflated" in sampler["method"]
    assert "Every released state is an exact draw" in sampler["caveat"] and "PCG64" in sampler["rng"]
    assert "epsilon/2 each" in manifest["privacy"]["guarantee"] and "exact draw" in manifest["privacy"]["guarantee"]
    assert "idealised arithmetic: the draws use NumPy's floating-point samplers" in manifest["privacy"]["guarantee"]
    assert manifest["parameters"]["base_measure"]["prior_strength"] == 0.5  # the paper's c = epsilon/2
    assert set(manifest["formulas"]) <= set(FORMULAS)
    assert "sampler.bingham.matrix_gibbs@1" not in manifest["formulas"]
    assert {"calibration.fpca.deflation@1", "sensitivity.fpca.deflated_energy@1"} <= set(manifest["formulas"])
    for o in manifest["outputs"]:
        assert o["sha256"] == hashlib.sha256((out / o["path"]).read_bytes()).hexdigest()
    assert (out / "components.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    png = (out / "components.png").read_bytes()  # trial G finding 5: the "typical curve" is a public centre, say which
    assert title_of(png).startswith("How curves vary around the public reference curve (a public centre, not the data's "
                                    "mean curve)")
    assert f"ε = {manifest['privacy']['epsilon']:g}, τ = " in title_of(png)  # trial L: the cost and radius, as elsewhere
    assert legend_of(png).startswith("legend: public reference curve |")

    table = pq.read_table(out / "release.parquet").to_pandas()
    assert list(table.columns) == ["t", "t_source", "component_1", "component_2"]
    assert table["t_source"].iloc[[0, -1]].tolist() == pytest.approx([1.0, 18.0])
    grid = grid_from_nodes(table["t"].to_numpy(), (0.0, 1.0))
    comps = table[["component_1", "component_2"]].to_numpy()
    assert np.allclose(comps.T @ (grid.weights[:, None] * comps), np.eye(2), atol=1e-8)

    led = Ledger(ledger)
    rows = led.releases()
    assert [(r.release_id, r.state, r.epsilon, r.summary) for r in rows] == [("growth-pca-1", "published", 1.0, "fpca")]
    assert [e["event"] for e in led.audit_events("growth-pca-1")] == [
        "release.reserved", "release.noised", "release.published"]
    assert led.verify() == []

    notes = artifacts("berkeley-growth-fpca-release-note")
    assert any("What is protected" in n and "growth-pca-1" in n and "data:image/png;base64," in n for n in notes)


def test_one_component_is_an_exact_draw_and_reruns_charge_nothing(tmp_path: Path) -> None:
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    cfg = _config(tmp_path, n_components=1, sampler__kind="gibbs")  # one component: an exact draw whatever is asked
    assert release(cfg, tmp_path / "a", ledger, "pc1") == 0
    assert release(cfg, tmp_path / "b", ledger, "pc1") == 0
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["sampler"]["exact"] is True and manifest["sampler"]["burn_in"] is None
    assert manifest["sampler"]["kind"] == "deflation"  # an audit found "gibbs" next to "exact: true"
    assert "exact draw" in manifest["privacy"]["guarantee"]
    assert "sampler.bingham.matrix_gibbs@1" not in manifest["formulas"]
    for name in ("release.parquet", "components.png", "manifest.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert Ledger(ledger).budgets("berkeley-growth")[0].spent == (1.0, 0.0)


def test_without_a_centering_block_the_plot_names_value_offset_as_the_centre(tmp_path: Path) -> None:
    """Trial G finding 5: the components are those of the second moment about value_offset, not about a mean."""
    raw = yaml.safe_load(_config(tmp_path, n_components=1, dataset__value_offset=120.0).read_text())
    del raw["centering"]
    cfg = tmp_path / "no-centre.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    assert release(cfg, tmp_path / "out", f"sqlite:///{tmp_path / 'l.sqlite'}", "pc-offset") == 0
    png = (tmp_path / "out" / "components.png").read_bytes()
    assert title_of(png).startswith("How curves vary around the constant value_offset 120 (a public centre, not the "
                                    "data's mean curve)")
    assert legend_of(png).startswith("legend: public value_offset 120 |")


def test_manifest_holds_no_data_derived_value(tmp_path: Path) -> None:
    """Two different data sets of the same size give manifests that differ only in outputs and provenance."""
    other = pd.read_parquet(DATA)
    other["height_cm"] = other["height_cm"] + np.random.default_rng(0).normal(0, 3.0, len(other))
    other_path = tmp_path / "other.parquet"
    other.to_parquet(other_path)
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert release(_config(tmp_path), tmp_path / "a", ledger, "x1") == 0
    assert release(_config(tmp_path, data=other_path), tmp_path / "b", ledger, "x2") == 0
    ma = json.loads((tmp_path / "a" / "manifest.json").read_text())
    mb = json.loads((tmp_path / "b" / "manifest.json").read_text())
    for key in ("outputs", "provenance", "release_id", "audit_commitment"):  # the commitment: ledger state
        ma.pop(key), mb.pop(key)
    assert ma == mb


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ({"n_components": 5}, "n_components (5) must be < basis.n_basis (5)"),
        ({"n_components": 0}, "n_components"),
        ({"privacy__delta": 0.01}, "privacy.delta (0.01) must be 0"),
        ({"base_measure__prior_strength": -1.0}, "prior_strength"),
        ({"centering__time": [5.0, 18.0]}, "must have the same length"),
    ],
)
def test_bad_configs_exit_2_and_spend_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              override: dict[str, object], needle: str) -> None:
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert release(_config(tmp_path, **override), tmp_path / "out", ledger, "bad") == 2
    assert needle in capsys.readouterr().err
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_reference_not_covering_the_ages_is_rejected_before_any_charge(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    cfg = _config(tmp_path, centering__time=[float(a) for a in range(3, 21)])
    assert release(cfg, tmp_path / "out", ledger, "bad-ref") == 2
    assert "centering.time ([3, 20]) must reach from at most 1 to at least 18" in capsys.readouterr().err
    assert Ledger(ledger).releases() == []


@pytest.mark.parametrize(
    ("overrides", "field"),
    [({"sampler__kind": "gibbs", "sampler__burn_in": 20000}, "sampler.kind"),
     ({"sampler__kind": "gibbs", "sampler__burn_in": 1}, "sampler.kind"),
     ({"sampler__burn_in": 20000}, "sampler.burn_in")],
    ids=["gibbs-refused", "gibbs-burn-in-1-refused", "burn-in-without-gibbs"],
)
def test_the_gibbs_chain_is_refused_for_k_above_one_before_any_charge(
        tmp_path: Path, overrides: dict[str, object], field: str, capsys: pytest.CaptureFixture[str]) -> None:
    """issue 17 finding 3: no certified bound on the chain's distance, so no private release from it (exit 2)."""
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert release(_config(tmp_path, **overrides), tmp_path / "out", ledger, "gibbs") == 2
    assert field in capsys.readouterr().err
    assert Ledger(ledger).releases() == []


def test_centring_keeps_an_unaligned_unit_at_the_reference() -> None:
    """preprocess.public_reference@1: the FPCA centre is subtracted from aligned records only; an unaligned unit's
    zero record stays 0 (no spurious direction -r for the exponential mechanism to weigh)."""
    from fdp.schemas import CurveBatch
    from fdp.schemas.fpca import FpcaPlanEnvelope
    from fdp.tasks.fpca import center_curves

    x = np.array([[3.0, 4.0, 5.0], [0.0, 0.0, 0.0]])
    batch = CurveBatch(data_matrix=x, n_samples=2, aligned=np.array([True, False]))
    out = center_curves.fn(batch, FpcaPlanEnvelope(plan=None, reference=np.array([1.0, 1.0, 1.0])))
    assert out.data_matrix.tolist() == [[2.0, 3.0, 4.0], [0.0, 0.0, 0.0]]
    assert out.n_samples == 2 and out.aligned.tolist() == [True, False]
