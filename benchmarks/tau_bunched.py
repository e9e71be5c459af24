"""``tau: auto`` on curves whose norms bunch together (tuning.tau.dp_norm_quantile@2 against @1).

A new user's ChickWeight and Nottingham-temperature releases drew tau far below every norm in 60-75 % of draws:
their norms lay inside one gap of the old candidate grid, where the DP quantile's rank score is flat over every
candidate below the data. This script rebuilds that situation with synthetic curves, ``level * (1 + 0.5 sin 2 pi t)``
times a log-normal amplitude of sd ``sd`` (norms within about +-2 sd) plus small noise, on 24 midpoints of [0, 1]
(Matern 3/2, rho 0.2), and prints for each (n, epsilon, sd) cell the share of draws with tau below half the median
norm and the default release's RMSE over the non-private oracle's (``utility.oracle_choice``: tau = the largest
norm, best (eta, psi)), ``--draws`` releases per cell (``secure=False``: simulation only; the quantile is OpenDP's).
``--superseded`` runs the same cells with the superseded draw (@1: 10 candidates per decade, no dither).

    .venv/bin/python benchmarks/tau_bunched.py            # @2, the default (about 2 minutes on 2 cores)
    .venv/bin/python benchmarks/tau_bunched.py --superseded
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from utility import Data, oracle_choice  # noqa: E402  (a sibling script, not a package)

import fdpcore.noise.quantiles as quantiles  # noqa: E402
from fdpcore.basis.grids import midpoint_grid  # noqa: E402
from fdpcore.noise.quantiles import record_norms  # noqa: E402
from fdpcore.summaries.mean import release_mean  # noqa: E402

KERNEL: dict[str, object] = {"name": "matern", "nu": 1.5, "rho": 0.2}
#: (level, n, epsilon, sd of the log amplitude): the proof note's cells.
CELLS = ((0.35, 20, 8.0, 0.04), (0.7, 50, 4.0, 0.04), (0.7, 50, 1.0, 0.04), (0.55, 93, 2.0, 0.04),
         (0.33, 150, 2.0, 0.04), (0.36, 60, 2.0, 0.001), (0.5, 150, 1.0, 0.002))


def superseded() -> None:
    """Install tuning.tau.dp_norm_quantile@1's draw: 10 candidates per decade, the norms read as they are."""
    quantiles.tau_candidates.__defaults__ = (10,)
    quantiles.dither_norms = lambda norms, candidates: np.asarray(norms, dtype=np.float64)  # type: ignore[assignment]


def main() -> None:
    """Print one line per cell."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--superseded", action="store_true", help="tuning.tau.dp_norm_quantile@1 instead of @2")
    args = ap.parse_args()
    if args.superseded:
        superseded()
    grid = midpoint_grid(24)
    shape = 1 + 0.5 * np.sin(2 * np.pi * grid.grid_points)
    print("| n | ε | norms (min-max) | P(τ < median/2) | RMSE / oracle |\n|---|---|---|---|---|")
    for level, n, eps, sd in CELLS:
        rng = np.random.default_rng([args.seed, n, int(eps * 10), int(sd * 1000)])
        x = level * shape[None, :] / 1.06 * np.exp(rng.normal(0, sd, (n, 1))) + rng.normal(0, sd / 4, (n, grid.size))
        norms = record_norms(x, grid.weights)
        oracle = math.sqrt(oracle_choice(Data("b", x, grid, KERNEL, 0.0, 1.0, None, (0, 1), x), eps)[2])
        taus, sq = [], []
        for _ in range(args.draws):
            r = release_mean(x, grid, epsilon=eps, tau="auto", kernel=KERNEL, secure=False, rng=rng)
            taus.append(r.plan.tau)
            sq.append(float(grid.norm(r.values - x.mean(axis=0)[None, :])[0] ** 2))
        low = float(np.mean(np.asarray(taus) < np.median(norms) / 2))
        print(f"| {n} | {eps:g} | {norms.min():.3f}-{norms.max():.3f} | {low:.0%} | {math.sqrt(np.mean(sq)) / oracle:.2f} |",
              flush=True)


if __name__ == "__main__":
    main()
