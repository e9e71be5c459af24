"""The ``mean_release`` Prefect flow: ingest -> align -> clip -> plan -> summarise -> charge -> noise -> publish."""

from __future__ import annotations

from typing import Any

from prefect import flow

from fdp.flows._steps import Progress, already_published, announce, cancel_unless_noised, charge
from fdp.schemas import ReleaseConfig
from fdp.tasks import (
    charge_request,
    clip_curves,
    draw_noise,
    load_curves,
    plan_release,
    publish_release,
    summarise_curves,
)
from fdp.tasks.mean import select_parameters
from fdp.tasks.streaming import stream_curves, summarise_sums


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
    if (done := already_published(ledger_url, release_id, config_sha256, out_dir)) is not None:
        return done
    progress = Progress(release_id)
    streaming = config.engine.name != "memory"  # local/dask: exact sums chunk by chunk (fdp.tasks.streaming)
    batch = stream_curves(config, config_dir) if streaming else clip_curves(load_curves(config, config_dir), config)
    progress(40, "curves aligned and clipped")
    plan = plan_release(config, batch.n_samples)
    pending = plan.plan.pending  # dp_select / pcv: parameters are chosen from the data after the charge
    summary = None if pending else (summarise_sums if streaming else summarise_curves)(batch, plan)
    progress(60, "noise planned from public inputs")
    request = charge_request(config, config_sha256, plan, batch.counts).model_copy(update={"period": period})
    if (done := charge(ledger_url, release_id, request, out_dir, config.budget)) is not None:
        return done
    progress(70, "budget charged")
    with cancel_unless_noised(ledger_url, release_id):
        noised = False
        if pending:
            noised = plan.plan.tuning == "dp_select"  # select_parameters marks the charge final before its draw
            plan = select_parameters(ledger_url, release_id, batch, plan)
            summary = summarise_curves(batch, plan)
        values = draw_noise(ledger_url, release_id, plan, summary, noised)
    progress(85, "noise drawn")
    manifest = publish_release(ledger_url, release_id, config, config_sha256, plan, values, out_dir)
    progress(100, "published")
    return announce(manifest, "mean-release", out_dir)
