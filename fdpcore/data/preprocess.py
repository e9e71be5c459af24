"""Record-wise preprocessing: grid alignment, one curve per privacy unit, clipping (MATH.md §1.7).

Every map here acts on one record at a time with a definition that does not
depend on the other records, so it is privacy-neutral. Data-dependent counts
(unalignable units, clipped curves) are returned for the internal ledger only.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fdpcore import _validate
from fdpcore._typing import ArrayLike, NDArrayBool, NDArrayFloat
from fdpcore.basis.grids import Grid
from fdpcore.errors import DomainError

__all__ = ["AlignedCurves", "add_reference", "align_long", "centre_on_reference", "clip_l2", "rescale_long",
           "to_source_units"]

#: Relative tolerance for a unit's observed range to count as covering the grid ends.
COVER_RTOL = 1e-9


@dataclass(frozen=True, eq=False)
class AlignedCurves:
    """Curves on the release grid, one row per privacy unit.

    Attributes:
        data_matrix: ``n_samples x K`` values on the grid; an unalignable unit's row is 0.
        n_samples: number of privacy units (public under replace-one adjacency).
        n_unalignable: units that could not be aligned (internal only, never published).
        n_rows_dropped: rows with a non-finite time or value (internal only).
        n_duplicates_merged: repeated (unit, curve, t) rows averaged (internal only).
        unit_ids: the unit id of each row (internal only; dp_select's keyed-hash split).
        aligned: per row, whether the unit had an alignable curve (internal only; a mean centred on a public
            reference keeps the unaligned rows at 0, ``preprocess.public_reference@1``).
    """

    data_matrix: NDArrayFloat
    n_samples: int
    n_unalignable: int
    n_rows_dropped: int
    n_duplicates_merged: int
    unit_ids: tuple[object, ...] | None = None
    aligned: NDArrayBool | None = None


def align_long(
    units: ArrayLike,
    times: ArrayLike,
    values: ArrayLike,
    grid: Grid,
    curves: ArrayLike | None = None,
    *,
    max_gap: float = 0.0,
) -> AlignedCurves:
    """Align long-format observations ``(unit[, curve], t, value)`` onto ``grid`` (formula ``preprocess.align_linear@2``).

    Rule (published in every manifest as ``alignment``):

    * rows with a non-finite time or value are ignored;
    * repeated ``(unit, curve, t)`` rows are averaged;
    * a curve is aligned by linear interpolation at the grid points when it has at
      least two distinct observation times and its first and last observation are within
      ``max_gap`` (public, grid-domain units) of the first and last grid point; grid points
      beyond its observed range take its first or last observed value (``max_gap = 0``: the
      range must cover both ends, ``preprocess.align_linear@1``); otherwise it is unalignable;
    * a unit's record is the average of its aligned curves (one contribution per
      privacy unit); a unit with no alignable curve contributes the zero curve, so
      the number of records ``n`` stays the number of privacy units.

    The work is vectorised over all units (no per-curve Python loop).

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> a = align_long([1, 1, 2, 2], [0.0, 1.0, 0.0, 1.0], [0.0, 2.0, 1.0, 1.0], midpoint_grid(2))
    >>> a.data_matrix.tolist()
    [[0.5, 1.5], [1.0, 1.0]]
    >>> late = ([1, 1, 1], [0.3, 0.5, 1.0], [1.0, 2.0, 3.0], midpoint_grid(2))  # first reading after 0.25
    >>> align_long(*late).n_unalignable, align_long(*late, max_gap=0.1).data_matrix.tolist()
    (1, [[1.0, 2.5]])
    """
    u = units if isinstance(units, pd.Categorical) else np.asarray(units)
    t = np.asarray(times, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if not (u.shape == t.shape == v.shape) or u.ndim != 1:
        raise DomainError("units, times and values must be 1-D arrays of the same length")
    unit_codes, n_units = _codes(u, "units")
    if n_units == 0:
        raise DomainError("no privacy units: the input has zero rows")
    if curves is None:
        curve_codes = np.zeros_like(unit_codes)
    else:
        c = curves if isinstance(curves, pd.Categorical) else np.asarray(curves)
        if c.shape != u.shape:
            raise DomainError("curves must have the same length as units")
        curve_codes, _ = _codes(c, "curves")
    labels = np.empty(n_units, dtype=object)
    if isinstance(u, pd.Categorical):  # the sorted distinct ids, as _codes numbered them
        cats = np.asarray(u.categories, dtype=object)
        labels[:] = list(np.sort(cats[np.flatnonzero(np.bincount(u.codes, minlength=cats.shape[0]))]))
    else:
        labels[unit_codes] = u  # every row of a unit carries the same id: row order of data_matrix
    gap = float(max_gap)
    if not (math.isfinite(gap) and gap >= 0.0):
        raise DomainError(f"max_gap ({max_gap!r}) must be finite and >= 0")
    return dataclasses.replace(_align_codes(unit_codes, n_units, curve_codes, t, v, grid, max_gap=gap),
                               unit_ids=tuple(labels))


#: Grid values aligned per block of curves in :func:`_align_codes` (about 8 MB per temporary array).
ALIGN_BLOCK = 2**20


def _align_codes(
    unit_codes: np.ndarray,
    n_units: int,
    curve_codes: np.ndarray,
    t: NDArrayFloat,
    v: NDArrayFloat,
    grid: Grid,
    *,
    fast: bool = True,
    max_gap: float = 0.0,
) -> AlignedCurves:
    """:func:`align_long` on integer unit and curve codes (``fast=False`` forces the general path).

    Fast path: when the finite rows' ``(unit, curve, t)`` keys are already strictly increasing
    (sorted input without repeats, checked in O(rows)), the canonical sort is the identity and
    every repeat group has one row, so the duplicate averaging is skipped: the output is the
    general path's output exactly (a one-row group's sum ``0 + v`` differs from ``v`` at most in
    the sign of a zero, which the final ``0 + x`` accumulation erases as well).
    """
    finite = np.isfinite(t) & np.isfinite(v)
    n_dropped = int(finite.shape[0] - np.count_nonzero(finite))
    if n_dropped:
        unit_codes, curve_codes, t, v = unit_codes[finite], curve_codes[finite], t[finite], v[finite]
    if fast and _keys_strictly_increasing(unit_codes, curve_codes, t):
        fu, fc, tt, vv, n_merged = unit_codes, curve_codes, t, v, 0
    else:
        fu, fc, tt, vv, n_merged = _merge_duplicates(unit_codes, curve_codes, t, v)
    # one segment per (unit, curve); rows are sorted by (u, c, t) with strictly increasing t in a segment
    m = fu.shape[0]
    if m:
        seg_start = np.flatnonzero(np.r_[True, (fu[1:] != fu[:-1]) | (fc[1:] != fc[:-1])])
    else:
        seg_start = np.zeros(0, np.int64)
    seg_end = np.r_[seg_start[1:], m].astype(np.int64)
    g = grid.grid_points
    tol = COVER_RTOL * (grid.domain_range[1] - grid.domain_range[0]) + max_gap
    count = seg_end - seg_start
    ok = count >= 2
    tmin = tt[seg_start] if m else np.zeros(0)
    tmax = tt[np.maximum(seg_end - 1, 0)] if m else np.zeros(0)
    ok &= (tmin <= g[0] + tol) & (tmax >= g[-1] - tol)
    seg_unit = fu[seg_start] if m else np.zeros(0, np.int64)
    good = np.flatnonzero(ok)
    k = g.shape[0]
    data = np.zeros((n_units, k))
    counts = np.zeros(n_units)
    if good.shape[0]:
        np.add.at(counts, seg_unit[good], 1.0)
        # blocks of whole segments bound the (segments x K) temporaries (trial L: 11.7 M rows in one block took
        # 1.5 GB); blocks are summed in segment order, so the records are those of a single block bit for bit
        step = max(1, ALIGN_BLOCK // k)
        for b0 in range(0, good.shape[0], step):
            sel = good[b0:b0 + step]
            s0, s1 = int(sel[0]), int(sel[-1]) + 1
            r0 = int(seg_start[s0])
            lo, hi = seg_start[sel], seg_end[sel]
            q = np.clip(g[None, :], tmin[sel][:, None], tmax[sel][:, None])  # (S, K)
            left = r0 + _bracket(tt[r0:int(seg_end[s1 - 1])], count[s0:s1], g, sel - s0, lo - r0, hi - r0)
            right = left + 1
            t0, t1 = tt[left], tt[right]
            w1 = (q - t0) / (t1 - t0)
            aligned = vv[left] * (1.0 - w1) + vv[right] * w1
            # a unit's record is the average of its curves, again as a sum of x / count
            np.add.at(data, seg_unit[sel], aligned / counts[seg_unit[sel], None])
    has = counts > 0
    # Every entry is a convex combination of finite values, so its exact value is finite;
    # only rounding at the edge of the float range can give +-inf: round it to +-max.
    big = np.finfo(np.float64).max
    np.clip(data, -big, big, out=data)
    return AlignedCurves(data, n_units, int((~has).sum()), n_dropped, int(n_merged), aligned=has)


def _keys_strictly_increasing(u: np.ndarray, c: np.ndarray, t: NDArrayFloat) -> bool:
    """Whether the keys ``(u_i, c_i, t_i)`` increase strictly in lexicographic order (O(rows))."""
    if u.shape[0] < 2:
        return True
    un, up = u[1:], u[:-1]
    if np.any(un < up):
        return False
    same_u = un == up
    cn, cp = c[1:], c[:-1]
    if np.any(same_u & (cn < cp)):
        return False
    return bool(np.all(~same_u | (cn > cp) | (t[1:] > t[:-1])))


def _merge_duplicates(
    u: np.ndarray, c: np.ndarray, t: NDArrayFloat, v: NDArrayFloat
) -> tuple[np.ndarray, np.ndarray, NDArrayFloat, NDArrayFloat, int]:
    """The general path: sort by ``(u, c, t)`` and average repeated ``(u, c, t)`` rows.

    The average is a sum of ``v / count``: a convex combination computed without overflow for
    any finite values (a plain sum could overflow). Rows are put in a canonical order first (by
    ``(u, c, t, v)``), so the floating-point sum (and so a unit's record) depends only on the unit's
    rows as a set, never on the file's row order. NumPy only: one ``lexsort`` permutation and one
    ``add.reduceat`` (trial L: pandas' sort and two group-bys took 2.2 GB over an 11.7 M-row file).

    >>> _merge_duplicates(np.array([1, 0, 1]), np.zeros(3, int), np.array([0.5, 0.2, 0.5]), np.array([4.0, 1.0, 2.0]))[2:]
    (array([0.2, 0.5]), array([1., 3.]), 1)
    """
    order = np.lexsort((v, t, c, u))  # the last key is the primary one
    u, c, t, v = u[order], c[order], t[order], v[order]
    del order
    m = u.shape[0]
    new = np.ones(m, dtype=bool)
    new[1:] = (u[1:] != u[:-1]) | (c[1:] != c[:-1]) | (t[1:] != t[:-1])
    starts = np.flatnonzero(new)
    del new
    size = np.diff(np.append(starts, m))
    mean = np.add.reduceat(v / np.repeat(size, size), starts) if m else v
    return u[starts], c[starts], t[starts], mean, int(m - starts.shape[0])


def _codes(ids: np.ndarray | pd.Categorical, name: str) -> tuple[np.ndarray, int]:
    """Integer codes of ids in a deterministic order (ids of mixed types are ordered by type, then text).

    Integer ids that are already sorted (the streaming engine's case) are coded in O(rows)
    without hashing; the codes are those of ``pd.factorize(ids, sort=True)``.
    """
    if isinstance(ids, pd.Categorical):  # text ids, one code per row (fdpcore.io.tables.compact_ids)
        if np.any(ids.codes < 0):
            raise DomainError(f"{name} must not contain missing ids (None or NaN)")
        cats = np.asarray(ids.categories, dtype=object)
        used = np.flatnonzero(np.bincount(ids.codes, minlength=cats.shape[0]))  # a dictionary may hold unused ids
        rank = np.full(cats.shape[0], -1, dtype=np.int64)
        rank[used[np.argsort(cats[used], kind="stable")]] = np.arange(used.shape[0])  # one type per column: sorted
        return rank[ids.codes], int(used.shape[0])
    if ids.ndim == 1 and ids.dtype.kind in "iu" and ids.shape[0] and bool(np.all(ids[1:] >= ids[:-1])):
        codes = np.zeros(ids.shape[0], dtype=np.int64)
        np.cumsum(ids[1:] != ids[:-1], out=codes[1:])
        return codes, int(codes[-1]) + 1
    try:
        codes, uniques = pd.factorize(ids, sort=True)
    except TypeError:  # ids of mixed, mutually unorderable types
        codes, uniques = pd.factorize(ids, sort=False)
        order = sorted(range(len(uniques)), key=lambda j: (type(uniques[j]).__name__, str(uniques[j])))
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        codes = np.where(codes >= 0, rank[np.maximum(codes, 0)], -1)
    if np.any(codes < 0):
        raise DomainError(f"{name} must not contain missing ids (None or NaN)")
    return codes, len(uniques)


def _bracket(
    tt: NDArrayFloat, count: np.ndarray, g: NDArrayFloat, good: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    """Left bracketing index of every (good segment, grid point): ``clip(lo + r - 1, lo, hi - 2)``.

    ``r`` is the number of the segment's times ``<= clip(g_j, tmin, tmax)`` (``searchsorted(...,
    side='right')`` within the segment); segments hold strictly increasing times. Each time is
    replaced by its exact integer rank among the (strictly increasing) grid points,
    ``p_i = #{j : g_j < t_i}``, so that ``t_i <= g_j`` iff ``p_i <= j``: ``r`` is the cumulative
    count of the composite integer key ``(segment, p_i)`` along ``j`` (one ``bincount`` and one
    ``cumsum``, integers only, so exact; no sort). A grid point below a segment's first time gets
    ``r = 0`` rather than 1, and one above its last time ``r = count``; the clip maps both to the
    same bracket as the within-segment ``searchsorted``.
    """
    k = g.shape[0]
    n_good = good.shape[0]
    if n_good == count.shape[0]:
        seg_of_row = np.repeat(np.arange(n_good, dtype=np.int64), count)
        times = tt
    else:  # rows of unalignable segments take no part
        rank = np.full(count.shape[0], -1, dtype=np.int64)
        rank[good] = np.arange(n_good, dtype=np.int64)
        seg_of_row = np.repeat(rank, count)
        keep = seg_of_row >= 0
        seg_of_row, times = seg_of_row[keep], tt[keep]
    p = np.searchsorted(g, times, side="left").astype(np.int64)
    hist = np.bincount(seg_of_row * (k + 1) + p, minlength=n_good * (k + 1)).reshape(n_good, k + 1)
    r = np.cumsum(hist[:, :k], axis=1)
    out: np.ndarray = np.clip(lo[:, None] + r - 1, lo[:, None], hi[:, None] - 2)
    return out


def clip_l2(data_matrix: ArrayLike, weights: ArrayLike, tau: float) -> tuple[NDArrayFloat, int]:
    """Record-wise L2 clipping ``X_i <- X_i min(1, tau/||X_i||_W)`` (MATH.md §1.7).

    Returns the clipped curves and the number of clipped records (internal only).

    .. math:: X_i \\leftarrow X_i\\cdot\\min\\{1,\\ \\tau/\\lVert X_i\\rVert_W\\}

    >>> x, k = clip_l2([[3.0, 4.0], [0.3, 0.4]], [1.0, 1.0], 1.0)
    >>> x.round(6).tolist(), k
    ([[0.6, 0.8], [0.3, 0.4]], 1)
    """
    tau = _validate.positive_finite("tau", tau)
    x = _validate.finite_matrix("data_matrix", data_matrix)
    w = np.asarray(weights, dtype=np.float64)
    m, s = _scaled_norms(x, w)
    with np.errstate(over="ignore"):
        norms = m * s
    over = norms > tau
    out = x.copy()
    # x_i * tau / ||x_i|| computed as (x_i / m_i) * (tau / s_i): both factors are well scaled, so the
    # result is accurate even when tau / ||x_i|| alone would underflow or overflow
    out[over] = (x[over] / m[over, None]) * (tau / s[over])[:, None]
    # rounding can leave a clipped norm a few ulps above tau (by either way of computing it);
    # shrink by a few ulps until it holds
    bad = _above(out, w, tau)
    while np.any(bad):
        # nextafter towards 0 guarantees progress where a relative shrink cannot (subnormal values)
        out[bad] = np.nextafter(out[bad] * (1.0 - 4 * np.finfo(float).eps), 0.0)
        bad = _above(out, w, tau)
    return out, int(over.sum())


def _above(x: NDArrayFloat, w: NDArrayFloat, tau: float) -> NDArrayFloat:
    """Rows whose norm exceeds tau, computed scaled (no overflow) or directly (as ``Grid.norm`` does)."""
    with np.errstate(over="ignore", under="ignore"):
        sq = np.einsum("ik,k,ik->i", x, w, x)
    # the direct sum of squares is only accurate where it is a normal float (no overflow, no underflow)
    usable = np.isfinite(sq) & (sq >= np.finfo(np.float64).tiny)
    out: NDArrayFloat = (weighted_norms(x, w) > tau) | (usable & (np.sqrt(np.where(usable, sq, 0.0)) > tau))
    return out


def _scaled_norms(x: NDArrayFloat, w: NDArrayFloat) -> tuple[NDArrayFloat, NDArrayFloat]:
    """``(m_i, s_i)`` with ``||x_i||_W = m_i s_i``: ``m_i = max_k |x_ik|`` and ``s_i = ||x_i / m_i||_W``.

    Scaling each row by its maximum first avoids overflow and underflow of the squares.
    Rows of zeros get ``m_i = 1, s_i = 0``.
    """
    m = np.max(np.abs(x), axis=1, initial=0.0)
    m = np.where(m > 0, m, 1.0)
    y = x / m[:, None]
    return m, np.sqrt(np.einsum("ik,k,ik->i", y, w, y))


def weighted_norms(x: NDArrayFloat, w: NDArrayFloat) -> NDArrayFloat:
    """``||x_i||_W`` for each row without overflow or underflow of the squares (``inf`` only beyond the float range).

    >>> (weighted_norms(np.array([[3e200, 4e200], [0.0, 0.0]]), np.array([1.0, 1.0])) / 1e200).round(12).tolist()
    [5.0, 0.0]
    """
    m, s = _scaled_norms(x, w)
    # m * s may overflow to inf only when the true norm exceeds the float range
    with np.errstate(over="ignore"):
        out: NDArrayFloat = m * s
    return out


def rescale_long(
    times: ArrayLike,
    values: ArrayLike,
    *,
    time_domain: tuple[float, float],
    grid_domain: tuple[float, float],
    value_offset: float = 0.0,
    value_scale: float = 1.0,
) -> tuple[NDArrayFloat, NDArrayFloat, int]:
    """Public affine maps: time ``[a, b] -> grid domain``, value ``(v - offset) / scale``.

    Rows whose time lies outside the public ``time_domain`` get a NaN time (they are
    then ignored by :func:`align_long`); their count is returned for the internal
    ledger only. Both maps are record-wise and data-independent (MATH.md §1.7).

    >>> t, v, k = rescale_long([0.5, 48.5, 49.0], [1500.0, 2500.0, 0.0], time_domain=(0.5, 48.5),
    ...                        grid_domain=(0.0, 1.0), value_offset=1500.0, value_scale=1000.0)
    >>> t.tolist()[:2], v.tolist(), k
    ([0.0, 1.0], [0.0, 1.0, -1.5], 1)
    """
    a, b = float(time_domain[0]), float(time_domain[1])
    c, d = float(grid_domain[0]), float(grid_domain[1])
    scale = _validate.positive_finite("value_scale", value_scale, privacy=False)
    for name, lo, hi in (("time_domain", a, b), ("grid_domain", c, d)):
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi and math.isfinite(hi - lo)):
            raise DomainError(f"{name} ([{lo!r}, {hi!r}]) must be finite with a < b and a finite width b - a")
    offset = float(value_offset)
    if not math.isfinite(offset):
        raise DomainError(f"value_offset ({value_offset!r}) must be finite")
    t = np.asarray(times, dtype=np.float64)
    outside = (t < a) | (t > b)
    mapped = c + (t - a) * ((d - c) / (b - a))
    mapped = np.where(outside, np.nan, np.clip(mapped, c, d))
    raw = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore"):
        v = (raw - offset) / scale
    # a finite value whose rescaled value overflows saturates at +-max (it is clipped to tau later);
    # non-finite inputs stay non-finite (and are ignored by the alignment)
    big = np.finfo(np.float64).max
    v = np.where(np.isfinite(raw), np.clip(v, -big, big), v)
    return mapped, v, int(outside.sum())


def to_source_units(
    grid_values: ArrayLike,
    grid_points: ArrayLike,
    *,
    time_domain: tuple[float, float],
    grid_domain: tuple[float, float],
    value_offset: float = 0.0,
    value_scale: float = 1.0,
) -> tuple[NDArrayFloat, NDArrayFloat]:
    """Inverse of :func:`rescale_long` for published curves (post-processing).

    >>> t, v = to_source_units([0.0, 1.0], [0.0, 1.0], time_domain=(0.5, 48.5), grid_domain=(0.0, 1.0),
    ...                        value_offset=1500.0, value_scale=1000.0)
    >>> t.tolist(), v.tolist()
    ([0.5, 48.5], [1500.0, 2500.0])
    """
    a, b = float(time_domain[0]), float(time_domain[1])
    c, d = float(grid_domain[0]), float(grid_domain[1])
    g = np.asarray(grid_points, dtype=np.float64)
    t = a + (g - c) * ((b - a) / (d - c))
    v = np.asarray(grid_values, dtype=np.float64) * float(value_scale) + float(value_offset)
    return t, v


def centre_on_reference(curves: ArrayLike, reference: ArrayLike, *, aligned: ArrayLike | None = None) -> NDArrayFloat:
    """Records minus a public reference curve, before clipping (formula ``preprocess.public_reference@1``).

    .. math:: Y_i = X_i - r \\ \\text{(aligned } i\\text{)}, \\quad Y_i = 0 \\ \\text{(unaligned } i\\text{)}, \\quad
              \\tilde\\mu = r + \\mathcal{M}(\\mathrm{clip}_\\tau(Y_1), \\dots, \\mathrm{clip}_\\tau(Y_n))

    ``r`` is a public curve on the grid in the records' (rescaled) units; :func:`add_reference` adds it back to
    the noisy release. ``aligned`` (one boolean per row, default all ``True``) marks the rows that hold an aligned
    curve; the others (units without an alignable curve, whose row is the zero curve) stay 0, so such a unit
    contributes ``r`` to the release. The map is record-wise and data-independent, so each ``Y_i`` is still
    clipped to ``tau``: the sensitivity, the noise and the guarantee are those of the uncentred release
    (``docs/proofs/preprocess.public_reference@1.md``).

    Privacy assumptions: ``reference`` is public and fixed before seeing the data (never computed from it).

    >>> centre_on_reference([[3.0, 4.0], [0.0, 0.0]], [1.0, 2.0], aligned=[True, False]).tolist()
    [[2.0, 2.0], [0.0, 0.0]]
    """
    x = np.asarray(curves, dtype=np.float64)
    if x.ndim != 2:
        raise DomainError(f"curves (shape {x.shape}) must be an n x K matrix")
    r = _reference_vector(reference, x.shape[1])
    if aligned is None:
        out: NDArrayFloat = x - r[None, :]
        return out
    mask = np.asarray(aligned)
    if mask.shape != (x.shape[0],) or mask.dtype != np.bool_:
        raise DomainError(f"aligned (shape {mask.shape}) must hold one boolean per row ({x.shape[0]})")
    out = x - np.where(mask[:, None], r[None, :], 0.0)
    return out


def add_reference(values: ArrayLike, reference: ArrayLike) -> NDArrayFloat:
    """The noisy release plus the public reference curve (post-processing; ``preprocess.public_reference@1``).

    >>> add_reference([[0.5, -0.5]], [1.0, 2.0]).tolist()
    [[1.5, 1.5]]
    """
    v = np.asarray(values, dtype=np.float64)
    out: NDArrayFloat = v + _reference_vector(reference, v.shape[-1])
    return out


def _reference_vector(reference: ArrayLike, length: int) -> NDArrayFloat:
    r = np.asarray(reference, dtype=np.float64)
    if r.shape != (length,) or not bool(np.all(np.isfinite(r))):
        raise DomainError(f"reference (shape {r.shape}) must hold {length} finite grid values")
    return r
