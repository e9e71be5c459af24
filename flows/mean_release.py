"""The ``mean_release`` Prefect flow: ingest -> align -> clip -> plan -> summarise -> charge -> noise -> publish."""

from __future__ import annotations

from typing import Any

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
from fdp.tasks.lineage import lineage_failed
from fdp.tasks.mean import (
    check_same_cost,
    choose_public_parameters,
    mean_reference,
    plan_public_choices,
    select_parameters,
    uses_public_choices,
)
from fdp.tasks.streaming import stream_curves, summarise_sums
from prefect import flow


@flow(name="mean-release", flow_run_name="mean-release-{release_id}", persist_result=False, retries=0,
      on_failure=[lineage_failed], on_crashed=[lineage_failed])
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
    then the selection runs, then the noise is drawn. With ``tau: auto`` / ``value_offset: auto`` the
    charge also holds their splits; after it, the centre and ``tau`` are drawn (DP quantiles), the
    curves are clipped to the released ``tau``, and the plan is finished with it. A re-run of a published ``release_id``
    re-writes its files from the ledger and
    charges nothing. ``period`` is the budget period charged (default: the current month).
    """
    if (done := already_published(ledger_url, release_id, config_sha256, out_dir)) is not None:
        return done
    progress = Progress(release_id)
    streaming = config.engine.name != "memory"  # local/dask: exact sums chunk by chunk (fdp.tasks.streaming)
    auto = uses_public_choices(config)  # tau/value_offset bought with budget: drawn after the charge
    if streaming:
        batch = stream_curves(config, config_dir, center=mean_reference(config))
    else:
        batch = load_curves(config, config_dir)
        batch = batch if auto else clip_curves(batch, config)
    progress(40, "curves aligned" + ("" if auto else " and clipped"))
    choices = plan_public_choices(config, batch.n_samples) if auto else ()
    plan = plan_release(config, batch.n_samples, 1.0 if config.clipping.tau == "auto" else None, choices)
    pending = plan.plan.pending or auto  # dp_select / pcv / auto: finished from the data after the charge
    summary = None if pending else (summarise_sums if streaming else summarise_curves)(batch, plan)
    progress(60, "noise planned from public inputs")
    request = charge_request(config, config_sha256, plan, batch.counts).model_copy(update={"period": period})
    if (done := charge(ledger_url, release_id, request, out_dir, config.budget)) is not None:
        return done
    progress(70, "budget charged")
    with cancel_unless_noised(ledger_url, release_id):
        noised = False
        if auto:  # marks the charge final before its quantile draws
            batch, choices = choose_public_parameters(ledger_url, release_id, config, config_dir, batch, choices)
            tau = next((c.value for c in choices if c.name == "tau"), None)
            plan = plan_release(config, batch.n_samples, tau, choices)
            check_same_cost(request, plan)
            noised = True
        if plan.plan.pending:
            selection_marks = plan.plan.tuning == "dp_select" and not noised  # it marks the charge final first
            plan = select_parameters(ledger_url, release_id, batch, plan, noised)
            noised = noised or selection_marks
        if pending:
            summary = summarise_curves(batch, plan)
        values = draw_noise(ledger_url, release_id, plan, summary, noised)
    progress(85, "noise drawn")
    manifest = publish_release(ledger_url, release_id, config, config_sha256, plan, values, out_dir)
    progress(100, "published")
    return announce(manifest, "mean-release", out_dir, ledger_url)
