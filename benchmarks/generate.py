"""Generate a long-format Parquet dataset of N units x ~50 irregular observations (run on demand).

    .venv/bin/python benchmarks/generate.py --units 1000000 --out /tmp/fdp-bench/n1000000 [--files 8]

Each unit is a smooth random curve on [0, 1] (three random Fourier terms plus a unit level),
observed at 40-60 uniform random times plus both ends (so every unit can be aligned), with
Gaussian measurement noise. Rows are sorted by unit and, inside a unit, by time — the order the
streaming engine needs (units are contiguous within a file; files hold disjoint unit ranges).
Columns: ``unit`` (int64), ``t`` (float64, in [0, 1]), ``y`` (float64). Row groups of 1,000,000 rows.
Deterministic for a given ``--seed``. Synthetic data only: nothing here is private.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROW_GROUP = 1_000_000


def generate(units: int, out: Path, files: int = 8, seed: int = 0, block: int = 100_000) -> dict[str, float]:
    """Write ``files`` Parquet files under ``out``; returns a summary (rows, seconds, bytes)."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.parquet"):
        old.unlink()
    edges = np.linspace(0, units, files + 1).astype(np.int64)
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    rows = 0
    for f in range(files):
        writer = None
        for lo in range(int(edges[f]), int(edges[f + 1]), block):
            hi = min(lo + block, int(edges[f + 1]))
            m = hi - lo
            counts = rng.integers(40, 61, size=m)  # interior observations; + 2 ends
            total = int(counts.sum()) + 2 * m
            unit = np.repeat(np.arange(lo, hi, dtype=np.int64), counts + 2)
            t = rng.uniform(0.0, 1.0, size=total)
            starts = np.r_[0, np.cumsum(counts + 2)[:-1]]
            t[starts] = 0.0
            t[starts + counts + 1] = 1.0
            order = np.lexsort((t, unit))
            t = t[order]
            coef = rng.normal(size=(m, 4)) * np.array([0.5, 0.3, 0.2, 0.1])
            cu = coef[unit - lo]
            y = (cu[:, 0] + cu[:, 1] * np.sin(2 * np.pi * t) + cu[:, 2] * np.cos(2 * np.pi * t)
                 + cu[:, 3] * np.sin(6 * np.pi * t) + rng.normal(scale=0.05, size=total))
            table = pa.table({"unit": unit, "t": t, "y": y})
            if writer is None:
                writer = pq.ParquetWriter(out / f"part-{f:04d}.parquet", table.schema)
            writer.write_table(table, row_group_size=ROW_GROUP)
            rows += total
        if writer is not None:
            writer.close()
    size = sum(p.stat().st_size for p in out.glob("*.parquet"))
    return {"units": units, "rows": rows, "files": files, "seconds": time.perf_counter() - t0, "bytes": size}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--units", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    print(json.dumps(generate(a.units, a.out, a.files, a.seed)))


if __name__ == "__main__":
    main()
