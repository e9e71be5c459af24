"""``psi: auto`` for ridge ERM against fixed psi and the best psi on a grid (tuning.erm.psi.risk_prior@1, issue 16).

Two synthetic regressions, fixed before any measurement:

* ``smooth``: covariate uniform on [0, 1], ``f(x) = 0.5 sin(2 pi x) + 0.25 cos(3 pi x)``, Gaussian residuals of sd 0.3,
  ``label_bound`` 1 (a-priori range of the response);
* ``faithful-like``: eruption length bimodal on [1.5, 5.5] minutes (35 % near 2.0, 65 % near 4.3), waiting time
  ``33.5 + 10.7 x`` plus residuals of sd 6 minutes, ``label_offset`` 70 and ``label_bound`` 40 (the issue's config).
* ``smooth, bound 5``: ``smooth`` with a generous ``label_bound`` 5 (the function's L2 size is 0.27, the prior's 2.5):
  where the rule's prior is wrong by a factor 10.

For n in {100, 300, 1000} and epsilon in {0.5, 1, 5} it releases the kernel ridge function (``fdp init``'s defaults:
Matern 3/2, rho 0.2, eta 1.5, 50 midpoints, ICLP; NumPy draws, ``secure=False``: simulation only) on ``--reps``
fresh data sets per cell (``--mechanism gp``: Gaussian process noise, delta 1e-5), and prints the root mean square over the domain of (release - true regression function),
averaged over the data sets, in label units: ``psi: auto``, psi in {0.01, 0.1, 1}, and the oracle -- the best psi on
the grid 10^(k/4), k = -12 .. 4, chosen with the true function (not private; a lower bound for any public rule) --
with ``auto / oracle``. Run on demand:

    .venv/bin/python benchmarks/erm_psi.py --reps 50                   # 2-core VM: about 10 s
    .venv/bin/python benchmarks/erm_psi.py --reps 50 --mechanism gp
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

import numpy as np

from fdpcore.basis.grids import midpoint_grid
from fdpcore.summaries.erm import plan_erm_release, summarise_erm
from fdpcore.summaries.kde import draw_point_release

KERNEL = {"name": "matern", "nu": 1.5, "rho": 0.2}
GRID = midpoint_grid(50)
ORACLE_PSIS = tuple(10.0 ** (k / 4.0) for k in range(-12, 5))
FIXED = (0.01, 0.1, 1.0)


def _smooth_x(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.uniform(size=n)


def _faithful_x(rng: np.random.Generator, n: int) -> np.ndarray:
    short = rng.uniform(size=n) < 0.35
    return np.clip(np.where(short, rng.normal(2.0, 0.3, n), rng.normal(4.3, 0.4, n)), 1.5, 5.5)


#: name -> (domain, x sampler, regression function, residual sd, label_offset, label_bound)
SCENARIOS: dict[str, tuple[tuple[float, float], Callable[[np.random.Generator, int], np.ndarray],
                           Callable[[np.ndarray], np.ndarray], float, float, float]] = {
    "smooth": ((0.0, 1.0), _smooth_x, lambda x: 0.5 * np.sin(2 * np.pi * x) + 0.25 * np.cos(3 * np.pi * x), 0.3, 0.0, 1.0),
    "faithful-like": ((1.5, 5.5), _faithful_x, lambda x: 33.5 + 10.7 * x, 6.0, 70.0, 40.0),
    "smooth, bound 5": ((0.0, 1.0), _smooth_x, lambda x: 0.5 * np.sin(2 * np.pi * x) + 0.25 * np.cos(3 * np.pi * x), 0.3,
                        0.0, 5.0),
}


def _rmse(plan, data: list[tuple[np.ndarray, np.ndarray]], truth: np.ndarray, offset: float,  # type: ignore[no-untyped-def]
          rng: np.random.Generator) -> float:
    """Mean over the data sets of the RMS over the domain of (one private release - truth)."""
    errs = []
    for u, y in data:
        z = summarise_erm(u[:, None], y - offset, np.arange(u.shape[0]), plan)
        f = draw_point_release(plan, z, rng=rng)[0] + offset
        errs.append(math.sqrt(float(np.sum((f - truth) ** 2 * GRID.weights))))
    return float(np.mean(errs))


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=20261127)
    ap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS))
    ap.add_argument("--mechanism", choices=("iclp", "gp"), default="iclp", help="gp: Gaussian process noise, delta 1e-5")
    args = ap.parse_args()
    delta = 1e-5 if args.mechanism == "gp" else 0.0
    rng = np.random.default_rng(args.seed)
    print("| scenario | n | ε | auto ψ | auto | ψ = 0.01 | ψ = 0.1 | ψ = 1 | oracle (ψ) | auto / oracle |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in args.scenarios:
        (a, b), draw_x, f, sd, offset, bound = SCENARIOS[name]
        truth = f(a + (b - a) * GRID.grid_points)
        for n in (100, 300, 1000):
            for eps in (0.5, 1.0, 5.0):
                data = []
                for _ in range(args.reps):
                    x = draw_x(rng, n)
                    data.append(((x - a) / (b - a), f(x) + sd * rng.normal(size=n)))

                def plan(psi: float | str, n: int = n, eps: float = eps, bound: float = bound):  # type: ignore[no-untyped-def]
                    return plan_erm_release(GRID, KERNEL, n=n, epsilon=eps, loss="ridge", psi=psi, eta=1.5,
                                            label_bound=bound, mechanism=args.mechanism, delta=delta, secure=False)

                auto = plan("auto")
                err_auto = _rmse(auto, data, truth, offset, rng)
                grid = {psi: _rmse(plan(psi), data, truth, offset, rng) for psi in ORACLE_PSIS}
                best = min(grid, key=grid.__getitem__)
                fixed = [grid[min(ORACLE_PSIS, key=lambda p, v=v: abs(math.log(p / v)))] for v in FIXED]
                print(f"| {name} | {n} | {eps:g} | {auto.parameters['psi']:.3g} | {err_auto:.3g} | "
                      + " | ".join(f"{e:.3g}" for e in fixed)
                      + f" | {grid[best]:.3g} ({best:.3g}) | {err_auto / grid[best]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
