"""Input checks run by ``fdp plan`` and by ``fdp release`` before any Prefect run exists (plain functions, no tasks).

:func:`read_inputs` reads the data file with the very readers the release uses (memory engine), so a
misspelled column, text in a numeric column or a missing unit id is refused by ``fdp plan`` exactly as
``fdp release`` would refuse it, and ``fdp release`` refuses it in seconds, before Prefect's server boots,
with one clean message (not Prefect's task-failure logs). The default handling of a bad record is
record-wise (KDE/ERM points outside the domain are clamped, a FoSR covariate that varies within a unit is
averaged, a logistic/hinge label other than ±1 becomes its sign; MATH.md §1.7). When a config opts into
strict validation (``dataset.outside_domain: error``, ``covariates_within_unit: error``, ERM
``dataset.labels: error``), the check runs here too. The messages, which name the row, reach the curator's
terminal only — never Prefect's logs, artifacts or UI — and nothing is charged. Streaming engines (data
larger than memory) are not read here: their own pass reports the same errors, except the strict FoSR
covariate check, which gets one extra pass here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fdp.tasks.planning import alignment_requirement, end_gap, release_grid

from fdpcore.data.preprocess import AlignedCurves, align_long, rescale_long
from fdpcore.errors import DataError
from fdpcore.io.covariates import read_unit_covariates
from fdpcore.io.points import PointTable, read_point_table
from fdpcore.io.tables import LongTable, read_long_table

__all__ = ["REPEATED_WARN_SHARE", "Inputs", "read_and_align", "read_inputs", "repeated_readings_warning"]


def read_and_align(config: Any, config_dir: str, value_offset: float | None = None) -> tuple[LongTable, AlignedCurves, int]:
    """Read a curve release's long table (memory engine), rescale it publicly and align each unit onto the grid.

    Returns the table, the aligned curves and the number of rows outside ``time_domain``. Raises
    :class:`fdpcore.errors.DataError` when no unit can be aligned (the release would have nothing but the public
    reference to publish). The release's ``load-curves`` task and ``fdp plan`` / ``fdp release``'s pre-flight both
    call it, so the plan refuses exactly what the release refuses. ``value_offset`` overrides the config's (the
    released DP centre of ``value_offset: auto``; ``auto`` without it: offset 0, alignment does not depend on it).
    """
    ds = config.dataset
    offset = value_offset if value_offset is not None else (0.0 if ds.value_offset == "auto" else ds.value_offset)
    path = Path(ds.path) if Path(ds.path).is_absolute() else Path(config_dir) / ds.path
    table = read_long_table(
        path, ds.format, unit_column=ds.unit_column, time_column=ds.time_column, value_column=ds.value_column,
        curve_column=ds.curve_column, csv_delimiter=ds.csv_delimiter,
    )
    grid = release_grid(config)
    t, v, n_outside = rescale_long(
        table.times, table.values, time_domain=ds.time_domain, grid_domain=grid.domain_range,
        value_offset=offset, value_scale=ds.value_scale,
    )
    aligned = align_long(table.units, t, v, grid, curves=table.curves, max_gap=end_gap(config)[1])
    if aligned.n_unalignable == aligned.n_samples:
        raise DataError(
            f"{path.name}: no privacy unit could be aligned onto the grid ({alignment_requirement(config)}); check "
            "dataset.time_domain against the times every unit is observed at (empty values count as not observed), "
            "dataset.time_column, the grid and dataset.max_end_gap"
        )
    return table, aligned, n_outside


@dataclass(frozen=True)
class Inputs:
    """What :func:`read_inputs` read: ``n``, and a curve config's table and alignment (memory engine only).

    Data, for the curator's terminal only (``fdp plan`` and ``fdp init`` count zero records from it).
    """

    n: int | None
    table: LongTable | None = None
    aligned: AlignedCurves | None = None
    covariates_averaged: int | None = None  # FoSR (memory engine): units whose covariate varied and was averaged
    points: PointTable | None = None  # KDE, ERM: the points (and labels) as the release reads them


#: Curve summaries: their records are rescaled by value_offset and value_scale and aligned onto the grid.
CURVE_SUMMARIES = ("mean", "covariance", "fpca", "fosr")


@dataclass(frozen=True)
class UnitCount:
    """``count`` of ``n`` units found by a terminal-only check of :class:`Inputs` (data: never published or stored)."""

    count: int
    n: int

    @property
    def share(self) -> float:
        """``count / n``."""
        return self.count / self.n if self.n else 0.0


def covariates_averaged_warning(config: Any, inputs: Inputs) -> str | None:
    """FoSR: how many units had a covariate that varies within the unit, averaged (data: this terminal only)."""
    k = inputs.covariates_averaged
    if not k or config.summary != "fosr":
        return None
    n = inputs.n or k
    return (f"{k} of {n} units have a covariate that changes between their rows; with covariates_within_unit: average "
            "(the default) each enters as the unit's mean over its rows — a one-hot column becomes that unit's share "
            "of rows at the level — so the regression is on per-unit averages, not on the rows' values. If a "
            "covariate should be constant within a unit (a treatment arm, sex), check the data; "
            "covariates_within_unit: error refuses such a file, naming the column and row (docs/summaries/fosr.md)")


#: The share of a curve table's rows that repeat another row's (unit, curve, time) from which the data warnings say so.
REPEATED_WARN_SHARE = 0.05


def repeated_readings_warning(config: Any, inputs: Inputs) -> str | None:
    """Rows that repeat another row's (unit, curve, time) reading, averaged with it (data: this terminal only).

    Trial P (L1): every (subject, day) of a file twice, 100 ms apart, was released without a word; averaging repeated
    readings is the documented rule, but a duplicated export or a join that multiplied rows is worth a look. From
    :data:`REPEATED_WARN_SHARE` of the rows. ``None`` for points and a streaming engine (not read here).
    """
    if inputs.aligned is None or inputs.table is None or not inputs.table.n_rows:
        return None
    k, rows = int(inputs.aligned.n_duplicates_merged), int(inputs.table.n_rows)
    if k < REPEATED_WARN_SHARE * rows:
        return None
    return (f"{k} of {rows} rows ({100 * k / rows:.3g} %) repeat the (unit, time{', curve' if config.dataset.curve_column else ''}) "
            "of another row and were averaged with it (the documented rule for repeated readings): if each reading "
            "should appear once, check the export for duplicated rows or a join that multiplied them — repeats that "
            "disagree enter as their average")


def read_inputs(config: Any, config_dir: str) -> Inputs:
    """What the release's readers read, or :class:`fdpcore.errors.DataError` (naming file, column and row) where they fail.

    ``n`` is ``None`` for a streaming engine's curves (not read here); the rest serves the data warnings of ``fdp init``,
    ``fdp plan`` and ``fdp release`` (:func:`fdp.flows.plan_command.data_warnings`).
    """
    ds = config.dataset
    path = Path(ds.path) if Path(ds.path).is_absolute() else Path(config_dir) / ds.path
    memory = getattr(getattr(config, "engine", None), "name", "memory") == "memory"
    if config.summary in ("kde", "erm"):
        binary = config.summary == "erm" and getattr(config, "loss", "ridge") != "ridge"
        points = read_point_table(
            path, ds.format, unit_column=ds.unit_column, coordinate_columns=ds.coordinate_columns, domain=ds.domain,
            label_column=getattr(ds, "label_column", None), outside=ds.outside_domain, binary_labels=binary,
            csv_delimiter=ds.csv_delimiter, labels=getattr(ds, "labels", "sign"))
        return Inputs(points.n_units, points=points)
    inputs = Inputs(None)
    if memory:
        table, aligned, _ = read_and_align(config, config_dir)
        inputs = Inputs(aligned.n_samples, table, aligned)
    if config.summary == "fosr" and memory:
        cov = read_unit_covariates(path, ds.format, unit_column=ds.unit_column, csv_delimiter=ds.csv_delimiter,
                                   covariates=[(name, enc) for _, name, enc in config.design_columns()],
                                   within_unit=config.covariates_within_unit)
        inputs = replace(inputs, covariates_averaged=int(cov.n_varying_units))
    elif config.summary == "fosr" and config.covariates_within_unit == "error":  # streaming engines: one extra pass
        from fdp.tasks.streaming import stream_spec

        from fdpcore.io.streaming import stream_dataset

        stream_dataset(path, stream_spec(config, covariates=True))
    return inputs
