"""End to end with a real ``prefect server`` on loopback: ``fdp serve`` deploys scheduled releases,
a triggered run completes, and the Prefect API, the ledger, the files and the lineage log agree.

Also: a re-triggered run of the same period charges nothing, and a run whose period allowance is
exhausted fails visibly (FAILED state with the budget message) with nothing spent.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from e2e_support import BIN, stop, webhook_receiver
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    FlowRunFilter,
    FlowRunFilterParentFlowRunId,
    LogFilter,
    LogFilterFlowRunId,
)
from prefect.deployments import run_deployment
from prefect.settings import PREFECT_API_URL, temporary_settings

from fdpcore.ledger import Ledger, current_period

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "electricity_mean.yaml"
DATA = REPO / "examples" / "data" / "electricity_monday.parquet"
TERMINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


@pytest.fixture(scope="module")
def ops(prefect_server: dict, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """An ``fdp serve`` process with two scheduled release series (monthly cron), against the shared server."""
    root = tmp_path_factory.mktemp("ops")
    api = str(prefect_server["api"])
    env = {**prefect_server["env"], "FDP_STATE_DIR": str(root / "state"),  # type: ignore[dict-item]
           "FDP_LINEAGE_FILE": str(root / "lineage.jsonl"), "PREFECT_API_URL": api}
    elec = yaml.safe_load(EXAMPLE.read_text())
    elec["dataset"]["path"] = str(DATA)
    elec["release"] = {"name": "elec-monthly"}
    (root / "elec.yaml").write_text(yaml.safe_dump(elec))
    tight = yaml.safe_load(EXAMPLE.read_text())
    tight["dataset"].update(path=str(DATA), id="tight-allowance")
    tight["budget"] = {"epsilon": 10.0, "period": "month", "epsilon_per_period": 0.5}
    (root / "tight.yaml").write_text(yaml.safe_dump(tight))
    ledger = f"sqlite:///{root / 'ledger.sqlite'}"
    receiver, received = webhook_receiver()  # the team's chat webhook, on loopback
    served = subprocess.Popen(
        [str(BIN / "fdp"), "serve", str(root / "elec.yaml"), str(root / "tight.yaml"), "--ledger", ledger,
         "--out-root", str(root / "releases"), "--notify", f"http://127.0.0.1:{receiver.server_port}/hook"],
        env=env, stdout=(root / "serve.log").open("wb"), stderr=subprocess.STDOUT,
    )
    try:
        with temporary_settings(updates={PREFECT_API_URL: api}):
            yield {"api": api, "root": root, "ledger": ledger, "served": served, "received": received}
    finally:
        stop(served)
        receiver.shutdown()


def _deployment(name: str, timeout: float = 120):  # noqa: ANN202
    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while True:
            try:
                return client.read_deployment_by_name(name)
            except Exception:  # noqa: BLE001 - not registered yet
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)


def _run(name: str, timeout: float = 300):  # noqa: ANN202
    run = run_deployment(name, timeout=0)
    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while True:
            run = client.read_flow_run(run.id)
            if run.state is not None and run.state.type.value in TERMINAL:
                return run
            if time.monotonic() > deadline:
                raise TimeoutError(f"flow run {run.id} still {run.state.type.value if run.state else None}")
            time.sleep(1)


def test_scheduled_release_runs_and_api_ledger_files_and_lineage_agree(ops: dict) -> None:
    dep = _deployment("scheduled-release/elec-monthly")
    assert [s.schedule.cron for s in dep.schedules] == ["0 6 1 * *"]
    assert dep.parameters["config_path"].endswith("elec.yaml") and dep.parameters["series"] == "elec-monthly"

    run = _run("scheduled-release/elec-monthly")
    assert run.state.type.value == "COMPLETED", run.state.message
    period = current_period()
    release_id = f"elec-monthly-{period}"
    assert run.name == release_id
    led = Ledger(ops["ledger"])
    record = led.get(release_id)
    assert record is not None and record.state == "published" and record.period == period
    assert led.verify() == []

    with get_client(sync_client=True) as client:
        children = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[run.id])))
        assert [c.name for c in children] == [release_id]
        child = children[0]
        assert str(child.id) == record.provenance["flow_run_id"]
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[child.id])))
    by_key = {a.key: a for a in artifacts if a.key}
    note = by_key["elec-monthly-release-note"]  # keyed by the series (release.name)
    ops["note_artifact_id"] = str(note.id)
    assert release_id in str(note.data) and "What is protected" in str(note.data)
    assert f"charged to period {period}" in str(note.data) and "This period: spent ε = 1" in str(note.data)
    assert "![released curve and noise band](data:image/png;base64," in str(note.data)  # the plot, embedded
    assert "elec-monthly-budget-splits" in by_key
    progress = [a for a in artifacts if a.type == "progress"]
    assert [float(a.data) for a in progress] == [100.0]
    assert (Path(ops["root"]) / "releases" / "elec-monthly" / period / "release.png").is_file()

    out = Path(ops["root"]) / "releases" / "elec-monthly" / period
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest == record.public["manifest"]
    assert manifest["provenance"]["flow_run_id"] == str(child.id)

    events = [json.loads(line) for line in (Path(ops["root"]) / "lineage.jsonl").read_text().splitlines()]
    mine = [e for e in events if e["run"]["runId"] == str(child.id)]
    complete = [e for e in mine if e["eventType"] == "COMPLETE"]
    assert [e["eventType"] for e in mine] == ["START", "COMPLETE"] and complete[0]["job"]["name"] == "mean-release"
    assert complete[0]["run"]["facets"]["fdp_privacy"]["ledgerEntryId"] == f"{led.ledger_id}/{release_id}"

    again = _run("scheduled-release/elec-monthly")  # re-triggered in the same period
    assert again.state.type.value == "COMPLETED", again.state.message
    assert led.budgets("adelaide-electricity-monday")[0].spent == (1.0, 0.0)  # charged once
    assert json.loads((out / "manifest.json").read_text()) == manifest


def test_a_run_whose_period_allowance_is_exhausted_fails_visibly_and_spends_nothing(ops: dict) -> None:
    _deployment("scheduled-release/tight-allowance-mean")
    run = _run("scheduled-release/tight-allowance-mean")
    assert run.state.type.value == "FAILED"
    assert "allowance of period" in (run.state.message or "") or _failure_logged(run.id, "allowance of period")
    # the team is told: series, month, ledger and budget state, next step — and no data or error text
    deadline = time.monotonic() + 60
    while not ops["received"] and time.monotonic() < deadline:
        time.sleep(0.5)
    period = current_period()
    [note] = ops["received"]
    assert (note["series"], note["month"], note["state"]) == ("tight-allowance-mean", period, "Failed")
    assert note["text"].startswith(f"fdp: scheduled release tight-allowance-mean-{period} (series "
                                   f"tight-allowance-mean, month {period}) ended Failed. Ledger: no entry.")
    assert "Next step: nothing was charged" in note["text"] and "Requested:" not in note["text"]  # no error text
    led = Ledger(ops["ledger"])
    assert led.releases("tight-allowance") == []
    assert led.budgets("tight-allowance") == []  # the refused first charge did not even record the proposal
    assert led.verify() == []


def _failure_logged(flow_run_id, text: str) -> bool:  # noqa: ANN001
    with get_client(sync_client=True) as client:
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
    return any(text in log.message for log in logs)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (`python3 dev.py test` installs it "
                                            "as root with apt-get; or apt-get install chromium)")
def test_the_release_note_renders_in_the_prefect_ui(ops: dict, tmp_path: Path) -> None:
    """A headless browser loads the artifact page of the UI and finds the release note's text."""
    if "note_artifact_id" not in ops:
        pytest.skip("the scheduled release test did not run first")
    url = ops["api"].removesuffix("/api") + f"/artifacts/artifact/{ops['note_artifact_id']}"
    quiet = ["--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-quic"]  # no look-ups of Google's hosts on a closed network
    dom = subprocess.run(
        [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", *quiet, f"--user-data-dir={tmp_path / 'profile'}",
         "--virtual-time-budget=20000", "--dump-dom", url],
        capture_output=True, text=True, timeout=120,
    ).stdout
    assert "What is protected." in dom and f"charged to period {current_period()}" in dom
