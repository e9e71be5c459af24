"""Ledger tasks shared by every release flow: look up, charge, mark noised, cancel, close.

Each summary's flow calls them in the same order (DESIGN.md invariant 2): charge the full
cost atomically before any noise exists, mark the charge final immediately before the noise
is drawn, cancel only while no noise exists, and close the entry with the public outputs.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from fdp.schemas import ChargeRequest
from fdp.tasks import _publish
from fdp.tasks._settings import data_task
from prefect import get_run_logger
from prefect.runtime import flow_run

import fdpcore
from fdpcore.errors import ConcurrentRunError, NotResumableError
from fdpcore.io.provenance import git_sha, operator_host
from fdpcore.ledger import Ledger, ReleaseRecord, owner_may_be_running, release_owner, wait_seconds

__all__ = [
    "attach_flow_run",
    "await_other_run",
    "cancel_reservation",
    "charge_budget",
    "check_existing_release",
    "close_release",
    "mark_noised",
    "period_and_budget",
    "provenance",
    "republish_release",
]


def provenance(config_sha256: str, *, public: bool = False) -> dict[str, Any]:
    """Provenance of a release run: code version and git commit, config hash, flow run, operator, host.

    ``public=True`` leaves out the operator and host: they go to the ledger, not into public files.
    """
    record: dict[str, Any] = {
        "code_version": fdpcore.__version__,
        "git_sha": git_sha(),
        "created_at": datetime.now(UTC).isoformat(),
        "config_sha256": config_sha256,
        "flow_run_id": str(flow_run.id) if flow_run.id else None,
    }
    if not public:
        record["operator"], record["host"] = operator_host()
    return record


@data_task(name="check-existing-release")
def check_existing_release(ledger_url: str, release_id: str) -> ReleaseRecord | None:
    """The ledger row of ``release_id`` if it exists (for idempotent re-runs)."""
    return Ledger(ledger_url).get(release_id)


@data_task(name="charge-budget")
def charge_budget(ledger_url: str, release_id: str, request: ChargeRequest) -> dict[str, Any]:
    """Reserve the release's full cost atomically in the ledger, before any noise exists.

    Returns ``{"charged": bool, "published": bool}``: a re-run of a published id charges nothing.
    """
    outcome = Ledger(ledger_url).reserve(
        release_id=release_id, dataset_id=request.dataset_id, epsilon=request.epsilon, delta=request.delta,
        config_sha256=request.config_sha256, summary=request.summary, mechanism=request.mechanism,
        sensitivity_formula=request.sensitivity_formula,
        budget_splits=[s.model_dump(mode="json") for s in request.budget_splits],
        provenance=provenance(request.config_sha256), internal=request.internal, period=request.period,
        rho=request.rho, proposal=None if request.budget_proposal is None else {
            "epsilon": request.budget_proposal.epsilon, "delta": request.budget_proposal.delta,
            **request.budget_proposal.policy()},
        non_private=request.non_private,
    )
    return {"charged": outcome.charged, "published": outcome.published}


@data_task(name="await-other-run")
def await_other_run(ledger_url: str, release_id: str) -> str:
    """Before resuming a reservation, wait while another live run of the same release id works on it.

    Returns ``"mine"`` when this run may go on (the reservation's owner stopped and this run took it over,
    atomically, or it was this process's own), ``"published"`` when the other run published it (this run
    re-writes its files from the ledger) and ``"cancelled"`` when it gave its reservation back (this run
    charges afresh). So two live runs of one id never race for the same noise: one draws, the others wait.

    Raises:
        NotResumableError: the other run drew the noise and stopped without publishing (the noise is lost).
        ConcurrentRunError: the other run did not finish within ``$FDP_WAIT_SECONDS``; this run charged nothing.
    """
    ledger = Ledger(ledger_url)
    deadline = time.monotonic() + wait_seconds()
    while True:
        record = ledger.get(release_id)
        if record is None or record.state == "cancelled":
            return "cancelled"
        if record.state == "published":
            return "published"
        live = owner_may_be_running(release_owner(record))
        if record.state == "reserved" and not live and ledger.take_over(release_id):
            return "mine"
        if record.state == "noised" and not live:
            raise NotResumableError(
                f"release {release_id!r} drew its noise but was not published; its budget is spent. The run that "
                "drew it stopped, so the noise is lost (it is never kept) and the id cannot be resumed: run again "
                "with a new --release-id")
        if time.monotonic() > deadline:
            raise ConcurrentRunError(
                f"another run of release {release_id!r} is still working on it after FDP_WAIT_SECONDS = "
                f"{wait_seconds():g} s; this run charged nothing. Wait for it, then re-run with --release-id "
                f"{release_id} to get its files")
        time.sleep(0.5)


@data_task(name="attach-flow-run")
def attach_flow_run(ledger_url: str, release_id: str, summary: str) -> list[str]:
    """Record this flow run in the ledger for ``release_id`` and mark its stale runs Crashed; returns their ids.

    A re-run of a release id (a resumed reservation, a re-published release) finds the earlier runs of
    the same release that are still *Running* or *Pending* in the orchestrator — their process died
    (``kill -9``, a lost machine) — and sets them, and their still-running parent runs, to *Crashed*
    with a message naming this run. Candidates are the runs recorded in the ledger for the release and
    the runs named after it (``<release id>`` for scheduled runs, ``<summary>-release-<release id>``).
    An orchestrator that cannot be asked never fails the release: a warning is logged.
    """
    current = str(flow_run.id) if flow_run.id else None
    if current is None:
        return []
    ledger = Ledger(ledger_url)
    ledger.record_flow_run(release_id, current)
    record = ledger.get(release_id)
    if record is not None and owner_may_be_running(release_owner(record)):
        return []  # the run that reserved or noised it is alive (it may be finishing): it is not stale
    try:
        return _crash_stale_runs(release_id, summary, current, ledger.flow_runs(release_id))
    except Exception as exc:  # noqa: BLE001 - bookkeeping in the orchestrator never undoes a release
        get_run_logger().warning("could not check for stale runs of release %s (%s)", release_id, type(exc).__name__)
        return []


def _crash_stale_runs(release_id: str, summary: str, current: str, recorded: list[str]) -> list[str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterId,
        FlowRunFilterName,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.states import Crashed

    live = FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.RUNNING, StateType.PENDING]))
    with get_client(sync_client=True) as client:
        me = client.read_flow_run(UUID(current))
        keep = {me.id, *_ancestors(client, me)}
        candidates = {r.id: r for r in client.read_flow_runs(flow_run_filter=FlowRunFilter(
            state=live, name=FlowRunFilterName(any_=[release_id, f"{summary}-release-{release_id}"])))}
        candidates.update({r.id: r for r in client.read_flow_runs(flow_run_filter=FlowRunFilter(
            state=live, id=FlowRunFilterId(any_=[UUID(i) for i in recorded])))})
        stale = [r for r in candidates.values() if r.id not in keep]
        for run in list(stale):
            stale += [p for p in _ancestors_runs(client, run)
                      if p.id not in keep and p.state is not None and p.state.type in (StateType.RUNNING, StateType.PENDING)
                      and all(p.id != s.id for s in stale)]
        for run in stale:
            client.set_flow_run_state(run.id, Crashed(message=(
                f"marked Crashed by flow run {me.name!r} ({me.id}), which re-ran release {release_id}: this run "
                "stopped without reporting (its process died)")), force=True)
    return [str(r.id) for r in stale]


def _ancestors_runs(client: Any, run: Any) -> list[Any]:
    out = []
    while run.parent_task_run_id is not None:
        task_run = client.read_task_run(run.parent_task_run_id)
        if task_run.flow_run_id is None:
            break
        run = client.read_flow_run(task_run.flow_run_id)
        out.append(run)
    return out


def _ancestors(client: Any, run: Any) -> list[Any]:
    return [r.id for r in _ancestors_runs(client, run)]


def mark_noised(ledger_url: str, release_id: str) -> None:
    """Make the charge final; call inside a noise task immediately before the draw (never refunded after)."""
    Ledger(ledger_url).mark_noised(release_id)


@data_task(name="cancel-reservation")
def cancel_reservation(ledger_url: str, release_id: str) -> bool:
    """Give back a reservation whose release failed before any noise was drawn."""
    ledger = Ledger(ledger_url)
    record = ledger.get(release_id)
    if record is not None and record.state == "reserved":
        ledger.cancel(release_id)
        return True
    return False


def close_release(ledger_url: str, release_id: str, public: dict[str, Any]) -> dict[str, Any]:
    """Store the public outputs and close the ledger entry (before any file is written).

    Returns the outputs as stored: the manifest now carries the audit chain's commitment
    (``audit_commitment``), so write these, not the ones passed in.
    """
    return Ledger(ledger_url).publish(release_id, public)


@data_task(name="republish-release")
def republish_release(record: ReleaseRecord, out_dir: str) -> dict[str, Any]:
    """Re-write a published release's files from the ledger (an idempotent re-run; nothing is charged)."""
    if record.public is None:
        raise fdpcore.InternalError(f"release {record.release_id!r} is published but has no stored outputs")
    return _publish.write_release(record.public, Path(out_dir))


def period_and_budget(ledger_url: str, release_id: str) -> tuple[str, dict[str, Any]]:
    """The budget period a release was charged to, and its dataset's budget (``PrivacyBudget`` form)."""
    ledger = Ledger(ledger_url)
    record = ledger.get(release_id)
    if record is None:
        raise fdpcore.InternalError(f"release {release_id!r} is not in the ledger")
    return record.period, ledger.budgets(record.dataset_id)[0].as_dict()
