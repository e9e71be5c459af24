"""The ``mean_release`` Prefect flow: ingest -> align -> clip -> plan -> summarise -> charge -> noise -> publish."""

from __future__ import annotations

from typing import Any

from prefect import flow

from fdp.schemas import ReleaseConfig
from fdp.tasks import (
    cancel_reservation,
    charge_budget,
    charge_request,
    check_existing_release,
    clip_curves,
    draw_noise,
    load_curves,
    plan_release,
    publish_release,
    republish_release,
    summarise_curves,
)
from fdp.tasks.lineage import emit_lineage
from fdp.tasks.mean import select_parameters
from fdpcore.errors import ReleaseConflictError


@flow(name="mean-release", flow_run_name="mean-release-{release_id}", persist_result=False, retries=0)
def mean_release(
    config: ReleaseConfig,
    config_sha256: str,
    config_dir: str,
    out_dir: str,
    ledger_url: str,
    release_id: str,
    period: str | None = None,
) -> dict[str, Any]:
    """Publish one differentially private mean curve; returns the public manifest.

    Order is the privacy contract: everything that sets the noise is fixed from public
    inputs, the budget is charged atomically, and only then is noise drawn (once).
    With data-dependent tuning (``dp_select``) the full cost (selection + mean) is charged first,
    then the selection runs, then the noise is drawn. A re-run of a published ``release_id``
    re-writes its files from the ledger and
    charges nothing. ``period`` is the budget period charged (default: the current month).
    """
    existing = check_existing_release(ledger_url, release_id)
    if existing is not None and existing.config_sha256 != config_sha256:
        raise ReleaseConflictError(
            f"release id {release_id!r} was already used with a different config; choose a new --release-id"
        )
    if existing is not None and existing.state == "published":
        return republish_release(existing, out_dir)
    batch = clip_curves(load_curves(config, config_dir), config)
    plan = plan_release(config, batch.n_samples)
    pending = plan.plan.pending  # dp_select / pcv: parameters are chosen from the data after the charge
    summary = None if pending else summarise_curves(batch, plan)
    request = charge_request(config, config_sha256, plan, batch.counts).model_copy(update={"period": period})
    charge = charge_budget(ledger_url, release_id, request)
    if charge["published"]:  # published concurrently by another run of the same id
        return republish_release(check_existing_release(ledger_url, release_id), out_dir)
    try:
        noised = False
        if pending:
            noised = plan.plan.tuning == "dp_select"  # select_parameters marks the charge final before its draw
            plan = select_parameters(ledger_url, release_id, batch, plan)
            summary = summarise_curves(batch, plan)
        values = draw_noise(ledger_url, release_id, plan, summary, noised)
    except BaseException:
        cancel_reservation(ledger_url, release_id)  # only while no noise exists (state 'reserved')
        raise
    manifest = publish_release(ledger_url, release_id, config, config_sha256, plan, values, out_dir)
    emit_lineage(manifest, "mean-release", out_dir)
    return manifest
