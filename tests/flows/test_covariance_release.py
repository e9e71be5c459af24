"""End-to-end: `fdp release` through the covariance_release flow (MATH.md §6) on the shipped electricity data."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from fdp.flows.config import load_config
from fdp.tasks._plots import labels_of, title_of
from fdp.tasks.covariance import _surface_names
from flow_support import REPO, artifacts, release, write_config

from fdpcore.basis.grids import midpoint_grid
from fdpcore.ledger import Ledger
from fdpcore.privacy.formulas import FORMULAS
from fdpcore.summaries.covariance import plan_covariance_release

EXAMPLE = REPO / "examples" / "electricity_covariance.yaml"
MEAN_EXAMPLE = REPO / "examples" / "electricity_mean.yaml"
DATA = REPO / "examples" / "data" / "electricity_monday.parquet"


def _config(tmp_path: Path, example: Path = EXAMPLE, data: Path = DATA, **overrides: object) -> Path:
    return write_config(tmp_path, example, data=data, prefix="cov", **overrides)


def test_covariance_release_publishes_surface_eigenfunctions_manifest_ledger_and_artifacts(tmp_path: Path) -> None:
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    out = tmp_path / "out"
    assert release(_config(tmp_path), out, ledger, "cov-1") == 0

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["summary"] == "covariance" and manifest["n"] == 508
    assert manifest["privacy"]["epsilon"] == 1.0 and manifest["privacy"]["adjacency"] == "replace-one"
    assert manifest["budget_splits"] == [{"name": "covariance", "epsilon": 1.0, "delta": 0.0}]
    sens = manifest["sensitivity"]
    assert sens["bound"] == "sensitivity.cov.public_center@1" and sens["status"] == "UPPER"
    assert sens["value"] / 2 <= sens["attained_lower_bound"] <= sens["value"] and sens["paper_bound"] is None
    par = manifest["parameters"]
    assert par["centering"]["kind"] == "public" and par["contribution_rule"].startswith("average")
    assert par["privacy_unit"] == manifest["privacy"]["privacy_unit"]
    assert manifest["noise"]["whitened_scale"] == pytest.approx(sens["value"])  # epsilon = 1
    assert manifest["composition"] is None
    assert set(manifest["formulas"]) <= set(FORMULAS)
    assert {"estimator.cov.iclp_qr@1", "postprocess.cov.psd_projection@1"} <= set(manifest["formulas"])
    for o in manifest["outputs"]:
        assert o["sha256"] == hashlib.sha256((out / o["path"]).read_bytes()).hexdigest()
    assert [o["path"] for o in manifest["outputs"]] == ["release.parquet", "eigenfunctions.parquet", "release.png"]
    assert (out / "release.png").read_bytes()[:4] == b"\x89PNG"  # heat map of the private surface with a colour bar
    # trial G finding 5: the plot says the surface is the second moment about value_offset, not "covariance", and
    # states the plan's noise (a public number) in the surface's units next to the colour scale
    png = (out / "release.png").read_bytes()
    l2 = manifest["noise"]["expected_l2_error"]
    eps, tau = manifest["privacy"]["epsilon"], manifest["parameters"]["tau"]
    assert title_of(png) == ("cov-1: private second moment about value_offset 1500 (not a covariance about the mean) "
                             f"ε = {eps:g}, τ = {tau:.4g} (rescaled units); noise only (clipping and smoothing bias not "
                             f"included): expected L2 error {l2:.3g} demand_mw squared = its root mean square over the "
                             "surface")  # trial H, F6: the plot states epsilon and tau
    assert labels_of(png).endswith("| colour bar: second moment about value_offset 1500 (demand_mw squared)")

    grid = midpoint_grid(48)
    table = pq.read_table(out / "release.parquet").to_pandas()
    assert list(table.columns) == ["s", "t", "s_source", "t_source", "value"] and len(table) == 48 * 48
    surface = table["value"].to_numpy().reshape(48, 48)
    assert np.allclose(surface, surface.T)
    sw = np.sqrt(grid.weights)
    assert np.linalg.eigvalsh(sw[:, None] * surface * sw[None, :])[0] >= -1e-6 * np.abs(surface).max()
    eig = pq.read_table(out / "eigenfunctions.parquet").to_pandas()
    funs = eig[[f"eigenfunction_{r}" for r in (1, 2, 3)]].to_numpy()
    assert np.allclose(funs.T @ (grid.weights[:, None] * funs), np.eye(3), atol=1e-8)
    assert eig["eigenvalue_1"].iloc[0] >= eig["eigenvalue_2"].iloc[0] >= eig["eigenvalue_3"].iloc[0]

    record = Ledger(ledger).get("cov-1")
    assert record is not None and record.state == "published" and record.summary == "covariance"
    assert record.internal["counts"]["n_rows"] == 24384
    # other tests' covariance releases share the key (and the session's Prefect server): this release's note by its id
    (note,) = [a for a in artifacts("adelaide-electricity-monday-covariance-release-note") if "`cov-1`" in a]
    assert "Monday demand curve" in note and "Parts of this release: covariance ε = 1." in note
    assert artifacts("adelaide-electricity-monday-covariance-budget-splits")

    # idempotent re-run: same files, nothing charged
    again = tmp_path / "again"
    assert release(_config(tmp_path), again, ledger, "cov-1") == 0
    assert (again / "release.parquet").read_bytes() == (out / "release.parquet").read_bytes()
    assert Ledger(ledger).budgets("adelaide-electricity-monday")[0].as_dict()["spent"]["epsilon"] == 1.0


def test_centring_by_a_published_private_mean_links_and_composes(tmp_path: Path) -> None:
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    # a missing mean release: exit 2, nothing charged
    cfg = _config(tmp_path, centering={"kind": "private_mean", "release_id": "mean-1"})
    assert release(cfg, tmp_path / "bad", ledger, "cov-bad") == 2
    assert Ledger(ledger).get("cov-bad") is None

    assert release(_config(tmp_path, example=MEAN_EXAMPLE), tmp_path / "mean", ledger, "mean-1") == 0
    out = tmp_path / "cov"
    assert release(cfg, out, ledger, "cov-2") == 0
    manifest = json.loads((out / "manifest.json").read_text())
    link = manifest["composition"]
    assert link["centering_release_id"] == "mean-1" and link["centering_epsilon"] == 1.0
    assert link["combined_epsilon"] == 2.0 and "accounting.pure.sequential@1" in manifest["formulas"]
    assert "mean-1" in manifest["privacy"]["guarantee"]
    assert Ledger(ledger).budgets("adelaide-electricity-monday")[0].as_dict()["spent"]["epsilon"] == 2.0
    assert Ledger(ledger).get("cov-2").internal["centering_release_id"] == "mean-1"
    png = (out / "release.png").read_bytes()
    assert title_of(png).startswith("cov-2: private covariance (centred on the private mean release 'mean-1') ε = 1, τ = ")
    assert labels_of(png).endswith("| colour bar: covariance (demand_mw squared)")

    # a covariance release cannot be used as a centre
    cfg2 = _config(tmp_path, centering={"kind": "private_mean", "release_id": "cov-2"})
    assert release(cfg2, tmp_path / "bad2", ledger, "cov-bad2") == 2


def test_sample_mean_centring_uses_the_larger_bound(tmp_path: Path) -> None:
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert release(_config(tmp_path), tmp_path / "a", ledger, "cov-pub") == 0
    assert release(_config(tmp_path, centering={"kind": "sample_mean"}), tmp_path / "b", ledger, "cov-smp") == 0
    pub = json.loads((tmp_path / "a" / "manifest.json").read_text())["sensitivity"]
    smp = json.loads((tmp_path / "b" / "manifest.json").read_text())["sensitivity"]
    assert smp["bound"] == "sensitivity.cov.sample_mean_center@1"
    assert 2.5 < smp["value"] / pub["value"] <= (4 + 2**0.5) / 2**0.5  # about 3x (MATH.md §6 (b))
    assert title_of((tmp_path / "b" / "release.png").read_bytes()).startswith(
        "cov-smp: private covariance (centred on the sample mean) ε = 1, τ = ")


def test_the_plot_names_the_surface_by_its_centring(tmp_path: Path) -> None:
    """Trial G finding 5: only a centre on the mean gives a covariance; a public centre gives a second moment."""
    reference = {"time": [0.5, 48.5], "value": [1400.0, 1600.0], "source": "a public forecast"}
    names = {kind: _surface_names(load_config(_config(tmp_path, centering=c)))
             for kind, c in [("offset", {"kind": "public"}), ("reference", {"kind": "public", "reference": reference}),
                             ("private", {"kind": "private_mean", "release_id": "m"}), ("sample", {"kind": "sample_mean"})]}
    assert names == {
        "offset": ("second moment about value_offset 1500 (not a covariance about the mean)",
                   "second moment about value_offset 1500"),
        "reference": ("second moment about the public reference curve (not a covariance about the mean)",
                      "second moment about the reference"),
        "private": ("covariance (centred on the private mean release 'm')", "covariance"),
        "sample": ("covariance (centred on the sample mean)", "covariance"),
    }


def test_unit_with_ten_curves_is_one_record(tmp_path: Path, electricity: pd.DataFrame) -> None:
    # Households with several meters: household 0 holds 10 Monday curves, the others one each.
    frame = electricity.rename(columns={"monday_index": "meter"})
    frame["household"] = np.where(frame["meter"] < 10, 0, frame["meter"])
    data = tmp_path / "households.parquet"
    frame.to_parquet(data)
    cfg = _config(tmp_path, data=data, dataset__unit_column="household", dataset__curve_column="meter",
                  dataset__privacy_unit="household (all its meters)")
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert release(cfg, tmp_path / "out", ledger, "cov-hh") == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["n"] == 508 - 9
    assert manifest["privacy"]["privacy_unit"] == "household (all its meters)"
    assert "averaged into one record" in manifest["parameters"]["contribution_rule"]
    # one record per household: the bound is that of n = 499 records (a cap at 10 curves would multiply it by 10)
    plan = plan_covariance_release(midpoint_grid(48), {"name": "matern", "nu": 1.5, "rho": 0.1}, n=499, tau=0.5,
                                   epsilon=1.0, tuning="exact_free", secure=False)
    assert manifest["sensitivity"]["value"] == pytest.approx(plan.sensitivity, rel=1e-12)


def test_bad_covariance_configs_exit_2(tmp_path: Path) -> None:
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    cases = [
        {"privacy": {"epsilon": 1.0, "delta": 1e-6}},
        {"centering": {"kind": "public", "release_id": "x"}},
        {"centering": {"kind": "sample_mean", "reference": {"time": [0.5, 48.5], "value": [0, 0], "source": "s"}}},
        {"tuning": {"eta": 1.0}},
        {"tuning": {"rule": "pcv"}},
        {"output": {"n_components": 0}},
        {"clipping": {"tau": 1.0, "sup_clip": 2.0}},
    ]
    for i, override in enumerate(cases):
        assert release(_config(tmp_path, **override), tmp_path / f"o{i}", ledger, f"bad-{i}") == 2, override
    assert Ledger(ledger).get("bad-0") is None
