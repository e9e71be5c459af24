"""Execution engine of a release: in memory (default), streaming in this process, or streaming on Dask.

The engine changes how the sufficient statistics are computed, never what is released: the
streaming engines accumulate exact integer sums (``fdpcore.data.accumulate``), so ``local`` and
``dask`` give bit-identical pre-noise summaries for any partition of the data, and both agree with
``memory`` to the lattice resolution (below ``2^-39 tau`` per grid value). Same plan, same
sensitivity, same noise.
"""

from __future__ import annotations

from typing import Any, Literal

from fdp.schemas._base import Frozen, Internal
from pydantic import Field, model_validator

__all__ = ["EngineSpec", "StreamBatch", "check_engine_fields"]


class EngineSpec(Frozen):
    """How the data is read and reduced (YAML block ``engine:``; optional)."""

    name: Literal["memory", "local", "dask"] = Field(
        "memory",
        description="memory: read the whole table (small data; any tuning); local: stream Parquet chunk by chunk "
        "in this process; dask: stream one file per Dask task (prefect-dask)",
    )
    address: str | None = Field(
        None, min_length=1, description="dask: scheduler address of an existing cluster (default: a LocalCluster)"
    )
    n_workers: int = Field(2, ge=1, le=1024, description="dask without address: LocalCluster worker processes")
    threads_per_worker: int = Field(1, ge=1, le=256, description="dask without address: threads per worker")
    chunk_rows: int = Field(1_000_000, ge=1, description="local/dask: rows read per chunk (memory is bounded by it)")

    @model_validator(mode="after")
    def _dask_only(self) -> EngineSpec:
        if self.address is not None and self.name != "dask":
            raise ValueError(f"engine.address is used by engine 'dask' only, not {self.name!r}")
        return self


def check_engine_fields(engine: EngineSpec, fmt: str, tuning_rule: str | None) -> None:
    """Cross-field rules of a streaming engine (called by ``ReleaseConfig``'s validator).

    Raises:
        ValueError: a streaming engine with CSV input, or with data-dependent tuning (``dp_select``
            and ``pcv`` need the individual records, which streaming does not keep).
    """
    if engine.name == "memory":
        return
    if fmt != "parquet":
        raise ValueError(f"engine.name ({engine.name!r}) streams Parquet only; dataset.format is {fmt!r}")
    if tuning_rule in ("dp_select", "pcv"):
        raise ValueError(
            f"tuning.rule ({tuning_rule!r}) needs the individual records; use engine 'memory' or a PSS rule"
        )


class StreamBatch(Internal):
    """Exact sufficient statistics of a streamed dataset (an ``fdpcore.data.accumulate.CurveSums``; memory only)."""

    sums: Any
    n_samples: int
    counts: dict[str, int] = Field(default_factory=dict, description="data-dependent counts for the internal ledger only")
