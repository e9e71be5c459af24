"""Strict input checks run by ``fdp release`` before any Prefect run exists (plain functions, no tasks).

The default handling of a bad record is record-wise (KDE/ERM points outside the domain are clamped,
a FoSR covariate that varies within a unit is averaged, a logistic/hinge label other than ±1 becomes its
sign; MATH.md §1.7). When a config opts into strict
validation (``dataset.outside_domain: error``, ``covariates_within_unit: error``, ERM ``dataset.labels: error``),
the check runs here, in the curator's process before the flow starts: the
message, which names the row, reaches the curator's terminal only — never Prefect's logs, artifacts
or UI — and nothing is charged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fdpcore.io.covariates import read_unit_covariates
from fdpcore.io.points import read_point_table

__all__ = ["check_strict_inputs"]


def check_strict_inputs(config: Any, config_dir: str) -> None:
    """Raise :class:`fdpcore.errors.DataError` (naming the row) when a strict check of ``config`` fails."""
    ds = config.dataset
    path = Path(ds.path) if Path(ds.path).is_absolute() else Path(config_dir) / ds.path
    if config.summary in ("kde", "erm"):
        binary = config.summary == "erm" and getattr(config, "loss", "ridge") != "ridge"
        strict_labels = binary and getattr(ds, "labels", "sign") == "error"
        if ds.outside_domain == "error" or strict_labels:
            read_point_table(path, ds.format, unit_column=ds.unit_column, coordinate_columns=ds.coordinate_columns,
                             domain=ds.domain, label_column=getattr(ds, "label_column", None),
                             outside=ds.outside_domain, binary_labels=binary, csv_delimiter=ds.csv_delimiter,
                             labels=getattr(ds, "labels", "sign"))
    elif config.summary == "fosr" and config.covariates_within_unit == "error" and config.engine.name == "memory":
        read_unit_covariates(path, ds.format, unit_column=ds.unit_column, csv_delimiter=ds.csv_delimiter,
                             covariates=[(name, enc) for _, name, enc in config.design_columns()], within_unit="error")
    elif config.summary == "fosr" and config.covariates_within_unit == "error":  # streaming engines: one extra pass
        from fdp.tasks.streaming import stream_spec

        from fdpcore.io.streaming import stream_dataset

        stream_dataset(path, stream_spec(config, covariates=True))
