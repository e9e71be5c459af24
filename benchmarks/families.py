"""The default mean release on curve families the project was not built on (issue 16: "build for curves you have not seen").

``benchmarks/utility.py`` measures the default against a non-private oracle on the two shipped data sets. This
benchmark asks the same question of synthetic families whose *norm distributions* differ in the ways real data
do, fixed before any measurement (not fitted to anything):

* ``tight``    — every curve is the same shape times a log-normal amplitude (sd 0.1): norms within +-30 %
  (height-like data);
* ``heavy``    — log-normal amplitude with sd 0.6: a long right tail of norms (demand-like data);
* ``outliers`` — 5 % of the curves at three times the amplitude;
* ``centred``  — the mean (0.05) is small against the curves' spread: norms come from the variation;
* ``small``    — curves at a tenth of the a-priori bound (a generous ``value_scale``: norms about 0.03 while
  the a-priori tau is 1).

Each curve is ``amplitude * (0.3 + 0.2 sin 2 pi t)`` plus a smooth random perturbation (seven Fourier pairs with
1/k decay), on 40 midpoints of [0, 1], clipped to [-1, 1] (the a-priori bound of rescaled values), kernel
Matern 3/2 with rho 0.2. For each family, ``n`` in ``--n`` and epsilon in ``--epsilons`` it prints the RMSE of
the default release (``tau: auto``, default tuning, ``--draws`` releases, the DP quantile drawn afresh each
time) divided by the oracle's root expected squared error in closed form (not private: tau = the largest norm,
(eta, psi) the best on the grid of ``utility.oracle_choice`` by that exact expected error). With ``--a-priori`` a second table: the ratio when the
default's tau split falls in the half-of-epsilon regime of ``tuning.tau.quantile_level@2`` is replaced by the
a-priori tau with the whole epsilon (what the superseded ``tuning.tau.a_priori_fallback@1`` did), so the two rules
can be compared cell by cell. ``--decompose FAMILY:N:EPS`` prints, for one cell, the exact expected error of the
default plan at the tau quantile level it targets (the level's norm quantile, the split's remaining epsilon) and
with the oracle's best (eta, psi) substituted at the same tau, and the same at the 0.9 quantile: which of the level
and the tuning the gap comes from (no draws). Errors are against each data set's own mean (what privacy costs); the mean
releases use the facade's NumPy sampler (``secure=False``: simulation only). ``--signal-fractions S [S ...]`` prints,
for every family cell and the two shipped data sets, the same exact expected error (no draws) at the default's level
and split with ``risk_prior``'s prior signal scale ``s`` set to each ``S`` (default 0.5), over the oracle, and the
geometric means: how much a different public prior size would move each data set.

    .venv/bin/python benchmarks/families.py --draws 200 --a-priori
    .venv/bin/python benchmarks/families.py --signal-fractions 0.5 0.7 1
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from utility import Data, electricity, growth, oracle_choice, table  # noqa: E402  (a sibling script, not a package)

from fdpcore.basis.grids import midpoint_grid  # noqa: E402
from fdpcore.data.preprocess import clip_l2  # noqa: E402
from fdpcore.noise.quantiles import MAX_SHARE, quantile_rank_margin, record_norms, split_epsilon, tau_candidates  # noqa: E402
from fdpcore.privacy.tuning import RISK_ETAS  # noqa: E402
from fdpcore.summaries.mean import auto_public_choices, plan_mean_release, release_mean  # noqa: E402

FAMILIES = ("tight", "heavy", "outliers", "centred", "small")
KERNEL: dict[str, object] = {"name": "matern", "nu": 1.5, "rho": 0.2}


def family(name: str, n: int, seed: int) -> Data:
    """``n`` curves of family ``name`` (module docstring), already on the public scale (offset 0, scale 1)."""
    rng = np.random.default_rng([seed, n, FAMILIES.index(name)])
    grid = midpoint_grid(40)
    t = grid.grid_points
    k = np.arange(1, 8)[:, None]
    sines, cosines = np.sin(math.pi * k * t[None, :]), np.cos(math.pi * k * t[None, :])

    def wiggle(sd: float) -> np.ndarray:
        a, b = rng.normal(0.0, sd, (2, n, 7)) / k.T
        return np.asarray(a @ sines + b @ cosines)

    shape = 0.3 + 0.2 * np.sin(2 * math.pi * t)
    if name == "tight":
        x = np.exp(rng.normal(0.0, 0.1, (n, 1))) * shape + wiggle(0.02)
    elif name == "heavy":
        x = 0.5 * np.exp(rng.normal(0.0, 0.6, (n, 1))) * shape + wiggle(0.03)
    elif name == "outliers":
        amp = np.where(rng.random((n, 1)) < 0.05, 3.0, 1.0) * np.exp(rng.normal(0.0, 0.15, (n, 1)))
        x = 0.25 * amp * shape + wiggle(0.02)
    elif name == "centred":
        x = 0.05 + wiggle(0.15)
    else:
        x = 0.1 * (np.exp(rng.normal(0.0, 0.3, (n, 1))) * shape + wiggle(0.03))
    x = np.clip(x, -1.0, 1.0)
    return Data(f"{name} (n = {n})", x, grid, KERNEL, 0.0, 1.0, None, (0.0, 1.0), x)


def _rmse(data: Data, eps: float, draws: int, rng: np.random.Generator, tau: float | str) -> float:
    x, grid = data.curves, data.grid
    r = [release_mean(x, grid, epsilon=eps, tau=tau, kernel=data.kernel, secure=False, rng=rng).values[0]
         for _ in range(draws)] if tau == "auto" else list(
        release_mean(x, grid, epsilon=eps, tau=tau, kernel=data.kernel, draws=draws, secure=False, rng=rng).values)
    err = grid.norm(np.asarray(r) - x.mean(axis=0)[None, :])
    return float(np.sqrt(np.mean(err**2)))


def half_regime(data: Data, eps: float) -> bool:
    """True where ``tuning.tau.quantile_level@2`` gives the tau split half of epsilon (``@1`` fell back there)."""
    n = data.curves.shape[0]
    (choice,) = auto_public_choices(data.grid, data.kernel, n=n, epsilon=eps, tau_auto=True)
    floor = 2 * quantile_rank_margin(1.0, len(tau_candidates(0.01, 1.0))) / n
    return not choice.a_priori and floor > MAX_SHARE * eps and choice.epsilon == split_epsilon(eps, MAX_SHARE)


def rows(ns: tuple[int, ...], epsilons: tuple[float, ...], draws: int, seed: int,
         a_priori: bool) -> tuple[list[list[str]], list[list[str]]]:
    """Ratio tables: the default, and (``a_priori``) the superseded fallback where it differs."""
    rng = np.random.default_rng(seed)
    out, alt = [], []
    for name in FAMILIES:
        for n in ns:
            data = family(name, n, seed)
            ratios, others = [], []
            for eps in epsilons:
                oracle = math.sqrt(oracle_choice(data, eps)[2])
                ratios.append(_rmse(data, eps, draws, rng, "auto") / oracle)
                if a_priori:
                    others.append(_rmse(data, eps, draws, rng, 1.0) / oracle if half_regime(data, eps) else math.nan)
            out.append([data.name, *(f"{v:.2f}" for v in ratios), f"{max(ratios):.2f}"])
            if a_priori:
                alt.append([data.name, *("—" if math.isnan(v) else f"{v:.2f}" for v in others)])
    return out, alt


def expected_error(data: Data, eps: float, tau: float, eta: float | None = None, psi: float | None = None) -> float:
    """Root expected squared error of the ICLP-QR mean at a fixed tau: clipping and shrinkage bias plus noise."""
    x, grid = data.curves, data.grid
    plan = plan_mean_release(grid, data.kernel, n=x.shape[0], tau=tau, epsilon=eps, eta=eta, psi=psi, secure=False)
    basis, lam = plan.basis, plan.basis.eigenvalues
    eta_, psi_ = float(plan.eta or 0.0), float(plan.psi or 0.0)
    clipped, _ = clip_l2(x, grid.weights, tau)
    est = basis.reconstruct(basis.coefficients(clipped).mean(axis=0) * lam**eta_ / (lam**eta_ + psi_))
    bias = float(grid.norm((est - x.mean(axis=0))[None, :])[0] ** 2)
    return math.sqrt(bias + plan.expected_sq_l2_error)


def decompose(cell: str, seed: int) -> None:
    """Print where one cell's gap to the oracle comes from (module docstring)."""
    name, n, eps = cell.split(":")
    data = family(name, int(n), seed)
    e = float(eps)
    (choice,) = auto_public_choices(data.grid, data.kernel, n=int(n), epsilon=e, tau_auto=True)
    oracle = math.sqrt(oracle_choice(data, e)[2])
    norms = record_norms(data.curves, data.grid.weights)
    rest = e - choice.epsilon
    print(f"{data.name}, epsilon {e:g}: tau split {choice.epsilon:g}, level {choice.alpha:.3f}; oracle {oracle:.4g}")
    for level in (choice.alpha, 0.9):
        tau = float(np.quantile(norms, level))
        best = min(expected_error(data, rest, tau, eta, 10.0 ** (k / 4)) for eta in RISK_ETAS for k in range(-48, 9))
        print(f"  tau at the {level:.3f} quantile ({tau:.3g}): default tuning {expected_error(data, rest, tau) / oracle:.2f}"
              f" x the oracle, best (eta, psi) {best / oracle:.2f} x")


def signal_cell(data: Data, eps: float, fractions: tuple[float, ...]) -> tuple[bool, list[float]]:
    """Whether the default's tau is a priori, and its exact expected error / oracle per prior signal scale.

    The default's tau: the level's norm quantile with the split's remaining epsilon, or the a-priori bound with the
    whole epsilon (no draws).
    """
    n = data.curves.shape[0]
    (choice,) = auto_public_choices(data.grid, data.kernel, n=n, epsilon=eps, tau_auto=True)
    tau, rest = ((float(data.fixed_tau or 1.0), eps) if choice.a_priori else
                 (float(np.quantile(record_norms(data.curves, data.grid.weights), choice.alpha)), eps - choice.epsilon))
    oracle = math.sqrt(oracle_choice(data, eps)[2])
    ratios = []
    for s in fractions:
        plan = plan_mean_release(data.grid, data.kernel, n=n, tau=tau, epsilon=rest, signal_fraction=s, secure=False)
        ratios.append(expected_error(data, rest, tau, plan.eta, plan.psi) / oracle)
    return choice.a_priori, ratios


def signal_rows(fractions: tuple[float, ...], ns: tuple[int, ...], epsilons: tuple[float, ...],
                seed: int) -> tuple[list[list[str]], list[list[str]]]:
    """Exact expected error / oracle at the default's tau level and split, per prior signal scale (no draws)."""
    sets = [growth(), electricity()] + [family(name, n, seed) for name in FAMILIES for n in ns]
    ratios: dict[float, list[float]] = {s: [] for s in fractions}
    out = []
    for data in sets:
        cells = []
        for eps in epsilons:
            _, cell = signal_cell(data, eps, fractions)
            for s, ratio in zip(fractions, cell, strict=True):
                ratios[s].append(ratio)
            cells.append(" / ".join(f"{r:.2f}" for r in cell))
        out.append([data.name, *cells])
    summary = []
    for s, v in ratios.items():
        r = np.asarray(v)
        fam = r[2 * len(epsilons):]  # the family cells (the first two rows are the shipped data sets)
        summary.append([f"{s:g}", f"{np.exp(np.log(r).mean()):.3f}", f"{np.exp(np.log(fam).mean()):.3f}",
                        f"{r.max():.2f}", str(int((r > 1.3).sum())), str(int((r > 1.5).sum()))])
    return out, summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--n", type=int, nargs="+", default=[60, 150, 600])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0, 5.0, 10.0])
    ap.add_argument("--seed", type=int, default=20261125)
    ap.add_argument("--a-priori", action="store_true", help="also the superseded a-priori fallback, where it differs")
    ap.add_argument("--decompose", nargs="+", metavar="FAMILY:N:EPS", help="where one cell's gap comes from; no table")
    ap.add_argument("--signal-fractions", type=float, nargs="+", metavar="S",
                    help="the exact error at the default's tau per prior signal scale S; no draws")
    args = ap.parse_args()
    if args.signal_fractions:
        out, summary = signal_rows(tuple(args.signal_fractions), tuple(args.n), tuple(args.epsilons), args.seed)
        print(f"### Exact expected error / oracle at the default's tau, prior signal scale s = "
              f"{' / '.join(f'{s:g}' for s in args.signal_fractions)}\n")
        print(table(["data", *(f"ε = {e:g}" for e in args.epsilons)], out))
        print()
        print(table(["s", "geometric mean (all)", "geometric mean (families)", "max", "cells > 1.3", "cells > 1.5"],
                    summary))
        return
    if args.decompose:
        for cell in args.decompose:
            decompose(cell, args.seed)
        return
    t0 = time.perf_counter()
    eps = tuple(args.epsilons)
    out, alt = rows(tuple(args.n), eps, args.draws, args.seed, args.a_priori)
    head = [f"ε = {e:g}" for e in eps]
    print(f"### Default / oracle RMSE of the mean, {args.draws} draws (seed {args.seed})\n")
    print(table(["family", *head, "max"], out))
    if args.a_priori:
        print("\n### The superseded a-priori τ (whole ε) / oracle, where the default buys τ with half of ε\n")
        print(table(["family", *head], alt))
    print(f"\n({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
