"""Nobody misses a crashed month (issue 15): server-side automations act when no fdp process is left.

With a real ``prefect server`` on loopback and ``fdp serve --notify`` (heartbeats every 30 s):

* the run's own process is killed with SIGKILL while ``fdp serve`` lives: the run ends Crashed and the
  server's *crashed* automation posts exactly one notification (the in-process hook no longer does);
* the whole ``fdp serve`` process group is killed with SIGKILL mid-run — nothing of fdp is left to
  report: the server's *no heartbeat* automation sets the run Crashed after three missed heartbeats,
  and the notification still arrives;
* a run the server's *scheduler* started (a cron tick, no hand on the trigger) is killed the same way: the
  team is told within a minute, not after Prefect's 15-minute look-back (the scheduler writes no event for
  the runs it creates, so the server held every later event of such a run; ``announce_scheduled_state``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from e2e_support import BIN, webhook_receiver
from prefect.automations import Automation
from prefect.client.orchestration import get_client
from prefect.deployments import run_deployment
from prefect.settings import PREFECT_API_URL, temporary_settings

from fdpcore.ledger import current_period

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "electricity_mean.yaml"
DATA = REPO / "examples" / "data" / "electricity_monday.parquet"
HEARTBEAT = 30
#: ``fdp serve``'s announcer alone, on the deployment id given, every second, for at most 5 minutes.
ANNOUNCER = ("import sys, threading; from fdp.flows.scheduled import announce_scheduled_runs; stop = threading.Event(); "
             "threading.Timer(300, stop.set).start(); announce_scheduled_runs([sys.argv[1]], stop, 1.0)")


@pytest.fixture(scope="module")
def crash(prefect_server: dict, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    root = tmp_path_factory.mktemp("crash")
    api = str(prefect_server["api"])
    cfg = yaml.safe_load(EXAMPLE.read_text())
    cfg["dataset"]["path"] = str(DATA)
    cfg["release"] = {"name": "elec-crash"}
    (root / "elec.yaml").write_text(yaml.safe_dump(cfg))
    receiver, received = webhook_receiver()  # the team's chat webhook, on loopback
    env = {**prefect_server["env"], "FDP_STATE_DIR": str(root / "state"),  # type: ignore[dict-item]
           "FDP_LINEAGE_FILE": str(root / "lineage.jsonl"), "PREFECT_API_URL": api,
           "FDP_HEARTBEAT_SECONDS": str(HEARTBEAT)}
    argv = [str(BIN / "fdp"), "serve", str(root / "elec.yaml"), "--cron", "0 6 1 1 *",
            "--ledger", f"sqlite:///{root / 'ledger.sqlite'}", "--out-root", str(root / "releases"),
            "--notify", f"http://127.0.0.1:{receiver.server_port}/hook"]
    state: dict[str, object] = {"root": root, "received": received, "procs": [], "notify": argv[-1], "env": env}

    def serve(cron: str = "0 6 1 1 *") -> subprocess.Popen:  # type: ignore[type-arg]
        proc = subprocess.Popen([*argv[:4], cron, *argv[5:]], env=env, stdout=(root / "serve.log").open("ab"), stderr=subprocess.STDOUT,
                                start_new_session=True)  # its own process group: the flow runs die with it
        state["procs"].append(proc)  # type: ignore[attr-defined]
        return proc

    state["serve"] = serve
    try:
        with temporary_settings(updates={PREFECT_API_URL: api}):
            yield state
    finally:
        for proc in state["procs"]:  # type: ignore[attr-defined]
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        receiver.shutdown()


def _running_run(name: str, timeout: float = 180):  # noqa: ANN202
    """Trigger the deployment (once it is registered) and wait until its run is Running."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            run = run_deployment(name, timeout=0)
            break
        except Exception:  # noqa: BLE001 - the deployment is not registered yet
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    with get_client(sync_client=True) as client:
        while True:
            run = client.read_flow_run(run.id)
            if run.state is not None and run.state.type.value == "RUNNING":
                return run
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {run.id} never started ({run.state.type.value if run.state else None})")
            time.sleep(0.2)


def _state(run_id: object) -> str:
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(run_id)  # type: ignore[arg-type]
    return run.state.type.value if run.state else "NONE"


def _wait(predicate, timeout: float) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(1)
    return predicate()


def _heartbeats(run_id: object) -> int:
    """How many heartbeat events of the run the server has received."""
    import httpx

    body = {"filter": {"event": {"name": ["prefect.flow-run.heartbeat"]},
                       "resource": {"id": [f"prefect.flow-run.{run_id}"]}}, "limit": 10}
    response = httpx.post(f"{PREFECT_API_URL.value()}/events/filter", json=body, timeout=10)
    response.raise_for_status()
    return len(response.json()["events"])


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _check_notification(note: dict, release_id: str) -> None:
    period = current_period()
    assert (note["series"], note["state"]) == ("elec-crash", "Crashed")
    assert note["text"].startswith(f"fdp: scheduled release {release_id} (series elec-crash, month {period}) "
                                   "ended Crashed")
    assert f"fdp audit show {release_id}" in note["text"] and "reserved: no noise was drawn" in note["text"]
    assert note["subject"] == f"fdp: elec-crash {release_id} Crashed"


def test_a_killed_flow_process_is_crashed_and_the_server_tells_the_team_once(crash: dict) -> None:
    serve = crash["serve"]()
    run = _running_run("scheduled-release/elec-crash")
    assert {a.name for a in (Automation.read(name="fdp: elec-crash no heartbeat"),
                             Automation.read(name="fdp: elec-crash crashed"))} == {
        "fdp: elec-crash no heartbeat", "fdp: elec-crash crashed"}
    flow_processes = _children(serve.pid)
    assert flow_processes, "the served run's process was not found"
    for pid in flow_processes:
        os.kill(pid, signal.SIGKILL)
    assert _wait(lambda: _state(run.id) == "CRASHED", 120), _state(run.id)
    assert _wait(lambda: len(crash["received"]) >= 1, 60), "no notification"
    time.sleep(10)  # a second notification (the old in-process hook) would arrive by now
    assert len(crash["received"]) == 1, crash["received"]
    _check_notification(crash["received"][0], f"elec-crash-{current_period()}")
    os.killpg(serve.pid, signal.SIGKILL)
    serve.wait()


def test_a_run_whose_whole_serve_process_died_is_set_crashed_by_its_missing_heartbeats(crash: dict) -> None:
    crash["received"].clear()
    serve = crash["serve"]()  # serving again updates the automations in place (by name), never duplicates them
    run = _running_run("scheduled-release/elec-crash")
    assert _wait(lambda: _heartbeats(run.id) >= 1, 30), "the run sent no heartbeat"  # the automation is armed
    os.killpg(serve.pid, signal.SIGKILL)  # fdp serve and the run's process: nothing of fdp is left
    serve.wait()
    killed = time.monotonic()
    assert _state(run.id) == "RUNNING"
    assert _wait(lambda: _state(run.id) == "CRASHED", 3 * HEARTBEAT + 120), _state(run.id)
    crashed_after = time.monotonic() - killed
    assert _wait(lambda: len(crash["received"]) >= 1, 60), "no notification"
    print(f"\nkill -9 of fdp serve -> run Crashed after {crashed_after:.0f} s, notified after "
          f"{time.monotonic() - killed:.0f} s")
    assert len(crash["received"]) == 1
    _check_notification(crash["received"][0], f"elec-crash-{current_period()}")
    with get_client(sync_client=True) as client:
        message = client.read_flow_run(run.id).state.message  # type: ignore[union-attr]
    assert "no heartbeat" in (message or "")


def _cron_started_running_run(deployment: str, timeout: float = 240):  # noqa: ANN202
    """Wait until a run the scheduler created for ``deployment`` (``auto_scheduled``) is Running."""
    from prefect.client.schemas.filters import (
        DeploymentFilter,
        DeploymentFilterId,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType

    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while True:
            try:
                dep = client.read_deployment_by_name(deployment)
                runs = client.read_flow_runs(
                    deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[dep.id])),
                    flow_run_filter=FlowRunFilter(state=FlowRunFilterState(
                        type=FlowRunFilterStateType(any_=[StateType.RUNNING]))))
            except Exception:  # noqa: BLE001 - the deployment is not registered yet
                runs = []
            ticked = [r for r in runs if r.auto_scheduled]
            if ticked:
                return ticked[0]
            if time.monotonic() > deadline:
                raise TimeoutError(f"no cron-started run of {deployment} was Running within {timeout:g} s")
            time.sleep(0.5)


def test_a_killed_cron_started_run_is_told_within_a_minute(crash: dict) -> None:
    crash["received"].clear()
    serve = crash["serve"]("* * * * *")  # the scheduler starts the runs: no hand on the trigger
    run = _cron_started_running_run("scheduled-release/elec-crash")
    for pid in _children(serve.pid):
        os.kill(pid, signal.SIGKILL)
    assert _wait(lambda: _state(run.id) == "CRASHED", 120), _state(run.id)
    crashed = time.monotonic()
    told = _wait(lambda: len(crash["received"]) >= 1, 60)
    print(f"\ncron-started run killed: told {time.monotonic() - crashed:.0f} s after it was Crashed")
    os.killpg(serve.pid, signal.SIGKILL)
    serve.wait()
    assert told, "no notification within 60 s of the crash of a cron-started run"
    _check_notification(crash["received"][0], f"elec-crash-{current_period()}")


def test_a_cron_started_run_that_crashed_before_anyone_announced_it_is_told_at_the_next_look(crash: dict) -> None:
    """The race CI hit at 747d119: the runner started a fresh tick's run between two looks of ``fdp serve`` and the
    run was killed before its own announcement; its Crashed event was held. The next look announces it anyway."""
    from fdp.flows.scheduled import ensure_failure_automations, scheduled_release
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
    from prefect.states import Crashed, Pending, Running

    crash["received"].clear()
    series = "elec-announce"
    deployment_id = scheduled_release.to_deployment(  # registered with its automations; no runner serves it
        name=series, cron="* * * * *", parameters={"config_path": str(crash["root"] / "elec.yaml"), "series": series}
    ).apply()
    ensure_failure_automations(series, deployment_id, heartbeat=HEARTBEAT, notify_url=crash["notify"])
    of_it = DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id]))
    with get_client(sync_client=True) as client:
        assert _wait(lambda: bool(client.read_flow_runs(deployment_filter=of_it)), 60), "the scheduler made no run"
        run = min((r for r in client.read_flow_runs(deployment_filter=of_it) if r.auto_scheduled),
                  key=lambda r: r.expected_start_time)
        for state in (Pending(), Running(), Crashed(message="killed")):  # what the runner and a kill -9 write
            client.set_flow_run_state(run.id, state, force=True)
        time.sleep(15)
        held = list(crash["received"])  # the scheduler wrote no Scheduled event: the server holds the rest
        # the announcer as `fdp serve` runs it, in a process of its own (its events client is that process's)
        looks = subprocess.Popen([sys.executable, "-c", ANNOUNCER, str(deployment_id)], env=crash["env"])
        try:
            told = _wait(lambda: len(crash["received"]) >= 1, 60)
        finally:
            looks.terminate()
            looks.wait(30)
            client.delete_deployment(deployment_id)
    assert held == [], "the premise no longer holds: the server told the crash without the announcement"
    assert told, "no notification within 60 s of the announcing look"
    assert [(n["series"], n["state"]) for n in crash["received"]] == [(series, "Crashed")]


@pytest.mark.slow  # waits out three missed heartbeats after the run: about 3 minutes
def test_a_completed_cron_started_run_does_not_trip_the_no_heartbeat_automation(crash: dict) -> None:
    """Its Completed event reaches the automations at once (the run announced its Scheduled state), so the
    no-heartbeat trigger sees the run end; before, it fired about 3 minutes later and its action failed ("already
    in terminal state"), once per served run (operations trial I)."""
    import httpx

    serve = crash["serve"]("* * * * *")
    run = _cron_started_running_run("scheduled-release/elec-crash")
    assert _wait(lambda: _state(run.id) in ("COMPLETED", "FAILED"), 240), _state(run.id)
    os.killpg(serve.pid, signal.SIGTERM)  # a clean stop: no further runs
    serve.wait(60)
    time.sleep(3 * HEARTBEAT + 60)
    body = {"filter": {"event": {"name": ["prefect.automation.triggered"]}}, "limit": 50}
    response = httpx.post(f"{PREFECT_API_URL.value()}/events/filter", json=body, timeout=10)
    response.raise_for_status()
    about_it = [e for e in response.json()["events"]  # the automation's for_each label names the run it fired for
                if f"prefect.flow-run.{run.id}" in (e.get("payload", {}).get("triggering_labels") or {}).values()]
    assert about_it == []
