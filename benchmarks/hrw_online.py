"""Timing of online [HRW] releases (MATH.md §11): OU bridge vs general Cholesky conditioning.

Run on demand (not part of the test suite):

    .venv/bin/python benchmarks/hrw_online.py [--queries 10000] [--general-queries 2000] [--secure]

The OU bridge costs O(log i) per query (bisection + two neighbours); the general path costs
O(i^2) per query (one triangular solve) and O(i^2) memory, so it is timed on fewer queries by
default and its per-query time is reported by block to show the growth. Query points are
uniform on [0, 1]; the released function is 0 (timing only; no data involved).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from fdpcore.summaries.hrw import OnlineGPReleaser, OUBridgeReleaser


def _run(releaser: OnlineGPReleaser | OUBridgeReleaser, xs: np.ndarray, blocks: int = 4) -> list[float]:
    """Mean seconds per query in each of ``blocks`` consecutive blocks of queries."""
    out = []
    for chunk in np.array_split(xs, blocks):
        t0 = time.perf_counter()
        for x in chunk:
            releaser.release(float(x), 0.0)
        out.append((time.perf_counter() - t0) / max(len(chunk), 1))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=10_000, help="OU-bridge queries (default 10000)")
    parser.add_argument("--general-queries", type=int, default=2_000, help="general-kernel queries (default 2000)")
    parser.add_argument("--secure", action="store_true", help="draw with OpenDP instead of NumPy")
    parser.add_argument("--rho", type=float, default=0.1)
    args = parser.parse_args()

    rng = np.random.default_rng()
    kernel = {"name": "exponential", "rho": args.rho}
    xs = rng.uniform(0.0, 1.0, args.queries)
    ou = OUBridgeReleaser(kernel, 1.0, secure=args.secure, rng=rng)
    t0 = time.perf_counter()
    ou_blocks = _run(ou, xs)
    ou_total = time.perf_counter() - t0
    general = OnlineGPReleaser(kernel, 1.0, secure=args.secure, rng=rng)
    t0 = time.perf_counter()
    gen_blocks = _run(general, xs[: args.general_queries])
    gen_total = time.perf_counter() - t0

    mode = "OpenDP" if args.secure else "NumPy"
    print(f"sampler: {mode}; exponential kernel rho={args.rho}")
    print(f"OU bridge : {args.queries:6d} queries in {ou_total:8.3f} s; us/query by quarter: "
          + ", ".join(f"{1e6 * b:.1f}" for b in ou_blocks))
    print(f"general   : {args.general_queries:6d} queries in {gen_total:8.3f} s; us/query by quarter: "
          + ", ".join(f"{1e6 * b:.1f}" for b in gen_blocks))


if __name__ == "__main__":
    main()
