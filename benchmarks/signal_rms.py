"""The mean's size stated a priori (``tuning.signal_rms``) on shipped, held-out and synthetic curves.

Whole default releases (``tuning.risk.signal_stated@1``) with nothing stated, with the true size stated and τ's search
range left at its default, and with the true size stated as fdp uses it (the range's lower end raised to the mean's
norm).

The true size (the mean's RMS distance from ``value_offset``, from the data) is the best statement a user could make:
this measures what the rule can buy, not what a user's a-priori figure buys (new-user trial X measured that). Error
/ oracle as in ``benchmarks/utility.py`` (the non-private oracle: τ = the largest norm, the best (η, ψ) of a grid).
Needs the held-out data packages (``benchmarks/heldout.py``'s docstring); Clemson (365 points) is left out for time.

    .venv/bin/python benchmarks/signal_rms.py --draws 100      # about 10 min
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from families import FAMILIES, family  # noqa: E402  (sibling scripts, not a package)
from heldout import A_PRIORI, panel  # noqa: E402
from utility import Data, _sq_err, electricity, growth, oracle_choice, table  # noqa: E402

from fdpcore.noise.quantiles import default_tau_range  # noqa: E402
from fdpcore.summaries.mean import release_mean  # noqa: E402

VARIANTS = ("nothing stated", "true size, default range", "true size (fdp)")


def cell(data: Data, eps: float, draws: int, rng: np.random.Generator) -> list[float]:
    """Error / oracle of each variant at one epsilon."""
    x, grid = data.curves, data.grid
    xbar = x.mean(axis=0)
    length = grid.domain_range[1] - grid.domain_range[0]
    rms = float(grid.norm(xbar[None, :])[0]) / math.sqrt(length)
    oracle = oracle_choice(data, eps)[2]
    settings = [({}, None), ({"signal_rms": rms}, default_tau_range(length)), ({"signal_rms": rms}, None)]
    out = []
    for kw, tau_range in settings:
        sq = [_sq_err(release_mean(x, grid, epsilon=eps, tau="auto", tau_range=tau_range, kernel=data.kernel,
                                   secure=False, rng=rng, **kw).values, xbar, grid)[0] for _ in range(draws)]
        out.append(math.sqrt(float(np.mean(sq)) / oracle))
    return out


def main() -> None:
    """Print the table and the geometric means."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=100)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0, 5.0])
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    sets = [growth(), electricity()] + [panel(k) for k in A_PRIORI if k != "clemson"]
    sets += [family(name, n, 20261125) for name in FAMILIES for n in (60, 150)]
    rows, ratios = [], []
    for data in sets:
        cells = [cell(data, eps, args.draws, rng) for eps in args.epsilons]
        ratios += cells
        rows.append([data.name, *(" / ".join(f"{r:.2f}" for r in c) for c in cells)])
    print(f"### Error / oracle: {' / '.join(VARIANTS)} ({args.draws} whole releases per cell)\n")
    print(table(["data", *(f"ε = {e:g}" for e in args.epsilons)], rows))
    v = np.asarray(ratios)
    print()
    print(table(["variant", "geometric mean", "cells > 1.3", "better than nothing stated by > 5 %",
                 "worse than nothing stated by > 5 %"],
                [[name, f"{np.exp(np.log(v[:, i]).mean()):.3f}", str(int((v[:, i] > 1.3).sum())),
                  str(int((v[:, i] < v[:, 0] / 1.05).sum())), str(int((v[:, i] > v[:, 0] * 1.05).sum()))]
                 for i, name in enumerate(VARIANTS)]))


if __name__ == "__main__":
    main()
