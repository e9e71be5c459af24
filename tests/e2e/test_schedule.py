"""The schedule that no hand touches: a real ``prefect server`` on loopback, ``fdp serve`` of two
summaries of one dataset (mean and covariance, two release series) on ``--cron "* * * * *"``, and
nothing else. The test waits (bounded) until the server's scheduler has created a run of each series
and both are published in the ledger with their files and lineage; it never triggers a run.

Prints the time from each cron tick (the run's scheduled start) to the release's publication in the
ledger (``pytest -s`` shows it; docs/operations.md quotes it).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pyarrow.parquet as pq
import yaml
from e2e_support import BIN, stop
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    DeploymentFilter,
    DeploymentFilterName,
    FlowRunFilter,
    FlowRunFilterParentFlowRunId,
)
from prefect.settings import PREFECT_API_URL, temporary_settings

from fdpcore.ledger import Ledger

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "examples" / "data" / "electricity_monday.parquet"
DATASET = "adelaide-electricity-monday"
SERIES = {"mean": f"{DATASET}-mean", "covariance": f"{DATASET}-covariance"}
WAIT_S = 330  # the scheduler's loop (60 s) + the next minute's tick + two releases, with room on a busy machine


def _config(name: str, root: Path) -> Path:
    cfg = yaml.safe_load((REPO / "examples" / f"electricity_{name}.yaml").read_text())
    cfg["dataset"]["path"] = str(DATA)
    path = root / f"electricity_{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _published(ledger: Ledger) -> dict[str, object]:
    out = {}
    for record in ledger.releases(DATASET):
        for summary, series in SERIES.items():
            if re.fullmatch(rf"{re.escape(series)}-\d{{4}}-\d{{2}}", record.release_id) and record.state == "published":
                out.setdefault(summary, record)
    return out


def test_the_scheduler_publishes_two_series_of_one_dataset_by_itself(prefect_server: dict, tmp_path: Path) -> None:
    api = str(prefect_server["api"])
    env = {**prefect_server["env"], "PREFECT_API_URL": api, "FDP_STATE_DIR": str(tmp_path / "state"),  # type: ignore[dict-item]
           "FDP_LINEAGE_FILE": str(tmp_path / "lineage.jsonl")}
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    out_root = tmp_path / "releases"
    budget = subprocess.run(  # docs/operations.md step 2: the privacy officer's policy, shared by both series
        [str(BIN / "fdp"), "budget", "set", DATASET, "--epsilon", "12", "--period", "month", "--per-period", "2",
         "--ledger", url], env=env, capture_output=True, text=True, timeout=120)
    assert budget.returncode == 0, budget.stderr
    configs = [_config("mean", tmp_path), _config("covariance", tmp_path)]
    log = (tmp_path / "serve.log").open("wb")
    served = subprocess.Popen(
        [str(BIN / "fdp"), "serve", *map(str, configs), "--cron", "* * * * *", "--ledger", url,
         "--out-root", str(out_root)], env=env, stdout=log, stderr=subprocess.STDOUT)
    ledger = Ledger(url)
    try:
        deadline = time.monotonic() + WAIT_S
        while len(published := _published(ledger)) < 2:
            assert served.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            assert time.monotonic() < deadline, (
                f"after {WAIT_S} s only {sorted(published)} published\n" + (tmp_path / "serve.log").read_text()[-3000:])
            time.sleep(2)
        # published in the ledger; let the runs finish (files, artifacts, lineage) before serve is stopped
        with temporary_settings(updates={PREFECT_API_URL: api}), get_client(sync_client=True) as client:
            while True:
                runs = client.read_flow_runs(deployment_filter=DeploymentFilter(
                    name=DeploymentFilterName(any_=list(SERIES.values()))))
                done = {r.name for r in runs if r.state is not None and r.state.is_completed()}
                if {r.release_id for r in published.values()} <= done:
                    break
                assert time.monotonic() < deadline + 120, [(r.name, r.state) for r in runs]
                time.sleep(2)
    finally:
        stop(served)
        log.close()

    lineage = [json.loads(line) for line in (tmp_path / "lineage.jsonl").read_text().splitlines()]
    with temporary_settings(updates={PREFECT_API_URL: api}), get_client(sync_client=True) as client:
        for summary, series in SERIES.items():
            record = published[summary]
            runs = client.read_flow_runs(
                deployment_filter=DeploymentFilter(name=DeploymentFilterName(any_=[series])))
            parents = [r for r in runs if r.name == record.release_id]
            assert parents, f"no flow run of scheduled-release/{series} is named {record.release_id}"
            # created by the server's scheduler: auto-scheduled, on a minute's tick, never triggered by hand
            assert all(r.auto_scheduled for r in runs), [(r.name, r.auto_scheduled) for r in runs]

            def kids(run):  # noqa: ANN001, ANN202
                return client.read_flow_runs(flow_run_filter=FlowRunFilter(
                    parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[run.id])))

            # a later tick of the same month may run the release again (it then re-writes it, charging nothing): the
            # parent is the scheduled run whose child published it
            publishing = [r for r in parents if any(str(c.id) == record.provenance["flow_run_id"] for c in kids(r))]
            assert len(publishing) == 1, [(r.name, r.expected_start_time) for r in parents]
            parent = publishing[0]
            tick = parent.expected_start_time
            assert tick.second == 0 and tick.microsecond == 0
            children = kids(parent)
            assert [c.name for c in children] == [record.release_id]
            child = children[0]
            assert record.provenance["flow_run_id"] == str(child.id)
            assert record.period == f"{tick:%Y-%m}" and record.release_id == f"{series}-{tick:%Y-%m}"

            folder = out_root / series / record.period
            manifest = json.loads((folder / "manifest.json").read_text())
            assert manifest == record.public["manifest"] and manifest["summary"] == summary
            assert manifest["provenance"]["flow_run_id"] == str(child.id)
            assert pq.read_table(folder / "release.parquet").num_rows > 0
            artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=[child.id])))
            prefix = f"{DATASET}-{summary}"  # the series (default <dataset>-<summary>): docs/operations.md, artifact keys
            assert {a.key for a in artifacts if a.key} == {f"{prefix}-release-note", f"{prefix}-budget-splits"}
            events = [e["eventType"] for e in lineage if e["run"]["runId"] == str(child.id)]
            assert events == ["START", "COMPLETE"]

            seconds = (datetime.fromisoformat(record.updated_at) - tick).total_seconds()
            print(f"\n{series}: cron tick {tick:%H:%M:%S} -> published {seconds:.1f} s later ({record.release_id})")
            assert seconds > 0

    assert ledger.budgets(DATASET)[0].spent == (2.0, 0.0)  # both series charged the dataset's shared budget once
    assert ledger.verify() == []
    server_log = Path(str(prefect_server["log"])).read_text(errors="replace")
    assert "InvalidRequestError" not in server_log and "bulk_dml" not in server_log, server_log[-3000:]
    # Prefect's own SQLite server logs (and retries) "database is locked" when the machine is busy; any other
    # traceback in the server is a failure (e.g. the 3.8 scheduler's bulk DML error with SQLAlchemy 2.1)
    tracebacks = server_log.split("Traceback (most recent call last):")[1:]
    unexpected = [t for t in tracebacks if "database is locked" not in t]
    assert not unexpected, unexpected[0][-3000:]
