"""Scheduled organisational releases: one Prefect deployment per release series, on a cron schedule.

A release config names its **series** (``release: {name: …}``, default ``<dataset id>-<summary>``;
:func:`fdp.flows.config.series_name`). ``fdp serve`` deploys each series as
``scheduled-release/<series>``; any number of series of one dataset run side by side and share the
dataset's budget in the ledger. The release calendar maps a scheduled run to its budget period and
release id:

* period = the calendar month (UTC) of the run's *scheduled* start time, so a late or re-triggered
  run of the same schedule slot still belongs to its month;
* release id = ``<series>-<period>`` (e.g. ``adelaide-electricity-monday-mean-2026-11``), so a
  re-triggered run of the same period is idempotent: it re-writes the published files from the
  ledger and charges nothing;
* files go to ``<out_root>/<series>/<period>/``; the run and its summary subflow are both named
  ``<series>-<period>`` (no paths, and months tell apart in the UI).

The run is charged to that period: when the dataset's allowance for the period (or its total) is
exhausted, the run fails with the budget message (visible in the Prefect UI), and nothing is spent; that check
(read-only, :func:`fdp.flows.config.precheck_budget`) comes before the data are read, so a month whose allowance
is spent costs no read or plan per tick. The summary's atomic charge still decides.

Failed and crashed runs are notified (docs/operations.md, which also says what is not: a clean stop, a dead serve between ticks). A served run's process sends Prefect flow-run
heartbeats every :func:`heartbeat_seconds`; for each series ``fdp serve`` keeps two server-side Prefect
automations (:func:`ensure_failure_automations`), so they act even when no fdp process is left:

* *no heartbeat*: a run of the series that has been silent for :data:`MISSED_HEARTBEATS` heartbeats
  (its process was killed with ``kill -9``, ran out of memory, or its machine or ``fdp serve`` died)
  is set *Crashed* by the server — it never stays *Running*;
* *crashed*: with a webhook (``fdp serve --notify URL`` or ``$FDP_NOTIFY_URL``), every run of the
  series that ends *Crashed* — by that automation, or seen by the runner — sends one notification
  through Prefect's ``CustomWebhookNotificationBlock``: series, month, release id and the next step for
  each ledger state (the server cannot read the ledger; ``fdp audit show`` can) — never data.

A run the server's *scheduler* created (a cron tick) would be told about 15 minutes late: Prefect's scheduler
writes such runs with no *Scheduled* event, and the server holds every later state event of a run until it has
seen the one it follows (for up to 15 minutes), so the automations saw the run's *Crashed* (and *Completed*)
event that late. ``fdp serve`` announces the runs of its series (:func:`announce_scheduled_runs`), whatever their
state, and each run announces its own *Scheduled* state first (:func:`announce_scheduled_state`).

A run that ends *Failed* is still alive to say more: its state hook (:func:`notify_failure`) reads the
ledger when it sends and tells the webhook the ledger state and the month's budget with the next step
(:func:`failure_message`). A series that keeps failing for the same cause (a minute cron, an exhausted
allowance) notifies once per series, month and cause: the hook remembers what it sent in fdp's state
directory (:func:`already_notified`), and a completed run of the series forgets it.

Two runs of one release id at once (a re-trigger while a run is still going, or two runs after a
restart): the one that finds the id reserved or noised by the other, live, run waits for it (up to
``$FDP_WAIT_SECONDS``) and, when that run publishes, completes by re-writing the files from the
ledger, charging nothing (docs/audit.md, "The same release id twice at once").
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fdp.flows.config import DEFAULT_CRON, config_sha256, load_config, precheck_budget, series_name
from fdp.flows.registry import SUMMARIES
from fdp.tasks._settings import quiet_expected_tracebacks
from prefect import flow, get_run_logger
from prefect.runtime import flow_run

from fdpcore.errors import ConfigError, NotResumableError
from fdpcore.ledger import (
    Ledger,
    current_period,
    default_ledger_url,
    owner_may_be_running,
    release_owner,
    state_dir,
    wait_seconds,
)

__all__ = ["BUDGET_STEP", "CONFIG_STEP", "DEFAULT_CRON", "LIVE_STEP", "MISSED_HEARTBEATS", "NEXT_STEP", "already_notified",
           "announce_scheduled_runs", "announce_scheduled_state",
           "crash_message_template", "ensure_failure_automations", "failure_automations", "failure_message",
           "forget_notified", "heartbeat_seconds", "notify_failure", "release_calendar", "scheduled_release", "scheduled_run_name"]

#: The next step for each ledger state of a failed run (docs/operations.md, "Recovering a failed run").
NEXT_STEP = {
    "none": "nothing was charged: fix the cause shown in the run's message, then trigger the deployment again",
    "reserved": "no noise was drawn: trigger the deployment again (it resumes without a second charge) or "
                "`fdp budget cancel {release_id}`",
    "noised": "the charge is final and this month's release id is used up: `fdp budget grant` if the month's "
              "allowance is spent, then `fdp release CONFIG --release-id {release_id}-b --period {period}`",
    "published": "the release is published: trigger the deployment again to re-write its files",
    "cancelled": "the reservation was given back: trigger the deployment again",
}

#: The next step when the ledger could not be read at send time (its state for the release is unknown).
UNREAD_STEP = ("the ledger could not be read, so this run's release may be published, held or absent: when the "
               "ledger is reachable again, `fdp audit show {release_id}` says which — published: nothing to do (the next "
               "run re-writes its files); reserved: trigger the deployment again (it resumes without a second charge); "
               "absent: nothing was charged, trigger it again; noised: see the recovery table")

#: What a run refused because its config file changed since ``fdp serve`` deployed it says (:func:`scheduled_release`).
CONFIG_CHANGED = "changed since series"
#: The next step of such a run: every later run is refused the same way until ``fdp serve`` is restarted.
CONFIG_STEP = ("this run charged nothing: the config file changed since `fdp serve` deployed the series, so every run "
               "of it is refused until `fdp serve` is restarted to serve the new definition (under a new release.name "
               "if the series has releases); triggering the deployment again fails the same way")

#: The next step when the ledger shows another live run holding the release (reserved or noised by a process that
#: may still be running): it may be publishing it right now, so no new release id is advised.
LIVE_STEP = ("another run of this release is publishing it right now (it holds the release in the ledger): check "
             "`fdp audit show {release_id}` in {minutes} minutes — once it is published, nothing is lost (trigger the "
             "deployment again to re-write its files)")

#: The next step of a run refused for budget (nothing was charged), by what ran out.
BUDGET_STEP = {
    "period": "nothing was charged: the {period} allowance of dataset {dataset} cannot pay for this release. Either "
              "the privacy officer adds to it (`fdp budget grant {dataset} --period {period} --epsilon E`) and you "
              "trigger the deployment again, or wait for the next month: the series' first run in it is charged to "
              "that month's allowance",
    "total": "nothing was charged: the total budget of dataset {dataset} cannot pay for this release, and no later "
             "run of the series can be charged until the privacy officer raises it (`fdp budget set {dataset} "
             "--epsilon E ...`); then trigger the deployment again",
    "proposal": "nothing was charged: the config's `budget:` proposal for dataset {dataset} (not in the ledger yet) "
                "cannot pay for this release: raise it in the config and restart `fdp serve`, or have the privacy "
                "officer set the dataset's policy (`fdp budget set {dataset} --epsilon E ...`) and trigger the "
                "deployment again",
}


#: Heartbeats a served run may miss before the server sets it Crashed.
MISSED_HEARTBEATS = 3


def heartbeat_seconds() -> int:
    """Seconds between a served run's heartbeats: ``$FDP_HEARTBEAT_SECONDS``, default 60 (Prefect's minimum is 30).

    A run silent for ``MISSED_HEARTBEATS`` of them is set Crashed: 3 minutes with the default.
    """
    raw = os.environ.get("FDP_HEARTBEAT_SECONDS", "60")
    try:
        seconds = int(raw)
    except ValueError:
        raise ConfigError(f"FDP_HEARTBEAT_SECONDS ({raw!r}) must be a whole number of seconds >= 30") from None
    if seconds < 30:
        raise ConfigError(f"FDP_HEARTBEAT_SECONDS ({seconds}) must be >= 30 (Prefect's minimum heartbeat interval)")
    return seconds


def crash_message_template(series: str) -> str:
    """The body of the *crashed* notification: a Jinja template the Prefect server fills (no data, no ledger read).

    >>> "fdp audit show {{ flow_run.name }}" in crash_message_template("elec-mean")
    True
    """
    steps = "; ".join(f"{state}: {step.format(release_id='{{ flow_run.name }}', period='{{ flow_run.name[-7:] }}')}"
                      for state, step in NEXT_STEP.items() if state != "cancelled")
    return (f"fdp: scheduled release {{{{ flow_run.name }}}} (series {series}, month {{{{ flow_run.name[-7:] }}}}) "
            "ended Crashed: its process stopped without reporting (killed, out of memory, or its machine or "
            "`fdp serve` died). Budget: the ledger's state of this release decides what was spent — "
            "`fdp audit show {{ flow_run.name }}` and `fdp calendar`. Next step by that state: " + steps
            + " (docs/operations.md, Recovering a failed run).")


def failure_automations(series: str, deployment_id: Any, *, heartbeat: int,
                        notify_block_id: Any | None = None) -> list[Any]:
    """The server-side automations of one served series (not yet created on the server).

    ``fdp: <series> no heartbeat`` sets a run of the deployment Crashed once it has missed
    :data:`MISSED_HEARTBEATS` heartbeats; ``fdp: <series> crashed`` (only with a notification block)
    sends the block :func:`crash_message_template` when a run of the deployment becomes Crashed.
    """
    from prefect.automations import Automation, EventTrigger, Posture
    from prefect.client.schemas.objects import StateType
    from prefect.events.actions import ChangeFlowRunState, SendNotification

    runs = {"prefect.resource.id": "prefect.flow-run.*"}
    of_deployment = {"prefect.resource.id": f"prefect.deployment.{deployment_id}"}
    silent = Automation(
        name=f"fdp: {series} no heartbeat",
        description=f"Set a run of scheduled-release/{series} Crashed when it has sent no heartbeat for "
                    f"{MISSED_HEARTBEATS * heartbeat} s (fdp serve)",
        trigger=EventTrigger(match=runs, match_related=of_deployment, after={"prefect.flow-run.heartbeat"},
                             expect={"prefect.flow-run.*"}, for_each={"prefect.resource.id"},
                             posture=Posture.Proactive, threshold=1,
                             within=timedelta(seconds=MISSED_HEARTBEATS * heartbeat)),
        actions=[ChangeFlowRunState(state=StateType.CRASHED, name="Crashed",
                                    message=f"no heartbeat for {MISSED_HEARTBEATS * heartbeat} s: the process running "
                                            "this release stopped (set Crashed by the fdp automation)")],
    )
    if notify_block_id is None:
        return [silent]
    crashed = Automation(
        name=f"fdp: {series} crashed",
        description=f"Tell the team when a run of scheduled-release/{series} crashes (fdp serve --notify)",
        trigger=EventTrigger(match=runs, match_related=of_deployment, expect={"prefect.flow-run.Crashed"},
                             posture=Posture.Reactive, threshold=1),
        actions=[SendNotification(block_document_id=notify_block_id, subject=f"fdp: {series} {{{{ flow_run.name }}}} Crashed",
                                  body=crash_message_template(series))],
    )
    return [silent, crashed]


def ensure_failure_automations(series: str, deployment_id: Any, *, heartbeat: int, notify_url: str | None) -> list[Any]:
    """Create or update (by name, so serving again never duplicates them) the automations of one series."""
    from prefect.automations import Automation
    from prefect.blocks.notifications import CustomWebhookNotificationBlock

    block_id = None
    if notify_url:
        block = CustomWebhookNotificationBlock(
            name="fdp-crashed-release", url=notify_url, allow_private_urls=True, timeout=10,
            json_data={"text": "{{body}}", "subject": "{{subject}}", "series": series, "state": "Crashed"})
        slug = "".join(c if c.isalnum() else "-" for c in series.lower()).strip("-")
        block_id = block.save(f"fdp-crashed-{slug}", overwrite=True)
    made = []
    if block_id is None:  # served again without a webhook: the old crash notification must not linger
        try:
            Automation.read(name=f"fdp: {series} crashed").delete()
        except ValueError:
            pass
    for automation in failure_automations(series, deployment_id, heartbeat=heartbeat, notify_block_id=block_id):
        try:
            existing = Automation.read(name=automation.name)
        except ValueError:
            made.append(automation.create())
            continue
        automation.id = existing.id
        automation.update()
        made.append(automation)
    return made


def release_calendar(series: str, scheduled_start: datetime) -> tuple[str, str]:
    """The (period, release id) of a scheduled run of ``series``.

    >>> release_calendar("elec-mean", datetime(2026, 11, 30, 23, 59, tzinfo=UTC))
    ('2026-11', 'elec-mean-2026-11')
    """
    period = current_period(scheduled_start.astimezone(UTC))
    return period, f"{series}-{period}"


def _scheduled_start() -> datetime:
    start = flow_run.scheduled_start_time
    return start if isinstance(start, datetime) else datetime.now(UTC)


def scheduled_run_name() -> str:
    """The flow run name ``<series>-<YYYY-MM>`` (Prefect calls it when the run starts)."""
    return release_calendar(str(flow_run.parameters.get("series", "release")), _scheduled_start())[1]


def announce_scheduled_state() -> bool:
    """Emit the *Scheduled* event that Prefect's scheduler never wrote for this run; True when it did.

    The server names each state event of a run by the state's id and makes the next one *follow* it when it
    came within 5 minutes; its automations then hold an event until they have seen the one it follows, for up to
    15 minutes. A run created by the scheduler (``auto_scheduled``: a cron tick) starts from a *Scheduled* state
    inserted with no event, so its *Pending*, *Running* and terminal events were all held that long: a crash
    was notified about 15 minutes late (and a Completed run tripped the no-heartbeat automation). ``fdp serve``
    announces its runs as soon as the scheduler creates them (:func:`announce_scheduled_runs`); the run repeats it
    first thing (:func:`_announce`: the same event id, stored once), for a run started before ``fdp serve`` saw it.
    A run started by hand already has the event and is left alone. Never fails the run: a server that cannot be
    asked is logged as a warning.
    """
    from uuid import UUID

    from prefect.client.orchestration import get_client
    from prefect.events.worker import EventsWorker

    run_id = flow_run.id
    if run_id is None:
        return False
    try:
        with get_client(sync_client=True) as client:
            announced = _announce(client, client.read_flow_run(UUID(str(run_id)))) is not None
        EventsWorker.instance().wait_until_empty()  # sent now: a crash of the run may follow at once
        return announced
    except Exception as exc:  # noqa: BLE001 - bookkeeping in the orchestrator never undoes a release
        get_run_logger().warning("could not announce the scheduled state of this run (%s): a crash of it may be "
                                 "notified up to 15 minutes late", type(exc).__name__)
        return False


def _announce(client: Any, run: Any) -> Any | None:
    """Emit ``prefect.flow-run.Scheduled`` for a scheduler-created ``run`` with its first Scheduled state's id and time.

    Returns that state's id (``None`` for a run started by hand, or one without a Scheduled state). The event carries
    the run's name and state only (no data); the caller waits for the events client to send it.
    """
    from prefect.events import emit_event

    if not run.auto_scheduled:
        return None
    states = [st for st in client.read_flow_run_states(run.id) if st.type.value == "SCHEDULED"]
    if not states:
        return None
    first = min(states, key=lambda st: st.timestamp)
    related = [{"prefect.resource.id": f"prefect.deployment.{run.deployment_id}",
                "prefect.resource.role": "deployment"}] if run.deployment_id else []
    emit_event(event="prefect.flow-run.Scheduled", id=first.id, occurred=first.timestamp, related=related,
               resource={"prefect.resource.id": f"prefect.flow-run.{run.id}", "prefect.resource.name": run.name,
                         "prefect.state-name": first.name or "Scheduled", "prefect.state-type": "SCHEDULED"})
    return first.id


#: Seconds between two looks of ``fdp serve`` for runs the scheduler created (:func:`announce_scheduled_runs`).
ANNOUNCE_SECONDS = 5.0

#: The runs ``fdp serve`` announces are expected to start within this window around now. Back: the server holds an
#: event whose predecessor it has not seen for 15 minutes (Prefect's ``PRECEDING_EVENT_LOOKBACK``), then evaluates it
#: anyway. Ahead: a run's first state event waits for its *Scheduled* one only when that state is less than 5 minutes
#: older (the server's "tight timing"), so a run starting later than that is announced in time at a later look.
ANNOUNCE_WINDOW = (timedelta(minutes=20), timedelta(minutes=10))

#: Runs asked for per request of a look (:func:`announce_scheduled_runs`).
ANNOUNCE_PAGE = 100


def announce_scheduled_runs(deployment_ids: list[Any], stop: Any, every: float = ANNOUNCE_SECONDS) -> None:
    """In ``fdp serve``: announce each scheduler-created run of the served deployments, whatever its state.

    Until ``stop`` (a ``threading.Event``) is set, every ``every`` seconds (:func:`_announce`), each run expected to
    start within :data:`ANNOUNCE_WINDOW` of now that this process has not announced yet. A run seen while still
    *Scheduled* has its later state events reach the automations at once; a run the runner started between two
    looks and that died before it could announce itself (its *Crashed* event held by the server) is announced at
    the next look, and the server then evaluates the held events in order: the crash is told within ``every``
    seconds, not 15 minutes late. Errors are logged and the loop goes on (the run announces itself too).
    """
    import logging

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        DeploymentFilter,
        DeploymentFilterId,
        FlowRunFilter,
        FlowRunFilterExpectedStartTime,
    )
    from prefect.client.schemas.sorting import FlowRunSort
    from prefect.events.worker import EventsWorker

    done: set[Any] = set()
    deployments = DeploymentFilter(id=DeploymentFilterId(any_=list(deployment_ids)))
    while not stop.is_set():
        try:
            now = datetime.now(UTC)
            near = FlowRunFilter(expected_start_time=FlowRunFilterExpectedStartTime(
                after_=now - ANNOUNCE_WINDOW[0], before_=now + ANNOUNCE_WINDOW[1]))
            with get_client(sync_client=True) as client:
                seen: set[Any] = set()
                while True:  # page by page: many series on a minute cron exceed one answer of the server
                    page = client.read_flow_runs(deployment_filter=deployments, flow_run_filter=near, offset=len(seen),
                                                 limit=ANNOUNCE_PAGE, sort=FlowRunSort.EXPECTED_START_TIME_ASC)
                    for run in page:
                        seen.add(run.id)
                        if run.id not in done and run.auto_scheduled:
                            _announce(client, run)
                    if len(page) < ANNOUNCE_PAGE:
                        break
                done = seen  # a run that left the window never comes back into it
            EventsWorker.instance().wait_until_empty()  # one flush per look, not per run
        except Exception as exc:  # noqa: BLE001 - the server may be restarting: try again at the next look
            logging.getLogger("fdp").debug("could not announce scheduled runs (%s)", type(exc).__name__)
        stop.wait(every)


def _budget_cause(cause: str) -> str | None:
    """``"period"`` or ``"total"`` when the run's message is a budget refusal (BudgetExceededError), else None."""
    if "BudgetExceededError" not in cause:
        return None
    return "period" if "allowance of period" in cause else "total"


def failure_message(series: str, period: str, state_name: str, ledger_url: str | None, dataset_id: str | None,
                    cause: str = "") -> str:
    """The notification text of a failed run: series, month, ledger state and budget, next step (no data).

    It reads the ledger when it is called (at send time), so a release published meanwhile is told as published.
    ``cause`` is the run's state message; only its kind is used (a budget refusal and what ran out, a config changed
    since ``fdp serve``), never its text. A release held by another live run is told as possibly publishing (:data:`LIVE_STEP`), never as lost.
    """
    ledger_text, budget_text, step = _failure_parts(series, period, ledger_url, dataset_id, cause)
    return (f"fdp: scheduled release {series}-{period} (series {series}, month {period}) ended {state_name}. "
            f"Ledger: {ledger_text}. Budget: {budget_text}. Next step: {step} "
            "(docs/operations.md, Recovering a failed run).")


def _failure_parts(series: str, period: str, ledger_url: str | None, dataset_id: str | None,
                   cause: str) -> tuple[str, str, str]:
    """(ledger state, budget, next step) of :func:`failure_message`, read from the ledger now."""
    release_id = f"{series}-{period}"
    record, budget_text, live, has_policy = None, "unknown (the ledger could not be read)", False, True
    dataset = dataset_id
    read = False
    try:
        ledger = Ledger(ledger_url or default_ledger_url(), read_only=True)
        record = ledger.get(release_id)
        read = True
        dataset = dataset_id or (record.dataset_id if record is not None else None)
        budgets = ledger.budgets(dataset) if dataset else []
        live = record is not None and record.state in ("reserved", "noised") and owner_may_be_running(
            release_owner(record))
        if budgets:
            b = budgets[0]
            month = next((p for p in b.periods if p.period == period), None)
            budget_text = f"dataset {b.dataset_id}: remaining epsilon {b.remaining[0]:.6g} of {b.total[0]:g} in total"
            if month is not None and month.allowance is not None and month.remaining is not None:
                budget_text += (f"; {period}: spent epsilon {month.spent[0]:.6g} of {month.allowance[0]:g} allowed, "
                                f"remaining {month.remaining[0]:.6g}")
        else:
            has_policy = False
            budget_text = f"no budget policy for dataset {dataset} yet" if dataset else "no budget policy yet"
    except Exception:  # noqa: BLE001 - a notification is sent even when the ledger is the problem
        pass
    if not read:  # trial Q: "Ledger: no entry" went out for months already published while PostgreSQL was down
        return "unknown (the ledger could not be read)", budget_text, UNREAD_STEP.format(release_id=release_id)
    ledger_state = record.state if record is not None else "none"
    budget = _budget_cause(cause)
    if CONFIG_CHANGED in cause:
        step = CONFIG_STEP
    elif live:
        step = LIVE_STEP.format(release_id=release_id, minutes=max(1, math.ceil(wait_seconds() / 60)))
    elif ledger_state == "none" and budget is not None:
        step = BUDGET_STEP[budget if has_policy else "proposal"].format(period=period, dataset=dataset or "?")
    else:
        step = NEXT_STEP.get(ledger_state, NEXT_STEP["none"]).format(release_id=release_id, period=period)
    return "no entry" if record is None else ledger_state, budget_text, step


def _notified_path() -> Path:
    return state_dir() / "notified.json"


def _read_notified() -> dict[str, Any]:
    try:
        data = json.loads(_notified_path().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_notified(data: dict[str, Any]) -> None:
    path = _notified_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(data, sort_keys=True))
    os.replace(tmp, path)


def already_notified(series: str, period: str, cause: str) -> bool:
    """Whether a failure of ``series`` in ``period`` for this ``cause`` was already sent; records it if not.

    The record is ``<fdp state dir>/notified.json`` (``$FDP_STATE_DIR``; on the machine that runs ``fdp serve``):
    per series, the month and a SHA-256 of the cause (the run's final state, the release's ledger state and the
    run's error message; the file holds no message). A new month, another cause, or a completed run of the series
    in between (:func:`forget_notified`) notifies again.
    """
    digest = hashlib.sha256(cause.encode()).hexdigest()
    data = _read_notified()
    if data.get(series) == {"period": period, "cause": digest}:
        return True
    data[series] = {"period": period, "cause": digest}
    _write_notified(data)
    return False


def forget_notified(series: str) -> None:
    """A completed run of ``series``: its next failure notifies again, whatever its cause."""
    data = _read_notified()
    if series in data:
        del data[series]
        _write_notified(data)


def notify_failure(flow: Any, run: Any, state: Any) -> None:
    """Flow-run state hook (on failure): post :func:`failure_message` to the configured webhook.

    Crashes are told by the server-side automation (:func:`ensure_failure_automations`), which needs no live process.
    """
    from prefect.blocks.notifications import CustomWebhookNotificationBlock

    params = run.parameters or {}
    url = params.get("notify_url") or os.environ.get("FDP_NOTIFY_URL")
    if not url:
        return
    series = str(params.get("series", "?"))
    start = run.expected_start_time or datetime.now(UTC)
    period, release_id = release_calendar(series, start)
    cause = str(state.message or "")
    ledger_text, _, step = _failure_parts(series, period, params.get("ledger_url"), params.get("dataset_id"), cause)
    if already_notified(series, period, "\n".join((state.name, ledger_text, step, cause))):
        get_run_logger().info("a failure of series %s in %s with the same cause was already notified: no webhook "
                              "sent this time (a completed run, a new month or another cause notifies again)",
                              series, period)
        return
    text = failure_message(series, period, state.name, params.get("ledger_url"), params.get("dataset_id"), cause)
    block = CustomWebhookNotificationBlock(
        name="fdp-failed-release", url=url, allow_private_urls=True, timeout=10,
        json_data={"text": "{{body}}", "subject": "{{subject}}", "series": series, "month": period,
                   "release_id": release_id, "state": state.name})
    try:
        block.notify(body=text, subject=f"fdp: {release_id} {state.name}")
    except Exception as exc:  # noqa: BLE001 - say so in the run's log; never mask the run's own state
        get_run_logger().warning("the failure notification to the webhook could not be sent (%s)", type(exc).__name__)


@flow(name="scheduled-release", flow_run_name=scheduled_run_name, persist_result=False, retries=0,
      on_failure=[notify_failure])
def scheduled_release(
    config_path: str,
    series: str,
    config_sha256_served: str,
    ledger_url: str | None = None,
    out_root: str = "releases",
    notify_url: str | None = None,
    dataset_id: str | None = None,
) -> dict[str, Any]:
    """Run the release of series ``series`` (config ``config_path``) for the period of this run's scheduled start.

    Files go to ``<out_root>/<series>/<period>/``. The summary's own flow runs as a subflow with the
    same name, so its artifacts (release note, budget splits, plot) appear under it in the UI.
    ``notify_url`` (a webhook) is told when the run fails or crashes; ``dataset_id`` names the budget
    shown in that notification.

    Raises:
        ConfigError: the config file changed since ``fdp serve`` deployed it (its hash differs from
            ``config_sha256_served``), or names another series; nothing is charged.
    """
    quiet_expected_tracebacks()  # a refused run (budget, config, data) logs its reason once, without a stack
    announce_scheduled_state()  # a cron tick's run: its crash is told at once, not 15 minutes late
    config = load_config(config_path)
    digest = config_sha256(config)
    if digest != config_sha256_served or series_name(config) != series:
        raise ConfigError(
            f"config {Path(config_path).name!r} {CONFIG_CHANGED} {series!r} was served (config sha256 "
            f"{digest[:12]}... instead of {config_sha256_served[:12]}...); restart `fdp serve` to serve the new "
            "definition (under a new release.name if the series has releases). Nothing was charged")
    period, release_id = release_calendar(series, _scheduled_start())
    url = ledger_url or default_ledger_url()
    with suppress(NotResumableError):  # noised, not published: the summary's run waits for a live one or says so
        precheck_budget(url, config, release_id, period)  # a spent allowance is refused before the data are read
    out_dir = Path(out_root) / series / period
    summary_flow: Any = SUMMARIES[config.summary].flow
    state = summary_flow.with_options(flow_run_name=release_id)(
        config=config, config_sha256=digest, config_dir=str(Path(config_path).resolve().parent),
        out_dir=str(out_dir), ledger_url=url, release_id=release_id, period=period, return_state=True,
    )
    manifest: dict[str, Any] = state.result()  # raises the summary flow's own error when it failed
    if manifest.get("provenance", {}).get("flow_run_id") != str(state.state_details.flow_run_id):
        # published by another run (earlier, or while this one waited): the same line as the summary's run, here too
        get_run_logger().info("release %s: already published — files re-written, nothing charged", release_id)
    forget_notified(series)  # the series works again: its next failure is told, whatever its cause
    return manifest
