"""Time per 1,000 Gibbs sweeps of fdpcore's matrix Bingham sampler (MATH.md §10.4).

Run from the repository root:

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bingham/bench_gibbs.py [--sweeps 1000] [--repeats 3] [--no-numba]

The parameter ``A`` is the same deterministic matrix the R comparison script builds
(``rstiefel_gibbs.R``): ``A_ij = 2 cos(0.7 i j) + [i = j] (20 / i - 0.2 i)``, i, j = 1..m.
For k = 1 a "sweep" is one exact vector-Bingham draw (fdp uses no chain for k = 1): the
``exact-acg`` row makes 1,000 calls of one draw each (validation and eigenvalues every call,
as rstiefel's ``rbing.vector.gibbs`` computes ``eigen(A)`` every call), the ``exact-acg-batch``
row one call with ``size=1000`` (one setup, 1,000 independent draws).
Prints one CSV row per (m, k) and method (best wall-clock and best CPU seconds of --repeats); the
first line says whether the kernels are compiled.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # tiny LAPACK calls: worker threads only add latency
if "--no-numba" in sys.argv:  # time the pure-NumPy fallback: make `import numba` fail before fdpcore loads
    sys.modules["numba"] = None  # type: ignore[assignment]

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from fdpcore.noise import _bingham_kernels  # noqa: E402
from fdpcore.noise.bingham import BinghamChains, sample_vector_bingham  # noqa: E402

CASES = [(40, 1), (40, 3), (5, 3)]


def benchmark_matrix(m: int) -> np.ndarray:
    """The shared benchmark parameter A (m x m)."""
    i = np.arange(1, m + 1, dtype=np.float64)
    a = 2.0 * np.cos(0.7 * np.outer(i, i))
    a[np.diag_indices(m)] += 20.0 / i - 0.2 * i
    return a


def time_case(m: int, k: int, sweeps: int, method: str, rng: np.random.Generator) -> tuple[float, float]:
    """(wall, CPU) seconds for ``sweeps`` sweeps (k > 1) or exact draws (k = 1) on one chain."""
    a = benchmark_matrix(m)
    if k == 1:
        sample_vector_bingham(a, rng, size=2)  # warm-up (loads the compiled kernel)
        start, cpu = time.perf_counter(), time.process_time()
        if method == "acg-batch":
            sample_vector_bingham(a, rng, size=sweeps)
        else:
            for _ in range(sweeps):
                sample_vector_bingham(a, rng)
        return time.perf_counter() - start, time.process_time() - cpu
    chains = BinghamChains.start(a, k, rng, method=method)
    chains.run(5, rng)  # warm-up
    start, cpu = time.perf_counter(), time.process_time()
    chains.run(sweeps, rng)
    return time.perf_counter() - start, time.process_time() - cpu


def main() -> None:
    """Print the timings (best of --repeats)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sweeps", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--methods", default="acg,hoff")
    p.add_argument("--no-numba", action="store_true", help="run fdpcore's NumPy fallback instead of the kernels")
    args = p.parse_args()
    rng = np.random.default_rng(2024)
    print(f"# fdpcore Bingham kernels compiled by numba: {_bingham_kernels.NUMBA}")
    print("m,k,method,seconds_per_1000_sweeps,cpu_seconds_per_1000_sweeps")
    for m, k in CASES:
        for method in [*args.methods.split(","), "acg-batch"]:
            if (k == 1 and method == "hoff") or (k > 1 and method == "acg-batch"):
                continue
            times = [time_case(m, k, args.sweeps, method, rng) for _ in range(args.repeats)]
            wall, cpu = (min(t[i] for t in times) * 1000 / args.sweeps for i in (0, 1))
            print(f"{m},{k},{'exact-' + method if k == 1 else method},{wall:.4f},{cpu:.4f}")


if __name__ == "__main__":
    main()
