"""The ``fpca_release`` Prefect flow: ingest -> align -> centre -> clip -> plan -> summarise -> charge -> draw -> publish."""

from __future__ import annotations

from typing import Any

from fdp.flows._steps import Progress, already_published, announce, cancel_unless_noised, charge
from fdp.schemas.fpca import FpcaReleaseConfig
from fdp.tasks import clip_curves, load_curves
from fdp.tasks.fpca import (
    center_curves,
    draw_components,
    fpca_charge_request,
    plan_fpca,
    publish_fpca,
    summarise_fpca,
)
from fdp.tasks.lineage import lineage_failed
from fdp.tasks.mean import check_same_cost, choose_public_parameters, plan_public_choices
from prefect import flow


@flow(name="fpca-release", flow_run_name="fpca-release-{release_id}", persist_result=False, retries=0,
      on_failure=[lineage_failed], on_crashed=[lineage_failed])
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
    from the ledger and charges nothing. ``period`` is the budget period charged. With ``tau: auto``
    the charge also holds the ``tau`` split (priced at ``tau = 1``: the cost does not depend on it); after
    it, ``tau`` is drawn (a DP median of the centred records' norms), the records are clipped to it and the
    plan is finished with it (same cost) before the components are drawn.
    """
    if (done := already_published(ledger_url, release_id, config_sha256, out_dir)) is not None:
        return done
    progress = Progress(release_id)
    auto = config.clipping.tau == "auto"  # tau bought with budget: drawn after the charge, then clipped
    curves = load_curves(config, config_dir)
    choices = plan_public_choices(config, curves.n_samples) if auto else ()
    plan = plan_fpca(config, curves.n_samples, 1.0 if auto else None, choices)
    batch = center_curves(curves, plan)
    batch = batch if auto else clip_curves(batch, config)
    gram = None if auto else summarise_fpca(batch, plan)
    progress(40, "curves aligned and centred" + ("" if auto else " and clipped"))
    request = fpca_charge_request(config, config_sha256, plan, batch.counts).model_copy(update={"period": period})
    if (done := charge(ledger_url, release_id, request, out_dir, config.budget)) is not None:
        return done
    progress(50, "budget charged; drawing the components (the exponential mechanism's sampler can take a minute)")
    with cancel_unless_noised(ledger_url, release_id):
        if auto:  # marks the charge final before the quantile draw
            batch, choices = choose_public_parameters(ledger_url, release_id, config, config_dir, batch, choices)
            plan = plan_fpca(config, batch.n_samples, choices[0].value, choices)
            check_same_cost(request, plan)
            gram = summarise_fpca(batch, plan)
        frame = draw_components(ledger_url, release_id, plan, gram, auto)
    progress(90, "components drawn")
    manifest = publish_fpca(ledger_url, release_id, config, config_sha256, plan, frame, batch.n_samples, out_dir)
    progress(100, "published")
    return announce(manifest, "fpca-release", out_dir, ledger_url)
