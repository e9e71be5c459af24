"""`fdp release` through the kde_release flow: manifest, ledger, artifacts, a unit with 10 points, bad inputs."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from fdp.tasks import _plots
from fdp.tasks import kde as kde_tasks
from fdp.tasks._plots import labels_of, legend_of, title_of
from fdp.tasks.kde import DENSITY_BAND_LABEL
from flow_support import REPO, release, write_config

from fdpcore.ledger import Ledger
from fdpcore.privacy.formulas import FORMULAS


def _config(tmp_path: Path, example: str, **overrides: object) -> Path:
    return write_config(tmp_path, REPO / "examples" / example, prefix="cfg", **overrides)


def test_kde_1d_example_publishes_density_manifest_and_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plt = _plots._pyplot()
    close, figures = plt.close, []
    monkeypatch.setattr(plt, "close", figures.append)  # keep the release's figure to read what it plotted
    drawn: list[dict] = []  # type: ignore[type-arg]
    monkeypatch.setattr(kde_tasks, "curves_png", lambda *a, _real=kde_tasks.curves_png, **k: drawn.append(k) or _real(*a, **k))
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    out = tmp_path / "out"
    assert release(_config(tmp_path, "kde_1d.yaml", grid__size=50), out, ledger, "kde-1") == 0
    m = json.loads((out / "manifest.json").read_text())
    assert m["summary"] == "kde" and m["mechanism"] == "iclp_qr" and m["n"] == 2000  # persons, not visits
    assert m["privacy"]["privacy_unit"].startswith("person") and m["privacy"]["delta"] == 0.0
    assert m["unit_bounding"]["rule"] == "average" and m["unit_bounding"]["formula"] == "preprocess.points.unit_average@1"
    assert m["sensitivity"]["bound"] == "sensitivity.kde.iclp_qr.exact_grid@1"
    assert m["sensitivity"]["paper_formula"] == "sensitivity.kde.iclp_qr.paper@1"
    assert m["sensitivity"]["value"] <= m["parameters"]["cs_upper_bound"]
    assert m["parameters"]["bandwidth"] == pytest.approx(1.06 / 6 * 2000 ** -0.2)  # tuning.kde.normal_reference@1
    assert m["budget_splits"] == [{"name": "kde", "epsilon": 1.0, "delta": 0.0}]
    assert set(m["formulas"]) <= set(FORMULAS) and "tuning.kde.normal_reference@1" in m["formulas"]
    for o in m["outputs"]:
        assert o["sha256"] == hashlib.sha256((out / o["path"]).read_bytes()).hexdigest()
    table = pq.read_table(out / "release.parquet").to_pandas()
    assert list(table.columns) == ["t", "score", "value", "density", "band_lower", "band_upper"]
    assert table["score"].between(0, 10).all() and (table["density"] >= 0).all()
    assert float(table["density"].sum() * 10 / 50) == pytest.approx(1.0)
    # trial G finding 5: the plot draws the `density` column (the raw value, labelled as such, only alongside)
    png = (out / "release.png").read_bytes()
    eps = json.loads((out / "manifest.json").read_text())["privacy"]["epsilon"]
    assert title_of(png) == ("kde-1: private density (`density` column: raw value clipped at 0, renormalised) "
                             f"ε = {eps:g}; the kernel's smoothing bias is not in the band")  # trial H, F6
    assert labels_of(png) == "x: score | y: density (per unit of score)"
    assert legend_of(png) == f"legend: {DENSITY_BAND_LABEL} | private density (`density`)"
    (fig,) = figures
    lines = {line.get_label(): line.get_ydata() for line in fig.axes[0].get_lines()}
    assert list(lines) == ["private density (`density`)"]
    assert np.array_equal(lines["private density (`density`)"], table["density"].to_numpy())
    # trial L: the band is the raw value's taken through density's own post-processing, so the curve lies inside it
    (lower, upper) = drawn[0]["band"]
    normaliser = table["density"].sum() / table["value"].clip(lower=0).sum()
    np.testing.assert_allclose(lower, table["band_lower"].clip(lower=0) * normaliser, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(upper, table["band_upper"].clip(lower=0) * normaliser, rtol=1e-12, atol=1e-15)
    assert np.all((lower <= table["density"] + 1e-12) & (table["density"] <= upper + 1e-12))
    close(fig)
    entry = Ledger(ledger).get("kde-1")
    assert entry is not None and entry.state == "published" and entry.summary == "kde"
    text = json.dumps(m)
    assert "counts" not in text and "n_rows" not in text  # internal counts stay in the ledger


def test_unit_with_ten_points_counts_once_and_outside_points(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"person_id": [f"p{i}" for i in range(99)] + ["heavy"] * 10,
                          "score": np.concatenate([rng.uniform(0, 10, 99), np.full(10, 5.0)])})
    data = tmp_path / "pts.parquet"
    frame.to_parquet(data)
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    cfg = _config(tmp_path, "kde_1d.yaml", grid__size=30)
    raw = yaml.safe_load(cfg.read_text())
    raw["dataset"]["path"] = str(data)
    cfg.write_text(yaml.safe_dump(raw))
    assert release(cfg, tmp_path / "o1", ledger, "ten") == 0
    assert json.loads((tmp_path / "o1" / "manifest.json").read_text())["n"] == 100

    frame.loc[3, "score"] = 11.0  # outside the public domain [0, 10]
    frame.to_parquet(data)
    # issue 17 finding 5: the default is record-wise (clamp), counted in the internal ledger entry only
    raw["dataset"].pop("outside_domain", None)
    cfg.write_text(yaml.safe_dump(raw))
    assert release(cfg, tmp_path / "o3", ledger, "clamped") == 0
    assert Ledger(ledger).get("clamped").internal["counts"]["n_points_clamped"] == 1  # type: ignore[union-attr]
    assert "n_points_clamped" not in (tmp_path / "o3" / "manifest.json").read_text()
    # strict validation is opt-in and stops before the charge
    raw["dataset"]["outside_domain"] = "error"
    cfg.write_text(yaml.safe_dump(raw))
    spent = Ledger(ledger).budgets("synthetic-scores")[0].as_dict()["spent"]["epsilon"]
    capsys.readouterr()
    caplog.clear()
    assert release(cfg, tmp_path / "o2", ledger, "outside") == 2
    assert "at row 4" in capsys.readouterr().err  # the row reaches the curator's terminal ...
    assert not any("row" in r.getMessage() for r in caplog.records if r.name.startswith("prefect"))  # ... not Prefect
    assert Ledger(ledger).get("outside") is None
    assert Ledger(ledger).budgets("synthetic-scores")[0].as_dict()["spent"]["epsilon"] == spent


def test_kde_2d_and_hall_gp(tmp_path: Path) -> None:
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert release(_config(tmp_path, "kde_2d.yaml", grid__size=12), tmp_path / "a", ledger, "kde-2d") == 0
    m = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert m["parameters"]["grid"]["tensor"] is True and "eigen.tensor_kron@1" in m["formulas"]
    table = pq.read_table(tmp_path / "a" / "release.parquet").to_pandas()
    assert len(table) == 144 and {"x1", "x2", "t1", "t2", "density"} <= set(table.columns)
    png = (tmp_path / "a" / "release.png").read_bytes()
    l2 = m["noise"]["expected_l2_error"]
    assert title_of(png) == ("kde-2d: private density (`density` column: raw value clipped at 0, renormalised) "
                             f"ε = {m['privacy']['epsilon']:g}; noise only (raw value), the kernel's smoothing bias not "
                             f"included: expected L2 error {l2:.3g} over the domain = root mean square {l2 / 10:.3g} "
                             "(per unit of x1 x x2)")  # |domain| = 10 x 10
    assert labels_of(png) == "x: x2 | y: x1 | colour bar: density (per unit of x1 x x2)"
    assert release(_config(tmp_path, "kde_1d_hall.yaml", grid__size=40), tmp_path / "b", ledger, "hall") == 0
    h = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert h["mechanism"] == "hall_gp" and h["privacy"]["delta"] == 1e-5
    assert h["sensitivity"]["value"] <= h["sensitivity"]["paper_bound"]  # equal once exp(-D^2/(2 h^2)) is below 1 ulp
    assert "rho" in h["privacy"]["guarantee"]


def test_bad_kde_configs_exit_2(tmp_path: Path) -> None:
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert release(_config(tmp_path, "kde_1d.yaml", mechanism="hall_gp"), tmp_path / "o", ledger, "x") == 2
    assert release(_config(tmp_path, "kde_1d.yaml", grid__domain=[0.0, 2.0]), tmp_path / "o", ledger, "y") == 2
    assert release(_config(tmp_path, "kde_1d.yaml", dataset__domain=[[0.0, 10.0], [0.0, 1.0]]), tmp_path / "o", ledger, "z") == 2


def test_kde_bandwidth_auto_charges_its_split_first_and_manifest_ledger_and_guarantee_agree(tmp_path: Path) -> None:
    from flow_support import assert_claims_agree

    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    out = tmp_path / "out"
    assert release(_config(tmp_path, "kde_1d.yaml", grid__size=50, bandwidth="auto"), out, ledger, "auto-1") == 0
    m = json.loads((out / "manifest.json").read_text())
    record = Ledger(ledger).get("auto-1")
    assert_claims_agree(m, record)
    (choice,) = m["parameters"]["public_choices"]
    assert [s["name"] for s in m["budget_splits"]] == ["bandwidth", "kde"]
    assert m["budget_splits"][0]["epsilon"] == choice["epsilon"] > 0 and choice["name"] == "bandwidth"
    assert choice["value"] == m["parameters"]["bandwidth"] and m["parameters"]["bandwidth_rule"] == "tuning.kde.bandwidth_auto@1"
    assert choice["quantile_levels"] == [0.25, 0.75] and len(choice["quartiles"]) == 1 and len(choice["sigmas"]) == 1
    assert choice["quantile_epsilon"] * 2 <= choice["epsilon"]
    assert choice["candidates"]["first"] <= choice["value"] <= choice["candidates"]["last"]
    assert {"tuning.kde.bandwidth_auto@1", "accounting.pure.sequential@1"} <= set(m["formulas"]) <= set(FORMULAS)
    text = m["privacy"]["guarantee"]
    assert f"of which epsilon {choice['epsilon']:g} buys the bandwidth h = {choice['value']:.6g}" in text
    # the noise is calibrated with what the split leaves, at the released bandwidth
    assert m["noise"]["whitened_scale"] == pytest.approx(m["sensitivity"]["value"] / m["budget_splits"][1]["epsilon"])


def test_kde_bandwidth_auto_without_enough_units_is_normal_reference_and_free(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    data = tmp_path / "pts.parquet"
    pd.DataFrame({"person_id": [f"p{i}" for i in range(60)], "score": rng.uniform(4, 6, 60)}).to_parquet(data)
    cfg = write_config(tmp_path, REPO / "examples" / "kde_1d.yaml", data=data, grid__size=30, bandwidth="auto")
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert release(cfg, tmp_path / "o", ledger, "few") == 0
    m = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert m["budget_splits"] == [{"name": "kde", "epsilon": 1.0, "delta": 0.0}]
    assert m["parameters"]["bandwidth"] == pytest.approx(1.06 / 6 * 60 ** -0.2)
    assert m["parameters"]["public_choices"][0]["epsilon"] == 0.0
    assert "is the public normal_reference rule" in m["privacy"]["guarantee"]
