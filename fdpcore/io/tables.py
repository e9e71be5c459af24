"""Reading long-format curve tables and writing released curves (Parquet via pyarrow)."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from fdpcore._typing import AnyArray, NDArrayFloat
from fdpcore.errors import DataError

__all__ = ["LongTable", "read_long_table"]


@dataclass(frozen=True, eq=False)
class LongTable:
    """Columns of a long-format table: unit, time, value (and optional curve id)."""

    units: AnyArray
    times: NDArrayFloat
    values: NDArrayFloat
    curves: AnyArray | None
    n_rows: int


def read_long_table(
    path: str | Path,
    fmt: str,
    *,
    unit_column: str,
    time_column: str,
    value_column: str,
    curve_column: str | None = None,
    csv_delimiter: str = ",",
) -> LongTable:
    """Read the columns of a long-format table, with errors that name file, column and row.

    Raises:
        DataError: missing/unreadable file, missing or duplicate columns, non-numeric
            time or value entries (the first offending row is named), zero rows.
    """
    p = Path(path)
    if not p.exists():
        raise DataError(f"dataset.path: file {str(p)!r} does not exist")
    if not p.is_file():
        raise DataError(f"dataset.path: {str(p)!r} is not a file")
    wanted = [c for c in (unit_column, time_column, value_column, curve_column) if c is not None]
    table = _read(p, fmt, csv_delimiter)
    names = table.column_names
    dupes = sorted({c for c in names if names.count(c) > 1})
    if dupes:
        raise DataError(f"{p.name}: duplicate column names {dupes}; rename them so each column is unique")
    missing = [c for c in wanted if c not in names]
    if missing:
        raise DataError(f"{p.name}: missing column(s) {missing}; the file has columns {names}")
    if table.num_rows == 0:
        raise DataError(f"{p.name}: the file has zero rows")
    frame = table.select(wanted).to_pandas()
    times = _numeric(frame[time_column], p.name, time_column)
    values = _numeric(frame[value_column], p.name, value_column)
    units = frame[unit_column].to_numpy()
    if pd.isna(frame[unit_column]).any():
        row = int(np.flatnonzero(pd.isna(frame[unit_column]).to_numpy())[0])
        raise DataError(f"{p.name}: column {unit_column!r} has a missing privacy-unit id at row {row + 1}")
    curves = frame[curve_column].to_numpy() if curve_column is not None else None
    return LongTable(units, times, values, curves, int(table.num_rows))


def _read(p: Path, fmt: str, delimiter: str) -> pa.Table:
    if fmt == "parquet":
        try:
            return pq.read_table(p)
        except (pa.ArrowInvalid, OSError) as exc:
            raise DataError(f"{p.name}: not a readable Parquet file ({type(exc).__name__}); check dataset.format and the file") from None
    if fmt == "csv":
        try:
            raw = p.read_bytes()
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DataError(f"{p.name}: not UTF-8 text (byte {exc.start}); re-encode the CSV as UTF-8") from None
        if not raw.strip():
            raise DataError(f"{p.name}: the file is empty")
        try:
            return pacsv.read_csv(io.BytesIO(raw), parse_options=pacsv.ParseOptions(delimiter=delimiter))
        except pa.ArrowInvalid as exc:
            first = str(exc).splitlines()[0][:200]
            raise DataError(f"{p.name}: CSV could not be parsed with delimiter {delimiter!r} ({first}); check dataset.csv_delimiter") from None
    raise DataError(f"dataset.format ({fmt!r}) must be 'parquet' or 'csv'")


def _numeric(col: pd.Series, fname: str, name: str) -> NDArrayFloat:
    if pd.api.types.is_bool_dtype(col):
        raise DataError(f"{fname}: column {name!r} is boolean; it must be numeric")
    converted = pd.to_numeric(col, errors="coerce")
    bad = converted.isna().to_numpy() & ~pd.isna(col).to_numpy()
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise DataError(f"{fname}: column {name!r} has a non-numeric entry at row {row + 1}; it must be numeric")
    return converted.to_numpy(dtype=np.float64, na_value=np.nan)
