"""Exact accumulation and streaming ingest: lattice quantisation, partition invariance, neighbours, agreement with
the in-memory path (electricity and generated multi-file data), order checks."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fdpcore.basis.grids import grid_from_nodes, midpoint_grid
from fdpcore.data.accumulate import (
    QUANTUM_BITS,
    CurveSums,
    accumulate_curves,
    quantisation_exponent,
    quantise_records,
    sum_int_cross,
    sum_int_outer,
    sum_int_rows,
    summarise_covariance_sums,
    summarise_fosr_sums,
    summarise_mean_sums,
)
from fdpcore.data.preprocess import align_long, clip_l2, rescale_long
from fdpcore.errors import DataError, DomainError
from fdpcore.io import read_long_table
from fdpcore.io.covariates import read_unit_covariates
from fdpcore.io.streaming import StreamSpec, combine_partials, dataset_files, ingest_file, stream_dataset
from fdpcore.summaries.covariance import plan_covariance_release, summarise_covariance
from fdpcore.summaries.fosr import clip_covariates, plan_fosr_release, summarise_fosr
from fdpcore.summaries.mean import iclp_qr_weights, plan_mean_release, summarise_mean

REPO = Path(__file__).resolve().parents[2]
ELEC = REPO / "examples" / "data" / "electricity_monday.parquet"
KERNEL = {"name": "matern", "nu": 1.5, "rho": 0.1}


# ------------------------------------------------------------------ quantisation and exact sums


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), log_tau=st.floats(-30, 30), k=st.integers(2, 40),
       magnitude=st.sampled_from([1e-300, 1e-8, 1.0, 1e8, 1e300]))
def test_quantisation_never_increases_a_value_or_a_norm(seed: int, log_tau: float, k: int, magnitude: float) -> None:
    rng = np.random.default_rng(seed)
    grid = grid_from_nodes(np.sort(np.r_[0.0, rng.uniform(0, 1, k - 2), 1.0]))
    tau = 2.0**log_tau
    x, _ = clip_l2(rng.standard_t(2, size=(20, k)) * magnitude, grid.weights, tau)
    ints = quantise_records(x, tau, grid.weights)
    s = quantisation_exponent(tau)
    q = np.ldexp(ints.astype(np.float64), s)
    assert np.all(np.abs(q) <= np.abs(x))  # toward zero, entry by entry (exact: power-of-two scaling)
    assert np.all(np.abs(x - q) < 2.0**s)  # resolution
    assert np.all(grid.norm(q) <= tau)
    assert 2.0 ** (s + QUANTUM_BITS - 1) < tau <= 2.0 ** (s + QUANTUM_BITS)


def test_quantisation_refuses_unclipped_records_and_tiny_weights() -> None:
    with pytest.raises(DomainError, match="clipped to tau"):
        quantise_records([[10.0, 0.0]], 1.0, [0.5, 0.5])
    with pytest.raises(DomainError, match="grid weights"):
        quantise_records([[0.0, 0.0]], 1.0, [2.0**-45, 1.0])
    with pytest.raises(DomainError, match="tau"):
        quantisation_exponent(0.0)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.lists(st.integers(-(2**62), 2**62), min_size=3, max_size=3), min_size=1, max_size=12))
def test_integer_sums_and_outer_products_are_exact(rows: list[list[int]]) -> None:
    a = np.array(rows, dtype=np.int64)
    assert sum_int_rows(a) == [sum(r[j] for r in rows) for j in range(3)]
    brute = [[sum(r[i] * r[j] for r in rows) for j in range(3)] for i in range(3)]
    assert sum_int_outer(a) == brute


def _random_clipped(seed: int, n: int, k: int, tau: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    grid = midpoint_grid(k)
    x, _ = clip_l2(rng.standard_t(3, size=(n, k)), grid.weights, tau)
    return x


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), cuts=st.lists(st.integers(1, 59), max_size=6))
def test_any_partition_in_any_order_gives_bit_identical_statistics(seed: int, cuts: list[int]) -> None:
    grid = midpoint_grid(8)
    x = _random_clipped(seed, 60, 8, 1.3)
    whole = accumulate_curves(x, 1.3, grid.weights, sup_clip=0.7, outer=True)
    bounds = [0, *sorted(set(cuts)), 60]
    parts = [accumulate_curves(x[a:b], 1.3, grid.weights, sup_clip=0.7, outer=True) for a, b in zip(bounds, bounds[1:], strict=False)]
    rng = np.random.default_rng(seed)
    total = parts[0]
    for i in rng.permutation(len(parts))[1:] if len(parts) > 1 else []:
        total = total + parts[i]
    if len(parts) > 1:  # re-sum in a permuted order starting from another part
        order = list(rng.permutation(len(parts)))
        total = parts[order[0]]
        for i in order[1:]:
            total = total + parts[i]
    assert total.n == whole.n == 60
    assert total.sum == whole.sum and total.sum_sup == whole.sum_sup and total.outer == whole.outer
    assert np.array_equal(total.mean(), whole.mean()) and np.array_equal(total.second_moment(), whole.second_moment())
    # the float mean is the correctly rounded exact mean of the lattice values
    s = quantisation_exponent(1.3)
    ints = quantise_records(x, 1.3, grid.weights)
    exact = [float(Fraction(int(v)) * Fraction(2) ** s / 60) for v in ints.astype(object).sum(axis=0)]
    assert whole.mean().tolist() == exact
    assert np.max(np.abs(whole.mean() - x.mean(axis=0))) < 2.0**s


def test_second_moment_matches_float_outer_products_to_resolution() -> None:
    grid = midpoint_grid(6)
    x = _random_clipped(3, 50, 6, 1.0)
    m = accumulate_curves(x, 1.0, grid.weights, outer=True).second_moment()
    assert np.allclose(m, x.T @ x / 50, atol=1e-10, rtol=0)


def test_sums_on_different_lattices_do_not_combine() -> None:
    grid = midpoint_grid(4)
    a = accumulate_curves(np.zeros((1, 4)), 1.0, grid.weights)
    b = accumulate_curves(np.zeros((1, 4)), 4.0, grid.weights)
    with pytest.raises(Exception, match="different lattices"):
        _ = a + b
    with pytest.raises(DomainError, match="n"):
        CurveSums(0, -40, (0, 0, 0, 0)).mean()


@pytest.mark.parametrize("psi", [1e-3, 5e-2])
def test_worst_case_neighbours_through_exact_sums_stay_within_the_sensitivity(psi: float) -> None:
    rng = np.random.default_rng(11)
    grid = grid_from_nodes(np.sort(np.r_[0.0, rng.uniform(0, 1, 30), 1.0]))
    n, tau, eta = 20, 1.7, 1.5
    plan = plan_mean_release(grid, KERNEL, n=n, tau=tau, epsilon=1.0, eta=eta, psi=psi, secure=False)
    a = iclp_qr_weights(plan.basis.eigenvalues, eta, psi)
    u = plan.basis.reconstruct(a / np.linalg.norm(a))
    others, _ = clip_l2(rng.normal(size=(n - 1, grid.size)), grid.weights, tau)
    d, d_prime = np.vstack([tau * u, others]), np.vstack([-tau * u, others])
    za = summarise_mean_sums(accumulate_curves(clip_l2(d, grid.weights, tau)[0], tau, grid.weights), plan)
    zb = summarise_mean_sums(accumulate_curves(clip_l2(d_prime, grid.weights, tau)[0], tau, grid.weights), plan)
    dist = float(np.sum(np.abs(za - zb)))
    assert dist <= plan.sensitivity  # quantisation toward zero never increases the worst case
    assert dist == pytest.approx(plan.sensitivity, rel=1e-8)  # ... and loses only the lattice resolution


# ------------------------------------------------------------------ streaming vs in-memory


def _in_memory(path: Path, spec: StreamSpec) -> tuple[np.ndarray, dict[str, int]]:
    tb = read_long_table(path, "parquet", unit_column=spec.unit_column, time_column=spec.time_column,
                         value_column=spec.value_column, curve_column=spec.curve_column)
    t, v, n_out = rescale_long(tb.times, tb.values, time_domain=spec.time_domain, grid_domain=spec.grid.domain_range,
                               value_offset=spec.value_offset, value_scale=spec.value_scale)
    al = align_long(tb.units, t, v, spec.grid, curves=tb.curves)
    clipped, n_clipped = clip_l2(al.data_matrix, spec.grid.weights, spec.tau)
    return clipped, {"n_rows": tb.n_rows, "n_rows_outside_time_domain": n_out, "n_rows_nonfinite": al.n_rows_dropped,
                     "n_duplicates_merged": al.n_duplicates_merged, "n_unalignable_units": al.n_unalignable,
                     "n_clipped": n_clipped}


ESTIMATOR_ARGS = {
    "iclp_qr": {},
    "gp": {"delta": 1e-5},
    "iclp_ar": {"eta": 1.5, "psi": 1e-3},
    "frl": {"n_basis": 6},
    "bernstein": {"lattice_k": 10, "sup_clip": 3.0},
}


@pytest.mark.parametrize(("estimator", "chunk_rows"), [
    *((e, c) for e in sorted(ESTIMATOR_ARGS) for c in (1000, 10**6)), ("iclp_qr", 47),  # 47: units span every chunk
])
def test_electricity_streaming_agrees_with_the_in_memory_path(estimator: str, chunk_rows: int) -> None:
    grid = midpoint_grid(48)
    args = dict(ESTIMATOR_ARGS[estimator])
    spec = StreamSpec("monday_index", "half_hour", "demand_mw", (0.5, 48.5), grid, 1.0, value_offset=1500.0,
                      value_scale=1000.0, chunk_rows=chunk_rows, sup_clip=args.get("sup_clip"))
    sums = stream_dataset(ELEC, spec)
    clipped, counts = _in_memory(ELEC, spec)
    assert sums.n == clipped.shape[0] == 508  # every unit counted exactly once, whatever the chunking
    assert sums.counts == counts
    plan = plan_mean_release(grid, KERNEL, n=sums.n, tau=1.0, epsilon=1.0, estimator=estimator, secure=False, **args)
    z_mem, z_stream = summarise_mean(clipped, plan), summarise_mean_sums(sums, plan)
    scale = 1.0 if estimator in ("frl", "bernstein") else 1.0 / float(np.sqrt(plan.basis.eigenvalues.min()))
    assert np.max(np.abs(z_mem - z_stream)) <= 4 * 2.0**quantisation_exponent(1.0) * math.sqrt(48) * scale
    if chunk_rows != 10**6:  # bit-identical to the single-chunk result
        one = stream_dataset(ELEC, StreamSpec(**{**spec.__dict__, "chunk_rows": 10**6}))
        assert one.sum == sums.sum and one.sum_sup == sums.sum_sup


def _generated(tmp: Path, n_units: int, n_files: int, row_group: int, seed: int = 0, curves: bool = False,
               string_ids: bool = False) -> tuple[Path, pa.Table]:
    """Units with ~20 irregular, unsorted-in-time observations (some duplicated, some NaN), split into files."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(2, 30, size=n_units)
    unit = np.repeat(np.arange(n_units), counts)
    t = rng.uniform(-0.05, 1.05, size=unit.shape[0])
    t[rng.random(unit.shape[0]) < 0.03] = np.nan
    # make most units cover the grid ends
    first = np.r_[0, np.cumsum(counts)[:-1]]
    t[first[rng.random(n_units) < 0.9]] = 0.0
    t[(first + counts - 1)[rng.random(n_units) < 0.9]] = 1.0
    v = rng.normal(size=unit.shape[0]) * rng.choice([0.1, 1.0, 10.0], size=unit.shape[0])
    dup = rng.random(unit.shape[0]) < 0.02
    t[dup] = np.round(t[dup], 1)
    cols = {"u": np.array([f"id{i:06d}" for i in unit]) if string_ids else unit, "t": t, "v": v}
    if curves:
        cols["c"] = rng.integers(0, 2, size=unit.shape[0])
    table = pa.table(cols)
    d = tmp / "ds"
    (d / "part=a").mkdir(parents=True)
    edges = np.linspace(0, n_units, n_files + 1).astype(int)
    for i in range(n_files):
        lo, hi = first[edges[i]] if edges[i] < n_units else unit.shape[0], (
            first[edges[i + 1]] if edges[i + 1] < n_units else unit.shape[0])
        pq.write_table(table.slice(lo, hi - lo), d / "part=a" / f"f{i:03d}.parquet", row_group_size=row_group)
    return d, table


@pytest.mark.parametrize(("curves", "string_ids"), [(False, False), (True, False), (False, True)])
def test_generated_multi_file_dataset_agrees_with_the_in_memory_path(tmp_path: Path, curves: bool,
                                                                     string_ids: bool) -> None:
    d, table = _generated(tmp_path, 400, 7, row_group=37, curves=curves, string_ids=string_ids)
    grid = midpoint_grid(24)
    spec = StreamSpec("u", "t", "v", (0.0, 1.0), grid, 2.0, curve_column="c" if curves else None, chunk_rows=53,
                      outer=True)
    assert len(dataset_files(d)) == 7
    sums = stream_dataset(d, spec)
    whole = tmp_path / "whole.parquet"
    pq.write_table(table, whole)
    clipped, counts = _in_memory(whole, spec)
    assert sums.n == clipped.shape[0] == 400
    assert sums.counts == counts
    assert np.max(np.abs(sums.mean() - clipped.mean(axis=0))) < 2.0 ** quantisation_exponent(2.0)
    assert np.allclose(sums.second_moment(), clipped.T @ clipped / 400, atol=1e-9, rtol=0)
    # bit-identical whatever the chunking, and whatever the order the file partials are combined in
    other = stream_dataset(d, StreamSpec(**{**spec.__dict__, "chunk_rows": 10**6}))
    assert other.sum == sums.sum and other.outer == sums.outer and other.counts == sums.counts
    rev = combine_partials([ingest_file(f, spec) for f in reversed(dataset_files(d))])
    assert rev.sum == sums.sum and rev.n == sums.n
    plan = plan_mean_release(grid, KERNEL, n=400, tau=2.0, epsilon=1.0, secure=False)
    assert np.allclose(summarise_mean_sums(sums, plan), summarise_mean(clipped, plan), atol=1e-8, rtol=0)


# ------------------------------------------------------------------ order checks and errors


def _spec(**kw: object) -> StreamSpec:
    return StreamSpec(**{"unit_column": "u", "time_column": "t", "value_column": "v", "time_domain": (0.0, 1.0),
                         "grid": midpoint_grid(4), "tau": 1.0, **kw})  # type: ignore[arg-type]


def test_unsorted_file_is_refused_naming_file_row_group_and_row(tmp_path: Path) -> None:
    p = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"u": [1, 1, 2, 2, 1, 1], "t": [0.0, 1.0] * 3, "v": [0.5] * 6}), p, row_group_size=2)
    for chunk in (1, 3, 100):  # one-row chunks: a unit spans every chunk boundary
        with pytest.raises(DataError, match=r"bad\.parquet: rows are not sorted by 'u' at row 5 \(row group 2\)"):
            ingest_file(p, _spec(chunk_rows=chunk))


def test_overlapping_files_are_refused(tmp_path: Path) -> None:
    pq.write_table(pa.table({"u": [1, 1, 3, 3], "t": [0.0, 1.0] * 2, "v": [0.5] * 4}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"u": [2, 2, 3, 3], "t": [0.0, 1.0] * 2, "v": [0.5] * 4}), tmp_path / "b.parquet")
    with pytest.raises(DataError, match="'a.parquet' and 'b.parquet' have overlapping privacy-unit ranges"):
        stream_dataset(tmp_path, _spec())


@pytest.mark.parametrize(("table", "match"), [
    ({"u": [1, None], "t": [0.0, 1.0], "v": [1.0, 2.0]}, r"missing privacy-unit id at row 2"),
    ({"u": [1, 1], "t": ["0", "1"], "v": [1.0, 2.0]}, r"column 't' has type string; the streaming engine needs"),
    ({"u": [1.5, 2.5], "t": [0.0, 1.0], "v": [1.0, 2.0]}, r"column 'u' has type double"),
    ({"u": [1, 1], "t": [0.0, 1.0]}, r"missing column\(s\) \['v'\]"),
])
def test_bad_files_give_data_errors_without_values(tmp_path: Path, table: dict, match: str) -> None:
    p = tmp_path / "x.parquet"
    pq.write_table(pa.table(table), p)
    with pytest.raises(DataError, match=match) as err:
        ingest_file(p, _spec())
    assert "1.5" not in str(err.value) and "2.0" not in str(err.value)


def test_missing_and_empty_dataset_paths(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist"):
        dataset_files(tmp_path / "nope")
    with pytest.raises(DataError, match="holds no"):
        dataset_files(tmp_path)
    (tmp_path / "x.parquet").write_bytes(b"not parquet")
    with pytest.raises(DataError, match="not a readable Parquet file"):
        ingest_file(tmp_path / "x.parquet", _spec())


# ------------------------------------------------------------------ covariance from streamed sums


@pytest.mark.parametrize("centering", ["public", "sample_mean"])
@pytest.mark.parametrize("chunk_rows", [47, 10**6])  # 47: units span every chunk boundary
def test_streamed_covariance_equals_the_in_memory_summary(centering: str, chunk_rows: int) -> None:
    grid = midpoint_grid(48)
    tau = 0.5 if centering == "public" else 1.5
    # a public centre (any data-independent curve), subtracted before clipping as the in-memory flow does
    center = 0.2 * np.sin(2 * np.pi * grid.grid_points) if centering == "public" else None
    spec = StreamSpec("monday_index", "half_hour", "demand_mw", (0.5, 48.5), grid, tau, value_offset=1500.0,
                      value_scale=1000.0, chunk_rows=chunk_rows, outer=True,
                      center=None if center is None else tuple(center))
    sums = stream_dataset(ELEC, spec)
    tb = read_long_table(ELEC, "parquet", unit_column="monday_index", time_column="half_hour",
                         value_column="demand_mw")
    t, v, _ = rescale_long(tb.times, tb.values, time_domain=(0.5, 48.5), grid_domain=(0.0, 1.0), value_offset=1500.0,
                           value_scale=1000.0)
    records = align_long(tb.units, t, v, grid).data_matrix
    clipped, _ = clip_l2(records if center is None else records - center[None, :], grid.weights, tau)
    # identical sufficient statistics (exact integers) to the in-memory records' ...
    mem = accumulate_curves(clipped, tau, grid.weights, outer=True)
    assert sums.n == mem.n == 508 and sums.sum == mem.sum and sums.outer == mem.outer
    # ... so the pre-noise summary is the in-memory summary of the quantised records, to rounding
    plan = plan_covariance_release(grid, KERNEL, n=508, tau=tau, epsilon=1.0, eta=2.0, psi=1e-3,
                                   centering=centering, secure=False)
    z_stream = summarise_covariance_sums(sums, plan)
    quantised = np.ldexp(quantise_records(clipped, tau, grid.weights).astype(np.float64), sums.exponent)
    z_q = summarise_covariance(quantised, plan)
    assert np.max(np.abs(z_stream - z_q)) <= 1e-9 * np.max(np.abs(z_q))
    # and the unquantised summary to the lattice resolution (|Q(x) - x| < 2^s per grid value)
    z_mem = summarise_covariance(clipped, plan)
    res = 2.0 * tau * 2.0 ** quantisation_exponent(tau) * math.sqrt(48) / float(plan.basis.eigenvalues.min())
    assert np.max(np.abs(z_stream - z_mem)) <= res
    if chunk_rows != 10**6:  # bit-identical whatever the chunking
        one = stream_dataset(ELEC, StreamSpec(**{**spec.__dict__, "chunk_rows": 10**6}))
        assert one.outer == sums.outer and one.sum == sums.sum
        assert np.array_equal(summarise_covariance_sums(one, plan), z_stream)


def test_streamed_covariance_refuses_sums_without_outer_products_and_a_bad_centre() -> None:
    grid = midpoint_grid(8)
    plan = plan_covariance_release(grid, KERNEL, n=2, tau=1.0, epsilon=1.0, eta=2.0, psi=1e-3, secure=False)
    with pytest.raises(DomainError, match="outer products"):
        summarise_covariance_sums(accumulate_curves(np.zeros((2, 8)), 1.0, grid.weights), plan)
    with pytest.raises(DomainError, match=r"sums.n \(3\) must equal"):
        summarise_covariance_sums(accumulate_curves(np.zeros((3, 8)), 1.0, grid.weights, outer=True), plan)
    with pytest.raises(DomainError, match=r"center \(length 3\) must hold 8 finite grid values"):
        _spec(grid=grid, center=(0.0, 0.0, 0.0))
    with pytest.raises(DomainError, match=r"center \(length 8\) must hold 8 finite"):
        _spec(grid=grid, center=(float("nan"),) * 8)


# ------------------------------------------------------------------ FoSR from streamed sums

GROWTH = REPO / "examples" / "data" / "berkeley_growth.parquet"
SEX = ("sex", (("F", -1.0), ("M", 1.0)))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), m=st.integers(0, 30), p=st.integers(1, 4), k=st.integers(1, 6))
def test_sum_int_cross_is_the_exact_integer_sum(seed: int, m: int, p: int, k: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.integers(-(2**62), 2**62, size=(m, p), dtype=np.int64)
    b = rng.integers(-(2**62), 2**62, size=(m, k), dtype=np.int64)
    exact = [[sum(int(a[i, r]) * int(b[i, c]) for i in range(m)) for c in range(k)] for r in range(p)]
    assert sum_int_cross(a, b) == exact
    assert sum_int_cross(a, a) == sum_int_outer(a)


@pytest.fixture(scope="module")
def growth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The growth table sorted by child (the streaming order) with a numeric covariate constant per child."""
    tb = pq.read_table(GROWTH).sort_by([("child_id", "ascending"), ("age_years", "ascending")])
    ids = tb.column("child_id").to_pylist()
    # a public-looking numeric covariate per child (deterministic in the id), not on any binary lattice
    score = [((sum(map(ord, u)) * 7919) % 1000) / 333.0 - 1.4 for u in ids]
    out = tmp_path_factory.mktemp("growth") / "growth.parquet"
    pq.write_table(tb.append_column("score", pa.array(score)), out, row_group_size=200)
    return out


def _growth_spec(chunk_rows: int, covariates: tuple[object, ...], bound: float, **kw: object) -> StreamSpec:
    return StreamSpec("child_id", "age_years", "height_cm", (1.0, 18.0), grid_from_nodes(np.linspace(0, 1, 31)),
                      1.0, value_offset=150.0, value_scale=40.0, chunk_rows=chunk_rows,
                      covariates=covariates, covariate_bound=bound, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("intercept", [True, False])
@pytest.mark.parametrize("chunk_rows", [37, 10**6])  # 37: children (31 ages) span every chunk boundary
def test_streamed_fosr_equals_the_in_memory_summary(growth: Path, intercept: bool, chunk_rows: int) -> None:
    covs = (SEX, ("score", None))
    bound = 1.2  # the score is clipped for some children: the clip is part of what must agree
    center = 0.1 * np.sin(np.pi * np.linspace(0, 1, 31))
    spec = _growth_spec(chunk_rows, covs, bound, center=tuple(center))
    sums = stream_dataset(growth, spec)
    # the in-memory path: read_long_table / align / centre / clip and read_unit_covariates / clip
    grid = spec.grid
    tb = read_long_table(growth, "parquet", unit_column="child_id", time_column="age_years", value_column="height_cm")
    t, v, _ = rescale_long(tb.times, tb.values, time_domain=(1.0, 18.0), grid_domain=(0.0, 1.0), value_offset=150.0,
                           value_scale=40.0)
    y, _ = clip_l2(align_long(tb.units, t, v, grid).data_matrix - center[None, :], grid.weights, 1.0)
    z_raw = read_unit_covariates(growth, "parquet", unit_column="child_id",
                                 covariates=[("sex", dict(SEX[1])), ("score", None)]).values
    z, n_clipped = clip_covariates(z_raw, bound)
    assert n_clipped > 0 and sums.n == 93 and sums.design is not None
    mem = accumulate_curves(y, 1.0, grid.weights, covariates=z, covariate_bound=bound)
    assert mem.design is not None
    assert sums.sum == mem.sum and sums.design.sum == mem.design.sum  # identical exact statistics
    assert sums.design.outer == mem.design.outer and sums.design.cross == mem.design.cross
    # quantisation never increases a covariate norm (the sensitivities' premise ||z_i||_2 <= B still holds)
    zq = np.ldexp(quantise_records(z, bound, np.ones(2)).astype(np.float64), sums.design.exponent)
    assert np.all(np.abs(zq) <= np.abs(z)) and np.all(np.linalg.norm(zq, axis=1) <= bound)
    plan = plan_fosr_release(grid, KERNEL, n=93, n_covariates=2, intercept=intercept, bound=bound, tau_y=1.0,
                             epsilon=1.0, secure=False)
    t1_s, t2_s = summarise_fosr_sums(sums, plan)
    yq = np.ldexp(quantise_records(y, 1.0, grid.weights).astype(np.float64), sums.exponent)
    t1_q, t2_q = summarise_fosr(zq, yq, plan)  # in memory on the quantised units: equal to rounding
    assert np.max(np.abs(t1_s - t1_q)) <= 1e-12 * np.max(np.abs(t1_q))
    assert np.max(np.abs(t2_s - t2_q)) <= 1e-9 * np.max(np.abs(t2_q))
    t1_m, t2_m = summarise_fosr(z, y, plan)  # on the unquantised units: to the lattice resolution
    assert np.max(np.abs(t1_s - t1_m)) <= 4 * bound * 2.0 ** quantisation_exponent(bound)
    lam_min = float(plan.basis.eigenvalues.min())
    res = 2 * (1 + bound) * 2.0 ** quantisation_exponent(1.0) * math.sqrt(31) / math.sqrt(lam_min)
    assert np.max(np.abs(t2_s - t2_m)) <= res
    if chunk_rows != 10**6:  # bit-identical whatever the chunking
        one = stream_dataset(growth, _growth_spec(10**6, covs, bound, center=tuple(center)))
        a, b = summarise_fosr_sums(one, plan), (t1_s, t2_s)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_streamed_fosr_splits_across_files_exactly(growth: Path, tmp_path: Path) -> None:
    """Partial sums of disjoint files (Dask partitions) combine to the one-file sums exactly."""
    tb = pq.read_table(growth)
    ids = np.array(tb.column("child_id").to_pylist())
    cut = np.searchsorted(ids, np.unique(ids)[[30, 61]])
    for i, (a, b) in enumerate(zip([0, *cut], [*cut, len(ids)], strict=True)):
        pq.write_table(tb.slice(a, b - a), tmp_path / f"part-{i}.parquet", row_group_size=50)
    spec = _growth_spec(64, (SEX,), 1.0)
    whole, parts = stream_dataset(growth, spec), stream_dataset(tmp_path, spec)
    assert parts.n == whole.n == 93 and parts.design is not None and whole.design is not None
    assert parts.sum == whole.sum and parts.design.cross == whole.design.cross
    assert parts.design.outer == whole.design.outer and parts.design.sum == whole.design.sum


def test_streamed_covariates_follow_the_in_memory_rules(tmp_path: Path) -> None:
    p = tmp_path / "c.parquet"
    base = {"u": [1, 1, 1, 2, 2, 2], "t": [0.0, 0.5, 1.0] * 2, "v": [0.1] * 6}
    # a covariate that changes inside unit 2, in a later chunk than the unit's first row (chunk of 4 rows)
    pq.write_table(pa.table({**base, "g": ["a", "a", "a", "b", "b", "a"]}), p)
    enc = ("g", (("a", 1.0), ("b", -1.0)))
    for chunk in (4, 100):
        with pytest.raises(DataError, match=r"c\.parquet: column 'g' is not constant within a privacy unit: row 6 "
                                            r"differs from the unit's first row 4"):
            ingest_file(p, _spec(chunk_rows=chunk, covariates=(enc,), covariate_bound=1.0,
                                 covariates_within_unit="error"))
        averaged = ingest_file(p, _spec(chunk_rows=chunk, covariates=(enc,), covariate_bound=1.0))  # the default
        assert averaged.sums.counts["n_units_covariate_averaged"] == 1
    pq.write_table(pa.table({**base, "g": ["a", "a", "a", "b", "c", "b"]}), p)
    with pytest.raises(DataError, match=r"column 'g' has a category that is not listed in its encoding at row 5"):
        ingest_file(p, _spec(chunk_rows=4, covariates=(enc,), covariate_bound=1.0))
    pq.write_table(pa.table({**base, "g": ["a", "a", "a", "b", None, "b"]}), p)
    with pytest.raises(DataError, match=r"column 'g' has a missing value at row 5"):
        ingest_file(p, _spec(chunk_rows=4, covariates=(enc,), covariate_bound=1.0))
    pq.write_table(pa.table({**base, "x": [1.0, 1.0, 1.0, 2.0, float("nan"), 2.0]}), p)
    with pytest.raises(DataError, match=r"column 'x' has a missing or non-finite value at row 5"):
        ingest_file(p, _spec(chunk_rows=4, covariates=(("x", None),), covariate_bound=1.0))
    pq.write_table(pa.table({**base, "x": ["1"] * 6}), p)
    with pytest.raises(DataError, match=r"covariate column 'x' has type string; the streaming engine needs"):
        ingest_file(p, _spec(covariates=(("x", None),), covariate_bound=1.0))
    with pytest.raises(DataError, match=r"missing column\(s\) \['y'\]"):
        ingest_file(p, _spec(covariates=(("y", None),), covariate_bound=1.0))
    with pytest.raises(DomainError, match=r"covariate_bound \(None\) must be given"):
        _spec(covariates=(("x", None),))


def test_streamed_covariates_of_a_unit_without_a_curve_still_count(tmp_path: Path) -> None:
    """As in memory: an unalignable unit contributes the zero curve and its covariates (n stays the units)."""
    p = tmp_path / "c.parquet"
    pq.write_table(pa.table({"u": [1, 1, 2, 3, 3], "t": [0.0, 1.0, 0.5, 0.0, 1.0], "v": [0.5, 0.5, 9.0, 0.25, 0.25],
                             "x": [0.5, 0.5, -0.75, 0.25, 0.25]}), p)
    s = ingest_file(p, _spec(chunk_rows=2, covariates=(("x", None),), covariate_bound=1.0)).sums
    assert s.n == 3 and s.counts["n_unalignable_units"] == 1 and s.design is not None
    zbar, zz, zy = s.design_means()
    assert zbar.tolist() == [0.0] and zz.tolist() == [[(0.25 + 0.5625 + 0.0625) / 3]]
    assert np.allclose(zy, [[(0.5 * 0.5 + 0.25 * 0.25) / 3] * 4], rtol=1e-15)  # unit 2: zero curve


def test_summarise_fosr_sums_refuses_sums_without_covariates_and_a_wrong_n() -> None:
    grid = midpoint_grid(8)
    plan = plan_fosr_release(grid, KERNEL, n=3, n_covariates=1, intercept=True, bound=1.0, tau_y=1.0, epsilon=1.0,
                             secure=False)
    with pytest.raises(DomainError, match="covariate statistics"):
        summarise_fosr_sums(accumulate_curves(np.zeros((3, 8)), 1.0, grid.weights), plan)
    with pytest.raises(DomainError, match=r"sums.n \(4\) must equal"):
        summarise_fosr_sums(accumulate_curves(np.zeros((4, 8)), 1.0, grid.weights, covariates=np.zeros((4, 1)),
                                              covariate_bound=1.0), plan)
    with pytest.raises(DomainError, match=r"sums have 2 covariates and 8 grid values; the plan needs 1"):
        summarise_fosr_sums(accumulate_curves(np.zeros((3, 8)), 1.0, grid.weights, covariates=np.zeros((3, 2)),
                                              covariate_bound=1.0), plan)
    with pytest.raises(DomainError, match=r"covariate_bound \(None\) must be given"):
        accumulate_curves(np.zeros((3, 8)), 1.0, grid.weights, covariates=np.zeros((3, 1)))
