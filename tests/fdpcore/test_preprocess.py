"""align_long's fast path (sorted keys, no repeats) against its general path, and its pieces against brute force.

The fast path must give bit-identical output to the general path (MATH.md §1.7 rule
``preprocess.align_linear@1``): the property tests compare both on random frames with repeated
``(unit, curve, t)`` rows, unsorted rows, several curves per unit and non-finite rows.
"""

from __future__ import annotations

from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fdpcore.basis.grids import grid_from_nodes, midpoint_grid
from fdpcore.data import preprocess
from fdpcore.data.preprocess import AlignedCurves, align_long

TIMES = [0.0, -0.0, 1.0, 0.25, 0.5, 0.75, 1.0 / 3.0, 0.1, 0.9, 0.5 + 2.0**-50, -0.5, 1.5, np.nan, np.inf]
VALUES = st.one_of(st.floats(-1e3, 1e3, allow_subnormal=True), st.sampled_from([0.0, -0.0, np.nan, -np.inf, 1e300,
                                                                               -1e300, 5e-324]))


def _bits(a: AlignedCurves) -> tuple[bytes, int, int, int, int, int]:
    """Everything align_long returns, with the matrix compared bit for bit (the sign of zero included)."""
    return (a.data_matrix.tobytes(), a.data_matrix.shape[0], a.n_unalignable, a.n_rows_dropped,
            a.n_duplicates_merged, a.n_samples)


def _general(units: np.ndarray, t: np.ndarray, v: np.ndarray, grid, curves: np.ndarray | None) -> AlignedCurves:  # type: ignore[no-untyped-def]
    uc, n = preprocess._codes(units, "units")
    cc = np.zeros_like(uc) if curves is None else preprocess._codes(curves, "curves")[0]
    return preprocess._align_codes(uc, n, cc, t, v, grid, fast=False)


@st.composite
def frames(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    n = draw(st.integers(1, 40))
    ids = draw(st.sampled_from(["int", "str", "mixed"]))
    unit_pool = {"int": [-3, 0, 7, 2**40], "str": ["a", "b", "zz"], "mixed": [1, "1", 2]}[ids]
    units = draw(st.lists(st.sampled_from(unit_pool), min_size=n, max_size=n))
    t = draw(st.lists(st.one_of(st.sampled_from(TIMES), st.floats(0, 1)), min_size=n, max_size=n))
    v = draw(st.lists(VALUES, min_size=n, max_size=n))
    curves = draw(st.one_of(st.none(), st.lists(st.integers(0, 2), min_size=n, max_size=n)))
    u = np.array(units, dtype=object if ids != "int" else np.int64)
    return u, np.array(t, dtype=np.float64), np.array(v, dtype=np.float64), (
        None if curves is None else np.array(curves))


def _sorted_unique(u: np.ndarray, t: np.ndarray, v: np.ndarray, c: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """Finite rows sorted by (unit, curve, t) with one row per key, then the non-finite rows appended."""
    uc, _ = preprocess._codes(u, "units")
    cc = np.zeros_like(uc) if c is None else preprocess._codes(c, "curves")[0]
    fin = np.isfinite(t) & np.isfinite(v)
    keep = np.flatnonzero(fin)
    keep = keep[np.lexsort((t[keep] + 0.0, cc[keep], uc[keep]))]  # + 0.0: -0.0 and 0.0 are one time
    key = np.c_[uc[keep], cc[keep]]
    first = np.r_[True, np.any(key[1:] != key[:-1], axis=1) | (t[keep][1:] != t[keep][:-1])][:keep.size]
    rows = np.r_[keep[first], np.flatnonzero(~fin)]
    return (u[rows], t[rows], v[rows], None if c is None else c[rows])


@settings(max_examples=200, deadline=None)
@given(frame=frames(), k=st.integers(2, 6), trapezoid=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_fast_path_equals_general_path_bit_for_bit(frame: tuple, k: int, trapezoid: bool, seed: int) -> None:  # type: ignore[type-arg]
    u, t, v, c = frame
    grid = grid_from_nodes(np.linspace(0.0, 1.0, k)) if trapezoid else midpoint_grid(k)
    # the frame as drawn: repeats, any order (the fast path applies only if it happens to be sorted)
    assert _bits(align_long(u, t, v, grid, curves=c)) == _bits(_general(u, t, v, grid, c))
    # sorted without repeats: the fast path must be taken and agree with the general path exactly
    su, st_, sv, sc = _sorted_unique(u, t, v, c)
    uc, _ = preprocess._codes(su, "units")
    cc = np.zeros_like(uc) if sc is None else preprocess._codes(sc, "curves")[0]
    fin = np.isfinite(st_) & np.isfinite(sv)
    assert preprocess._keys_strictly_increasing(uc[fin], cc[fin], st_[fin])
    with mock.patch.object(preprocess, "_merge_duplicates", side_effect=AssertionError("general path taken")):
        fast = align_long(su, st_, sv, grid, curves=sc)
    assert _bits(fast) == _bits(_general(su, st_, sv, grid, sc))
    # and the same rows in a random order (general path) give the same records
    perm = np.random.default_rng(seed).permutation(su.shape[0])
    shuffled = align_long(su[perm], st_[perm], sv[perm], grid, curves=None if sc is None else sc[perm])
    assert _bits(shuffled) == _bits(fast)


def test_repeats_and_unsorted_rows_take_the_general_path() -> None:
    grid = midpoint_grid(4)
    u, t, v = np.array([1, 1, 1, 2, 2]), np.array([0.0, 1.0, 1.0, 0.0, 1.0]), np.array([0.0, 1.0, 3.0, 1.0, 1.0])
    with mock.patch.object(preprocess, "_merge_duplicates", side_effect=AssertionError("general")):
        with pytest.raises(AssertionError, match="general"):
            align_long(u, t, v, grid)  # a repeated (unit, t)
        with pytest.raises(AssertionError, match="general"):
            align_long(u[[1, 0, 3, 4]], t[[1, 0, 3, 4]], v[[1, 0, 3, 4]], grid)  # times out of order
        with pytest.raises(AssertionError, match="general"):
            align_long(u[[3, 4, 0, 1]], t[[3, 4, 0, 1]], v[[3, 4, 0, 1]], grid)  # units out of order
    a = align_long(u, t, v, grid)
    assert a.n_duplicates_merged == 1
    np.testing.assert_allclose(a.data_matrix[0], 2.0 * grid.grid_points)  # (1 + 3) / 2 at t = 1


@settings(max_examples=300, deadline=None)
@given(keys=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), st.sampled_from([0.0, -0.0, 0.5, 1.0, 2.0])),
                     max_size=12))
def test_strictly_increasing_check_matches_tuple_comparison(keys: list[tuple[int, int, float]]) -> None:
    a = np.array(keys, dtype=np.float64).reshape(-1, 3)
    got = preprocess._keys_strictly_increasing(a[:, 0].astype(np.int64), a[:, 1].astype(np.int64), a[:, 2])
    assert got == all(x < y for x, y in zip(keys, keys[1:], strict=False))


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_seg=st.integers(1, 30), k=st.integers(2, 12))
def test_bracket_equals_a_per_segment_searchsorted(seed: int, n_seg: int, k: int) -> None:
    rng = np.random.default_rng(seed)
    g = np.sort(rng.choice(np.linspace(0.0, 1.0, 17), size=k, replace=False))
    # segments of strictly increasing times, some sharing values with the grid, some outside it
    count = rng.integers(1, 8, size=n_seg)
    tt = np.concatenate([np.sort(rng.choice(np.r_[g, rng.uniform(-0.2, 1.2, 10)], size=m, replace=False))
                         for m in count])
    hi_all = np.cumsum(count)
    lo_all = hi_all - count
    good = np.flatnonzero(count >= 2)
    if good.size == 0:
        return
    lo, hi = lo_all[good], hi_all[good]
    got = preprocess._bracket(tt, count, g, good, lo, hi)
    for row, (a, b) in enumerate(zip(lo, hi, strict=True)):
        q = np.clip(g, tt[a], tt[b - 1])
        ref = np.clip(a + np.searchsorted(tt[a:b], q, side="right") - 1, a, b - 2)
        assert got[row].tolist() == ref.tolist()


@pytest.mark.parametrize("ids", [np.array([-5, -5, 0, 3, 3, 3, 2**62]), np.array([0, 1, 1], dtype=np.uint64),
                                 np.array([7], dtype=np.int32), np.array([3, 1, 2]), np.array([1.5, 1.5, 2.0])])
def test_codes_fast_path_equals_sorted_factorize(ids: np.ndarray) -> None:
    codes, n = preprocess._codes(ids, "units")
    ref, uniques = pd.factorize(ids, sort=True)
    assert codes.tolist() == ref.tolist() and n == len(uniques)


def test_missing_ids_still_rejected() -> None:
    with pytest.raises(preprocess.DomainError, match="missing ids"):
        preprocess._codes(np.array([1.0, np.nan]), "units")


@settings(max_examples=150, deadline=None)
@given(starts=st.lists(st.floats(0.0, 0.3), min_size=1, max_size=8), gap=st.floats(0.0, 0.2),
       seed=st.integers(0, 2**32 - 1))
def test_end_gap_aligns_curves_within_it_holding_their_end_values(starts: list[float], gap: float, seed: int) -> None:
    """preprocess.align_linear@2: a curve whose first (last) reading lies within max_gap of the first (last) grid
    point is interpolated inside its range and held at its end values outside; beyond the gap it is unalignable and
    its unit is the zero curve. Each unit's record depends on its own rows only (np.interp per unit agrees)."""
    rng = np.random.default_rng(seed)
    grid = midpoint_grid(10)  # first / last grid points 0.05 / 0.95
    g = grid.grid_points
    units, times, values, expected = [], [], [], []
    for i, s in enumerate(starts):
        t = np.r_[s, np.sort(rng.uniform(s, 1.0 - s, 5)), 1.0 - s]  # readings on [s, 1 - s], symmetric gaps
        t = np.unique(t)
        v = rng.normal(size=t.size)
        units += [i] * t.size
        times += list(t)
        values += list(v)
        covered = t[0] <= g[0] + gap + 1e-9 and t[-1] >= g[-1] - gap - 1e-9
        expected.append(np.interp(g, t, v) if covered else np.zeros_like(g))
    a = align_long(np.array(units), np.array(times), np.array(values), grid, max_gap=gap)
    np.testing.assert_allclose(a.data_matrix, np.array(expected), rtol=1e-12, atol=1e-12)
    assert a.n_unalignable == sum(not np.any(e) for e in expected)
    if gap == 0.0:  # @1: the range must cover both ends
        assert a.n_unalignable == sum(s > 0.05 + 1e-9 for s in starts)


def test_end_gap_is_validated_and_weekly_readings_align_within_one_grid_step() -> None:
    grid = midpoint_grid(50)  # days 1..365 -> one step 7.28 days; first grid point 4.65 days in
    days = np.arange(6.0, 362.0, 7.0)  # weekly readings from day 6 to 356: both grid ends missed by under a step
    t = (days - 1.0) / 364.0
    strict = align_long(np.zeros(days.size, dtype=int), t, np.sin(t), grid)
    tolerant = align_long(np.zeros(days.size, dtype=int), t, np.sin(t), grid, max_gap=1.0 / 50)
    assert strict.n_unalignable == 1 and tolerant.n_unalignable == 0
    assert tolerant.data_matrix[0, 0] == pytest.approx(np.sin(t[0]))  # held at the first reading
    for bad in (-0.1, float("nan"), float("inf")):
        with pytest.raises(preprocess.DomainError, match="max_gap"):
            align_long([0, 0], [0.0, 1.0], [1.0, 2.0], grid, max_gap=bad)


@settings(max_examples=200, deadline=None)
@given(frame=frames(), k=st.integers(2, 6))
def test_categorical_ids_align_exactly_as_the_same_ids_as_objects(frame: tuple, k: int) -> None:  # type: ignore[type-arg]
    """fdpcore.io.tables.compact_ids hands text ids over as a pandas Categorical (one code per row): the records, their
    order and their unit ids must be those of the same ids as a NumPy object array, bit for bit."""
    u, t, v, c = frame
    u = np.array([str(x) for x in u], dtype=object)  # a text column of a file
    cat = pd.Categorical(u, categories=list(dict.fromkeys(reversed(u.tolist()))))  # categories in file order, unsorted
    cc = None if c is None else pd.Categorical(c)
    grid = midpoint_grid(k)
    as_objects, as_codes = align_long(u, t, v, grid, curves=c), align_long(cat, t, v, grid, curves=cc)
    assert _bits(as_codes) == _bits(as_objects)
    assert as_codes.unit_ids == as_objects.unit_ids and all(type(x) is str for x in as_codes.unit_ids)


def test_categorical_ids_with_unused_categories_and_missing_ids() -> None:
    grid = midpoint_grid(3)
    cat = pd.Categorical(["b", "a", "b", "a"], categories=["z", "b", "a"])  # 'z' in the dictionary, in no row
    a = align_long(cat, [0.0, 0.0, 1.0, 1.0], [1.0, 2.0, 3.0, 4.0], grid)
    assert a.unit_ids == ("a", "b") and a.n_samples == 2
    with pytest.raises(preprocess.DomainError, match="missing ids"):
        preprocess._codes(pd.Categorical(["a", None]), "units")


@settings(max_examples=200, deadline=None)
@given(frame=frames())
def test_merge_duplicates_averages_each_key_in_a_row_order_free_way(frame: tuple) -> None:  # type: ignore[type-arg]
    """The general path's merge: one row per (unit, curve, t) holding the mean of its rows (against pandas), the same
    bits whatever the row order."""
    u, t, v, c = frame
    fin = np.isfinite(t) & np.isfinite(v) & (np.abs(v) < 1e300)
    uc = preprocess._codes(u, "units")[0][fin]
    cc = np.zeros_like(uc) if c is None else preprocess._codes(c, "curves")[0][fin]
    t, v = t[fin] + 0.0, v[fin]
    mu, mc, mt, mv, merged = preprocess._merge_duplicates(uc, cc, t, v)
    ref = pd.DataFrame({"u": uc, "c": cc, "t": t, "v": v}).groupby(["u", "c", "t"], sort=True)["v"].mean()
    assert merged == uc.size - len(ref)
    assert list(zip(mu.tolist(), mc.tolist(), mt.tolist(), strict=True)) == list(ref.index)
    np.testing.assert_allclose(mv, ref.to_numpy(), rtol=1e-12, atol=1e-300)
    perm = np.random.default_rng(uc.size).permutation(uc.size)
    again = preprocess._merge_duplicates(uc[perm], cc[perm], t[perm], v[perm])
    assert all(np.array_equal(x, y) for x, y in zip(again[:4], (mu, mc, mt, mv), strict=True))


@settings(max_examples=150, deadline=None)
@given(frame=frames(), k=st.integers(2, 6), per_block=st.integers(1, 3))
def test_alignment_in_blocks_of_curves_equals_one_block_bit_for_bit(frame: tuple, k: int, per_block: int) -> None:  # type: ignore[type-arg]
    """_align_codes works through blocks of ALIGN_BLOCK grid values; any block size gives the same records."""
    u, t, v, c = frame
    grid = midpoint_grid(k)
    with mock.patch.object(preprocess, "ALIGN_BLOCK", 2**40):
        whole = align_long(u, t, v, grid, curves=c)
    with mock.patch.object(preprocess, "ALIGN_BLOCK", per_block * k):
        blocks = align_long(u, t, v, grid, curves=c)
    assert _bits(blocks) == _bits(whole)
