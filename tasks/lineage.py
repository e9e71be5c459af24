"""Lineage task shared by every release flow: one OpenLineage run event per published release."""

from __future__ import annotations

from typing import Any

from prefect.logging import get_run_logger

from fdp.tasks._settings import data_task
from fdpcore.io.lineage import emit_release_event

__all__ = ["emit_lineage"]


@data_task(name="emit-lineage")
def emit_lineage(manifest: dict[str, Any], job_name: str, out_dir: str) -> bool:
    """Emit the release's OpenLineage ``COMPLETE`` event (built from the public manifest only).

    A lineage back end that is down must not undo a published release: the failure is logged
    as a warning (the release, its files and its ledger entry stand) and False is returned.
    """
    try:
        return emit_release_event(manifest, job_name=job_name, out_dir=out_dir) is not None
    except Exception as exc:  # noqa: BLE001 - lineage is best effort after publication
        get_run_logger().warning("lineage event for %s not emitted: %s", manifest["release_id"], type(exc).__name__)
        return False
