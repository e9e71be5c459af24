"""100 ICLP draws vs 100 GP draws on K grid points, eigenbasis uncached vs cached (run on demand).

    .venv/bin/python benchmarks/draws.py [--sizes 100 200 500] [--draws 100] [--repeats 3]

Reproduces the shape of [ICLP] Table 1 (MATH.md §13.5: 0.57 / 2.78 / 29.98 s for 100 ICLP draws at
K = 100 / 200 / 500 on the authors' machine, which appears to include a decomposition per draw).
Here both mechanisms share the same weighted eigenbasis (48 -> K midpoints, Matérn 3/2 and
exponential kernels), and each timing is the median of ``--repeats`` runs:

* ``uncached``: empty disk cache and empty memory cache: the eigen-decomposition (and its disk
  write) is part of the time, then ``--draws`` draws;
* ``cached``: memory cache emptied, the basis is read from the disk cache (what a new process or a
  later release does), then the draws;
* ``secure``: OpenDP samplers (what ``fdp release`` uses), and ``numpy``: the simulation sampler.

A draw is ``(z + noise) R`` with ``R = diag(sqrt(lambda)) Phi^T`` (Laplace for ICLP, Gaussian for GP,
both on the whitened coordinates of the same basis), calibrated for Delta = 1, epsilon = 1
(delta = 1e-5 for GP). No data is involved.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: experiments/ is importable

from experiments.timing_table1 import noise_draws as _draws  # noqa: E402  (shared with the results report)
from fdpcore.basis import eigen  # noqa: E402
from fdpcore.basis.grids import midpoint_grid  # noqa: E402
from fdpcore.io.eigencache import DiskEigenCache  # noqa: E402

KERNELS = {"matern32": {"name": "matern", "nu": 1.5, "rho": 0.1}, "exponential": {"name": "matern", "nu": 0.5, "rho": 0.1}}


def _time(kernel: dict[str, Any], k: int, kind: str, draws: int, secure: bool, cached: bool, store_dir: str) -> float:
    grid = midpoint_grid(k)
    store = DiskEigenCache(store_dir)
    previous = eigen.set_eigen_store(store)
    try:
        eigen.clear_memory_cache()
        if cached:  # make sure the entry is on disk, then start from an empty memory cache
            eigen.weighted_eigenbasis(kernel, grid)
            eigen.clear_memory_cache()
        else:
            for f in store.directory.glob("*.npz"):
                f.unlink()
        rng = np.random.default_rng(0)
        t0 = time.perf_counter()
        basis = eigen.weighted_eigenbasis(kernel, grid)
        _draws(kind, basis, draws, secure, rng)
        return time.perf_counter() - t0
    finally:
        eigen.set_eigen_store(previous)
        eigen.clear_memory_cache()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[100, 200, 500])
    ap.add_argument("--draws", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--kernels", nargs="*", default=list(KERNELS))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        for name in a.kernels:
            for k in a.sizes:
                row: dict[str, Any] = {"kernel": name, "K": k}
                for secure in (True, False):
                    for cached in (False, True):
                        for kind in ("iclp", "gp"):
                            ts = [_time(KERNELS[name], k, kind, a.draws, secure, cached, d) for _ in range(a.repeats)]
                            key = f"{kind}_{'secure' if secure else 'numpy'}_{'cached' if cached else 'uncached'}_s"
                            row[key] = round(statistics.median(ts), 4)
                    tag = "secure" if secure else "numpy"
                    row[f"ratio_iclp_over_gp_{tag}_cached"] = round(row[f"iclp_{tag}_cached_s"] / row[f"gp_{tag}_cached_s"], 2)
                row["load"] = [round(x, 1) for x in os.getloadavg()]
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
