"""FPCA's stated accuracy against the mechanism (accuracy.fpca.energy_shortfall@1, issue 16).

``fdp plan`` states the expected captured-energy shortfall per record of the released components against the best
subspace of the basis as ``k (m - k) tau^2 / (n epsilon_step)`` (the Laplace approximation at the mode, the base
measure left out). For each data set (the shipped growth and electricity curves centred by their own mean — a
simulation only — and three families of ``benchmarks/families.py``), tau at the median or the largest record norm,
``m`` in ``--m``, ``k`` in 1..3 and epsilon in ``--epsilons``, this prints the mean realised shortfall over
``--draws`` exact releases (``release_fpca``, NumPy draws) divided by the figure. ``--prior paper`` uses the paper's
base measure ``c = epsilon/2`` (its bias is not in the figure); the default ``0`` leaves it out, as the figure does.

    .venv/bin/python benchmarks/fpca_shortfall.py            # c = 0: about 1 where n epsilon resolves the spectrum
    .venv/bin/python benchmarks/fpca_shortfall.py --prior paper
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import families  # noqa: E402  (sibling scripts, not a package)
from utility import electricity, growth  # noqa: E402

from fdpcore.data.preprocess import clip_l2  # noqa: E402
from fdpcore.noise.quantiles import record_norms  # noqa: E402
from fdpcore.summaries.fpca import (  # noqa: E402
    fpca_basis,
    fpca_coefficients,
    gaussian_length_scale,
    plan_fpca_release,
    release_fpca,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--m", type=int, nargs="+", default=[5, 12])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.25, 1.0, 4.0, 16.0, 64.0])
    ap.add_argument("--prior", choices=["0", "paper"], default="0")
    ap.add_argument("--seed", type=int, default=2)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    prior = 0.0 if args.prior == "0" else None
    datas = [growth(), electricity(), families.family("heavy", 150, 1), families.family("centred", 600, 1),
             families.family("tight", 60, 1)]
    worst = 0.0
    for d in datas:
        x = d.curves - d.curves.mean(axis=0)
        norms = record_norms(x, d.grid.weights)
        n = x.shape[0]
        for level in (0.5, 1.0):
            tau = float(np.quantile(norms, level))
            for m in args.m:
                basis = fpca_basis(d.grid, {"name": "gaussian", "length_scale": gaussian_length_scale(d.grid, m)}, m)
                coef = fpca_coefficients(clip_l2(x, d.grid.weights, tau)[0], basis)
                s = coef.T @ coef / n
                spectrum = np.sort(np.linalg.eigvalsh(s))[::-1]
                for k in (1, 2, 3):
                    best = float(spectrum[:k].sum())
                    ratios = []
                    for eps in args.epsilons:
                        frames = [release_fpca(x, basis, n_components=k, epsilon=eps, tau=tau, rng=rng,
                                               prior_strength=prior).frame for _ in range(args.draws)]
                        realised = best - float(np.mean([np.trace(v.T @ s @ v) for v in frames]))
                        plan = plan_fpca_release(basis, n_components=k, epsilon=eps, tau=tau, prior_strength=prior)
                        ratios.append(realised / plan.expected_energy_shortfall(n))
                    worst = max(worst, *ratios)
                    print(f"{d.name[:16]:16s} tau q{level:g} m={m:2d} k={k}: realised / stated "
                          + " ".join(f"{r:.2f}" for r in ratios), flush=True)
    print(f"largest ratio {worst:.2f} (epsilon {', '.join(f'{e:g}' for e in args.epsilons)})")


if __name__ == "__main__":
    main()
