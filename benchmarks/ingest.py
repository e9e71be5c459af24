"""End-to-end ingest benchmark: a bare pyarrow+NumPy baseline vs fdp's streaming mean release (run on demand).

    .venv/bin/python benchmarks/generate.py --units 1000000 --out /tmp/fdp-bench/n1000000   # once per N
    .venv/bin/python benchmarks/ingest.py --data /tmp/fdp-bench --sizes 10000 100000 1000000 [--dask]

Every measurement runs in its own subprocess (``ingest.py one --mode ...``), which reports its wall
time, its peak RSS (``resource.getrusage(RUSAGE_SELF).ru_maxrss``) and, for fdp, the split of time by
stage. Both sides read the same files with the same chunk size and do the same arithmetic on the
same grid (48 midpoints on [0, 1]): public affine maps, linear interpolation of each unit onto the
grid, L2 clipping, the sum of clipped curves.

* ``baseline``: by hand — ``iter_batches``, rows taken in the file's order (the generator writes them
  sorted by (unit, time); the baseline trusts that and checks nothing — fdp verifies it), a vectorised
  ``searchsorted`` on a composite key, interpolation, clipping, a float64 ``sum`` (order-dependent,
  no checks, no duplicate handling, no counts). Until 2026-11-22 the baseline also lexsorted each
  chunk, which made it slower than fdp once fdp skipped sorting already-sorted keys; it no longer does.
* ``fdp``: ``fdpcore.io.streaming.stream_dataset`` (the ``local`` engine: order checks, carried
  units, ``align_long``, ``clip_l2``, exact lattice sums), then the plan from public inputs, the
  summary from the sums and one secure (OpenDP) draw — everything a release computes except
  Prefect, the ledger and the files.
* ``--dask``: the same per-file ingest function on a ``distributed.LocalCluster`` with 1 and 2
  worker processes (``client.map(ingest_file, files)``, what the ``dask`` engine's tasks run),
  timed from cluster start-up excluded.

The machine load (``os.getloadavg``) is printed with each run: the benchmark host may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

K = 48
TAU = 1.0
CHUNK = 1_000_000


def _grid() -> tuple[np.ndarray, np.ndarray]:
    g = (np.arange(K) + 0.5) / K
    return g, np.full(K, 1.0 / K)


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ------------------------------------------------------------------ baseline (by hand)


def _baseline_block(unit: np.ndarray, t: np.ndarray, y: np.ndarray, g: np.ndarray, w: np.ndarray) -> tuple[int, np.ndarray]:
    t = (t - 0.0) / (1.0 - 0.0)
    v = (y - 0.0) / 1.0
    start = np.flatnonzero(np.r_[True, unit[1:] != unit[:-1]])
    end = np.r_[start[1:], unit.shape[0]]
    code = np.repeat(np.arange(start.shape[0]), end - start)
    key = code * 2.0 + t
    q = (np.arange(start.shape[0])[:, None] * 2.0 + g[None, :])
    idx = np.searchsorted(key, q, side="right")
    left = np.clip(idx - 1, start[:, None], end[:, None] - 2)
    w1 = (g[None, :] - t[left]) / (t[left + 1] - t[left])
    x = v[left] * (1.0 - w1) + v[left + 1] * w1
    norms = np.sqrt((x * x) @ w)
    x *= np.minimum(1.0, TAU / np.maximum(norms, 1e-300))[:, None]
    return start.shape[0], x.sum(axis=0)


def run_baseline(files: list[Path]) -> dict[str, Any]:
    g, w = _grid()
    n, total = 0, np.zeros(K)
    for f in files:
        carry = None
        for b in pq.ParquetFile(f).iter_batches(batch_size=CHUNK, columns=["unit", "t", "y"]):
            unit, t, y = (b.column(i).to_numpy() for i in range(3))
            if carry is not None:
                unit, t, y = (np.concatenate([c, a]) for c, a in zip(carry, (unit, t, y), strict=True))
            cut = int(np.searchsorted(unit, unit[-1], side="left"))
            if cut:
                m, s = _baseline_block(unit[:cut], t[:cut], y[:cut], g, w)
                n, total = n + m, total + s
            carry = (unit[cut:], t[cut:], y[cut:])
        if carry is not None and carry[0].size:
            m, s = _baseline_block(*carry, g, w)
            n, total = n + m, total + s
    return {"n": n, "mean_head": (total / n)[:3].tolist()}


# ------------------------------------------------------------------ fdp


def run_fdp(files: list[Path]) -> dict[str, Any]:
    import fdpcore.io.streaming as streaming
    from fdpcore.basis.grids import midpoint_grid
    from fdpcore.data.accumulate import summarise_mean_sums
    from fdpcore.summaries.mean import draw_mean_release, plan_mean_release

    stages: dict[str, float] = {}

    def timed(name: str, fn: Any) -> Any:
        def inner(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                stages[name] = stages.get(name, 0.0) + time.perf_counter() - t0
        return inner

    for name in ("rescale_long", "align_long", "clip_l2", "accumulate_curves", "_check_sorted"):
        setattr(streaming, name, timed(name, getattr(streaming, name)))
    grid = midpoint_grid(K)
    spec = streaming.StreamSpec("unit", "t", "y", (0.0, 1.0), grid, TAU, chunk_rows=CHUNK)
    t0 = time.perf_counter()
    sums = streaming.combine_partials(streaming.ingest_file(f, spec) for f in files)
    t_ingest = time.perf_counter() - t0
    t1 = time.perf_counter()
    plan = plan_mean_release(grid, {"name": "matern", "nu": 1.5, "rho": 0.1}, n=sums.n, tau=TAU, epsilon=1.0)
    t2 = time.perf_counter()
    z = summarise_mean_sums(sums, plan)
    t3 = time.perf_counter()
    draw_mean_release(plan, z, draws=1)
    t4 = time.perf_counter()
    inner = sum(stages.values())
    stages = {k: round(v, 3) for k, v in stages.items()}
    stages["read+convert+carry (rest of ingest)"] = round(t_ingest - inner, 3)
    stages["plan (eigenbasis, sensitivity, OpenDP calibration)"] = round(t2 - t1, 3)
    stages["summary from sums"] = round(t3 - t2, 3)
    stages["secure draw"] = round(t4 - t3, 3)
    return {"n": sums.n, "mean_head": sums.mean()[:3].tolist(), "stages_s": stages}


def run_dask(files: list[Path], workers: int) -> dict[str, Any]:
    from distributed import Client, LocalCluster

    import fdpcore.io.streaming as streaming
    from fdpcore.basis.grids import midpoint_grid

    spec = streaming.StreamSpec("unit", "t", "y", (0.0, 1.0), midpoint_grid(K), TAU, chunk_rows=CHUNK)
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        client.run(lambda: None)  # workers up
        t0 = time.perf_counter()
        partials = client.gather(client.map(streaming.ingest_file, [str(f) for f in files], spec=spec, pure=False))
        sums = streaming.combine_partials(partials)
        return {"n": sums.n, "ingest_s": time.perf_counter() - t0}


def one(mode: str, data: Path) -> dict[str, Any]:
    files = sorted(data.glob("*.parquet"))
    t0 = time.perf_counter()
    if mode == "baseline":
        out = run_baseline(files)
    elif mode == "fdp":
        out = run_fdp(files)
    else:
        out = run_dask(files, int(mode.removeprefix("dask")))
    out.update(mode=mode, seconds=time.perf_counter() - t0, peak_rss_mib=_peak_mib(), load=os.getloadavg())
    return out


def _sub(mode: str, data: Path) -> dict[str, Any]:
    r = subprocess.run([sys.executable, __file__, "one", "--mode", mode, "--data", str(data)],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", nargs="?", default="all", choices=["all", "one"])
    ap.add_argument("--data", type=Path, default=Path("/tmp/fdp-bench"))
    ap.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--mode", default="fdp")
    ap.add_argument("--dask", action="store_true", help="also time the ingest on Dask with 1 and 2 workers (largest N)")
    a = ap.parse_args()
    if a.command == "one":
        print(json.dumps(one(a.mode, a.data)))
        return
    rows = []
    for n in a.sizes:
        d = a.data / f"n{n}"
        base, fdp = _sub("baseline", d), _sub("fdp", d)
        assert base["n"] == fdp["n"] == n, (base["n"], fdp["n"])
        row = {"N": n, "baseline_s": round(base["seconds"], 2), "fdp_s": round(fdp["seconds"], 2),
               "ratio": round(fdp["seconds"] / base["seconds"], 2), "baseline_rss_mib": round(base["peak_rss_mib"]),
               "fdp_rss_mib": round(fdp["peak_rss_mib"]), "fdp_stages_s": fdp["stages_s"],
               "load": [round(x, 1) for x in fdp["load"]]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if a.dask:
        d = a.data / f"n{max(a.sizes)}"
        d1, d2 = _sub("dask1", d), _sub("dask2", d)
        print(json.dumps({"N": max(a.sizes), "dask1_ingest_s": round(d1["ingest_s"], 2),
                          "dask2_ingest_s": round(d2["ingest_s"], 2),
                          "speedup": round(d1["ingest_s"] / d2["ingest_s"], 2),
                          "load": [round(x, 1) for x in d2["load"]]}), flush=True)
    if len(rows) > 1:
        per_unit = [r["fdp_s"] / r["N"] * 1e6 for r in rows]
        print(json.dumps({"fdp_us_per_unit": [round(x, 1) for x in per_unit]}))


if __name__ == "__main__":
    main()
