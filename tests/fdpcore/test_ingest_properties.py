"""Adversarial inputs to ingest, rescaling, alignment and clipping (Hypothesis).

Properties: only fdp's own error types escape; every clipped norm is <= tau; every
aligned record is finite; alignment is record-wise (one unit's rows change only that
unit's record) even with extreme magnitudes, duplicates, non-finite rows, unsorted times
and ids of mixed types; error messages never quote a data value.
"""

from __future__ import annotations

import math
import string
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fdpcore.basis.grids import grid_from_nodes, midpoint_grid
from fdpcore.data.preprocess import align_long, clip_l2, rescale_long
from fdpcore.errors import DataError, DomainError, FdpError
from fdpcore.io import read_long_table

GRID = midpoint_grid(6)
BIG = np.finfo(np.float64).max

# -------------------------------------------------------------- strategies

extreme_floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e308, -1e308, BIG, -BIG, 5e-324, 1e-300, 0.5, 1.0]),
)
cell = st.one_of(
    extreme_floats,
    st.integers(-(2**63), 2**63 - 1),
    st.text(alphabet=string.printable, max_size=6),
    st.sampled_from(["1.5", " 2 ", "1e400", "-inf", "nan", "NA", "", "1,5", "abc", "0x1", "true"]),
    st.none(),
)


@st.composite
def adversarial_frames(draw: st.DrawFn) -> pd.DataFrame:
    """A long table whose columns may hold anything: numbers of any magnitude, text, None."""
    n = draw(st.integers(0, 25))
    unit = draw(st.lists(st.one_of(st.integers(0, 4), st.sampled_from(["a", "b", "1"]), st.none()), min_size=n, max_size=n))
    kind = draw(st.sampled_from(["clean", "dirty"]))
    if kind == "clean":
        t = draw(st.lists(st.one_of(st.floats(-0.5, 1.5), extreme_floats), min_size=n, max_size=n))
        v = draw(st.lists(extreme_floats, min_size=n, max_size=n))
    else:
        t = draw(st.lists(cell, min_size=n, max_size=n))
        v = draw(st.lists(cell, min_size=n, max_size=n))
    return pd.DataFrame({"unit": pd.Series(unit, dtype=object), "t": pd.Series(t, dtype=object),
                         "v": pd.Series(v, dtype=object)})


def _write(frame: pd.DataFrame, path: Path, fmt: str) -> None:
    if fmt == "csv":
        frame.to_csv(path, index=False)
        return
    cols = {}
    for name in frame.columns:
        col = frame[name].tolist()
        try:
            cols[name] = pa.array(col)
        except (pa.ArrowException, OverflowError):
            cols[name] = pa.array([None if x is None else str(x) for x in col], type=pa.string())
    pq.write_table(pa.table(cols), path)


def _pipeline(path: Path, fmt: str, tau: float) -> tuple[np.ndarray, int]:
    table = read_long_table(path, fmt, unit_column="unit", time_column="t", value_column="v")
    t, v, _ = rescale_long(table.times, table.values, time_domain=(0.0, 1.0), grid_domain=(0.0, 1.0),
                           value_offset=0.0, value_scale=1.0)
    aligned = align_long(table.units, t, v, GRID)
    assert np.all(np.isfinite(aligned.data_matrix))
    assert aligned.n_samples == len(set(map(repr, table.units.tolist())))
    clipped, _ = clip_l2(aligned.data_matrix, GRID.weights, tau)
    return clipped, aligned.n_samples


# -------------------------------------------------------------- properties


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frame=adversarial_frames(), fmt=st.sampled_from(["csv", "parquet"]), tau=st.floats(1e-6, 1e6))
def test_ingest_pipeline_raises_only_fdp_errors_and_bounds_norms(
    frame: pd.DataFrame, fmt: str, tau: float, tmp_path: Path
) -> None:
    path = tmp_path / f"data.{fmt}"
    _write(frame, path, fmt)
    try:
        clipped, n = _pipeline(path, fmt, tau)
    except FdpError as exc:
        message = str(exc)
        assert path.name in message or "dataset." in message
        # a message locates a bad entry by row and column; it never quotes a data value
        for value in frame.to_numpy().ravel():
            if isinstance(value, str) and len(value.strip()) >= 3 and value.strip() not in {"unit", "nan", "NaN"}:
                assert repr(value.strip()) not in message
        return
    assert clipped.shape == (n, GRID.size)
    assert np.all(GRID.norm(clipped) <= tau)


@st.composite
def unit_rows(draw: st.DrawFn, unit: object) -> tuple[list[object], list[float], list[float]]:
    k = draw(st.integers(0, 7))
    times = draw(st.lists(st.one_of(st.floats(-0.2, 1.2), st.sampled_from([0.0, 1.0, np.nan, np.inf])), min_size=k, max_size=k))
    if draw(st.booleans()):
        times += [0.0, 1.0]  # cover the grid, so most units align
    values = draw(st.lists(extreme_floats, min_size=len(times), max_size=len(times)))
    return [unit] * len(times), times, values


@settings(max_examples=150, deadline=None)
@given(data=st.data(), n_units=st.integers(2, 6), mixed_ids=st.booleans())
def test_alignment_is_record_wise_on_adversarial_rows(data: st.DataObject, n_units: int, mixed_ids: bool) -> None:
    ids: list[object] = [(f"u{i}" if i % 2 else i) if mixed_ids else i for i in range(n_units)]
    rows = [data.draw(unit_rows(uid)) for uid in ids]
    victim = data.draw(st.integers(0, n_units - 1))
    replacement = data.draw(unit_rows(ids[victim]))

    def frame(parts: list[tuple[list[object], list[float], list[float]]]) -> tuple[np.ndarray, ...]:
        u = np.array([x for p in parts for x in p[0]] + ids, dtype=object)  # each id appears at least once
        t = np.array([x for p in parts for x in p[1]] + [np.nan] * n_units, dtype=float)
        v = np.array([x for p in parts for x in p[2]] + [0.0] * n_units, dtype=float)
        order = data.draw(st.permutations(range(u.size)))  # row order must not matter
        return u[list(order)], t[list(order)], v[list(order)]

    base = align_long(*frame(rows), GRID)
    changed = align_long(*frame([*rows[:victim], replacement, *rows[victim + 1:]]), GRID)
    assert base.n_samples == changed.n_samples == n_units
    assert np.all(np.isfinite(base.data_matrix)) and np.all(np.isfinite(changed.data_matrix))
    # rows of data_matrix follow a fixed order of the ids; every other unit's record is bit-identical
    order = sorted(range(n_units), key=lambda i: (type(ids[i]).__name__, str(ids[i]))) if mixed_ids else list(range(n_units))
    victim_row = order.index(victim)
    others = np.arange(n_units) != victim_row
    np.testing.assert_array_equal(changed.data_matrix[others], base.data_matrix[others])


@settings(max_examples=150, deadline=None)
@given(
    data=st.lists(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=6, max_size=6), min_size=1, max_size=6),
    tau=st.floats(5e-324, 1e308, allow_subnormal=True),
)
def test_clipping_bounds_norms_over_the_whole_float_range(data: list[list[float]], tau: float) -> None:
    x = np.array(data)
    clipped, n_clipped = clip_l2(x, GRID.weights, tau)
    assert np.all(np.isfinite(clipped))
    with np.errstate(over="ignore", under="ignore"):
        sq = np.einsum("ik,k,ik->i", clipped, GRID.weights, clipped)
    direct = np.isfinite(sq) & (sq >= np.finfo(np.float64).tiny)
    # where the squares neither overflow nor underflow, Grid.norm itself is <= tau, exactly
    assert np.all(GRID.norm(clipped[direct]) <= tau)
    # elsewhere Grid.norm is meaningless in floating point: rescale by an exact power of 2 and
    # allow the rounding of a differently ordered computation (a few ulps)
    big = ~direct & (np.max(np.abs(clipped), axis=1) > 1.0)
    assert np.all(GRID.norm(clipped[big] * 2.0**-600) * 2.0**600 <= tau * (1 + 8 * np.finfo(float).eps))
    small = ~direct & ~big
    assert np.all(GRID.norm(clipped[small] * 2.0**600) * 2.0**-600 <= tau * (1 + 8 * np.finfo(float).eps))
    assert 0 <= n_clipped <= x.shape[0]
    # clipping only shrinks: each record keeps its direction (same sign pattern, |x'| <= |x|)
    assert np.all(np.abs(clipped) <= np.abs(x))
    assert np.all((np.sign(clipped) == np.sign(x)) | (clipped == 0))


def test_clipping_a_huge_record_keeps_its_direction() -> None:
    """A record of magnitude ~1e308 (squared norm overflows) is scaled to norm tau, not zeroed."""
    x = np.full((1, GRID.size), 1e308)
    clipped, n = clip_l2(x, GRID.weights, 1.0)
    assert n == 1
    np.testing.assert_allclose(GRID.norm(clipped), [1.0], rtol=1e-12)
    np.testing.assert_allclose(clipped, np.ones((1, GRID.size)), rtol=1e-12)


@settings(max_examples=100, deadline=None)
@given(
    t=st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=20),
    scale=st.floats(1e-300, 1e300),
    offset=st.floats(-1e308, 1e308),
)
def test_rescaling_keeps_finite_values_finite(t: list[float], scale: float, offset: float) -> None:
    values = np.array(t)
    mapped, v, n_out = rescale_long(values, values, time_domain=(-1.0, 1.0), grid_domain=(0.0, 1.0),
                                    value_offset=offset, value_scale=scale)
    finite = np.isfinite(values)
    assert np.all(np.isfinite(v[finite]))  # a finite value never becomes a dropped (non-finite) row
    assert np.all(~np.isfinite(v[~finite]))
    inside = finite & (values >= -1.0) & (values <= 1.0)
    assert np.all((mapped[inside] >= 0.0) & (mapped[inside] <= 1.0))
    assert n_out == int(np.sum((values < -1.0) | (values > 1.0)))


# -------------------------------------------------------------- examples


def test_extreme_but_finite_values_align_without_overflow() -> None:
    """Duplicates and unit averages of values near the float maximum stay finite (convex combinations)."""
    u = np.array([1, 1, 1, 1, 2, 2])
    t = np.array([0.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    v = np.array([BIG, BIG, BIG, -BIG, -1e308, 1e308])
    a = align_long(u, t, v, midpoint_grid(2))
    assert np.all(np.isfinite(a.data_matrix))
    assert a.data_matrix[0, 0] == pytest.approx(BIG * 0.75, rel=1e-12)  # 0.75 BIG + 0.25 * 0
    assert a.n_duplicates_merged == 2


def test_missing_ids_are_rejected_not_merged_into_a_neighbour() -> None:
    """A missing curve or unit id must never join another unit's segment (that would mix records)."""
    u = np.array([1, 1, 2, 2])
    t = np.array([0.0, 1.0, 0.0, 1.0])
    with pytest.raises(DomainError, match="curves must not contain missing ids"):
        align_long(u, t, t, GRID, curves=np.array([0.0, 0.0, np.nan, np.nan]))
    with pytest.raises(DomainError, match="units must not contain missing ids"):
        align_long(np.array([1, None, 2, 2], dtype=object), t, t, GRID)


def test_infinite_time_domain_width_is_rejected() -> None:
    with pytest.raises(DomainError, match="time_domain .* must be finite with a < b and a finite width"):
        rescale_long([0.0], [0.0], time_domain=(-1e308, 1e308), grid_domain=(0.0, 1.0))


def test_trapezoid_grid_and_curve_ids_align_per_curve() -> None:
    """Several curves of one unit are aligned separately and averaged; ragged observation times are fine."""
    g = grid_from_nodes([0.0, 0.5, 1.0])
    u = np.array(["a"] * 5 + ["b"] * 3)
    c = np.array([1, 1, 2, 2, 2, 1, 1, 1])
    t = np.array([0.0, 1.0, 1.0, 0.0, 0.3, 1.0, 0.0, 0.7])
    v = np.array([0.0, 2.0, 4.0, 4.0, 4.0, 1.0, 1.0, 1.0])
    a = align_long(u, t, v, g, curves=c)
    np.testing.assert_allclose(a.data_matrix, [[2.0, 2.5, 3.0], [1.0, 1.0, 1.0]])


def test_many_units_align_in_one_vectorised_pass() -> None:
    """200 000 privacy units with ragged, unsorted rows: n is the number of units, nothing is dropped."""
    rng = np.random.default_rng(1)
    n = 200_000
    u = np.repeat(np.arange(n), 3)
    t = np.tile([1.0, 0.0, 0.5], n)
    v = rng.normal(size=3 * n)
    order = rng.permutation(u.size)
    a = align_long(u[order], t[order], v[order], midpoint_grid(12))
    assert a.data_matrix.shape == (n, 12) and a.n_unalignable == 0
    i = 12345
    mine = order_rows = np.flatnonzero(u[order] == i)
    tt, vv = t[order][mine], v[order][mine]
    np.testing.assert_allclose(a.data_matrix[i], np.interp(midpoint_grid(12).grid_points, np.sort(tt), vv[np.argsort(tt)]))
    assert order_rows.size == 3


@pytest.mark.parametrize(
    ("content", "fmt", "message"),
    [
        (b"", "csv", "the file is empty"),
        (b"unit,t,v\n", "csv", "zero data rows"),
        (b"unit;t;v\n1;0;1\n", "csv", "one column only"),
        (b"unit,t,v,v\n1,0,1,2\n", "csv", r"duplicate column names \['v'\]"),
        (b"unit,t\n1,0\n", "csv", r"missing column\(s\) \['v'\]"),
        (b"unit,t,V\n1,0,1\n", "csv", r"\['v'\] differ only in upper/lower case from a column of the file"),
        (b"unit,t,v\n1,0,1\n1,1,secret-77\n", "csv", "column 'v' has a non-numeric entry at row 2"),
        (b"unit,t,v\n1,0,1\n1,0,1,99999\n", "csv", r"row 3 \(the header is row 1\) has 4 fields but the header has 3"),
        (b"unit,t,v\n,0,1\n", "csv", "column 'unit' has a missing privacy-unit id at row 1"),
        ("unit,t,v\n1,0,\u00e9\n".encode("latin-1"), "csv", r"not UTF-8 text \(byte 13\)"),
        (b"unit,t,v\n1,0,1\n", "parquet", "not a readable Parquet file"),
        (b"\x00\x01binary", "csv", "not UTF-8|NUL bytes"),
    ],
)
def test_bad_files_raise_data_error_naming_file_column_row(tmp_path: Path, content: bytes, fmt: str, message: str) -> None:
    path = tmp_path / f"input.{fmt}"
    path.write_bytes(content)
    with pytest.raises(DataError, match=message) as info:
        read_long_table(path, fmt, unit_column="unit", time_column="t", value_column="v")
    assert "secret-77" not in str(info.value) and "99999" not in str(info.value)


def test_a_large_binary_or_sparse_csv_is_refused_from_its_first_block(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial U, L2: a 2 GB sparse CSV was read whole (4.6 GB of memory) before its NUL refusal; its first block now
    decides. The whole file is never read (Path.read_bytes would fail)."""
    path = tmp_path / "sparse.csv"
    with path.open("wb") as f:
        f.truncate(256 << 20)  # 256 MiB of NUL bytes, sparse on disk
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail("the whole file was read"))
    with pytest.raises(DataError, match="sparse.csv: the file contains NUL bytes; it is not a CSV text file"):
        read_long_table(path, "csv", unit_column="unit", time_column="t", value_column="v")


@pytest.mark.parametrize(
    ("column", "message"),
    [
        (pa.array([[1], [2]]), "column 'unit' has type list<element: int64>; a privacy-unit id must be a single"),
        (pa.array([1.0, math.nan]), "column 'unit' has a missing privacy-unit id at row 2"),
    ],
)
def test_parquet_unit_column_types(tmp_path: Path, column: pa.Array, message: str) -> None:
    path = tmp_path / "x.parquet"
    pq.write_table(pa.table({"unit": column, "t": [0.0, 1.0], "v": [1.0, 2.0]}), path)
    with pytest.raises(DataError, match=message):
        read_long_table(path, "parquet", unit_column="unit", time_column="t", value_column="v")


def test_parquet_timestamp_times_are_rejected_with_advice(tmp_path: Path) -> None:
    path = tmp_path / "x.parquet"
    pd.DataFrame({"unit": [1, 1], "t": pd.to_datetime(["2020-01-01", "2020-01-02"]), "v": [1.0, 2.0]}).to_parquet(path)
    with pytest.raises(DataError, match=r"column 't' has type timestamp\[.*\]; it must be numeric \(convert dates"):
        read_long_table(path, "parquet", unit_column="unit", time_column="t", value_column="v")


def test_numeric_text_and_missing_entries_are_read(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_bytes(b"\xef\xbb\xbfunit,t,v\r\n7, 0 ,1e400\r\n7,1,\r\n7,0.5,nan\r\n")  # BOM, CRLF, spaces
    tb = read_long_table(path, "csv", unit_column="unit", time_column="t", value_column="v")
    assert tb.times.tolist() == [0.0, 1.0, 0.5]
    assert tb.values[0] == math.inf and math.isnan(tb.values[1]) and math.isnan(tb.values[2])


def test_the_documented_missing_markers_are_missing_and_other_text_is_refused_with_its_row(tmp_path: Path) -> None:
    from fdpcore.io.tables import CSV_MISSING

    path = tmp_path / "x.csv"
    path.write_text("unit,t,v\n" + "".join(f"7,{i},{m}\n" for i, m in enumerate(CSV_MISSING)) + "7,99,2\n")
    tb = read_long_table(path, "csv", unit_column="unit", time_column="t", value_column="v")
    assert np.isnan(tb.values[:-1]).all() and tb.values[-1] == 2.0  # trial L: n/a, NA, NULL, #N/A, nan ... missing
    for other in ("?", "-", "None", "."):
        path.write_text(f"unit,t,v\n7,0,1\n7,1,{other}\n")
        with pytest.raises(DataError, match="'v'"):
            read_long_table(path, "csv", unit_column="unit", time_column="t", value_column="v")


def test_mixed_type_units_are_distinct_and_deterministic() -> None:
    u = np.array([1, "1", 1, "1"], dtype=object)
    t = np.array([0.0, 0.0, 1.0, 1.0])
    v = np.array([1.0, 2.0, 1.0, 2.0])
    a = align_long(u, t, v, midpoint_grid(2))
    assert a.n_samples == 2  # the integer 1 and the text "1" are different units
    np.testing.assert_allclose(a.data_matrix, [[1.0, 1.0], [2.0, 2.0]])  # ordered by type name: int < str


# -------------------------------------------------------------- one unit written two ways (trial P, H1)

spellings = st.sampled_from(["{}", " {}", "{} ", "{}.0", "0{}", "{}.00", "+{}", "{}e0"])


@settings(max_examples=60, deadline=None)
@given(units=st.lists(st.integers(0, 999), min_size=1, max_size=12, unique=True), data=st.data())
def test_a_unit_written_two_ways_is_refused_by_row_and_distinct_ids_pass(units: list[int], data: st.DataObject) -> None:
    """Text ids are refused iff two distinct spellings name one number (or differ only in surrounding spaces); the
    message names both rows (1-based), never an id. Distinct numbers or texts in one spelling each always pass."""
    from fdpcore.io.tables import check_id_variants

    rows = [data.draw(spellings).format(u) for u in units for _ in range(2)]  # two rows per unit, one spelling each
    for i in range(0, len(rows), 2):
        rows[i + 1] = rows[i]
    check_id_variants(pa.chunked_array([rows]), "f.csv", "id")  # one spelling per unit: accepted
    check_id_variants(pa.chunked_array([[f"u{u}" for u in units] + ["U1"]]), "f.csv", "id")  # case kept: accepted
    j = data.draw(st.integers(0, len(rows) - 1))
    other = data.draw(spellings.filter(lambda f: f.format(units[j // 2]) != rows[j]))
    rows[j] = other.format(units[j // 2])
    with pytest.raises(DataError) as info:
        check_id_variants(pa.chunked_array([rows[: len(rows) // 2], rows[len(rows) // 2:]]), "f.csv", "id")
    message = str(info.value)
    partner = j + 1 if j % 2 == 0 else j - 1
    assert f"(rows {min(j, partner) + 1} and {max(j, partner) + 1}" in message and "column 'id'" in message
    assert not any(r.strip() in message for r in rows if len(r.strip()) > 2)  # no id quoted


@pytest.mark.parametrize("one,other", [("Jos\u00e9", "Jose\u0301"), ("A1", "\uff211"), ("ana", "ana\u200b"),
                                       ("M\u00fcller", "Mu\u0308ller"), ("id 5", "id\u00a05")])
def test_a_unit_written_in_two_unicode_forms_is_refused_and_different_letters_pass(one: str, other: str) -> None:
    """Trial U, M3: 'José' composed and decomposed, 'A1' and full-width 'Ａ1', 'ana' with a zero-width space were three
    extra privacy units (n 508 -> 511), so those people were protected at twice the stated epsilon."""
    from fdpcore.io.tables import check_id_variants

    ids = ["u0", one, "u1", other]
    with pytest.raises(DataError, match=r"differ only in .*Unicode form .*\(rows 2 and 4\)") as info:
        check_id_variants(pa.chunked_array([ids]), "f.csv", "id")
    assert one not in str(info.value) and other not in str(info.value)  # no id quoted
    check_id_variants(pa.chunked_array([["Jos\u00e9", "Jose", "ana", "Ana", "A1", "A2"]]), "f.csv", "id")  # distinct

