"""Tasks of the streaming engines: per-file ingest into exact sums, their combination, the summary.

``engine.name: local`` ingests the files one after the other in the flow's process; ``dask`` submits
one :func:`ingest_partition` task per file to a :class:`prefect_dask.DaskTaskRunner` (a LocalCluster
of ``engine.n_workers`` processes, or the cluster at ``engine.address``). A file is the unit of
distribution, so a privacy unit is never split between workers (and :func:`combine_partials`
checks that no unit appears in two files). The partial sums are exact integers, so the combined
statistics — and hence the released distribution — are identical whichever engine ran them.

Data tasks do not cache or persist results; nothing computed from the data leaves memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fdp.schemas import MeanSummary, NoisePlan
from fdp.schemas.engine import StreamBatch
from fdp.tasks._settings import data_task, quiet_expected_tracebacks
from fdp.tasks.mean import release_grid
from fdp.tasks.planning import alignment_requirement, end_gap

import fdpcore
from fdpcore.data.accumulate import summarise_mean_sums
from fdpcore.io.streaming import FilePartial, StreamSpec, combine_partials, dataset_files, ingest_file

__all__ = ["ingest_partition", "stream_curves", "stream_spec", "summarise_sums"]



def stream_spec(config: Any, *, center: Any = None, outer: bool = False, covariates: bool = False) -> StreamSpec:
    """The public inputs of the streaming ingest of a release config (mean, or covariance with ``outer``).

    ``center``: a public curve on the grid subtracted from every aligned record before clipping (the mean's
    reference, covariance and FoSR centring; a unit without an alignable curve stays the zero record, i.e.
    counts as the centre); ``outer``: also accumulate the outer products of the clipped records;
    ``covariates``: FoSR: read ``config.covariates`` with each chunk, clip them to
    ``config.covariate_bound`` and accumulate the design sums.
    """
    ds = config.dataset
    cov = tuple((name, None if enc is None else tuple(sorted(enc.items())))
                for _, name, enc in config.design_columns()) if covariates else ()  # one_hot: one column per indicator
    return StreamSpec(
        unit_column=ds.unit_column, time_column=ds.time_column, value_column=ds.value_column,
        curve_column=ds.curve_column, time_domain=ds.time_domain, value_offset=ds.value_offset,
        value_scale=ds.value_scale, grid=release_grid(config), tau=config.clipping.tau,
        sup_clip=config.clipping.sup_clip, chunk_rows=config.engine.chunk_rows, outer=outer,
        center=None if center is None else tuple(float(c) for c in center),
        covariates=cov, covariate_bound=float(config.covariate_bound) if covariates else None,
        covariates_within_unit=config.covariates_within_unit if covariates else "average",
        max_gap=end_gap(config)[1],
    )


def _dataset_path(config: Any, config_dir: str) -> Path:
    p = Path(config.dataset.path)
    return p if p.is_absolute() else Path(config_dir) / p


@data_task(name="ingest-partition", retries=0)
def ingest_partition(path: str, spec: StreamSpec) -> FilePartial:
    """Stream one Parquet file (a partition) into exact sums (runs on a Dask worker with engine 'dask')."""
    quiet_expected_tracebacks()  # a worker process logs a DataError (e.g. unsorted units) without a traceback
    return ingest_file(path, spec)


@data_task(name="combine-partitions")
def combine_partitions(partials: list[FilePartial], requirement: str = "") -> StreamBatch:
    """Combine per-file sums exactly (after checking that the files' units are disjoint).

    ``requirement`` is the config's public alignment requirement (:func:`fdp.tasks.planning.alignment_requirement`),
    quoted when no unit aligns.
    """
    sums = combine_partials(partials)
    if sums.n == 0 or sums.counts.get("n_unalignable_units", 0) == sums.n:
        raise fdpcore.DataError(
            "dataset: no privacy unit could be aligned onto the grid" + (f" ({requirement})" if requirement else "")
            + "; check dataset.time_domain against the times every unit is observed at (empty values count as not "
            "observed), dataset.time_column, the grid and dataset.max_end_gap"
        )
    return StreamBatch(sums=sums, n_samples=sums.n, counts=dict(sorted(sums.counts.items())))


def _runner(config: Any) -> Any:
    from prefect_dask import DaskTaskRunner  # imported only when the dask engine is used

    e = config.engine
    if e.address is not None:
        return DaskTaskRunner(address=e.address)
    return DaskTaskRunner(cluster_kwargs={"n_workers": e.n_workers, "threads_per_worker": e.threads_per_worker,
                                          "processes": True, "dashboard_address": ":0"})


def stream_curves(config: Any, config_dir: str, *, center: Any = None, outer: bool = False,
                  covariates: bool = False) -> StreamBatch:
    """Ingest the dataset with the configured streaming engine and return its exact statistics.

    ``center``, ``outer`` and ``covariates`` as in :func:`stream_spec` (the covariance release passes its public
    centre, or none for ``sample_mean`` centring, and ``outer=True``; the FoSR release its public reference curve
    and ``covariates=True``; the mean its reference curve).
    """
    spec = stream_spec(config, center=center, outer=outer, covariates=covariates)
    files = [str(f) for f in dataset_files(_dataset_path(config, config_dir))]
    if config.engine.name == "dask" and len(files) > 0:
        with _runner(config) as runner:
            futures = [runner.submit(ingest_partition, parameters={"path": f, "spec": spec}) for f in files]
            partials = [fut.result() for fut in futures]
    else:
        partials = [ingest_partition(f, spec) for f in files]
    return combine_partitions(partials, alignment_requirement(config))


@data_task(name="summarise-sums")
def summarise_sums(batch: StreamBatch, plan: NoisePlan) -> MeanSummary:
    """Pre-noise whitened coordinates from the exact sums (kept in memory only)."""
    return MeanSummary(coefficients=summarise_mean_sums(batch.sums, plan.plan))

