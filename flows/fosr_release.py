"""The ``fosr_release`` Prefect flow: ingest -> align -> centre -> clip -> covariates -> plan -> summarise -> charge -> noise -> publish."""

from __future__ import annotations

from typing import Any

from fdp.flows._steps import Progress, already_published, announce, cancel_unless_noised, charge
from fdp.schemas.fosr import FosrReleaseConfig
from fdp.tasks import clip_curves, load_curves
from fdp.tasks.covariance import center_curves
from fdp.tasks.fosr import (
    draw_fosr,
    fosr_charge_request,
    fosr_reference,
    load_covariates,
    plan_fosr,
    publish_fosr,
    summarise_fosr_data,
    summarise_fosr_stream,
)
from fdp.tasks.lineage import lineage_failed
from fdp.tasks.mean import check_same_cost, choose_public_parameters, plan_public_choices
from fdp.tasks.streaming import stream_curves
from prefect import flow


@flow(name="fosr-release", flow_run_name="fosr-release-{release_id}", persist_result=False, retries=0,
      on_failure=[lineage_failed], on_crashed=[lineage_failed])
def fosr_release(
    config: FosrReleaseConfig,
    config_sha256: str,
    config_dir: str,
    out_dir: str,
    ledger_url: str,
    release_id: str,
    period: str | None = None,
) -> dict[str, Any]:
    """Publish differentially private function-on-scalar regression coefficient curves; returns the manifest.

    Same contract as ``mean_release``. The cost is one charge with two named parts (T1 with
    ``gamma epsilon``, T2 with the rest); the charge is made final right before the single draw of
    both parts, and the coefficient curves are assembled from the noisy parts only. With ``tau: auto``
    the charge also holds the ``tau`` split (priced at ``tau_Y = 1``: the cost does not depend on it);
    after it, ``tau_Y`` is drawn (a DP quantile of the centred responses' norms), the responses are
    clipped to it and the plan is finished with it (same cost) before the noise.
    """
    if (done := already_published(ledger_url, release_id, config_sha256, out_dir)) is not None:
        return done
    progress = Progress(release_id)
    auto = config.clipping.tau == "auto"  # tau_Y bought with budget (engine memory): drawn after the charge, then clipped
    if config.engine.name != "memory":  # local/dask: curves and covariates chunk by chunk into exact sums
        batch = stream_curves(config, config_dir, center=fosr_reference(config), covariates=True)
        plan = plan_fosr(config, batch.n_samples)
        data = summarise_fosr_stream(batch, plan)
        counts = batch.counts
    else:
        curves = load_curves(config, config_dir)
        choices = plan_public_choices(config, curves.n_samples) if auto else ()
        plan = plan_fosr(config, curves.n_samples, 1.0 if auto else None, choices)
        covariates = load_covariates(config, config_dir, curves.n_samples)
        batch = center_curves(curves, plan.reference)
        batch = batch if auto else clip_curves(batch, config)
        data = None if auto else summarise_fosr_data(batch, covariates, plan)
        counts = {**batch.counts, **covariates.counts}  # internal ledger entry only
    progress(40, "data read" + ("" if auto else ", clipped and summarised") + "; noise planned from public inputs")
    request = fosr_charge_request(config, config_sha256, plan, counts).model_copy(update={"period": period})
    if (done := charge(ledger_url, release_id, request, out_dir, config.budget)) is not None:
        return done
    progress(60, "budget charged; drawing the noise")
    with cancel_unless_noised(ledger_url, release_id):
        if auto:  # marks the charge final before the quantile draw
            batch, choices = choose_public_parameters(ledger_url, release_id, config, config_dir, batch, choices)
            plan = plan_fosr(config, batch.n_samples, choices[0].value, choices)
            check_same_cost(request, plan)
            data = summarise_fosr_data(batch, covariates, plan)
        drawn = draw_fosr(ledger_url, release_id, plan, data, auto)
    progress(80, "noise drawn; publishing")
    manifest = publish_fosr(ledger_url, release_id, config, config_sha256, plan, drawn, out_dir)
    progress(100, "published")
    return announce(manifest, "fosr-release", out_dir, ledger_url)
