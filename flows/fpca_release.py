"""The ``fpca_release`` Prefect flow: ingest -> align -> centre -> clip -> plan -> summarise -> charge -> draw -> publish."""

from __future__ import annotations

from typing import Any

from prefect import flow

from fdp.schemas.fpca import FpcaReleaseConfig
from fdp.tasks import cancel_reservation, charge_budget, check_existing_release, clip_curves, load_curves
from fdp.tasks.fpca import (
    center_curves,
    draw_components,
    fpca_charge_request,
    plan_fpca,
    publish_fpca,
    summarise_fpca,
)
from fdp.tasks.mean import republish_release
from fdpcore.errors import ReleaseConflictError


@flow(name="fpca-release", flow_run_name="fpca-release-{release_id}", persist_result=False, retries=0)
def fpca_release(
    config: FpcaReleaseConfig,
    config_sha256: str,
    config_dir: str,
    out_dir: str,
    ledger_url: str,
    release_id: str,
    period: str | None = None,
) -> dict[str, Any]:
    """Publish the span of k private functional principal components; returns the public manifest.

    Same contract as ``mean_release``: the mechanism is fixed from public inputs, the full
    epsilon is charged atomically, the charge is made final right before the single
    data-dependent draw, and a re-run of a published ``release_id`` rewrites its files
    from the ledger and charges nothing. ``period`` is the budget period charged.
    """
    existing = check_existing_release(ledger_url, release_id)
    if existing is not None and existing.config_sha256 != config_sha256:
        raise ReleaseConflictError(
            f"release id {release_id!r} was already used with a different config; choose a new --release-id"
        )
    if existing is not None and existing.state == "published":
        return republish_release(existing, out_dir)
    plan = plan_fpca(config)
    batch = clip_curves(center_curves(load_curves(config, config_dir), plan), config)
    gram = summarise_fpca(batch, plan)
    request = fpca_charge_request(config, config_sha256, plan, batch.counts).model_copy(update={"period": period})
    charge = charge_budget(ledger_url, release_id, request)
    if charge["published"]:  # published concurrently by another run of the same id
        return republish_release(check_existing_release(ledger_url, release_id), out_dir)
    try:
        frame = draw_components(ledger_url, release_id, plan, gram)
    except BaseException:
        cancel_reservation(ledger_url, release_id)  # only while no draw exists (state 'reserved')
        raise
    return publish_fpca(ledger_url, release_id, config, config_sha256, plan, frame, batch.n_samples, out_dir)
