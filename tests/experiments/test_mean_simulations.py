"""Tests of the mean-function simulation section (experiments/mean_simulations.py, MATH.md §13.1)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pandas as pd
import pytest

from experiments import _sim_mean as sim
from experiments import mean_simulations as ms
from experiments.reference import MEAN_SIMULATION_SETTINGS
from fdpcore.summaries.mean import draw_mean_release, iclp_qr_weights, summarise_mean

SIZE = 40  # a small grid keeps the tests fast


def _data(scenario: str, n: int, nu: float = 1.5, errors: str = "rbf", seed: int = 0):  # noqa: ANN202
    rng = np.random.default_rng(seed)
    mu0 = sim.true_mean(scenario, nu, rng, SIZE)
    tau, sup = sim.scales(mu0, SIZE)
    y = (mu0 + sim.sample_errors(errors, n, rng, SIZE)) / tau
    return mu0, tau, sup, sim.summarise(y, nu, SIZE)


@pytest.mark.parametrize("variant", list(sim.VARIANTS))
def test_whitened_summary_equals_the_library_summary(variant: str) -> None:
    """The fast path (mean coefficients first) gives exactly what summarise_mean gives on the curves."""
    _, tau, sup, s = _data("S-2", 60)
    for est in sim.MECHANISMS:
        p = sim.plan(est, variant, 1.5, 60, sup / tau if est == "bernstein" else 1.0, None, SIZE)
        np.testing.assert_allclose(sim.whitened(p, s), summarise_mean(s.curves, p), rtol=1e-10, atol=1e-13)
    p = sim.pcv_select(1.5, s)
    np.testing.assert_allclose(sim.whitened(p, s), summarise_mean(s.curves, p), rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize(("est", "variant"), [("iclp_qr", "exact"), ("bernstein", "exact"), ("gp", "paper"),
                                              ("frl", "paper")])
def test_noise_energy_identity_by_monte_carlo(est: str, variant: str) -> None:
    """E||mu~ - mu_0||^2 = ||mu^ - mu_0||^2 + E||noise||^2: the mean over 4000 private draws agrees within 4 SE."""
    mu0, tau, sup, s = _data("S-1", 80)
    p = sim.plan(est, variant, 1.5, 80, sup / tau if est == "bernstein" else 1.0, None, SIZE)
    stat, priv = sim.squared_error(p, s, mu0 / tau)
    rel = draw_mean_release(p, sim.whitened(p, s), draws=4000, rng=np.random.default_rng(3))
    err = np.sum(sim.grid(SIZE).weights * (rel - mu0 / tau) ** 2, axis=1)
    se = err.std(ddof=1) / math.sqrt(err.size)
    assert abs(err.mean() - (stat + priv)) <= 4 * se
    assert priv > 0 and stat > 0


def test_paper_bound_recalibration_gives_the_a_norm_ratio() -> None:
    """At fixed tuning, privacy error with the paper bound / exact bound = (||a||_1/||a||_2)^2 for ICLP-QR, M for FRL."""
    table = ms._fixed_tuning_table([1.5], (100, 1000), SIZE)
    for r in table[table.mechanism == "iclp_qr"].itertuples():
        p = sim.plan("iclp_qr", r.tuning, 1.5, int(r.n), 1.0, None, SIZE)
        a = iclp_qr_weights(p.basis.eigenvalues, float(r.eta), float(r.psi))
        assert r.ratio == pytest.approx((a.sum() / np.linalg.norm(a)) ** 2, rel=1e-12)
        assert r.ratio > 1.5
    for r in table[table.mechanism == "frl"].itertuples():
        assert r.ratio == pytest.approx(r.n_basis, rel=1e-12)
    gp = table[(table.mechanism == "gp") & (table.tuning == "exact")]
    assert (gp.ratio < 1).all()  # the [MRS] bound is too small for eta > 1 (MATH.md §4.4)


def test_data_generators_follow_the_design() -> None:
    """Scenario means, unit-energy errors, the t_5 tails, S-4 in the span of 25 eigenfunctions, tau and B."""
    t = sim.grid(SIZE).grid_points
    rng = np.random.default_rng(5)
    np.testing.assert_allclose(sim.true_mean("S-1", 1.5, rng, SIZE), 10 * t * np.exp(-t))
    s2 = 0.3 * np.exp(-0.5 * ((t - 0.3) / 0.05) ** 2) / (0.05 * math.sqrt(2 * math.pi))
    s2 += 0.7 * np.exp(-0.5 * ((t - 0.8) / 0.05) ** 2) / (0.05 * math.sqrt(2 * math.pi))
    np.testing.assert_allclose(sim.true_mean("S-2", 1.5, rng, SIZE), s2)
    mu4 = sim.true_mean("S-4", 1.5, rng, SIZE)
    coef = sim.iclp_basis(1.5, SIZE).coefficients(mu4)
    assert np.all(np.abs(coef[:25]) <= 1) and np.allclose(coef[25:], 0, atol=1e-12)
    assert not np.allclose(mu4, sim.true_mean("S-4", 1.5, rng, SIZE))  # a new R per replicate
    tau, sup = sim.scales(mu4, SIZE)
    assert tau == pytest.approx(float(sim.grid(SIZE).norm(mu4)[0]) + sim.TAU_MARGIN)
    assert sup == pytest.approx(float(np.abs(mu4).max()) + sim.SUP_MARGIN)
    for errors in ("rbf", "exponential", "t5"):
        e = sim.sample_errors(errors, 20000, rng, SIZE)
        energy = sim.grid(SIZE).norm(e) ** 2
        assert energy.mean() == pytest.approx(1.0, rel=0.05), errors
        assert np.abs(e.mean(axis=0)).max() < 0.05
    pointwise = sim.sample_errors("t5", 40000, rng, SIZE)[:, SIZE // 2]
    kurtosis = np.mean(pointwise**4) / np.mean(pointwise**2) ** 2
    gauss = sim.sample_errors("rbf", 40000, rng, SIZE)[:, SIZE // 2]
    assert np.mean(gauss**4) / np.mean(gauss**2) ** 2 == pytest.approx(3.0, rel=0.1)
    assert kurtosis > 3.2  # heavier tails than Gaussian (a mixture of t_5 scores)


def test_loglog_slope_recovers_the_rate() -> None:
    rng = np.random.default_rng(0)
    rows = [{"n": n, "mse": 3.0 / n * (1 + 0.01 * rng.standard_normal())} for n in (100, 1000, 10000) for _ in range(5)]
    slope, se = ms.loglog_slope(pd.DataFrame(rows), rng, 50)
    assert slope == pytest.approx(-1.0, abs=0.02) and 0 < se < 0.02
    rows = [{"n": n, "mse": n**-0.5} for n in (100, 1000, 10000) for _ in range(3)]
    assert ms.loglog_slope(pd.DataFrame(rows), rng, 50)[0] == pytest.approx(-0.5)


def _synthetic(base: dict[str, float], power: float = -1.0, pcv: float = 1.1, s1: dict[str, float] | None = None,
               bias_share: float = 0.5):  # noqa: ANN202
    """Cells frames whose MSE is base[mechanism] * n^power (3 identical replicates; ``s1`` overrides S-1)."""
    rows = []
    for variant in sim.VARIANTS:
        for sc in sim.SCENARIOS:
            for n in (100, 1000, 5000):
                for rep in range(3):
                    here = {**base, **(s1 or {})} if sc == "S-1" else base
                    for est, b in {**here, "pcv": here["iclp_qr"] * pcv, "pcv_frl": here["frl"] * pcv}.items():
                        if est.startswith("pcv") and variant == "paper":
                            continue
                        m = b * n**power * (1 + 0.001 * rep)
                        rows.append((sim.MAIN, sc, n, rep, est, variant, m * bias_share, m * (1 - bias_share), 1.0))
    per_rep = pd.DataFrame(rows, columns=["config", "scenario", "n", "rep", "mechanism", "variant", "stat", "priv",
                                          "psi_ratio"])
    per_rep["mse"] = per_rep.stat + per_rep.priv
    fixed = pd.DataFrame({"mechanism": ["iclp_qr"], "ratio": [20.0], "a_norm_ratio_sq": [20.0]})
    mc = pd.DataFrame(columns=["check", "scenario", "n", "formula", "mc_mean", "mc_se", "rel_diff", "z"])
    return ms._cells(per_rep), fixed, mc


def test_verdicts_are_computed_from_the_numbers() -> None:
    """The same code says confirmed for data that show a finding and refuted for data that do not."""
    paper_like = {"frl": 2.0, "iclp_ar": 5.0, "iclp_qr": 1.0, "bernstein": 2.2, "gp": 0.8}
    s1 = {"frl": 1.2, "bernstein": 1.1}
    v = {k: verdict for k, verdict, _ in ms.findings(*_synthetic(paper_like, s1=s1, bias_share=0.8), "exact")}
    assert all(x == "confirmed" for x in v.values()), v
    reversed_ = {"frl": 0.5, "iclp_ar": 0.1, "iclp_qr": 1.0, "bernstein": 5.0, "gp": 3.0}
    v = {k: verdict for k, verdict, _ in ms.findings(*_synthetic(reversed_, power=-0.3, pcv=3.0,
                                                                 s1={"frl": 4.0, "bernstein": 5.0}), "exact")}
    for key in ("qr_best", "frl_bernstein_s1", "gp_slightly_better", "ar_worst", "pss_pcv", "qr_rate"):
        assert v[key] == "refuted", (key, v[key])
    # FRL and Bernstein as good as ICLP-QR everywhere: competitive on S-1 but not "only there"
    v = {k: w for k, w, _ in ms.findings(*_synthetic({**paper_like, "frl": 1.0, "bernstein": 1.0}), "exact")}
    assert v["frl_bernstein_s1"] == "refuted"
    # ICLP-AR the worst, but by noise: not "because of its bias"
    v = {k: w for k, w, _ in ms.findings(*_synthetic(paper_like, s1=s1, bias_share=0.1), "exact")}
    assert v["ar_worst"] == "partly confirmed"
    cells, fixed, mc = _synthetic(paper_like)
    fixed["ratio"] = 21.0
    v = {k: verdict for k, verdict, _ in ms.findings(cells, fixed, mc, "exact")}
    assert v["qr_exact"] == "refuted"


def test_cells_slope_recovers_the_rate() -> None:
    cells = pd.DataFrame({"n": [100, 1000, 10000], "mse": [3e-2, 3e-3, 3e-4], "mse_se": [3e-4, 3e-5, 3e-6]})
    slope, se = ms.cells_slope(cells)
    assert slope == pytest.approx(-1.0) and 0 < se < 0.01


def test_run_writes_the_section_its_csvs_and_figures(tmp_path: Path) -> None:
    out = tmp_path / "results"
    body = ms.run(out, 2, 11, n_values=(100, 400, 1600), configs=("m15_rbf",), grid_size=SIZE, mc_draws=300,
                  bootstrap=20)
    assert not re.search(r"^# ", body, flags=re.M)  # no top-level heading
    assert "2 replicate data sets per cell" in body
    assert f"the paper: {MEAN_SIMULATION_SETTINGS.rows['replicates']}" in body
    for link in re.findall(r"\]\((results/[^)\s]+)\)", body):
        f = tmp_path / link
        assert f.is_file(), link
        if f.suffix == ".png":
            assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            assert mpimg.imread(f).shape[0] > 200
    assert all(p.name.startswith("mean_simulations_") for p in out.iterdir())
    cells = pd.read_csv(out / "mean_simulations_cells.csv")
    assert len(cells) == 5 * 3 * (2 * 5 + 2)  # scenarios x n x (variants x mechanisms + PCV for ICLP-QR and FRL)
    assert (cells.reps == 2).all()
    # the Markdown cites the CSV's numbers
    for sc, est in (("S-1", "iclp_qr"), ("S-3", "gp")):
        r = cells[(cells.scenario == sc) & (cells.mechanism == est) & (cells.variant == "exact") & (cells.n == 100)]
        assert ms._mse_cell(r.iloc[0]) in body
    # MSE decreases with n for every mechanism on the smooth scenarios (exact pipeline)
    ex = cells[(cells.variant == "exact") & cells.scenario.isin(["S-1", "S-2", "S-3"])]
    for _, g in ex.groupby(["scenario", "mechanism"]):
        mse = g.sort_values("n").mse.to_numpy()
        assert np.all(np.diff(mse) < 0), g
    mc = pd.read_csv(out / "mean_simulations_monte_carlo.csv")
    assert len(mc) > 0 and (mc.z.abs() <= ms.MC_Z).all()
    fixed = pd.read_csv(out / "mean_simulations_fixed_tuning.csv")
    q = fixed[fixed.mechanism == "iclp_qr"]
    np.testing.assert_allclose(q.ratio, q.a_norm_ratio_sq, rtol=1e-12)
    for phrase in ("### Expected findings", "### PSS vs PCV", "### Exact vs paper sensitivities", "not stated in the paper",
                   "### Epsilon sweep", "FRL basis"):
        assert phrase in body
    assert "not differentially private" in body
    # every Markdown table row has as many (unescaped) cell separators as its header: norms like ||a|| are escaped
    header_cells = None
    for line in body.splitlines():
        if not line.startswith("|"):
            header_cells = None
            continue
        cells_in_line = len(re.findall(r"(?<!\\)\|", line))
        header_cells = header_cells or cells_in_line
        assert cells_in_line == header_cells, line


def test_run_rejects_bad_settings(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"reps \(0\) must be >= 1"):
        ms.run(tmp_path, 0, 1)
    with pytest.raises(ValueError, match="must include the main configuration"):
        ms.run(tmp_path, 1, 1, configs=("m25_rbf",))


def test_s4f_uses_an_orthonormal_fourier_basis_outside_the_frl_span() -> None:
    """S-4F's basis is orthonormal on the grid and its mean is not in the first 25 ICLP eigenfunctions."""
    g = sim.grid(100)
    phi = sim.fourier_basis(g.grid_points, 25)
    np.testing.assert_allclose(phi.T @ (g.weights[:, None] * phi), np.eye(25), atol=1e-10)
    mu = sim.true_mean("S-4F", 1.5, np.random.default_rng(0), 100)
    coef = sim.iclp_basis(1.5, 100).coefficients(mu)
    assert np.sum(coef[25:] ** 2) > 1e-3 * np.sum(coef**2)  # about 0.4%: small, but FRL is no longer unbiased at M = 25
