"""A small release through the CLI: cold start vs a running Prefect server (run on demand).

    .venv/bin/python benchmarks/cli.py [--repeats 3]

Runs ``fdp release examples/electricity_mean.yaml`` (508 curves) in fresh subprocesses, each with
its own ledger and output folder, and reports the median wall time of:

* ``import``: ``python -c "import fdp.flows.cli"`` (the CLI imports Prefect and a summary's flow only when
  a release runs);
* ``budget_show``: ``fdp budget show`` on an empty ledger (a command that never imports Prefect);
* ``import_floor``: importing only the third-party libraries a mean release uses (Prefect, NumPy, SciPy,
  pandas, pyarrow, OpenDP, matplotlib, SQLAlchemy, OpenLineage) — what no change inside fdp can go below;
* ``trivial_flow_cold``: an empty Prefect flow without ``PREFECT_API_URL`` — Prefect starts its
  temporary server for the run (the fixed cost every cold ``fdp release`` pays);
* ``release_first``: ``fdp release`` without ``PREFECT_API_URL`` and a brand-new ``PREFECT_HOME``
  (the temporary server also creates and migrates its SQLite database);
* ``release_cold``: ``fdp release`` without ``PREFECT_API_URL`` in a new process, ``PREFECT_HOME``
  already initialised (temporary server start-up, imports, the release);
* ``release_warm``: ``fdp release`` against a ``prefect server start`` already running (started
  once here, excluded from the timing);
* ``trivial_flow_warm``: the empty flow against that server (Prefect's own fixed cost per run).

Besides the median wall time, ``cpu_s`` gives the median CPU time (user + system, the command and its
child processes, e.g. the temporary server): on a shared host it moves much less with the load.

Targets (issue 8): cold <= 15 s, warm <= 3 s. Each run uses a fresh ``FDP_STATE_DIR`` except the
eigenbasis disk cache, which is shared (``FDP_CACHE_DIR``) as it would be across releases.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CONFIG = REPO / "examples" / "electricity_mean.yaml"


def _env(home: Path, api: str | None, cache: Path, state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_") and k != "FDP_LEDGER_URL"}
    env.update(PREFECT_HOME=str(home), FDP_CACHE_DIR=str(cache), FDP_STATE_DIR=str(state),
               PREFECT_SERVER_ANALYTICS_ENABLED="false",
               # the temporary server's default 20 s start-up limit is too short for a first start on a busy host
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="180")
    if api:
        env["PREFECT_API_URL"] = api
    return env


FLOOR = ("import prefect, prefect.flows, numpy, scipy.linalg, pandas, pyarrow.parquet, opendp.prelude, "
         "matplotlib.pyplot, sqlalchemy, openlineage.client")
CPU: dict[str, list[float]] = {}


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run(cmd: list[str], env: dict[str, str], key: str | None = None) -> float:
    c0, t0 = _cpu(), time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} failed ({r.returncode}): {r.stderr[-2000:]}")
    if key is not None:
        CPU.setdefault(key, []).append(_cpu() - c0)
    return dt


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    load_start = [round(x, 1) for x in os.getloadavg()]
    root = Path(tempfile.mkdtemp(prefix="fdp-cli-bench-"))
    cache = root / "cache"
    results: dict[str, list[float]] = {"import": [], "budget_show": [], "import_floor": [], "trivial_flow_cold": [],
                                       "release_first": [], "release_cold": [], "trivial_flow_warm": [],
                                       "release_warm": []}
    trivial = "from prefect import flow\n@flow\ndef f():\n    return 1\nf()\n"

    def release(i: int, tag: str, api: str | None, home: Path) -> float:
        out, state = root / f"{tag}-{i}", root / f"state-{tag}-{i}"
        cmd = [str(BIN / "fdp"), "release", str(CONFIG), "--out", str(out), "--ledger",
               f"sqlite:///{state / 'ledger.sqlite'}", "--release-id", f"{tag}-{i}"]
        state.mkdir(parents=True)
        return _run(cmd, _env(home, api, cache, state), key=f"release_{tag}")

    cold_home = root / "home-cold"
    for i in range(a.repeats):
        env = _env(cold_home, None, cache, root / f"s{i}")
        results["import"].append(_run([sys.executable, "-c", "import fdp.flows.cli"], env, "import"))
        results["budget_show"].append(_run([str(BIN / "fdp"), "budget", "show", "--ledger",
                                            f"sqlite:///{root / f'empty-{i}.sqlite'}"], env, "budget_show"))
        results["import_floor"].append(_run([sys.executable, "-c", FLOOR], env, "import_floor"))
        results["release_first"].append(release(i, "first", None, root / f"home-first-{i}"))
        results["trivial_flow_cold"].append(_run([sys.executable, "-c", trivial], env, "trivial_flow_cold"))
        results["release_cold"].append(release(i, "cold", None, cold_home))
    port = _free_port()
    home = root / "home-server"
    api = f"http://127.0.0.1:{port}/api"
    server = subprocess.Popen([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                              env=_env(home, None, cache, root / "srv"), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        t0 = time.perf_counter()
        while True:
            try:
                urllib.request.urlopen(f"{api}/health", timeout=2)
                break
            except OSError:
                if time.perf_counter() - t0 > 180:
                    raise
                time.sleep(0.5)
        server_start = time.perf_counter() - t0
        release(-1, "warmup", api, home)  # first run registers the flow
        _run([sys.executable, "-c", trivial], _env(home, api, cache, root / "srv"))
        CPU.pop("release_warmup")
        for i in range(a.repeats):
            results["trivial_flow_warm"].append(
                _run([sys.executable, "-c", trivial], _env(home, api, cache, root / "srv"), "trivial_flow_warm"))
            results["release_warm"].append(release(i, "warm", api, home))
    finally:
        server.terminate()
        server.wait(timeout=60)
    summary = {k: round(statistics.median(v), 2) for k, v in results.items()}
    summary["server_start_s"] = round(server_start, 2)
    summary["cpu_s"] = {k: round(statistics.median(v), 2) for k, v in CPU.items()}
    summary["all_runs_s"] = {k: [round(x, 2) for x in v] for k, v in results.items()}
    summary["load_start"] = load_start
    summary["load"] = [round(x, 1) for x in os.getloadavg()]
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
