"""FoSR's T2 smoothing chosen from the released T1~ (``tuning.fosr.t2_given_t1@1``) against the plan's public pair.

For the synthetic curve families of ``benchmarks/families.py`` (n = 60, 150, 600) and two designs fixed before any
measurement — ``pm1``: an intercept and one +-1 covariate (every other record; effect a fifth of the curve, as in
``benchmarks/tau_split.py --fosr``), well conditioned; ``onehot3``: an intercept and a 3-level factor coded by two
dummies (levels in turn; effects +0.2 and -0.1 of the curve), whose design's smallest eigenvalue is about 0.1 — and
each epsilon, it prints the relative RMSE of the coefficient curves (``--draws`` default releases, ``tau_y: auto``,
B = sqrt 2 for the dummies, 1 for +-1) against the non-private OLS, with the default rule (``risk_prior``, T2's pair
chosen after T1) / with the pair the plan chose from public inputs kept for every draw (the rule before it).
Releases use the facade's NumPy sampler (``secure=False``: simulation only).

    .venv/bin/python benchmarks/fosr_design.py --draws 40
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from families import FAMILIES, family  # noqa: E402  (a sibling script, not a package)
from utility import table  # noqa: E402

from fdpcore.summaries.fosr import plan_fosr_release, release_fosr  # noqa: E402


def design(name: str, curves: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(covariates, responses, bound) of design ``name`` (module docstring) on a family's curves."""
    n = curves.shape[0]
    if name == "pm1":
        s = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)[:, None]
        return s, np.clip(curves * (1.0 + 0.2 * s), -1.0, 1.0), 1.0
    level = np.arange(n) % 3
    s = np.column_stack([level == 1, level == 2]).astype(float)
    return s, np.clip(curves * (1.0 + 0.2 * s[:, :1] - 0.1 * s[:, 1:]), -1.0, 1.0), math.sqrt(2.0)


def relative_rmse(y: np.ndarray, s: np.ndarray, bound: float, data, eps: float, draws: int,  # noqa: ANN001
                  rng: np.random.Generator, public_pair: bool) -> float:
    """Relative RMSE of ``draws`` releases against the non-private OLS of ``y`` on ``(1, s)``."""
    x = np.hstack([np.ones((y.shape[0], 1)), s])
    beta = np.linalg.solve(x.T @ x, x.T @ y)
    w = data.grid.weights
    kw: dict[str, float] = {}
    if public_pair:
        p0 = plan_fosr_release(data.grid, data.kernel, n=y.shape[0], n_covariates=s.shape[1], intercept=True,
                               bound=bound, tau_y=1.0, epsilon=eps, secure=False)
        kw = {"eta": p0.eta, "psi": p0.psi, "gamma": p0.gamma}
    err = [float(np.sum((release_fosr(y, s, data.grid, epsilon=eps, tau_y="auto", bound=bound, kernel=data.kernel,
                                      secure=False, rng=rng, **kw).coefficients[0] - beta) ** 2 * w))
           for _ in range(draws)]
    return math.sqrt(float(np.mean(err)) / float(np.sum(beta**2 * w)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=40)
    ap.add_argument("--n", type=int, nargs="+", default=[60, 150, 600])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0, 5.0, 10.0])
    ap.add_argument("--seed", type=int, default=20261125)
    args = ap.parse_args()
    t0 = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    rows, ratios = [], []
    for name in FAMILIES:
        for n in args.n:
            data = family(name, n, args.seed)
            for dname in ("pm1", "onehot3"):
                s, y, bound = design(dname, data.curves)
                cells = []
                for eps in args.epsilons:
                    new = relative_rmse(y, s, bound, data, eps, args.draws, rng, public_pair=False)
                    old = relative_rmse(y, s, bound, data, eps, args.draws, rng, public_pair=True)
                    ratios.append(new / old)
                    cells.append(f"{new:.3f} / {old:.3f}")
                rows.append([data.name, dname, *cells])
                print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    r = np.array(ratios)
    print(f"### FoSR relative RMSE: T2's pair chosen after T1 / the plan's public pair, {args.draws} draws\n")
    print(table(["family", "design", *(f"ε = {e:g}" for e in args.epsilons)], rows))
    print(f"\nratio chosen / public: geometric mean {np.exp(np.mean(np.log(r))):.3f}, min {r.min():.3f}, "
          f"max {r.max():.3f}, above 1.05 in {int((r > 1.05).sum())} of {r.size} cells")
    print(f"\n({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
