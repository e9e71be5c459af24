"""Time one cell of the FPCA Table 1 experiment: ``sample_matrix_bingham`` for 100 chains x 20,000 sweeps.

Uses the setup of ``experiments/fpca_table1.py`` (paper preprocessing, Gaussian basis, m = 5).
Run from the repository root:

    .venv/bin/python benchmarks/bingham/time_table1_cell.py K EPSILON [--no-numba]

``--no-numba`` makes ``import numba`` fail, so fdpcore runs its NumPy fallback (for many chains:
the path vectorised over chains).
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
if "--no-numba" in sys.argv:
    sys.modules["numba"] = None  # type: ignore[assignment]
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "experiments"))

import time  # noqa: E402

import fpca_table1  # noqa: E402
import numpy as np  # noqa: E402

from fdpcore.noise import _bingham_kernels  # noqa: E402
from fdpcore.noise.bingham import sample_matrix_bingham  # noqa: E402
from fdpcore.summaries.fpca import (  # noqa: E402
    fpca_basis,
    fpca_bingham_parameter,
    fpca_coefficients,
    gaussian_length_scale,
    variance_ratio,
)


def main() -> None:
    """Print the seconds and the mean variance ratio of one cell."""
    k, eps = int(sys.argv[1]), float(sys.argv[2])
    x, grid = fpca_table1.growth_curves("paper")
    basis = fpca_basis(grid, {"name": "gaussian", "length_scale": gaussian_length_scale(grid, 5, 0.99)}, 5)
    coef = fpca_coefficients(x, basis)
    a = fpca_bingham_parameter(coef.T @ coef, basis.sigma, epsilon=eps, tau=1.0)
    rng = np.random.default_rng(20190609)
    sample_matrix_bingham(a, k, rng, n_sweeps=2, n_chains=2)  # warm-up (loads the compiled kernel)
    start = time.perf_counter()
    v = sample_matrix_bingham(a, k, rng, n_sweeps=20_000, n_chains=100)
    seconds = time.perf_counter() - start
    print(f"k={k} eps={eps} numba={_bingham_kernels.NUMBA}: {seconds:.2f} s, "
          f"VR {float(np.mean(variance_ratio(coef, v))):.3f}")


if __name__ == "__main__":
    main()
