"""Reading long-format curve tables (Parquet or CSV via pyarrow), with errors that name file, column and row.

Every error raised here is a :class:`~fdpcore.errors.DataError` whose message names the
file, the column and (where there is one) the data row, and says what to do. Messages never
contain a data value: a bad entry is located by its row and column, never quoted, and
pyarrow's own messages (which quote the offending text) are not passed on.
"""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from fdpcore._typing import AnyArray, NDArrayFloat
from fdpcore.errors import DataError, OutOfMemoryError

__all__ = ["DIFFER_ONLY", "LongTable", "check_id_variants", "count_units", "covariate_entry_error", "id_key", "read_long_table",
           "read_unit_columns", "unit_count"]


@dataclass(frozen=True, eq=False)
class LongTable:
    """Columns of a long-format table: unit, time, value (and optional curve id).

    ``units`` and ``curves`` are NumPy arrays, or :class:`pandas.Categorical` for text and dictionary columns
    (:func:`compact_ids`); :func:`fdpcore.data.preprocess.align_long` takes either.
    """

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

    Rows are numbered from 1, the header excluded (data row 1 is the first row below a
    CSV header). Only the named columns are read. Times and values must be numeric
    (integers, floats, decimals, or text that parses as a number); empty, ``NaN`` and
    ``±inf`` entries are kept here (the alignment ignores them and counts them).

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> with open(os.path.join(d, "x.csv"), "w") as fh:
    ...     _ = fh.write("id,t,y\\na,0,1.5\\na,1,\\n")
    >>> tb = read_long_table(os.path.join(d, "x.csv"), "csv", unit_column="id", time_column="t", value_column="y")
    >>> tb.units.tolist(), tb.times.tolist(), tb.n_rows
    (['a', 'a'], [0.0, 1.0], 2)

    Raises:
        DataError: missing/unreadable file, wrong format or delimiter, missing or duplicate
            columns, a column of a non-numeric type, a non-numeric time or value entry (the
            first offending row is named), a missing unit or curve id, zero rows.
    """
    p = Path(path)
    if not p.exists():
        raise DataError(f"dataset.path: file {str(p)!r} does not exist; check the path (relative paths are resolved against the config file)")
    if not p.is_file():
        raise DataError(f"dataset.path: {str(p)!r} is not a file")
    table = read_unit_columns(p, fmt, unit_column, [time_column, value_column, curve_column], csv_delimiter)
    if curve_column is not None:
        _check_id_type(table, p.name, curve_column, "curve id")
    times = _numeric(table.column(time_column), p.name, time_column)
    values = _numeric(table.column(value_column), p.name, value_column)
    units = compact_ids(table.column(unit_column), p.name, unit_column, "privacy-unit id")
    curves = compact_ids(table.column(curve_column), p.name, curve_column, "curve id") if curve_column is not None else None
    n_rows = int(table.num_rows)
    del table
    pa.default_memory_pool().release_unused()  # the Arrow buffers, to the system (trial L: 0.6 GB of 11.7 M rows kept)
    return LongTable(units, times, values, curves, n_rows)


def count_units(path: str | Path, fmt: str, unit_column: str, csv_delimiter: str = ",", *,
                columns: list[str] | None = None) -> int:
    """Number of distinct privacy units: ``n``, public under the replace-one adjacency (read: the unit column only).

    It equals the ``n`` of a release of the same file (every unit contributes one record; an
    unalignable unit contributes the zero curve), so ``fdp plan`` can state the noise before any charge.

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> with open(os.path.join(d, "x.csv"), "w") as fh:
    ...     _ = fh.write("id,t,y\\na,0,1\\nb,0,2\\na,1,3\\n")
    >>> count_units(os.path.join(d, "x.csv"), "csv", "id")
    2
    """
    p = Path(path)
    if not p.is_file():
        raise DataError(f"dataset.path: file {str(p)!r} does not exist or is not a file; check the path "
                        "(relative paths are resolved against the config file)")
    named = list(columns or [])
    if fmt == "parquet":  # the other columns' names from the schema: only the ids are read (a streaming engine's n)
        try:
            _check_columns(list(pq.read_schema(p).names), [unit_column, *named], p.name)
        except (pa.ArrowException, OSError):
            pass  # not a Parquet file: read_unit_columns says so
        named = []
    table = read_unit_columns(p, fmt, unit_column, named, csv_delimiter)  # missing columns are named
    col = table.column(unit_column)
    _missing_ids(col, p.name, unit_column, "privacy-unit id")
    return unit_count(pc.unique(col).to_numpy(zero_copy_only=False))  # distinct in Arrow first: no row-long copies


def unit_count(units: AnyArray) -> int:
    """The number of distinct privacy-unit ids (compared as text, as every reader keys them).

    >>> unit_count(np.array([1, 2, 1]))
    2
    """
    return int(pd.unique(pd.Series(np.asarray(units).astype(str))).shape[0])


def _check_columns(names: list[str], wanted: list[str], fname: str, hint: str = "") -> None:
    """Refuse duplicate or missing wanted columns, naming only the config's column names: the file's own header is not quoted, since in a file without a header row (or a file that is not a table) it is data."""
    dupes = sorted({c for c in wanted if names.count(c) > 1})
    if dupes:
        raise DataError(f"{fname}: duplicate column names {dupes}; rename them so each column is unique")
    missing = [c for c in wanted if c not in names]
    if missing:
        if not hint and names and all(_is_number(n) for n in names):
            hint = " (its first row holds only numbers: does the file have a header row?)"
        folded = {n.casefold() for n in names}
        cased = [c for c in missing if c.casefold() in folded]  # names the config gave: nothing of the file is quoted
        if cased:
            hint += f" ({cased} differ only in upper/lower case from a column of the file: column names are case-sensitive)"
        raise DataError(
            f"{fname}: missing column(s) {missing}; the file's header has {len(names)} column(s), none named so"
            f"{hint}. Check dataset.unit_column, dataset.time_column, dataset.value_column, dataset.curve_column, "
            "covariates[].name (fosr) and coordinate_columns/label_column (kde, erm), or the fdp init options that "
            "write them (--unit, --time, --value, --covariate)"
        )


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def memory_ran_out(fname: str) -> OutOfMemoryError:
    """The error for a read that ran out of memory (Arrow's own message is not passed on)."""
    return OutOfMemoryError(f"{fname}: memory ran out while reading the file; give the process more memory, read it "
                            "in chunks (engine: local) or split the file")



def read_unit_columns(
    p: Path, fmt: str, unit_column: str, columns: Sequence[str | None], csv_delimiter: str = ","
) -> pa.Table:
    """Read ``unit_column`` and ``columns`` (None entries skipped) of a Parquet or CSV file.

    Shared by every table reader: the format dispatch, the zero-row check and the privacy-unit id
    type check live here once. Errors name the file, column and row, never a value.
    """
    wanted = list(dict.fromkeys(c for c in (unit_column, *columns) if c is not None))
    if fmt == "parquet":
        table = _read_parquet(p, wanted)
    elif fmt == "csv":
        table = _read_csv(p, wanted, csv_delimiter)
    else:
        raise DataError(f"dataset.format ({fmt!r}) must be 'parquet' or 'csv'")
    if table.num_rows == 0:
        raise DataError(f"{p.name}: the file has zero data rows; check dataset.path")
    _check_id_type(table, p.name, unit_column, "privacy-unit id")
    check_id_variants(table.column(unit_column), p.name, unit_column)
    return table


def _read_parquet(p: Path, wanted: list[str]) -> pa.Table:
    try:
        schema = pq.read_schema(p)
        _check_columns(list(schema.names), wanted, p.name)
        return pq.read_table(p, columns=wanted)
    except DataError:
        raise
    except (pa.ArrowMemoryError, MemoryError):
        raise memory_ran_out(p.name) from None
    except (pa.ArrowException, OSError) as exc:
        raise DataError(
            f"{p.name}: not a readable Parquet file ({type(exc).__name__}); check dataset.format and the file"
        ) from None


#: The CSV entries read as a missing value (its row then has no reading there): empty, and the markers spreadsheets,
#: R and pandas write. Pinned (PyArrow's defaults as of 2026) so a library upgrade cannot change what counts as missing;
#: any other text in a numeric column is refused with its row (docs/troubleshooting.md).
CSV_MISSING = ("", "NA", "N/A", "n/a", "NULL", "null", "NaN", "nan", "-NaN", "-nan", "#N/A", "#N/A N/A", "#NA",
               "-1.#IND", "-1.#QNAN", "1.#IND", "1.#QNAN")


#: How much of a CSV file is checked for NUL bytes before the whole file is read (trial U, L2: a 2 GB sparse file was
#: read into 4.6 GB of memory before its refusal).
CSV_SNIFF_BYTES = 1 << 16


def _read_csv(p: Path, wanted: list[str], delimiter: str) -> pa.Table:
    try:
        with p.open("rb") as head:
            if b"\x00" in head.read(CSV_SNIFF_BYTES):  # binary (or sparse): refused before reading it all
                raise DataError(f"{p.name}: the file contains NUL bytes; it is not a CSV text file (check dataset.format)")
        raw = p.read_bytes()
    except OSError as exc:
        raise DataError(f"{p.name}: the file cannot be read ({exc.strerror}); check its permissions") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"{p.name}: not UTF-8 text (byte {exc.start}); re-encode the CSV as UTF-8 (or check dataset.format)") from None
    if not text.strip():
        raise DataError(f"{p.name}: the file is empty")
    if "\x00" in text:
        raise DataError(f"{p.name}: the file contains NUL bytes; it is not a CSV text file (check dataset.format)")
    try:
        header = next(csv.reader(io.StringIO(text), delimiter=delimiter))
    except (csv.Error, StopIteration):
        raise DataError(f"{p.name}: the CSV header cannot be parsed with delimiter {delimiter!r}; check dataset.csv_delimiter") from None
    hint = ""
    if len(header) == 1 and any(d in header[0] for d in ",;\t|" if d != delimiter):
        hint = f" (one column only: is dataset.csv_delimiter ({delimiter!r}) the file's delimiter?)"
    _check_columns(header, wanted, p.name, hint)
    # Wanted columns are read as text and converted by _numeric, so a bad entry is
    # reported by row (pyarrow's conversion errors would quote the entry itself).
    convert = pacsv.ConvertOptions(
        include_columns=wanted, column_types={c: pa.string() for c in wanted}, strings_can_be_null=True,
        null_values=list(CSV_MISSING),
    )
    parse = pacsv.ParseOptions(delimiter=delimiter)
    try:
        return pacsv.read_csv(io.BytesIO(raw), parse_options=parse, convert_options=convert)
    except (pa.ArrowMemoryError, MemoryError):
        raise memory_ran_out(p.name) from None
    except pa.ArrowInvalid:
        pass
    bad: list[tuple[int | None, int, int]] = []

    def handler(row: pacsv.InvalidRow) -> str:
        bad.append((row.number, row.expected_columns, row.actual_columns))
        return "error"

    try:
        pacsv.read_csv(io.BytesIO(raw), read_options=pacsv.ReadOptions(use_threads=False),
                       parse_options=pacsv.ParseOptions(delimiter=delimiter, invalid_row_handler=handler),
                       convert_options=convert)
    except pa.ArrowInvalid:
        pass
    if bad:
        number, expected, actual = bad[0]
        where = f"row {number} (the header is row 1)" if number is not None else "a row"
        raise DataError(
            f"{p.name}: CSV {where} has {actual} fields but the header has {expected}; "
            "fix the row or check dataset.csv_delimiter and quoting"
        )
    raise DataError(f"{p.name}: CSV could not be parsed with delimiter {delimiter!r}; check dataset.csv_delimiter and quoting")


def _type_name(t: pa.DataType) -> str:
    return str(t.value_type) if pa.types.is_dictionary(t) else str(t)


def _check_id_type(table: pa.Table, fname: str, name: str, what: str) -> None:
    t = table.schema.field(name).type
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_nested(t) or pa.types.is_null(t) and table.num_rows:
        if pa.types.is_null(t):
            raise DataError(f"{fname}: column {name!r} has a missing {what} at row 1; every row needs one")
        raise DataError(f"{fname}: column {name!r} has type {t}; a {what} must be a single integer or string")


def _missing_ids(col: pa.ChunkedArray, fname: str, name: str, what: str) -> None:
    """Refuse a missing id (null, or NaN in a float column), naming its row."""
    if col.null_count:
        row = int(np.flatnonzero(col.is_null(nan_is_null=True).to_numpy(zero_copy_only=False))[0])
        raise DataError(f"{fname}: column {name!r} has a missing {what} at row {row + 1}; every row needs one")
    if pa.types.is_floating(col.type) or (pa.types.is_dictionary(col.type) and pa.types.is_floating(col.type.value_type)):
        nan = col.is_null(nan_is_null=True).to_numpy(zero_copy_only=False)
        if nan.any():
            row = int(np.flatnonzero(nan)[0])
            raise DataError(f"{fname}: column {name!r} has a missing {what} at row {row + 1}; every row needs one")


def id_key(text: str) -> object:
    """The key under which text ids written two ways collide: one Unicode form, spaces around dropped, numbers as numbers.

    ``"308"``, ``" 308"``, ``"308.0"``, ``"0308"`` and ``"3.08e2"`` share one key (an Excel round trip, a float
    conversion, a lost leading zero: one unit written two ways), and so do ids that differ only in Unicode form (trial
    U: ``"José"`` composed and decomposed, ``"A1"`` and full-width ``"Ａ1"``, ``"ana"`` and ``"ana"`` with a zero-width
    space): NFKC normalisation, invisible format characters removed. Letter case is kept (``"ab"`` and ``"AB"`` differ).

    >>> id_key(" 0308 ") == id_key("308.0") == id_key("3.08e2"), id_key("AB") == id_key("ab")
    (True, False)
    >>> id_key("Jos\u00e9") == id_key("Jose\u0301"), id_key("A1") == id_key("\uff211"), id_key("ana") == id_key("ana\u200b")
    (True, True, True)
    """
    text = "".join(c for c in unicodedata.normalize("NFKC", text) if unicodedata.category(c) != "Cf")
    stripped = text.strip()
    try:
        number = Decimal(stripped)
    except InvalidOperation:
        return stripped
    return number if number.is_finite() else stripped


def check_id_variants(col: pa.ChunkedArray | pa.Array, fname: str, name: str, what: str = "privacy-unit id") -> None:
    """Refuse text ids that differ only in surrounding spaces, in how a number is written or in Unicode form (:func:`id_key`).

    Trial P: a CSV whose rows say ``308`` and ``308.0`` for one subject was released as 36 units for 18 subjects, so
    each person was protected at 2 epsilon while the guarantee said epsilon. The distinct ids are compared (Arrow's
    ``unique``, then one key per distinct id); the error names the rows of the first pair, never a value. Integer and
    float columns hold numbers already: nothing to compare.
    """
    t = col.type.value_type if pa.types.is_dictionary(col.type) else col.type
    if not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)):
        return
    distinct = pc.unique(col)
    if pa.types.is_dictionary(distinct.type):
        distinct = distinct.dictionary_decode()
    first: dict[object, str] = {}
    clash: list[tuple[str, str]] = []
    for text in pc.drop_null(distinct).to_pylist():  # a missing id is refused by its row elsewhere
        other = first.setdefault(id_key(text), text)
        if other != text:
            clash.append((other, text))
    if not clash:
        return
    a, b = clash[0]
    plain = pc.cast(col, t) if pa.types.is_dictionary(col.type) else col  # index() has no dictionary kernel
    rows = sorted(int(pc.index(plain, v).as_py()) + 1 for v in (a, b))
    more = f"; {len(clash)} such pairs in all" if len(clash) > 1 else ""
    raise DataError(f"{fname}: column {name!r} has {what}s that {DIFFER_ONLY} (rows {rows[0]} and {rows[1]}{more}): "
                    f"{WRITTEN_TWO_WAYS}")


#: How two ids refused as one unit written two ways may differ (:func:`id_key`).
DIFFER_ONLY = ("differ only in surrounding spaces, in how a number is written or in Unicode form (accents composed or "
               "decomposed, full-width or invisible characters)")

#: Why ids written two ways are refused and what to do (every reader's message ends with it; no id is quoted).
WRITTEN_TWO_WAYS = ("each is counted as a separate unit, so one unit written two ways would be released as two and "
                    "protected only at twice the stated epsilon; write every unit's id one way (e.g. as integers, "
                    "without spaces), or, if these really are different units, give them ids that differ in more than "
                    "that (e.g. a prefix)")


def _ids(col: pa.ChunkedArray, fname: str, name: str, what: str) -> AnyArray:
    _missing_ids(col, fname, name, what)
    out: AnyArray = col.to_pandas().to_numpy()
    return out


def compact_ids(col: pa.ChunkedArray, fname: str, name: str, what: str) -> AnyArray:
    """The ids of ``col``, missing ones refused naming the row: a categorical for text, else a NumPy array.

    A :class:`pandas.Categorical` for a text, binary or dictionary column, else :func:`_ids`'s NumPy array.
    A text id as a Python string costs about 70 bytes per row (trial L: 840 MB of an 11.7 M-row file's 1.6 GB); a
    categorical holds one small integer code per row and each distinct id once. Equality is the strings' (the
    codes of :func:`fdpcore.data.preprocess.align_long` are those of the NumPy array of the same ids).

    >>> compact_ids(pa.chunked_array([["b", "a"], ["b"]]), "f", "id", "privacy-unit id").codes.tolist()
    [0, 1, 0]
    >>> compact_ids(pa.chunked_array([[3, 1]]), "f", "id", "privacy-unit id").tolist()
    [3, 1]
    """
    t = col.type.value_type if pa.types.is_dictionary(col.type) else col.type
    if not (pa.types.is_dictionary(col.type) or pa.types.is_string(t) or pa.types.is_large_string(t)
            or pa.types.is_string_view(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t)):
        return _ids(col, fname, name, what)
    _missing_ids(col, fname, name, what)
    out: AnyArray = col.to_pandas(strings_to_categorical=True).array
    return out


#: Text that reads as a date (1952-07-01, 01/07/1952, 1.7.1952) or a clock time (00:00, 23:59:59): trial P's time column.
_DATE_OR_CLOCK = re.compile(r"\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}([ T]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?)?|\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?")


def _numeric(col: pa.ChunkedArray, fname: str, name: str) -> NDArrayFloat:
    t = col.type.value_type if pa.types.is_dictionary(col.type) else col.type
    if pa.types.is_boolean(t):
        raise DataError(f"{fname}: column {name!r} is boolean; it must be numeric")
    if pa.types.is_temporal(t):
        raise DataError(
            f"{fname}: column {name!r} has type {t}; it must be numeric (convert dates/times to numbers in "
            "the source units of dataset.time_domain)"
        )
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t) or pa.types.is_null(t)
            or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)):
        raise DataError(f"{fname}: column {name!r} has type {_type_name(col.type)}; it must be numeric")
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_null(t):
        series = pd.Series(col.to_numpy(zero_copy_only=False))
        numeric: NDArrayFloat = pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        return numeric
    series = pd.Series(col.to_pandas(), dtype=object)
    if pa.types.is_decimal(t):
        series = series.map(lambda x: float(x) if x is not None else np.nan)  # exact Decimal -> nearest float
    else:
        series = series.str.strip() if series.map(lambda x: isinstance(x, str)).any() else series
    converted = pd.to_numeric(series, errors="coerce")
    missing = pd.isna(series).to_numpy() | (series == "").to_numpy()
    bad = converted.isna().to_numpy() & ~missing
    # text such as "nan" parses to NaN legitimately: it is a non-finite value, not a bad entry
    if bad.any():
        text_nan = series[bad].astype(str).str.lower().isin(["nan", "+nan", "-nan"]).to_numpy()
        bad_idx = np.flatnonzero(bad)[~text_nan]
        if bad_idx.size:
            first = str(series.iloc[int(bad_idx[0])])
            dated = bool(_DATE_OR_CLOCK.fullmatch(first))  # the kind of entry is named, never the entry
            raise DataError(
                f"{fname}: column {name!r} has a non-numeric entry at row {int(bad_idx[0]) + 1}; it must be numeric "
                + ("(it reads as a date or a clock time: convert such a column to numbers in the units of "
                   "dataset.time_domain, e.g. hours since midnight or decimal years)" if dated else
                   "(use '.' as the decimal separator; leave missing values empty)")
            )
    values: NDArrayFloat = converted.to_numpy(dtype=np.float64, na_value=np.nan)
    return values


def covariate_entry_error(where: str, name: str, row: int, *, missing: bool, encoded: bool) -> DataError:
    """The refusal of a covariate entry that has no value: missing, non-finite, or a category its encoding does not list.

    One text for the in-memory and the streaming readers. The entry itself is never quoted (it is data); a category
    that is not listed is most often the same level spelled or cased otherwise (trial S: "female" / "Female").

    >>> str(covariate_entry_error("f.csv", "sex", 22, missing=False, encoded=True))[:76]
    "f.csv: column 'sex' has a category that is not listed in its encoding at row"
    """
    if missing or not encoded:
        what = "a missing value" if encoded else "a missing or non-finite value"
        return DataError(f"{where}: column {name!r} has {what} at row {row}; every row needs a covariate value "
                         "(check covariates[].encoding)")
    return DataError(f"{where}: column {name!r} has a category that is not listed in its encoding at row {row}; every "
                     "entry must be one of the listed levels, spelled and cased exactly as listed (surrounding spaces "
                     "are ignored): check covariates[].levels / encoding against the column")
