"""kde_figures: the [ICLP] §6.2 KDE simulations (1-D and 2-D)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from experiments import kde_figures as kf

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, pd.DataFrame]:
    out = tmp_path_factory.mktemp("kde")
    mp = pytest.MonkeyPatch()
    mp.setattr(kf, "GRID_2D", 10)  # the 2-D exact sensitivity is O(K^2 J): a 10 x 10 grid keeps the test fast
    try:
        md = kf.run(out, 2, 5, n=400, draws=100, lattices={1: (5, 20), 2: (4,)})
    finally:
        mp.undo()
    return out, md, pd.read_csv(out / "kde_figures_mse.csv")


def test_section_files_and_rows(tiny: tuple[Path, str, pd.DataFrame]) -> None:
    out, md, table = tiny
    for name in ("kde_figures_1d.png", "kde_figures_2d.png"):
        assert (out / name).read_bytes()[:8] == PNG_MAGIC
        assert f"](results/{name})" in md
    # ICLP-QR: each eta twice (exact, paper); Bernstein once per k
    assert len(table[(table.mechanism == "ICLP-QR")]) == 2 * (len(kf.ETAS[1]) + len(kf.ETAS[2]))
    assert set(table[table.mechanism == "Bernstein"].parameter) == {"k=5", "k=20", "k=4"}
    for r in table[table.version == "exact"].itertuples():
        assert f"| {r.dim} | {r.mechanism} | {r.parameter} |" in md


def test_privacy_error_matches_the_plan_noise_formula(tiny: tuple[Path, str, pd.DataFrame]) -> None:
    """E||f~ - f^||^2 over the draws equals noise.whitened.expected_sq_l2@1 of the plan (ICLP-QR)."""
    _, _, table = tiny
    qr = table[table.mechanism == "ICLP-QR"]
    assert np.allclose(qr.privacy_error, qr.expected_noise, rtol=0.2)


def test_bernstein_privacy_error_grows_with_k(tiny: tuple[Path, str, pd.DataFrame]) -> None:
    _, _, table = tiny
    b = table[(table.mechanism == "Bernstein") & (table.dim == 1)].set_index("parameter")
    assert b.loc["k=20", "privacy_error"] > b.loc["k=5", "privacy_error"]
    assert b.loc["k=20", "sensitivity"] == pytest.approx(b.loc["k=5", "sensitivity"] * 21 / 6)


def test_paper_version_uses_the_paper_bound() -> None:
    plans = kf.iclp_plans(1, 500, (1.25,))
    exact, paper = plans[1.25, "exact"], plans[1.25, "paper"]
    assert paper.calibration.sensitivity == exact.paper_sensitivity
    assert paper.expected_sq_l2_error / exact.expected_sq_l2_error == pytest.approx(
        (exact.paper_sensitivity / exact.sensitivity) ** 2, rel=1e-9)


@pytest.mark.parametrize("dim", [1, 2])
def test_true_density_integrates_to_one_and_samples_stay_in_the_box(dim: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kf, "GRID_2D", 60)
    grid = kf._axes(dim)
    from fdpcore.summaries.kde import point_space

    space = point_space({"name": "gaussian", "length_scale": 0.3}, grid)
    plan = type("P", (), {"space": space})()
    sc = kf.scenario(dim, plan)  # type: ignore[arg-type]
    assert float(sc.truth @ sc.weights) == pytest.approx(1.0, abs=0.01)
    x = kf.sample(dim, 5000, np.random.default_rng(0))
    assert x.shape == (5000, dim) and x.min() >= 0.0 and x.max() <= 1.0
    # mixture weights 0.6 / 0.4: the share of points nearer the first centre
    first = np.array([0.3]) if dim == 1 else (kf.MU_2D[0] - kf.BOX[0]) / 10.0
    second = np.array([0.7]) if dim == 1 else (kf.MU_2D[1] - kf.BOX[0]) / 10.0
    near_first = np.linalg.norm(x - first, axis=1) < np.linalg.norm(x - second, axis=1)
    assert near_first.mean() == pytest.approx(0.6, abs=0.03)
