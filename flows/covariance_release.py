"""The ``covariance_release`` Prefect flow: ingest -> align -> centre -> clip -> plan -> summarise -> charge -> noise -> publish."""

from __future__ import annotations

from typing import Any

from fdp.flows._steps import Progress, already_published, announce, cancel_unless_noised, charge
from fdp.schemas.covariance import CovarianceReleaseConfig
from fdp.tasks import clip_curves, load_curves
from fdp.tasks.covariance import (
    center_curves,
    covariance_center,
    covariance_charge_request,
    draw_covariance,
    plan_covariance,
    publish_covariance,
    summarise_covariance_curves,
    summarise_covariance_stream,
)
from fdp.tasks.lineage import lineage_failed
from fdp.tasks.mean import check_same_cost, choose_public_parameters, plan_public_choices
from fdp.tasks.streaming import stream_curves
from prefect import flow


@flow(name="covariance-release", flow_run_name="covariance-release-{release_id}", persist_result=False, retries=0,
      on_failure=[lineage_failed], on_crashed=[lineage_failed])
def covariance_release(
    config: CovarianceReleaseConfig,
    config_sha256: str,
    config_dir: str,
    out_dir: str,
    ledger_url: str,
    release_id: str,
    period: str | None = None,
) -> dict[str, Any]:
    """Publish one differentially private covariance surface and its leading eigenfunctions; returns the manifest.

    Same contract as ``mean_release``: the centre (public, or a published private mean found in the
    ledger) and everything that sets the noise are fixed from public inputs, the full epsilon is
    charged atomically, the charge is made final right before the single draw, and a re-run of a
    published ``release_id`` rewrites its files from the ledger and charges nothing. With ``tau: auto``
    the charge also holds the ``tau`` split (priced at ``tau = 1``: the cost does not depend on it); after
    it, ``tau`` is drawn (a DP quantile of the norms of the records the clip applies to: centred by the
    public or released centre, or raw for ``sample_mean``), the records are clipped to it and the plan is
    finished with it (same cost) before the surface's noise.
    """
    if (done := already_published(ledger_url, release_id, config_sha256, out_dir)) is not None:
        return done
    progress = Progress(release_id)
    center, link = covariance_center(config, ledger_url)
    auto = config.clipping.tau == "auto"  # tau bought with budget (engine memory): drawn after the charge, then clipped
    if config.engine.name != "memory":  # local/dask: exact sums and outer products chunk by chunk
        batch = stream_curves(config, config_dir, center=center, outer=True)
        plan = plan_covariance(config, batch.n_samples, center, link)
        summary = summarise_covariance_stream(batch, plan)
    elif auto:
        batch = center_curves(load_curves(config, config_dir), center)
        choices = plan_public_choices(config, batch.n_samples)
        plan = plan_covariance(config, batch.n_samples, center, link, 1.0, choices)
        summary = None
    else:
        batch = clip_curves(center_curves(load_curves(config, config_dir), center), config)
        plan = plan_covariance(config, batch.n_samples, center, link)
        summary = summarise_covariance_curves(batch, plan)
    progress(40, "data read" + ("" if auto else ", clipped and summarised") + "; noise planned from public inputs")
    request = covariance_charge_request(config, config_sha256, plan, batch.counts).model_copy(update={"period": period})
    if (done := charge(ledger_url, release_id, request, out_dir, config.budget)) is not None:
        return done
    progress(60, "budget charged; drawing the noise")
    with cancel_unless_noised(ledger_url, release_id):
        if auto:  # marks the charge final before the quantile draw
            batch, choices = choose_public_parameters(ledger_url, release_id, config, config_dir, batch, choices)
            plan = plan_covariance(config, batch.n_samples, center, link, choices[0].value, choices)
            check_same_cost(request, plan)
            summary = summarise_covariance_curves(batch, plan)
        coefficients = draw_covariance(ledger_url, release_id, plan, summary, auto)
    progress(80, "noise drawn; publishing")
    manifest = publish_covariance(ledger_url, release_id, config, config_sha256, plan, coefficients, out_dir)
    progress(100, "published")
    return announce(manifest, "covariance-release", out_dir, ledger_url)
