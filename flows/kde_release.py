"""The ``kde_release`` Prefect flow (ingest points -> plan -> summarise -> charge -> noise -> publish) and the steps it shares with ``erm_release``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fdp.flows._steps import already_published, announce, cancel_unless_noised, charge
from fdp.schemas.kde import KdeReleaseConfig
from fdp.tasks.kde import (
    choose_bandwidth,
    draw_point_noise,
    load_points,
    plan_kde,
    point_charge_request,
    publish_kde,
    summarise_points_kde,
)
from fdp.tasks.lineage import lineage_failed
from prefect import flow


def run_point_release(
    config: Any, config_sha256: str, config_dir: str, out_dir: str, ledger_url: str, release_id: str,
    period: str | None, *, plan_task: Callable[..., Any], summarise_task: Callable[..., Any],
    publish_task: Callable[..., Any], job_name: str,
) -> dict[str, Any]:
    """The release order of a point summary (KDE, ERM); called inside their flows.

    Everything that sets the noise is fixed from public inputs (n = number of privacy units),
    the full cost is charged atomically, the charge is made final right before the single draw,
    and a re-run of a published ``release_id`` rewrites its files and charges nothing. With KDE ``bandwidth: auto``
    the charge holds its split too; after it the charge is made final, the DP quartiles are drawn, the plan is
    finished at the bandwidth they give (the same cost, checked) and only then are the points summarised.
    """
    if (done := already_published(ledger_url, release_id, config_sha256, out_dir)) is not None:
        return done
    batch = load_points(config, config_dir)
    plan = plan_task(config, batch.n_samples)
    auto = getattr(config, "bandwidth", None) == "auto"  # bought with budget: drawn after the charge
    summary = None if auto else summarise_task(batch, plan)
    request = point_charge_request(config, config_sha256, plan, batch.counts).model_copy(update={"period": period})
    if (done := charge(ledger_url, release_id, request, out_dir, config.budget)) is not None:
        return done
    with cancel_unless_noised(ledger_url, release_id):
        if auto:  # marks the charge final before its quantile draws
            plan = choose_bandwidth(ledger_url, release_id, config, batch, plan, request)
            summary = summarise_task(batch, plan)
        values = draw_point_noise(ledger_url, release_id, plan, summary, auto)
    manifest = publish_task(ledger_url, release_id, config, config_sha256, plan, values, out_dir)
    return announce(manifest, job_name, out_dir, ledger_url)


@flow(name="kde-release", flow_run_name="kde-release-{release_id}", persist_result=False, retries=0,
      on_failure=[lineage_failed], on_crashed=[lineage_failed])
def kde_release(
    config: KdeReleaseConfig,
    config_sha256: str,
    config_dir: str,
    out_dir: str,
    ledger_url: str,
    release_id: str,
    period: str | None = None,
) -> dict[str, Any]:
    """Publish one private density curve (one coordinate) or surface (two); returns the public manifest."""
    return run_point_release(config, config_sha256, config_dir, out_dir, ledger_url, release_id, period,
                             plan_task=plan_kde, summarise_task=summarise_points_kde, publish_task=publish_kde,
                             job_name="kde-release")
