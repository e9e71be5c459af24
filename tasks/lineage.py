"""Lineage shared by every release flow: OpenLineage START, then exactly one COMPLETE or FAIL/ABORT event per run.

A run that publishes ends with the release's COMPLETE event (its ``fdp_privacy`` facet, :func:`emit_lineage`); a run
that only re-writes the files of a release already published ends with a plain COMPLETE event of its own run id
(:func:`lineage_rewritten`: no facet, so a consumer that counts releases or sums epsilon counts each release once).
"""

from __future__ import annotations

from typing import Any

from fdp.tasks._settings import data_task
from prefect.logging import get_run_logger
from prefect.runtime import flow_run

from fdpcore.io.lineage import emit_release_event, emit_state_event
from fdpcore.ledger import Ledger

__all__ = ["emit_lineage", "lineage_failed", "lineage_rewritten", "lineage_started"]


def lineage_started(release_id: str) -> None:
    """Emit the ``START`` event of this flow run (best effort, like every lineage event)."""
    try:
        emit_state_event("START", run_id=str(flow_run.id), job_name=str(flow_run.flow_name), release_id=release_id)
    except Exception as exc:  # noqa: BLE001 - lineage never stops a release
        get_run_logger().warning("lineage START for %s not emitted: %s", release_id, type(exc).__name__)


def lineage_rewritten(release_id: str) -> None:
    """Emit the ``COMPLETE`` event of this flow run when it re-wrote a published release's files (best effort)."""
    try:
        emit_state_event("COMPLETE", run_id=str(flow_run.id), job_name=str(flow_run.flow_name), release_id=release_id)
    except Exception as exc:  # noqa: BLE001 - lineage never stops a release
        get_run_logger().warning("lineage COMPLETE for %s not emitted: %s", release_id, type(exc).__name__)


def lineage_failed(flow: Any, run: Any, state: Any) -> None:
    """Flow-run state hook: ``FAIL`` for a failed run, ``ABORT`` for a crashed one (no error text: it may quote data)."""
    try:
        emit_state_event("ABORT" if state.is_crashed() else "FAIL", run_id=str(run.id), job_name=flow.name,
                         release_id=str((run.parameters or {}).get("release_id", "")))
    except Exception:  # noqa: BLE001 - lineage is best effort; the run's own state stands
        pass


@data_task(name="emit-lineage")
def emit_lineage(manifest: dict[str, Any], job_name: str, out_dir: str, ledger_url: str | None = None) -> bool:
    """Emit the release's OpenLineage ``COMPLETE`` event (built from the public manifest only).

    A lineage back end that is down must not undo a published release: the failure is logged
    as a warning (the release, its files and its ledger entry stand) and False is returned.
    """
    try:
        ledger_id = Ledger(ledger_url).ledger_id if ledger_url else None
        return emit_release_event(manifest, job_name=job_name, out_dir=out_dir, ledger_id=ledger_id) is not None
    except Exception as exc:  # noqa: BLE001 - lineage is best effort after publication
        get_run_logger().warning("lineage event for %s not emitted: %s", manifest["release_id"], type(exc).__name__)
        return False
