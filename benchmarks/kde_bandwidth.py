"""The KDE bandwidth rules against a known density (the paper's n_rule, tuning.kde.normal_reference@1 and bandwidth: auto).

For 1-D densities on [0, 1] (normal sd 0.06 and 0.15, a two-normal mixture, Beta(1.5, 1.5)) and a 2-D two-normal
mixture, n in {200, 2000} (2-D: {500, 2000}) and epsilon in {0.5, 1, 5} (2-D: {1, 5}), it prints the mean L2
distance between ``release_kde`` (ICLP-QR; NumPy draws, ``secure=False``: simulation only) and the true density,
``--draws`` releases per cell, for each rule. ``auto`` (tuning.kde.bandwidth_auto@1) pays its DP quartiles out of
the same epsilon (OpenDP's quantile; the release noise is NumPy's). A last table has units of 20 rows each, drawn
from the density (the KDE weighs each unit's rows 1/m, so the density is the same; ``auto`` takes the quartiles of
the units' mean points, which are far less spread than the rows). Run on demand:

    .venv/bin/python benchmarks/kde_bandwidth.py
    .venv/bin/python benchmarks/kde_bandwidth.py --rows-per-unit-only      # the last table alone (2 s)
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy import stats

from fdpcore.basis.grids import midpoint_grid
from fdpcore.summaries.kde import release_kde

ONE_D = {
    "normal sd 0.06": (lambda r, n: r.normal(0.5, 0.06, n), lambda x: stats.norm.pdf(x, 0.5, 0.06)),
    "normal sd 0.15": (lambda r, n: r.normal(0.45, 0.15, n), lambda x: stats.norm.pdf(x, 0.45, 0.15)),
    "mixture": (lambda r, n: np.where(r.random(n) < 0.5, r.normal(0.3, 0.05, n), r.normal(0.7, 0.08, n)),
                lambda x: 0.5 * stats.norm.pdf(x, 0.3, 0.05) + 0.5 * stats.norm.pdf(x, 0.7, 0.08)),
    "beta(1.5, 1.5)": (lambda r, n: r.beta(1.5, 1.5, n), lambda x: stats.beta.pdf(x, 1.5, 1.5)),
}


#: Rows per unit in the last table (``bandwidth: auto`` averages them into the unit's mean point).
ROWS_PER_UNIT = 20


def _error(values: np.ndarray, truth: np.ndarray, weights: np.ndarray) -> float:
    return math.sqrt(float(np.sum((values - truth) ** 2 * weights)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=10)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--rows-per-unit-only", action="store_true", help="only the last table (units of many rows)")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.rows_per_unit_only:
        rows_per_unit_table(rng, args.draws)
        return
    grid = midpoint_grid(100)
    wins = auto_wins = cells = 0
    rules = ("n_rule", "normal_reference", "auto")
    print("1-D, ICLP-QR eta 1.25, 100 midpoints: L2 error, n_rule / normal_reference / auto")
    for name, (draw, pdf) in ONE_D.items():
        truth = pdf(grid.grid_points)
        truth = truth / np.sum(truth * grid.weights)
        for n in (200, 2000):
            row = []
            for eps in (0.5, 1.0, 5.0):
                err = {}
                for rule in rules:
                    err[rule] = float(np.mean([_error(release_kde(np.clip(draw(rng, n), 0, 1)[:, None], axes=grid,
                                                                  epsilon=eps, eta=1.25, bandwidth=rule, secure=False,
                                                                  rng=rng)[0][0], truth, grid.weights)
                                               for _ in range(args.draws)]))
                wins += err["normal_reference"] < err["n_rule"]
                auto_wins += err["auto"] < err["normal_reference"]
                cells += 1
                row.append(f"eps {eps:g}: {err['n_rule']:.3f} / {err['normal_reference']:.3f} / {err['auto']:.3f}")
            print(f"  {name:15s} n={n:4d}  " + " | ".join(row), flush=True)
    ax = midpoint_grid(30)
    x1, x2 = np.meshgrid(ax.grid_points, ax.grid_points, indexing="ij")
    truth2 = (0.5 * stats.norm.pdf(x1, 0.35, 0.08) * stats.norm.pdf(x2, 0.4, 0.1)
              + 0.5 * stats.norm.pdf(x1, 0.65, 0.1) * stats.norm.pdf(x2, 0.6, 0.08)).ravel()
    w2 = np.outer(ax.weights, ax.weights).ravel()
    truth2 = truth2 / np.sum(truth2 * w2)

    def points(n: int) -> np.ndarray:
        first = rng.random(n) < 0.5
        return np.clip(np.where(first[:, None], rng.normal([0.35, 0.4], [0.08, 0.1], (n, 2)),
                                rng.normal([0.65, 0.6], [0.1, 0.08], (n, 2))), 0.0, 1.0)

    print("2-D mixture, ICLP-QR eta 1.2, 30 x 30: L2 error, n_rule / normal_reference / auto")
    for kernel in ("exponential", "gaussian"):
        for n in (500, 2000):
            row = []
            for eps in (1.0, 5.0):
                err = {rule: float(np.mean([_error(release_kde(points(n), axes=(ax, ax), epsilon=eps, eta=1.2,
                                                               kernel=kernel, bandwidth=rule, secure=False,
                                                               rng=rng)[0][0], truth2, w2)
                                            for _ in range(max(2, args.draws // 2))]))
                       for rule in rules}
                wins += err["normal_reference"] < err["n_rule"]
                auto_wins += err["auto"] < err["normal_reference"]
                cells += 1
                row.append(f"eps {eps:g}: {err['n_rule']:.3f} / {err['normal_reference']:.3f} / {err['auto']:.3f}")
            print(f"  {kernel:11s} n={n:4d}  " + " | ".join(row), flush=True)
    print(f"normal_reference better than n_rule in {wins} of {cells} cells; auto better than normal_reference in "
          f"{auto_wins} of {cells}")
    rows_per_unit_table(rng, args.draws)


def rows_per_unit_table(rng: np.random.Generator, draws: int) -> None:
    """Units of :data:`ROWS_PER_UNIT` rows each, drawn from the density: normal_reference / auto."""
    grid = midpoint_grid(100)
    print(f"1-D, {ROWS_PER_UNIT} rows per unit drawn from the density (the KDE weighs each unit's rows 1/m): L2 error, "
          "normal_reference / auto")
    for name in ("normal sd 0.06", "mixture"):
        draw, pdf = ONE_D[name]
        truth = pdf(grid.grid_points)
        truth = truth / np.sum(truth * grid.weights)
        for n in (200, 2000):
            codes = np.repeat(np.arange(n), ROWS_PER_UNIT)
            row = []
            for eps in (1.0, 5.0):
                err = {rule: float(np.mean([_error(release_kde(np.clip(draw(rng, n * ROWS_PER_UNIT), 0, 1)[:, None],
                                                               codes, axes=grid, epsilon=eps, eta=1.25, bandwidth=rule,
                                                               secure=False, rng=rng)[0][0], truth, grid.weights)
                                            for _ in range(draws)]))
                       for rule in ("normal_reference", "auto")}
                row.append(f"eps {eps:g}: {err['normal_reference']:.3f} / {err['auto']:.3f}")
            print(f"  {name:15s} n={n:4d}  " + " | ".join(row), flush=True)


if __name__ == "__main__":
    main()
