"""Scalar covariates per privacy unit, read from the same long table as the curves (MATH.md §7).

A covariate should be constant within a privacy unit (sex, treatment group, a baseline measure).
When it is not, the default (``within_unit="average"``) uses the mean of the unit's rows: a map applied
to each unit's own rows only (record-wise), so neighbouring datasets stay neighbouring and the
guarantee is unchanged; the number of such units is returned for the ledger's internal entry only.
``within_unit="error"`` (strict, opt-in) raises a :class:`~fdpcore.errors.DataError` naming the file,
the column and the data row where the unit's value changes (before any charge). Categorical covariates are encoded by a *public* mapping from the config
(e.g. ``{"M": 1, "F": -1}``); a category that the mapping does not list is an error naming the row.
Messages never quote a data value. Rows are numbered from 1 (the header excluded), as in
:func:`fdpcore.io.read_long_table`, whose file, column and number checks this reader reuses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from fdpcore._typing import NDArrayFloat
from fdpcore.data.preprocess import _codes
from fdpcore.errors import DataError
from fdpcore.io.tables import _ids, _numeric, covariate_entry_error, read_unit_columns

__all__ = ["UnitCovariates", "read_unit_covariates"]


@dataclass(frozen=True, eq=False)
class UnitCovariates:
    """One row of encoded covariates per privacy unit, in the unit order of :func:`fdpcore.data.preprocess.align_long`."""

    values: NDArrayFloat
    names: tuple[str, ...]
    n_units: int
    n_varying_units: int = 0  # units whose covariate changed within the unit and was averaged (internal only)


def read_unit_covariates(
    path: str | Path,
    fmt: str,
    *,
    unit_column: str,
    covariates: Sequence[tuple[str, Mapping[str, float] | None]],
    csv_delimiter: str = ",",
    within_unit: str = "average",
) -> UnitCovariates:
    """Read covariates ``(name, encoding or None)`` per privacy unit.

    ``encoding=None``: the column must be numeric. A mapping: every entry (as text) must be one of its
    keys and is replaced by the mapped number. Every row of a unit must carry the same value.

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> with open(os.path.join(d, "x.csv"), "w") as fh:
    ...     _ = fh.write("id,t,sex,age\\nb,0,F,7\\nb,1,F,7\\na,0,M,9\\n")
    >>> c = read_unit_covariates(os.path.join(d, "x.csv"), "csv", unit_column="id",
    ...                          covariates=[("sex", {"M": 1.0, "F": -1.0}), ("age", None)])
    >>> c.values.tolist(), c.names
    ([[1.0, 9.0], [-1.0, 7.0]], ('sex', 'age'))

    Raises:
        DataError: missing file or column, a non-numeric or missing entry, a category outside the
            encoding, a covariate that changes within a unit (each names the column and the row).
    """
    if within_unit not in ("average", "error"):
        raise DataError(f"covariates_within_unit ({within_unit!r}) must be 'average' or 'error'")
    p = Path(path)
    if not p.is_file():
        raise DataError(f"dataset.path: file {str(p)!r} does not exist; check the path (relative paths are resolved against the config file)")
    names = [name for name, _ in covariates]
    table = read_unit_columns(p, fmt, unit_column, names, csv_delimiter)
    codes, n_units = _codes(_ids(table.column(unit_column), p.name, unit_column, "privacy-unit id"), "units")
    out = np.empty((n_units, len(covariates)))
    varying = np.zeros(n_units, dtype=bool)
    for k, (name, encoding) in enumerate(covariates):
        col = table.column(name)
        if encoding is None:
            v = _numeric(col, p.name, name)
            bad = ~np.isfinite(v)
            missing = bad
        else:
            text = pd.Series(col.to_pandas(), dtype=object)
            missing = text.isna().to_numpy()
            keys = {str(key): float(val) for key, val in encoding.items()}
            mapped = text.map(lambda x, keys=keys: keys.get(str(x).strip()) if x is not None else None)
            v = pd.to_numeric(mapped, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
            bad = np.isnan(v)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise covariate_entry_error(p.name, name, row + 1, missing=bool(missing[row]), encoded=encoding is not None)
        first = np.full(n_units, -1, dtype=np.int64)
        order = np.arange(codes.shape[0])[::-1]
        first[codes[order]] = order  # the first row of each unit
        changes = v != v[first[codes]]
        if changes.any() and within_unit == "error":
            row = int(np.flatnonzero(changes)[0])
            raise DataError(
                f"{p.name}: column {name!r} is not constant within a privacy unit: row {row + 1} differs from the "
                f"unit's first row {int(first[codes[row]]) + 1}; a covariate must have one value per unit "
                "(or set covariates_within_unit: average)"
            )
        varying[codes[changes]] = True
        out[:, k] = np.bincount(codes, weights=v, minlength=n_units) / np.bincount(codes, minlength=n_units)
    return UnitCovariates(out, tuple(names), n_units, int(varying.sum()))
