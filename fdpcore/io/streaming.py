"""Streaming ingest of Parquet datasets into exact sufficient statistics (MATH.md §1.7; DESIGN.md "summarise").

A dataset is one Parquet file or a directory of ``*.parquet`` files (searched recursively, in
sorted path order). Each file is read chunk by chunk (``chunk_rows`` rows, across row groups);
every chunk goes through the same record-wise steps as the in-memory path —
:func:`~fdpcore.data.preprocess.rescale_long`, :func:`~fdpcore.data.preprocess.align_long`,
:func:`~fdpcore.data.preprocess.clip_l2` — and is reduced to :class:`~fdpcore.data.accumulate.CurveSums`
(exact integer sums), so memory is bounded by the chunk, not by the dataset.

Required order (checked, never assumed):

* **within a file** rows are sorted by the unit column (non-decreasing; any order of time and
  curve inside a unit). The rows of a unit that spans a chunk or row-group boundary are carried
  over to the next chunk, so every unit forms exactly one record and is counted once.
* **across files** the units of different files are disjoint: the files' unit ranges
  ``[first, last]`` must not overlap (e.g. partition by unit into files). A file is the unit of
  distribution (a Dask partition), so a unit is never split between workers.

Violations raise :class:`~fdpcore.errors.DataError` naming the file, the row group and the row
(never an id or a value). Unit ids must be integers or strings; time and value columns must be
integer or floating Parquet columns (text columns: use the in-memory engine, which parses them).
Unit ids are held in memory only, to check the order; they never enter a message or a result
that is written anywhere.

FoSR (MATH.md §7): ``covariates`` names scalar columns of the same table, one value per unit
(the rules of :func:`fdpcore.io.covariates.read_unit_covariates`: every row needs a value, an
encoded column's entries must be keys of its public encoding; a covariate that varies within a unit
is averaged over the unit's rows, or refused with ``covariates_within_unit="error"``). They are
read with the chunk, so a unit's covariates travel with its rows (also across a chunk boundary);
each unit's row is clipped to ``covariate_bound`` and accumulated with its record
(:class:`~fdpcore.data.accumulate.DesignSums`). Numeric covariates must be integer or floating Parquet
columns (text: use the in-memory engine).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from fdpcore.basis.grids import Grid
from fdpcore.data.accumulate import CurveSums, DesignSums, accumulate_curves, quantisation_exponent
from fdpcore.data.preprocess import align_long, centre_on_reference, clip_l2, rescale_long
from fdpcore.errors import DataError, DomainError, OutOfMemoryError
from fdpcore.io.tables import DIFFER_ONLY, WRITTEN_TWO_WAYS, covariate_entry_error, id_key, memory_ran_out

__all__ = ["FilePartial", "StreamSpec", "combine_partials", "dataset_files", "ingest_file", "stream_dataset"]

#: Default rows per chunk (about 40 MB of unit/time/value columns).
DEFAULT_CHUNK_ROWS = 1_000_000

_COUNT_KEYS = ("n_rows", "n_rows_outside_time_domain", "n_rows_nonfinite", "n_duplicates_merged",
               "n_unalignable_units", "n_clipped")


@dataclass(frozen=True)
class StreamSpec:
    """Public inputs of a streaming ingest (columns, public maps, grid, clipping, what to accumulate).

    ``center`` is a public curve on the grid subtracted from every aligned record before clipping (the mean's
    reference curve, the covariance and FoSR releases' centres); a unit without an alignable curve stays the
    zero record, i.e. counts as the centre itself (``preprocess.public_reference@1``). ``outer`` also
    accumulates the outer products.
    """

    unit_column: str
    time_column: str
    value_column: str
    time_domain: tuple[float, float]
    grid: Grid
    tau: float
    curve_column: str | None = None
    value_offset: float = 0.0
    value_scale: float = 1.0
    sup_clip: float | None = None
    outer: bool = False
    chunk_rows: int = DEFAULT_CHUNK_ROWS
    center: tuple[float, ...] | None = None
    covariates: tuple[tuple[str, tuple[tuple[str, float], ...] | None], ...] = ()
    covariate_bound: float | None = None
    covariates_within_unit: str = "average"
    max_gap: float = 0.0

    def __post_init__(self) -> None:
        if self.center is not None:
            c = np.asarray(self.center, dtype=np.float64)
            if c.shape != (self.grid.size,) or not bool(np.all(np.isfinite(c))):
                raise DomainError(f"center (length {c.size}) must hold {self.grid.size} finite grid values")
        if self.covariates and self.covariate_bound is None:
            raise DomainError("covariate_bound (None) must be given with covariates")

    @property
    def columns(self) -> list[str]:
        """The columns read (each once)."""
        return list(dict.fromkeys(c for c in (self.unit_column, self.time_column, self.value_column,
                                              self.curve_column, *(name for name, _ in self.covariates))
                                  if c is not None))


@dataclass(frozen=True, eq=False)
class FilePartial:
    """Exact sums of one file plus its unit range (in memory only: used to check disjointness)."""

    source: str
    sums: CurveSums
    first_unit: Any
    last_unit: Any
    id_keys: dict[object, str] | None = None  # text ids: fdpcore.io.tables.id_key -> the id as written


def dataset_files(path: str | Path) -> list[Path]:
    """The Parquet files of a dataset: the file itself, or a directory's ``*.parquet`` in sorted order.

    >>> dataset_files("/nonexistent/x.parquet")
    Traceback (most recent call last):
    ...
    fdpcore.errors.DataError: dataset.path: 'x.parquet' does not exist; check the path
    """
    p = Path(path)
    if p.is_file():
        return [p]
    if p.is_dir():
        files = sorted(q for q in p.rglob("*.parquet") if q.is_file())
        if not files:
            raise DataError(f"dataset.path: directory {p.name!r} holds no *.parquet file")
        return files
    raise DataError(f"dataset.path: {p.name!r} does not exist; check the path")


def ingest_file(path: str | Path, spec: StreamSpec) -> FilePartial:
    """Stream one Parquet file into exact sums, chunk by chunk (see the module notes for the order).

    Raises:
        DataError: unreadable file, missing columns, unsupported column types, a missing unit
            id, or rows not sorted by unit (the file, row group and row are named).
        OutOfMemoryError: memory ran out while Arrow read the file.
    """
    try:
        return _ingest_file(Path(path), spec)
    except (pa.ArrowMemoryError, MemoryError) as exc:
        if isinstance(exc, OutOfMemoryError):
            raise
        raise memory_ran_out(Path(path).name) from None


def _ingest_file(p: Path, spec: StreamSpec) -> FilePartial:
    pf = _open(p)
    _check_schema(pf.schema_arrow, p.name, spec)
    rg_ends = np.cumsum([pf.metadata.row_group(i).num_rows for i in range(pf.metadata.num_row_groups)])
    w = spec.grid.weights
    total = CurveSums(0, quantisation_exponent(spec.tau), (0,) * spec.grid.size,
                      (0,) * spec.grid.size if spec.sup_clip is not None else None,
                      tuple((0,) * spec.grid.size for _ in range(spec.grid.size)) if spec.outer else None,
                      dict.fromkeys(_COUNT_KEYS, 0), _zero_design(spec))
    carry: _Rows | None = None
    first_unit: Any = None
    last_unit: Any = None
    offset = 0  # rows of the file already read
    unit_type = _base_type(pf.schema_arrow.field(spec.unit_column).type)
    keys: dict[object, str] | None = {} if pa.types.is_string(unit_type) or pa.types.is_large_string(unit_type) else None
    for batch in pf.iter_batches(batch_size=spec.chunk_rows, columns=spec.columns):
        m = batch.num_rows
        if m == 0:
            continue
        units = batch.column(spec.unit_column)
        if pa.types.is_dictionary(units.type):
            units = units.dictionary_decode()
        if units.null_count:
            row = offset + int(np.flatnonzero(units.is_null().to_numpy(zero_copy_only=False))[0])
            raise DataError(f"{p.name}: column {spec.unit_column!r} has a missing privacy-unit id at row {row + 1} "
                            f"(row group {_row_group(rg_ends, row)}); every row needs one")
        change = _check_sorted(units, p.name, spec.unit_column, offset, rg_ends, last_unit)
        if keys is not None:
            _check_id_keys(keys, units, p.name, spec.unit_column, offset)
        if first_unit is None:
            first_unit = units[0].as_py()
        codes = np.concatenate([[0], np.cumsum(change, dtype=np.int64)])
        rows = _Rows(codes + 1, _float(batch.column(spec.time_column)), _float(batch.column(spec.value_column)),
                     _curves(batch, spec.curve_column, p.name), *_covariates(batch, spec, p.name, offset))
        if carry is not None:
            same = units[0].as_py() == last_unit
            carry = _Rows(np.full(carry.codes.shape, 1 if same else 0), carry.times, carry.values, carry.curves,
                          carry.cov, carry.rows)
            rows = carry.concat(rows)
        last_unit = units[m - 1].as_py()
        start = _last_run_start(rows.codes)
        if start > 0:
            total = total + _reduce(rows.slice(0, start), spec, w, p.name)
        carry = rows.slice(start, len(rows.codes))
        offset += m
    if carry is not None and len(carry.codes):
        total = total + _reduce(carry, spec, w, p.name)
    return FilePartial(p.name, total, first_unit, last_unit, keys)


def _check_id_keys(keys: dict[object, str], units: pa.Array, fname: str, col: str, offset: int) -> None:
    """Add a batch's distinct text ids to ``keys``; refuse one written two ways (:func:`fdpcore.io.tables.check_id_variants`)."""
    for text in pc.drop_null(pc.unique(units)).to_pylist():
        if keys.setdefault(id_key(text), text) != text:
            row = offset + int(pc.index(units, text).as_py()) + 1
            raise DataError(f"{fname}: column {col!r} has a privacy-unit id at row {row} that, with an earlier row's, "
                            f"{DIFFER_ONLY}: {WRITTEN_TWO_WAYS}")


def combine_partials(partials: Iterable[FilePartial]) -> CurveSums:
    """Exact sum of per-file sums, after checking that no unit appears in two files.

    The result does not depend on the order of ``partials`` (integer sums).

    Raises:
        DataError: two files' unit ranges overlap (a unit may be split between files), or their
            unit ids have different types.
    """
    parts = [q for q in partials]
    if not parts:
        raise DataError("dataset.path: no Parquet file to read")
    filled = [q for q in parts if q.sums.n > 0]
    try:
        ordered = sorted(filled, key=lambda q: (q.first_unit, q.source))
    except TypeError:
        raise DataError("dataset: the files' unit columns have different types (integer and string ids)") from None
    for a, b in zip(ordered, ordered[1:], strict=False):
        if not a.last_unit < b.first_unit:
            raise DataError(
                f"dataset: files {a.source!r} and {b.source!r} have overlapping privacy-unit ranges; every unit must "
                "lie in one file (partition the dataset by unit, each file sorted by unit)"
            )
    seen: dict[object, str] = {}
    where: dict[object, str] = {}
    for q in parts:
        for key, text in (q.id_keys or {}).items():
            if seen.setdefault(key, text) != text:
                raise DataError(f"dataset: files {where[key]!r} and {q.source!r} hold privacy-unit ids that differ only "
                                f"in surrounding spaces or in how a number is written: {WRITTEN_TWO_WAYS}")
            where.setdefault(key, q.source)
    total = parts[0].sums
    for q in parts[1:]:
        total = total + q.sums
    return total


def stream_dataset(path: str | Path, spec: StreamSpec) -> CurveSums:
    """Stream every file of a dataset in this process and combine the sums exactly (the ``local`` engine).

    >>> import tempfile, os, pyarrow as pa, pyarrow.parquet as pq
    >>> from fdpcore.basis.grids import midpoint_grid
    >>> d = tempfile.mkdtemp()
    >>> pq.write_table(pa.table({"u": [1, 1, 2, 2], "t": [0.0, 1.0, 0.0, 1.0], "v": [0.0, 0.5, 0.25, 0.25]}),
    ...                os.path.join(d, "a.parquet"))
    >>> s = stream_dataset(d, StreamSpec("u", "t", "v", (0.0, 1.0), midpoint_grid(2), tau=1.0, chunk_rows=3))
    >>> s.n, s.mean().tolist()
    (2, [0.1875, 0.3125])
    """
    return combine_partials(ingest_file(f, spec) for f in dataset_files(path))


# --------------------------------------------------------------------------- helpers


@dataclass(frozen=True, eq=False)
class _Rows:
    codes: np.ndarray
    times: np.ndarray
    values: np.ndarray
    curves: np.ndarray | None
    cov: np.ndarray | None = None  # encoded covariates, one row per data row (FoSR)
    rows: np.ndarray | None = None  # file row numbers (0-based), for the covariate messages

    def concat(self, other: _Rows) -> _Rows:
        def cat(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
            return None if a is None or b is None else np.concatenate([a, b])

        return _Rows(np.concatenate([self.codes, other.codes]), np.concatenate([self.times, other.times]),
                     np.concatenate([self.values, other.values]), cat(self.curves, other.curves),
                     cat(self.cov, other.cov), cat(self.rows, other.rows))

    def slice(self, a: int, b: int) -> _Rows:
        def cut(x: np.ndarray | None) -> np.ndarray | None:
            return None if x is None else x[a:b]

        return _Rows(self.codes[a:b], self.times[a:b], self.values[a:b], cut(self.curves), cut(self.cov),
                     cut(self.rows))


def _zero_design(spec: StreamSpec) -> DesignSums | None:
    if not spec.covariates or spec.covariate_bound is None:
        return None
    q, k = len(spec.covariates), spec.grid.size
    return DesignSums(quantisation_exponent(spec.covariate_bound), (0,) * q, tuple((0,) * q for _ in range(q)),
                      tuple((0,) * k for _ in range(q)))


def _covariates(batch: pa.RecordBatch, spec: StreamSpec, fname: str,
                offset: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Encoded covariates of a chunk (``m x q``) and its file row numbers; the rules of ``read_unit_covariates``."""
    if not spec.covariates:
        return None, None
    m = batch.num_rows
    out = np.empty((m, len(spec.covariates)))
    for k, (name, encoding) in enumerate(spec.covariates):
        col = batch.column(name)
        if encoding is None:
            v = _float(col)
            bad = missing = ~np.isfinite(v)
        else:  # map the chunk's distinct entries (few) through the public encoding, then index
            enc = col if pa.types.is_dictionary(col.type) else col.dictionary_encode()
            keys = {str(key): float(val) for key, val in encoding}
            table = np.array([keys.get(str(x).strip(), np.nan) for x in enc.dictionary.to_pylist()] + [np.nan])
            idx = enc.indices.fill_null(len(enc.dictionary)).to_numpy(zero_copy_only=False).astype(np.int64)
            v = table[idx]
            bad = np.isnan(v)
            missing = enc.indices.is_null().to_numpy(zero_copy_only=False)
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            raise covariate_entry_error(fname, name, offset + first + 1, missing=bool(missing[first]),
                                        encoded=encoding is not None)
        out[:, k] = v
    return out, np.arange(offset, offset + m, dtype=np.int64)


def _unit_covariates(rows: _Rows, spec: StreamSpec, fname: str) -> tuple[np.ndarray, int]:
    """One covariate row per unit (the unit order of ``align_long``: runs of sorted codes) and the count of units averaged.

    The rule of the in-memory path (:func:`fdpcore.io.covariates.read_unit_covariates`): a covariate that
    varies within a unit is replaced by the mean of the unit's rows (``covariates_within_unit: average``,
    record-wise), summed in row order as there, or refused naming the row (``error``).
    """
    cov, where = rows.cov, rows.rows
    assert cov is not None and where is not None  # noqa: S101 - set whenever spec.covariates is
    starts = np.flatnonzero(np.concatenate([[True], rows.codes[1:] != rows.codes[:-1]]))
    run = np.cumsum(np.concatenate([[False], rows.codes[1:] != rows.codes[:-1]]))
    first = starts[run]
    varying = np.zeros(starts.shape[0], dtype=bool)
    out = np.empty((starts.shape[0], len(spec.covariates)))
    sizes = np.bincount(run, minlength=starts.shape[0])
    for k, (name, _) in enumerate(spec.covariates):
        changes = cov[:, k] != cov[first, k]
        if changes.any() and spec.covariates_within_unit == "error":
            row = int(np.flatnonzero(changes)[0])
            raise DataError(
                f"{fname}: column {name!r} is not constant within a privacy unit: row {int(where[row]) + 1} differs "
                f"from the unit's first row {int(where[first[row]]) + 1}; a covariate must have one value per unit "
                "(or set covariates_within_unit: average)"
            )
        varying[run[changes]] = True
        out[:, k] = np.bincount(run, weights=cov[:, k], minlength=starts.shape[0]) / sizes
    return out, int(varying.sum())


def _reduce(rows: _Rows, spec: StreamSpec, w: np.ndarray, fname: str = "") -> CurveSums:
    """The record-wise steps of the in-memory path on complete units, then exact sums."""
    t, v, n_outside = rescale_long(rows.times, rows.values, time_domain=spec.time_domain,
                                   grid_domain=spec.grid.domain_range, value_offset=spec.value_offset,
                                   value_scale=spec.value_scale)
    aligned = align_long(rows.codes, t, v, spec.grid, curves=rows.curves, max_gap=spec.max_gap)
    records = aligned.data_matrix
    if spec.center is not None:  # public centre, record-wise, before clipping (as the in-memory path)
        records = centre_on_reference(records, spec.center, aligned=aligned.aligned)
    clipped, n_clipped = clip_l2(records, w, spec.tau)
    counts = {"n_rows": int(rows.codes.shape[0]), "n_rows_outside_time_domain": n_outside,
              "n_rows_nonfinite": aligned.n_rows_dropped, "n_duplicates_merged": aligned.n_duplicates_merged,
              "n_unalignable_units": aligned.n_unalignable, "n_clipped": n_clipped}
    z = None
    if spec.covariates and spec.covariate_bound is not None:  # FoSR: record-wise Euclidean clip to B
        unit_cov, n_averaged = _unit_covariates(rows, spec, fname)
        counts["n_units_covariate_averaged"] = n_averaged
        z, _ = clip_l2(unit_cov, np.ones(len(spec.covariates)), spec.covariate_bound)
    return accumulate_curves(clipped, spec.tau, w, sup_clip=spec.sup_clip, outer=spec.outer, counts=counts,
                             covariates=z, covariate_bound=spec.covariate_bound)


def _open(p: Path) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(p)
    except (pa.ArrowMemoryError, MemoryError):
        raise memory_ran_out(p.name) from None
    except (pa.ArrowException, OSError) as exc:
        raise DataError(f"{p.name}: not a readable Parquet file ({type(exc).__name__}); check dataset.format and the file") from None


def _base_type(t: pa.DataType) -> pa.DataType:
    return t.value_type if pa.types.is_dictionary(t) else t


def _check_schema(schema: pa.Schema, fname: str, spec: StreamSpec) -> None:
    names = list(schema.names)
    missing = [c for c in spec.columns if c not in names]
    if missing:
        raise DataError(f"{fname}: missing column(s) {missing}; check dataset.unit_column, dataset.time_column, "
                        "dataset.value_column, dataset.curve_column and covariates")
    ids = [(spec.unit_column, "privacy-unit id")] + ([(spec.curve_column, "curve id")] if spec.curve_column else [])
    for name, what in ids:
        t = _base_type(schema.field(name).type)
        if not (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)):
            raise DataError(f"{fname}: column {name!r} has type {t}; a {what} must be an integer or a string "
                            "for the streaming engine")
    for name in (spec.time_column, spec.value_column):
        t = _base_type(schema.field(name).type)
        if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
            raise DataError(f"{fname}: column {name!r} has type {t}; the streaming engine needs an integer or "
                            "floating column (use engine 'memory' to parse text or decimals)")
    for name, encoding in spec.covariates:
        t = _base_type(schema.field(name).type)
        if encoding is None and not (pa.types.is_integer(t) or pa.types.is_floating(t)):
            raise DataError(f"{fname}: covariate column {name!r} has type {t}; the streaming engine needs an integer "
                            "or floating column for a numeric covariate (give an encoding, or use engine 'memory')")


def _row_group(rg_ends: np.ndarray, row: int) -> int:
    return int(np.searchsorted(rg_ends, row, side="right"))


def _check_sorted(units: pa.Array, fname: str, col: str, offset: int, rg_ends: np.ndarray, prev: Any) -> np.ndarray:
    """Boolean ``units[i+1] != units[i]``; raises when the file is not sorted by unit."""
    m = len(units)
    if prev is not None:
        try:
            bad_first = units[0].as_py() < prev
        except TypeError:  # pragma: no cover - one Parquet column has one type
            bad_first = True
        if bad_first:
            raise _unsorted(fname, col, offset, rg_ends)
    if m < 2:
        return np.zeros(0, dtype=bool)
    a, b = units.slice(0, m - 1), units.slice(1)
    down = pc.less(b, a).to_numpy(zero_copy_only=False)
    if down.any():
        raise _unsorted(fname, col, offset + 1 + int(np.flatnonzero(down)[0]), rg_ends)
    out: np.ndarray = pc.not_equal(b, a).to_numpy(zero_copy_only=False)
    return out


def _unsorted(fname: str, col: str, row: int, rg_ends: np.ndarray) -> DataError:
    return DataError(
        f"{fname}: rows are not sorted by {col!r} at row {row + 1} (row group {_row_group(rg_ends, row)}); the "
        "streaming engine needs each file sorted by the privacy unit (sort it, or use engine 'memory')"
    )


def _float(col: pa.Array) -> np.ndarray:
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    out: np.ndarray = pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False)
    return out


def _curves(batch: pa.RecordBatch, name: str | None, fname: str) -> np.ndarray | None:
    if name is None:
        return None
    col = batch.column(name)
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    if col.null_count:
        raise DataError(f"{fname}: column {name!r} has a missing curve id; every row needs one")
    out: np.ndarray = col.to_numpy(zero_copy_only=False)
    return out


def _last_run_start(codes: np.ndarray) -> int:
    """Index where the last run of equal codes starts (codes are non-decreasing)."""
    n = codes.shape[0]
    if n == 0:
        return 0
    return int(np.searchsorted(codes, codes[-1], side="left"))
