"""How many Gibbs sweeps the FPCA chains need: split R-hat over Haar-started chains (MATH.md §10.5).

Runs :func:`fdpcore.summaries.fpca.gibbs_diagnostic` on the Berkeley-growth matrices A of ``fpca_table1.py``
(both preprocessings, k = 2, 3, every epsilon) and on a synthetic data set of the same size
(93 curves, public scale; no real data), and reports the first checkpoint after which
R-hat stays below 1.01. This is a methodologist's check of the public burn-in; diagnostics on
private data are never published with a release.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python experiments/fpca_burnin.py [--sweeps 2000] [--chains 8]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fpca_table1 import EPSILONS, RESULTS, growth_curves  # noqa: E402

from fdpcore.summaries.fpca import (  # noqa: E402
    fpca_basis,
    fpca_bingham_parameter,
    fpca_coefficients,
    gaussian_length_scale,
    gibbs_diagnostic,
)


def main() -> None:
    """Print and write the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sweeps", type=int, default=2000)
    p.add_argument("--chains", type=int, default=8)
    args = p.parse_args()
    rng = np.random.default_rng(7)
    lines = ["# Burn-in check: first sweep count after which split R-hat < 1.01 stays (MATH.md §10.5)", "",
             f"{args.chains} Haar-started chains, {args.sweeps} sweeps, R-hat on the second half of each window "
             "(energy tr(V'AV) and every entry of VV').", "",
             "| data | k | " + " | ".join(f"ε={e:g}" for e in EPSILONS) + " |",
             "| --- | --- | " + " | ".join("---" for _ in EPSILONS) + " |"]
    x_syn = None
    for data in ("paper", "public", "synthetic"):
        if data == "synthetic":
            x, grid = growth_curves("public")
            # synthetic: Gaussian curves with a smooth covariance, same n and grid (no real data)
            t = grid.grid_points
            cov = 0.09 * np.exp(-((t[:, None] - t[None, :]) ** 2) / 0.08)
            x_syn = rng.multivariate_normal(np.zeros(t.size), cov, size=93)
            x = x_syn
        else:
            x, grid = growth_curves(data)
        basis = fpca_basis(grid, {"name": "gaussian", "length_scale": gaussian_length_scale(grid, 5, 0.99)}, 5)
        coef = fpca_coefficients(x, basis)
        for k in (2, 3):
            cells = []
            for eps in EPSILONS:
                a = fpca_bingham_parameter(coef.T @ coef, basis.sigma, epsilon=eps, tau=1.0)
                d = gibbs_diagnostic(a, k, rng, n_sweeps=args.sweeps, n_chains=args.chains)
                cells.append(str(d.converged_after) if d.converged_after is not None else f"> {args.sweeps}")
            lines.append(f"| {data} | {k} | " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "fpca_burnin.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
