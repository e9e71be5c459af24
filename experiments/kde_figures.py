"""[ICLP] §6.2 KDE simulations (MATH.md §13.2): private density curves (1-D) and surfaces (2-D), n = 2000.

    .venv/bin/python -m experiments.kde_figures [--reps R] [--out DIR]

* 1-D: x ~ 0.6 N(0.3, 0.1; [0, 1]) + 0.4 N(0.7, 0.1; [0, 1]) (truncated normals), Gaussian kernel;
  ICLP-QR with eta in {1.25, 1.5}, Bernstein with k in {10, 30, 50}.
* 2-D: 0.6 N((-3, -3), S; box) + 0.4 N((3, 2), S; box), S = [[1, .5], [.5, 1]], box [-5, 5]^2 (the
  printed box is a typo, §13.2), separable exponential kernel; ICLP-QR eta in {1.01, 1.05, 1.2},
  Bernstein k in {5, 10}.

Bandwidth h = n^(-1/(4+d)) (``tuning.kde.bandwidth@1``), epsilon = 1 (not stated; §13.2). ICLP-QR
runs through ``fdpcore.summaries.kde`` (plan, snapped summary, whitened Laplace draws) twice: with the exact
grid sensitivity (``sensitivity.kde.iclp_qr.exact_grid@1``) and with the paper's printed bound
(``sensitivity.kde.iclp_qr.paper@1``, which is not a valid bound when M_K < 1, §14 item 10).
Bernstein (``fdpcore.noise.bernstein.bernstein_mechanism``) noises the ordinary KDE on the lattice with
diffpriv's rule L x Delta_inf, Delta_inf from the sup-clip rule with B = kappa k_h(0)
(``sensitivity.mean.bernstein.sup_exact@1``: each point's bump lies in [0, B]).
All on the unit-scaled domain; densities are per unit of the unit box.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats

from experiments._frl_density import frl_density_plan, frl_density_summary
from experiments._util import Verdict, fmt, md_table, save_csv, save_figure, standalone, verdict_word
from fdpcore.basis.grids import midpoint_grid
from fdpcore.basis.kernels import kernel_matrix
from fdpcore.noise.bernstein import bernstein_basis, bernstein_lattice, bernstein_mechanism, bernstein_sensitivity
from fdpcore.noise.iclp import calibrate_iclp
from fdpcore.summaries.kde import PointPlan, draw_point_release, kde_bandwidth, plan_kde_release, summarise_kde
from fdpcore.summaries.mean import draw_mean_release

TITLE = "Private kernel density estimates in 1-D and 2-D ([ICLP] §6.2)"
NAME = "kde_figures"
DEFAULT_REPS = 20
N = 2000
EPSILON = 1.0  # not stated in the paper (MATH.md §13.2: presumably 1)
#: h = c n^(-1/(4+d)) (``tuning.kde.bandwidth@1`` times c): the paper gives only the rate, not the constant.
#: c = 1 (h = 0.219 in 1-D) is wider than the mixture components (sd 0.1) and flattens both modes, so
#: we use c = 1/4 (h = 0.055 in 1-D, 0.070 in 2-D); public, fixed before seeing any data.
BANDWIDTH_CONSTANT = 0.25
#: Grid sizes (not stated in the paper): 1-D midpoint grid, 2-D tensor midpoint grid per axis.
GRID_1D = 100
GRID_2D = 30
ETAS = {1: (1.25, 1.5), 2: (1.01, 1.05, 1.2)}
LATTICE = {1: (10, 30, 50), 2: (5, 10)}
KERNEL = {1: "gaussian", 2: "exponential"}
#: Private draws per replicate for the MSE (paper: not stated for §6.2) and draws shown in the 1-D figure (paper: 10).
DRAWS = 200
SHOWN = 10
BOX = (-5.0, 5.0)
MU_2D = (np.array([-3.0, -3.0]), np.array([3.0, 2.0]))
COV_2D = np.array([[1.0, 0.5], [0.5, 1.0]])


@dataclass(frozen=True)
class Scenario:
    """One dimension's data law, evaluated on the unit box."""

    dim: int
    nodes: np.ndarray  # K x d
    truth: np.ndarray  # K density values on the unit box
    weights: np.ndarray  # K quadrature weights


def _tn(mean: float, sd: float) -> stats.rv_continuous:
    return stats.truncnorm((0.0 - mean) / sd, (1.0 - mean) / sd, loc=mean, scale=sd)


def sample(dim: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n x dim`` points in the unit box from the §13.2 mixture of the dimension."""
    if dim == 1:
        comp = rng.random(n) < 0.6
        x = np.where(comp, _tn(0.3, 0.1).rvs(n, random_state=rng), _tn(0.7, 0.1).rvs(n, random_state=rng))
        return x[:, None]
    out = np.empty((0, 2))
    while out.shape[0] < n:  # truncation to the box by rejection
        comp = rng.random(2 * n) < 0.6
        z = rng.multivariate_normal(np.zeros(2), COV_2D, size=2 * n) + np.where(comp[:, None], MU_2D[0], MU_2D[1])
        inside = np.all((z >= BOX[0]) & (z <= BOX[1]), axis=1)
        out = np.vstack([out, z[inside]])
    return (out[:n] - BOX[0]) / (BOX[1] - BOX[0])


def scenario(dim: int, plan: PointPlan) -> Scenario:
    """The true density of the dimension's law at the plan's grid nodes (unit-box scale)."""
    nodes = plan.space.nodes
    if dim == 1:
        t = nodes[:, 0]
        truth = 0.6 * _tn(0.3, 0.1).pdf(t) + 0.4 * _tn(0.7, 0.1).pdf(t)
    else:
        width = BOX[1] - BOX[0]
        z = BOX[0] + width * nodes
        lo, hi = np.full(2, BOX[0]), np.full(2, BOX[1])
        parts = []
        for mu in MU_2D:
            law = stats.multivariate_normal(mu, COV_2D)
            mass = law.cdf(hi, lower_limit=lo)
            parts.append(law.pdf(z) / mass)
        truth = (0.6 * parts[0] + 0.4 * parts[1]) * width**2
    return Scenario(dim, nodes, np.asarray(truth, dtype=np.float64), plan.space.weights)


def _axes(dim: int) -> list:
    return [midpoint_grid(GRID_1D)] if dim == 1 else [midpoint_grid(GRID_2D), midpoint_grid(GRID_2D)]


def _kernel_1d(name: str, h: float) -> dict[str, object]:
    return {"name": "gaussian", "length_scale": h} if name == "gaussian" else {"name": "exponential", "rho": h}


def kde_values(points: np.ndarray, at: np.ndarray, dim: int, h: float) -> np.ndarray:
    """The ordinary (non-private) KDE of ``points`` at ``at`` with the dimension's product kernel."""
    spec = _kernel_1d(KERNEL[dim], h)
    kappa = kde_kappa(dim, h)
    prod = np.ones((at.shape[0], points.shape[0]))
    for i in range(dim):
        prod *= kernel_matrix(spec, at[:, i], points[:, i])
    return np.asarray(kappa * prod.mean(axis=1), dtype=np.float64)


def kde_kappa(dim: int, h: float) -> float:
    """Normaliser of the product kernel on R^d: (h sqrt(2 pi))^-d (Gaussian) or (2h)^-d (exponential)."""
    one = h * math.sqrt(2.0 * math.pi) if KERNEL[dim] == "gaussian" else 2.0 * h
    return float(one ** (-dim))


def _sq_l2(values: np.ndarray, target: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.asarray(((values - target) ** 2) @ w, dtype=np.float64)


def bandwidth(n: int, dim: int) -> float:
    """The experiment's bandwidth: ``BANDWIDTH_CONSTANT * n^(-1/(4+d))`` on the unit box."""
    return BANDWIDTH_CONSTANT * kde_bandwidth(n, dim)


def iclp_plans(dim: int, n: int, etas: Sequence[float]) -> dict[tuple[float, str], PointPlan]:
    """ICLP-QR plans per (eta, version): exact grid sensitivity, or noise recalibrated to the paper's bound."""
    plans = {}
    for eta in etas:
        p = plan_kde_release(_axes(dim), n=n, epsilon=EPSILON, kernel=KERNEL[dim], eta=eta, secure=False,
                             bandwidth=bandwidth(n, dim))
        plans[eta, "exact"] = p
        cal = calibrate_iclp(p.paper_sensitivity, EPSILON, n_basis=p.space.n_basis, secure=False)
        plans[eta, "paper"] = replace(p, calibration=cal, sensitivity=p.paper_sensitivity)
    return plans


def simulate(dim: int, reps: int, seed: int, *, n: int = N, etas: Sequence[float] | None = None,
             lattices: Sequence[int] | None = None, draws: int = DRAWS) -> tuple[pd.DataFrame, dict]:
    """MSE table over ``reps`` samples, and the first replicate's curves for the figures."""
    etas = tuple(ETAS[dim] if etas is None else etas)
    lattices = tuple(LATTICE[dim] if lattices is None else lattices)
    rng = np.random.default_rng(seed + dim)
    plans = iclp_plans(dim, n, etas)
    first = next(iter(plans.values()))
    sc = scenario(dim, first)
    h = bandwidth(n, dim)
    kappa = kde_kappa(dim, h)
    records: list[dict] = []
    shown: dict = {"truth": sc.truth, "nodes": sc.nodes, "curves": {}}
    frl = frl_density_plan(midpoint_grid(GRID_1D), h, n=n, epsilon=EPSILON) if dim == 1 else None
    for rep in range(reps):
        x = sample(dim, n, rng)
        codes = np.arange(n)
        for (eta, version), plan in plans.items():
            z = summarise_kde(x, codes, plan)
            nonpriv = z @ plan.space.recolour
            out = draw_point_release(plan, z, draws=draws, rng=rng)
            records.append(_record(dim, "ICLP-QR", f"eta={eta:g}", version, plan.sensitivity, plan.paper_sensitivity,
                                   out, nonpriv, sc, plan.expected_sq_l2_error, rep))
            if rep == 0 and version == "exact":
                shown["curves"][f"ICLP-QR eta={eta:g}"] = (nonpriv, out[:SHOWN])
        for k in lattices:
            lattice = bernstein_lattice(k, dim)
            values = kde_values(x, lattice, dim, h)
            sens = bernstein_sensitivity(kappa, k=k, n=n, d=dim)  # B = kappa k_h(0) = kappa: bumps lie in [0, B]
            out = bernstein_mechanism(values, sc.nodes, k=k, sensitivity=sens, epsilon=EPSILON, draws=draws,
                                      secure=False, rng=rng)
            nonpriv = bernstein_basis(sc.nodes, k) @ values
            records.append(_record(dim, "Bernstein", f"k={k}", "exact", sens, sens, out, nonpriv, sc,
                                   float(np.mean(_sq_l2(out, nonpriv, sc.weights))), rep))
            if rep == 0:
                shown["curves"][f"Bernstein k={k}"] = (nonpriv, out[:SHOWN])
        if frl is not None:
            fplan, b = frl
            counts = np.bincount(first.space.snap(x), minlength=sc.nodes.shape[0])
            z = frl_density_summary(fplan, b, counts, n)
            nonpriv = z @ fplan.recolour
            out = draw_mean_release(fplan, z, draws=draws, rng=rng)
            records.append(_record(dim, "FRL", f"M={fplan.n_basis}", "exact", fplan.sensitivity,
                                   float(fplan.paper_sensitivity or math.nan), out, nonpriv, sc,
                                   fplan.expected_sq_l2_error, rep))
            if rep == 0:
                shown["curves"][f"FRL M={fplan.n_basis}"] = (nonpriv, out[:SHOWN])
        if rep == 0:
            shown["kde"] = kde_values(x, sc.nodes, dim, h)
    raw = pd.DataFrame(records)
    keys = ["dim", "mechanism", "parameter", "version"]
    agg = raw.groupby(keys, sort=False).agg(
        mse_truth=("mse_truth", "mean"), mse_truth_se=("mse_truth", lambda s: s.std(ddof=1) / np.sqrt(s.size)),
        privacy_error=("privacy_error", "mean"), privacy_error_se=("privacy_error", lambda s: s.std(ddof=1) / np.sqrt(s.size)),
        bias2=("bias2", "mean"), sensitivity=("sensitivity", "first"), paper_sensitivity=("paper_sensitivity", "first"),
        expected_noise=("expected_noise", "first"),
    ).reset_index()
    agg["reps"], agg["draws"], agg["n"], agg["bandwidth"] = reps, draws, n, h
    return agg, shown


def _record(dim: int, mech: str, param: str, version: str, sens: float, paper: float, out: np.ndarray,
            nonpriv: np.ndarray, sc: Scenario, expected: float, rep: int) -> dict:
    return {"dim": dim, "mechanism": mech, "parameter": param, "version": version, "rep": rep, "sensitivity": sens,
            "paper_sensitivity": paper, "mse_truth": float(np.mean(_sq_l2(out, sc.truth, sc.weights))),
            "privacy_error": float(np.mean(_sq_l2(out, nonpriv, sc.weights))),
            "bias2": float(_sq_l2(nonpriv[None, :], sc.truth, sc.weights)[0]), "expected_noise": expected}


def _figure_1d(shown: dict, out_dir: Path) -> str:
    curves = shown["curves"]
    fig, axes = plt.subplots(1, len(curves), figsize=(3.2 * len(curves), 3.2), sharey=True, squeeze=False)
    t = shown["nodes"][:, 0]
    for ax, (label, (nonpriv, draws)) in zip(axes[0], curves.items(), strict=True):
        for d in draws:
            ax.plot(t, d, color="0.6", lw=0.6)
        ax.plot(t, shown["truth"], "k-", lw=1.6, label="true density")
        ax.plot(t, shown["kde"], "C1--", lw=1.2, label="non-private KDE")
        ax.plot(t, nonpriv, "C0-", lw=1.2, label="mechanism's non-private target")
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("x")
    axes[0][0].set_ylabel("density")
    axes[0][0].legend(fontsize=6)
    fig.suptitle(f"1-D, n = {N}, ε = {EPSILON:g}: {SHOWN} private draws (grey)", fontsize=10)
    return save_figure(fig, out_dir, f"{NAME}_1d.png")


def _figure_2d(shown: dict, out_dir: Path) -> str:
    curves = shown["curves"]
    panels = [("true density", shown["truth"]), ("non-private KDE", shown["kde"])]
    panels += [(f"{label}: one private draw", draws[0]) for label, (_, draws) in curves.items()]
    cols = min(4, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.1 * cols, 3.0 * rows), squeeze=False)
    g = GRID_2D
    for ax in axes.ravel():
        ax.set_axis_off()
    # one colour scale for every panel (the truth's range, widened to the draws' 1st-99th percentiles)
    allv = np.concatenate([np.asarray(v).ravel() for _, v in panels])
    vmin = float(min(np.min(shown["truth"]), np.percentile(allv, 1)))
    vmax = float(max(np.max(shown["truth"]), np.percentile(allv, 99)))
    image = None
    for ax, (label, values) in zip(axes.ravel(), panels, strict=False):
        ax.set_axis_on()
        image = ax.imshow(values.reshape(g, g).T, origin="lower", extent=(0, 1, 0, 1), cmap="viridis", vmin=vmin,
                          vmax=vmax)
        ax.set_title(label, fontsize=8)
    if image is not None:
        fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8, label="density on the unit box (common scale)")
    fig.suptitle(f"2-D, n = {N}, ε = {EPSILON:g} (unit box = [-5, 5]²)", fontsize=10)
    return save_figure(fig, out_dir, f"{NAME}_2d.png")


def run(out_dir: Path, reps: int, seed: int, *, n: int | None = None, draws: int | None = None,
        dims: Sequence[int] = (1, 2), etas: dict | None = None, lattices: dict | None = None) -> str:
    """Run the 1-D and 2-D simulations and return the Markdown section."""
    n = N if n is None else n
    draws = DRAWS if draws is None else draws
    tables, figs = [], {}
    for dim in dims:
        agg, shown = simulate(dim, reps, seed, n=n, draws=draws, etas=(etas or {}).get(dim),
                              lattices=(lattices or {}).get(dim))
        tables.append(agg)
        figs[dim] = _figure_1d(shown, out_dir) if dim == 1 else _figure_2d(shown, out_dir)
    table = pd.concat(tables, ignore_index=True)
    csv = save_csv(table, out_dir, f"{NAME}_mse.csv")
    text = [
        f"n = {n} per replicate (paper: 2000), ε = {EPSILON:g} (not stated in the paper; we use 1), {reps} replicate "
        f"samples (paper: not stated) × {draws} private draws each. Grids not stated in the paper; we use a "
        f"{GRID_1D}-point midpoint grid (1-D) and a {GRID_2D} × {GRID_2D} tensor midpoint grid (2-D) on the unit box. "
        f"Bandwidth h = c·n^(-1/(4+d)): the paper states only the rate; c = 1 (h = {fmt(kde_bandwidth(n, 1), 3)} in 1-D) "
        "is wider than the mixture components (sd 0.1 on the unit scale) and flattens both modes, so we use "
        f"c = {BANDWIDTH_CONSTANT:g} (" + ", ".join(f"d = {d}: h = {fmt(bandwidth(n, d), 3)}" for d in dims) + "). "
        "FRL (1-D only; M by PCV in the paper, here the library's PSS rule `exact`, M = (nε²)^(1/2) capped at the "
        "kept eigenpairs): fdp has no FRL density estimator, so the experiment releases the mean of the records' "
        "kernel bumps with the library's FRL mean release (`experiments/_frl_density.py`; its guarantee is the FRL "
        "mean's, with τ = the largest bump norm). In 2-D it is not run (the mean release takes a 1-D grid). Bernstein uses diffpriv's generic rule L·Δ∞ (the tighter KDE bound of MATH.md §4.5 is "
        "not implemented in fdpcore). MSE = E‖f̃ − f₀‖² against the true density; privacy error = "
        "E‖f̃ − f̂‖² against the mechanism's own non-private estimate; both in L² of the unit box.",
        "",
    ]
    for dim in dims:
        text += [f"![{dim}-D private densities]({figs[dim]})", ""]
    header = ["d", "mechanism", "parameter", "sensitivity", "MSE vs truth (SE)", "privacy error (SE)", "bias²",
              "paper-bound Δ / exact Δ", "MSE vs truth with the paper's bound (SE)"]
    rows = []
    for r in table[table.version == "exact"].itertuples():
        paper = table[(table.dim == r.dim) & (table.mechanism == r.mechanism) & (table.parameter == r.parameter)
                      & (table.version == "paper")]
        pm = (f"{fmt(paper.mse_truth.iloc[0], 3)} ({fmt(paper.mse_truth_se.iloc[0], 2)})" if len(paper) else "same")
        rows.append([r.dim, r.mechanism, r.parameter, fmt(r.sensitivity, 3),
                     f"{fmt(r.mse_truth, 3)} ({fmt(r.mse_truth_se, 2)})",
                     f"{fmt(r.privacy_error, 3)} ({fmt(r.privacy_error_se, 2)})", fmt(r.bias2, 3),
                     fmt(r.paper_sensitivity / r.sensitivity, 3), pm])
    text += [md_table(header, rows), "", f"Data: [{NAME}_mse.csv]({csv}).", ""]
    text += _findings(table, dims, verdicts(out_dir))
    return "\n".join(text)


def verdicts(results_dir: Path) -> list[Verdict]:
    """ICLP-QR's best MSE below Bernstein's best, per dimension, from the section's CSV."""
    table = pd.read_csv(Path(results_dir) / f"{NAME}_mse.csv")
    ex = table[table.version == "exact"]
    out = []
    for dim in sorted(ex.dim.unique()):
        sub = ex[ex.dim == dim]
        best = sub.loc[sub.mse_truth.idxmin()]
        qr = float(sub[sub.mechanism == "ICLP-QR"].mse_truth.min())
        bern = float(sub[sub.mechanism == "Bernstein"].mse_truth.min())
        others = sub[sub.mechanism != "ICLP-QR"]
        word = verdict_word(qr < float(others.mse_truth.min()), qr < bern)
        out.append(Verdict(f"{NAME}.qr_beats_bernstein_{dim}d", f"{dim}-D KDE: ICLP-QR draws closest to the truth "
                           "([ICLP] §6.2, figures)", "qualitative (figures)",
                           f"best ICLP-QR MSE {fmt(qr, 3)} vs best Bernstein {fmt(bern, 3)}"
                           + ("".join(f", FRL {fmt(float(x), 3)}" for x in sub[sub.mechanism == 'FRL'].mse_truth))
                           + f"; lowest {best.mechanism} {best.parameter}", word,
                           "" if word == "confirmed" else f"{best.mechanism} {best.parameter} has the lowest MSE"))
    return out


def _findings(table: pd.DataFrame, dims: Sequence[int], found: list[Verdict]) -> list[str]:
    lines = ["**Findings.**", ""]
    for v in found:
        lines.append(f"* {v.claim}: {v.ours} → {v.tagged}.")
    qr = table[table.mechanism == "ICLP-QR"]
    piv = qr.pivot_table(index=["dim", "parameter"], columns="version", values="sensitivity")
    ratio = piv["paper"] / piv["exact"]
    below = [f"{d}-D {p}" for (d, p), r in ratio.items() if r < 1]
    lines.append("* Paper vs exact KDE sensitivity (ICLP-QR): ratio Δ_paper/Δ_exact = "
                 + ", ".join(f"{d}-D {p}: {fmt(r, 3)}" for (d, p), r in ratio.items())
                 + (f". Below 1 for {', '.join(below)}: there the printed bound is smaller than the true "
                    "sensitivity, i.e. not a valid DP calibration (MATH.md §14 item 10); its MSE column there is not "
                    "that of a private release." if below else ". The exact grid sensitivity is smaller everywhere."))
    return lines


def main() -> None:
    """Standalone run: ``python -m experiments.kde_figures --reps R --out DIR``."""
    standalone(NAME, run, DEFAULT_REPS, __doc__.splitlines()[0])


if __name__ == "__main__":
    main()
