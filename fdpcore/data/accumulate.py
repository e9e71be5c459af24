"""Exact, order-independent sufficient statistics of clipped curves (MATH.md §1.7, §4, §6).

Floating-point sums depend on the order of their terms, so a release computed from partial
sums (chunks of a file, files of a dataset, Dask partitions) would otherwise depend on how
the data was cut. Here every clipped record is first mapped onto a fixed binary lattice by
:func:`quantise_records` (a record-wise map that never increases a norm, so every sensitivity
of MATH.md still holds), and the lattice integers are summed exactly: ``int64`` inside a block
whose size is bounded so no partial sum can overflow, Python integers across blocks. Any
partition of the records, in any order, on any engine, gives bit-identical statistics.

Resolution: the lattice step is ``q = 2^(e - QUANTUM_BITS)`` with ``2^(e-1) < tau <= 2^e``, i.e.
between ``2^-40 tau`` and ``2^-39 tau`` (an absolute error below ``2^-39 tau`` per grid value).
Overflow: a clipped record has ``|x_k| <= tau / sqrt(w_k)``, so a lattice integer is below
``2^(QUANTUM_BITS+1) / sqrt(w_min)``; grids with ``w_min < 2^-40`` are refused. Blocks are cut so
that ``rows x max|integer| < 2^63``; totals are unbounded Python integers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from fdpcore._typing import ArrayLike, NDArrayFloat
from fdpcore.errors import DomainError, InternalError
from fdpcore.noise.bernstein import bernstein_interpolation_matrix, clip_sup
from fdpcore.summaries.covariance import CovariancePlan, _upper, iclp_qr_covariance_coefficients
from fdpcore.summaries.fosr import FosrPlan, fosr_whitened
from fdpcore.summaries.mean import MeanPlan, whitened_from_mean_coefficients

__all__ = [
    "QUANTUM_BITS",
    "CurveSums",
    "DesignSums",
    "accumulate_curves",
    "summarise_covariance_sums",
    "quantisation_exponent",
    "quantise_records",
    "sum_int_rows",
    "sum_int_cross",
    "sum_int_outer",
    "summarise_fosr_sums",
    "summarise_mean_sums",
]

#: Bits of resolution below the power of two that bounds tau.
QUANTUM_BITS = 40

_I63 = (1 << 63) - 1
#: Limb width for exact outer products through float64 matrix products (4 limbs cover 63 bits).
_LIMB = 16
#: Rows per float64 block: limb products are < 2^32, so 2^20 of them sum exactly (< 2^52).
_OUTER_BLOCK = 1 << 20


def quantisation_exponent(tau: float) -> int:
    """Exponent ``s`` of the lattice step ``2^s`` for clipping radius ``tau`` (a public function of tau).

    ``s = e - QUANTUM_BITS`` with ``e`` the smallest integer such that ``tau <= 2^e``.

    >>> quantisation_exponent(1.0), quantisation_exponent(1.5), quantisation_exponent(0.25)
    (-40, -39, -42)
    """
    if not (isinstance(tau, (int, float)) and math.isfinite(tau) and tau > 0):
        raise DomainError(f"tau ({tau!r}) must be a positive finite number")
    m, e = math.frexp(float(tau))  # tau = m 2^e, m in [0.5, 1)
    if m == 0.5:
        e -= 1
    return e - QUANTUM_BITS


def quantise_records(x: ArrayLike, tau: float, weights: ArrayLike) -> np.ndarray:
    """Integers ``trunc(x / 2^s)`` of clipped records on the lattice ``2^s Z`` (MATH.md §1.7).

    Truncation toward zero: the lattice value ``2^s trunc(x 2^-s)`` has ``|.| <= |x|`` entry by entry,
    so ``||Q(X_i)||_W <= ||X_i||_W <= tau``. The map is record-wise and data-independent, hence
    privacy-neutral, and every sensitivity that assumes ``||X_i||_W <= tau`` still holds. The
    scaling by a power of two is exact in floating point, so the bound holds exactly.

    .. math:: Q(X_i)_k = 2^{s}\\,\\operatorname{trunc}\\bigl(2^{-s} X_i(t_k)\\bigr),\\qquad
              2^{s} = 2^{\\lceil\\log_2\\tau\\rceil - 40}.

    Args:
        x: clipped records ``m x K`` with ``||x_i||_W <= tau``.
        tau: the public clipping radius.
        weights: the grid's quadrature weights (used for the overflow bound only).

    Returns:
        ``int64`` array ``m x K``.

    Raises:
        DomainError: a grid weight below ``2^-40`` (the integers could overflow), or an entry
            beyond the clipping bound (the input was not clipped).

    >>> q = quantise_records([[0.5, -0.3]], 1.0, [0.5, 0.5])
    >>> q.tolist(), bool(np.all(np.abs(q * 2.0**-40) <= [0.5, 0.3]))
    ([[549755813888, -329853488332]], True)
    """
    s = quantisation_exponent(tau)
    w = np.asarray(weights, dtype=np.float64)
    if w.size == 0 or not float(w.min()) >= 2.0**-QUANTUM_BITS:
        raise DomainError(f"grid weights (min {float(w.min()) if w.size else 'none'}) must be >= 2^-{QUANTUM_BITS} "
                          "for exact accumulation")
    xa = np.asarray(x, dtype=np.float64)
    scaled = np.trunc(np.ldexp(xa, -s))
    bound = 2.0 ** (QUANTUM_BITS + 1) / math.sqrt(float(w.min()))
    if scaled.size and not float(np.max(np.abs(scaled))) <= bound:
        raise DomainError("records must be clipped to tau before quantisation")
    out: np.ndarray = scaled.astype(np.int64)
    return out


def sum_int_rows(ints: np.ndarray) -> list[int]:
    """Exact column sums of an ``int64`` matrix as Python integers (order-independent).

    >>> sum_int_rows(np.array([[2**62, 1], [2**62, -1]], dtype=np.int64))
    [9223372036854775808, 0]
    """
    a = np.asarray(ints)
    if a.ndim != 2 or a.dtype != np.int64:
        raise InternalError("sum_int_rows needs a 2-D int64 array")
    total = [0] * a.shape[1]
    if a.shape[0] == 0:
        return total
    big = int(np.max(np.abs(a))) if a.size else 0
    block = max(1, _I63 // max(big, 1))
    for start in range(0, a.shape[0], block):  # one block in practice (block >= 2^20 rows)
        part = a[start:start + block].sum(axis=0, dtype=np.int64)
        total = [t + int(p) for t, p in zip(total, part.tolist(), strict=True)]
    return total


def sum_int_outer(ints: np.ndarray) -> list[list[int]]:
    """Exact ``sum_i q_i q_i^T`` of ``int64`` rows as Python integers (order-independent).

    Each integer is split into four 16-bit limbs (the top one signed); every limb product is
    below ``2^32`` in magnitude, so a float64 matrix product over at most ``2^20`` rows is exact
    (``< 2^52``), and the limb products are recombined as Python integers.

    >>> sum_int_outer(np.array([[3, -2**40], [1, 5]], dtype=np.int64))
    [[10, -3298534883323], [-3298534883323, 1208925819614629174706201]]
    """
    a = np.asarray(ints)
    if a.ndim != 2 or a.dtype != np.int64:
        raise InternalError("sum_int_outer needs a 2-D int64 array")
    k = a.shape[1]
    total = np.zeros((k, k), dtype=object)
    total[:] = 0
    mask = (1 << _LIMB) - 1
    for start in range(0, a.shape[0], _OUTER_BLOCK):
        blk = a[start:start + _OUTER_BLOCK]
        limbs = [((blk >> (_LIMB * j)) & mask).astype(np.float64) for j in range(3)]
        limbs.append((blk >> (3 * _LIMB)).astype(np.float64))  # arithmetic shift: signed top limb
        for i in range(4):
            for j in range(i, 4):
                p = (limbs[i].T @ limbs[j]).astype(np.int64).astype(object)
                term = p if i == j else p + p.T
                total += term * (1 << (_LIMB * (i + j)))
    out: list[list[int]] = total.tolist()
    return out


def sum_int_cross(a: np.ndarray, b: np.ndarray) -> list[list[int]]:
    """Exact ``sum_i a_i b_i^T`` of paired ``int64`` rows as Python integers (order-independent).

    The limb scheme of :func:`sum_int_outer` for two different matrices (``m x p`` and ``m x K``).

    >>> sum_int_cross(np.array([[2], [-1]], dtype=np.int64), np.array([[3, 2**40], [1, 5]], dtype=np.int64))
    [[5, 2199023255547]]
    """
    x, y = np.asarray(a), np.asarray(b)
    if x.ndim != 2 or y.ndim != 2 or x.dtype != np.int64 or y.dtype != np.int64 or x.shape[0] != y.shape[0]:
        raise InternalError("sum_int_cross needs two 2-D int64 arrays with the same number of rows")
    p, k = x.shape[1], y.shape[1]
    total = np.zeros((p, k), dtype=object)
    total[:] = 0
    for start in range(0, x.shape[0], _OUTER_BLOCK):  # all 16 limb products in one matrix product
        prod = (np.hstack(_limbs(x[start:start + _OUTER_BLOCK])).T @ np.hstack(_limbs(y[start:start + _OUTER_BLOCK])))
        blocks = prod.astype(np.int64).astype(object)
        for i in range(4):
            for j in range(4):
                total += blocks[i * p:(i + 1) * p, j * k:(j + 1) * k] * (1 << (_LIMB * (i + j)))
    out: list[list[int]] = total.tolist()
    return out


def _limbs(blk: np.ndarray) -> list[np.ndarray]:
    """Four 16-bit limbs of int64 entries as float64 (the top one signed)."""
    mask = (1 << _LIMB) - 1
    out = [((blk >> (_LIMB * j)) & mask).astype(np.float64) for j in range(3)]
    out.append((blk >> (3 * _LIMB)).astype(np.float64))  # arithmetic shift: signed top limb
    return out


@dataclass(frozen=True, eq=False)
class DesignSums:
    """Exact FoSR statistics of clipped covariates ``z_i`` paired with clipped records ``X_i`` (MATH.md §7).

    Covariates live on their own lattice ``2^e Z`` (``e = quantisation_exponent(B)``), records on the
    curves' lattice ``2^s Z``.

    Attributes:
        exponent: covariate lattice exponent ``e``.
        sum: ``sum_i r_i`` of the covariate integers ``r_i = 2^-e Q(z_i)`` (length q).
        outer: ``sum_i r_i r_i^T`` (q x q; value ``= 2^(2e) x integer``).
        cross: ``sum_i r_i q_i^T`` with the record integers ``q_i`` (q x K; value ``= 2^(e+s) x integer``).
    """

    exponent: int
    sum: tuple[int, ...]
    outer: tuple[tuple[int, ...], ...]
    cross: tuple[tuple[int, ...], ...]

    def __add__(self, other: DesignSums) -> DesignSums:
        """Exact combination of two disjoint sets of units."""
        if self.exponent != other.exponent or len(self.sum) != len(other.sum) or \
                len(self.cross[0]) != len(other.cross[0]):
            raise InternalError("partial design sums on different lattices or shapes cannot be combined")
        return DesignSums(self.exponent, _add(self.sum, other.sum),
                          tuple(_add(a, b) for a, b in zip(self.outer, other.outer, strict=True)),
                          tuple(_add(a, b) for a, b in zip(self.cross, other.cross, strict=True)))


@dataclass(frozen=True, eq=False)
class CurveSums:
    """Exact sufficient statistics of a set of clipped records on one lattice.

    Attributes:
        n: number of records (privacy units; public under replace-one adjacency).
        exponent: lattice exponent ``s`` (value ``= 2^s x integer``).
        sum: ``sum_i Q(X_i)`` as Python integers (length K).
        sum_sup: ``sum_i Q(clip_sup(X_i, B))`` (Bernstein), else ``None``.
        outer: ``sum_i q_i q_i^T`` of the lattice integers ``q_i = 2^-s Q(X_i)`` (K x K, covariance;
            value ``= 2^(2s) x integer``), else ``None``.
        counts: internal diagnostics (never published).
        design: the FoSR covariate statistics (:class:`DesignSums`), else ``None``.
    """

    n: int
    exponent: int
    sum: tuple[int, ...]
    sum_sup: tuple[int, ...] | None = None
    outer: tuple[tuple[int, ...], ...] | None = None
    counts: dict[str, int] = field(default_factory=dict)
    design: DesignSums | None = None

    def __add__(self, other: CurveSums) -> CurveSums:
        """Exact combination of two disjoint sets of records."""
        if self.exponent != other.exponent or len(self.sum) != len(other.sum):
            raise InternalError("partial sums on different lattices or grids cannot be combined")
        if (self.sum_sup is None) != (other.sum_sup is None) or (self.outer is None) != (other.outer is None) \
                or (self.design is None) != (other.design is None):
            raise InternalError("partial sums carry different statistics")
        sup = None if self.sum_sup is None or other.sum_sup is None else _add(self.sum_sup, other.sum_sup)
        outer = None
        if self.outer is not None and other.outer is not None:
            outer = tuple(_add(a, b) for a, b in zip(self.outer, other.outer, strict=True))
        counts = {k: self.counts.get(k, 0) + other.counts.get(k, 0) for k in {*self.counts, *other.counts}}
        design = None if self.design is None or other.design is None else self.design + other.design
        return CurveSums(self.n + other.n, self.exponent, _add(self.sum, other.sum), sup, outer, counts, design)

    def mean(self) -> NDArrayFloat:
        """``(1/n) sum_i Q(X_i)``, correctly rounded from the exact sum (the same for any partition)."""
        return self._mean(self.sum)

    def mean_sup(self) -> NDArrayFloat:
        """``(1/n) sum_i Q(clip_sup(X_i))``, correctly rounded (Bernstein)."""
        if self.sum_sup is None:
            raise InternalError("these sums carry no sup-clipped statistics")
        return self._mean(self.sum_sup)

    def second_moment(self) -> NDArrayFloat:
        """``(1/n) sum_i Q(X_i) Q(X_i)^T``, correctly rounded entry by entry (K x K)."""
        if self.outer is None:
            raise InternalError("these sums carry no outer products")
        return np.array([self._mean(row, 2 * self.exponent) for row in self.outer])

    def design_means(self) -> tuple[NDArrayFloat, NDArrayFloat, NDArrayFloat]:
        """``(1/n) sum Q(z_i)``, ``(1/n) sum Q(z_i) Q(z_i)^T`` and ``(1/n) sum Q(z_i) Q(X_i)^T``, correctly rounded."""
        d = self.design
        if d is None:
            raise InternalError("these sums carry no covariate statistics")
        return (self._mean(d.sum, d.exponent), np.array([self._mean(r, 2 * d.exponent) for r in d.outer]),
                np.array([self._mean(r, d.exponent + self.exponent) for r in d.cross]).reshape(len(d.sum), -1))

    def _mean(self, ints: tuple[int, ...], exponent: int | None = None) -> NDArrayFloat:
        if self.n <= 0:
            raise DomainError(f"n ({self.n}) must be >= 1 to form a mean")
        s = self.exponent if exponent is None else exponent
        scale = Fraction(2) ** s
        return np.array([float(Fraction(v) * scale / self.n) for v in ints], dtype=np.float64)


def _add(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(x + y for x, y in zip(a, b, strict=True))


def accumulate_curves(
    clipped: ArrayLike,
    tau: float,
    weights: ArrayLike,
    *,
    sup_clip: float | None = None,
    outer: bool = False,
    counts: dict[str, int] | None = None,
    covariates: ArrayLike | None = None,
    covariate_bound: float | None = None,
) -> CurveSums:
    """Exact sufficient statistics of clipped records: ``n``, ``sum Q(X_i)`` and, on request, the rest.

    Args:
        clipped: ``m x K`` records already clipped to ``||X_i||_W <= tau``.
        tau: the clipping radius (fixes the lattice).
        weights: grid quadrature weights.
        sup_clip: Bernstein's ``B``: also accumulate ``Q(clip_sup(X_i, B))``.
        outer: also accumulate ``sum Q(X_i) Q(X_i)^T`` (covariance).
        counts: internal diagnostics carried along (never published).
        covariates: FoSR: ``m x q`` covariates ``z_i`` of the same units (row ``i`` pairs with record
            ``i``), already clipped to ``||z_i||_2 <= covariate_bound``; they are quantised on the lattice
            of ``covariate_bound`` (unit weights) and :class:`DesignSums` is accumulated.
        covariate_bound: FoSR's ``B`` (``B_z`` or ``B_x``), required with ``covariates``.

    >>> a = accumulate_curves([[0.5, 0.25]], 1.0, [0.5, 0.5])
    >>> b = accumulate_curves([[0.25, -0.25]], 1.0, [0.5, 0.5])
    >>> (a + b).n, (a + b).mean().tolist()
    (2, [0.375, 0.0])
    """
    x = np.asarray(clipped, dtype=np.float64)
    if x.ndim != 2:
        raise DomainError(f"clipped (ndim {x.ndim}) must be a 2-D array")
    s = quantisation_exponent(tau)
    q = quantise_records(x, tau, weights)
    sup = None
    if sup_clip is not None:
        xs, _ = clip_sup(x, sup_clip)
        sup = tuple(sum_int_rows(quantise_records(xs, tau, weights)))
    out = tuple(tuple(r) for r in sum_int_outer(q)) if outer else None
    design = None
    if covariates is not None:
        z = np.asarray(covariates, dtype=np.float64)
        if z.ndim != 2 or z.shape[0] != x.shape[0] or z.shape[1] == 0:
            raise DomainError(f"covariates (shape {z.shape}) must have one row per record and at least one column")
        if covariate_bound is None:
            raise DomainError("covariate_bound (None) must be given with covariates")
        r = quantise_records(z, covariate_bound, np.ones(z.shape[1]))
        design = DesignSums(quantisation_exponent(covariate_bound), tuple(sum_int_rows(r)),
                            tuple(tuple(v) for v in sum_int_outer(r)), tuple(tuple(v) for v in sum_int_cross(r, q)))
    return CurveSums(int(x.shape[0]), s, tuple(sum_int_rows(q)), sup, out, dict(counts or {}), design)


def summarise_mean_sums(sums: CurveSums, plan: MeanPlan) -> NDArrayFloat:
    """Pre-noise whitened coordinates ``z`` from exact sums: :func:`fdpcore.summaries.mean.summarise_mean` on a mean.

    Every mean estimator of MATH.md §4 is a function of the mean of the clipped records only
    (Bernstein: of the mean of the sup-clipped records), so ``z`` is computed from
    :meth:`CurveSums.mean` with the same estimator functions and the same plan; it agrees with
    ``summarise_mean`` on the records to the lattice resolution (``< 2^-39 tau`` per grid value).
    Data-dependent tuning (``dp_select``, ``pcv``) needs the records and is not available here.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> from fdpcore.summaries.mean import plan_mean_release
    >>> g = midpoint_grid(20)
    >>> p = plan_mean_release(g, {"name": "matern", "nu": 1.5, "rho": 0.1}, n=2, tau=1.0,
    ...                       epsilon=1.0, estimator="frl", n_basis=3, secure=False)
    >>> summarise_mean_sums(accumulate_curves(np.zeros((2, 20)), 1.0, g.weights), p).tolist()
    [0.0, 0.0, 0.0]
    """
    if plan.pending:
        raise DomainError("the plan's parameters are not selected yet; data-dependent tuning needs the records")
    if sums.n != plan.n:
        raise DomainError(f"sums.n ({sums.n}) must equal the plan's n ({plan.n})")
    grid = plan.basis.grid
    if len(sums.sum) != grid.size:
        raise DomainError(f"sums has {len(sums.sum)} grid values but the grid has {grid.size}")
    if plan.estimator == "bernstein":
        k = plan.lattice_k if plan.lattice_k is not None else 0
        r = bernstein_interpolation_matrix(grid.grid_points, grid.domain_range, k)
        out: NDArrayFloat = r @ sums.mean_sup()
        return out
    return whitened_from_mean_coefficients(plan.basis.coefficients(sums.mean()[None, :])[0], plan)


def summarise_covariance_sums(sums: CurveSums, plan: CovariancePlan) -> NDArrayFloat:
    """Pre-noise whitened upper-triangle coordinates from exact sums: :func:`fdpcore.summaries.covariance.summarise_covariance`.

    The covariance summary (MATH.md §6) depends on the records only through
    ``Kbar = (1/n) sum_i y_i y_i^T`` of their eigen-coefficients ``y_i = theta(X_i)``
    (``- mean_i theta(X_i)`` with ``sample_mean`` centring). ``theta`` is linear, so ``Kbar`` is
    ``theta`` applied on both sides of the second moment ``M = (1/n) sum_i Q(X_i) Q(X_i)^T`` (minus
    ``theta(m) theta(m)^T``, ``m`` the mean, with ``sample_mean`` centring): the same quantity as the
    in-memory path on the quantised records, up to floating-point rounding. ``M`` and ``m`` are
    correctly rounded from exact integer sums, so the result is identical for every partition of
    the data and every engine. ``sums`` must carry the outer products (``StreamSpec(outer=True)``)
    of the centred (public centring) or raw (``sample_mean``) records clipped to ``plan.tau``.

    >>> from fdpcore.summaries.covariance import plan_covariance_release, summarise_covariance
    >>> from fdpcore.basis.grids import midpoint_grid
    >>> g = midpoint_grid(8)
    >>> x = np.array([[0.5] * 8, [-0.25] * 8, [0.125, -0.125] * 4])
    >>> p = plan_covariance_release(g, {"name": "matern", "nu": 1.5, "rho": 0.2}, n=3, tau=1.0, epsilon=1.0,
    ...                             eta=1.0, psi=0.1, centering="sample_mean", secure=False)
    >>> z = summarise_covariance_sums(accumulate_curves(x, 1.0, g.weights, outer=True), p)
    >>> bool(np.allclose(z, summarise_covariance(x, p), rtol=1e-12, atol=1e-14))
    True
    """
    if sums.outer is None:
        raise DomainError("sums must carry the outer products (accumulate with outer=True) for a covariance")
    if sums.n != plan.n:
        raise DomainError(f"sums.n ({sums.n}) must equal the plan's n ({plan.n})")
    basis = plan.basis
    if len(sums.sum) != basis.grid.size:
        raise DomainError(f"sums has {len(sums.sum)} grid values but the grid has {basis.grid.size}")
    second = sums.second_moment()
    kbar = basis.coefficients(basis.coefficients(second).T)  # theta on both sides of M
    if plan.centering == "sample_mean":
        ybar = basis.coefficients(sums.mean()[None, :])[0]
        kbar = kbar - np.outer(ybar, ybar)
    lam = basis.eigenvalues
    khat = iclp_qr_covariance_coefficients((kbar + kbar.T) / 2.0, lam, eta=plan.eta, psi=plan.psi)
    prod, iu = _upper(lam)
    out: NDArrayFloat = khat[iu] / np.sqrt(prod)
    return out


def summarise_fosr_sums(sums: CurveSums, plan: FosrPlan) -> tuple[NDArrayFloat, NDArrayFloat]:
    """Pre-noise whitened ``T1`` entries and ``T2`` coefficients from exact sums: :func:`fdpcore.summaries.fosr.summarise_fosr`.

    The FoSR summary (MATH.md §7) depends on the units only through ``T1 = (1/n) sum_i x_i x_i^T``
    and ``G = theta((1/n) sum_i x_i Y_i^T)`` (``theta`` is linear). With ``x_i = (1, z_i)`` these
    are assembled from ``n``, the means of ``Q(z_i)``, ``Q(z_i) Q(z_i)^T``, ``Q(Y_i)`` and
    ``Q(z_i) Q(Y_i)^T`` (without an intercept, from the last two products only): the in-memory
    quantities on the quantised covariates and records, up to floating-point rounding, and
    identical for every partition of the data and every engine (correctly rounded from exact
    integer sums). ``sums`` must carry :class:`DesignSums` of covariates clipped to ``plan.bound``
    and records clipped to ``plan.tau_y``.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> from fdpcore.summaries.fosr import plan_fosr_release, summarise_fosr
    >>> g = midpoint_grid(8)
    >>> y, z = np.array([[0.5] * 8, [-0.25] * 8, [0.125, -0.125] * 4]), np.array([[1.0], [-1.0], [0.5]])
    >>> p = plan_fosr_release(g, {"name": "matern", "nu": 1.5, "rho": 0.2}, n=3, n_covariates=1, intercept=True,
    ...                       bound=1.0, tau_y=1.0, epsilon=1.0, secure=False)
    >>> t1, t2 = summarise_fosr_sums(accumulate_curves(y, 1.0, g.weights, covariates=z, covariate_bound=1.0), p)
    >>> m1, m2 = summarise_fosr(z, y, p)
    >>> bool(np.allclose(t1, m1, rtol=1e-12) and np.allclose(t2, m2, rtol=1e-12, atol=1e-14))
    True
    """
    d = sums.design
    if d is None:
        raise DomainError("sums must carry the covariate statistics (accumulate with covariates) for a regression")
    if sums.n != plan.n:
        raise DomainError(f"sums.n ({sums.n}) must equal the plan's n ({plan.n})")
    q = plan.p - 1 if plan.intercept else plan.p
    if len(d.sum) != q or len(sums.sum) != plan.basis.grid.size:
        raise DomainError(f"sums have {len(d.sum)} covariates and {len(sums.sum)} grid values; the plan needs {q} "
                          f"and {plan.basis.grid.size}")
    zbar, zz, zy = sums.design_means()
    if plan.intercept:
        t1 = np.block([[np.ones((1, 1)), zbar[None, :]], [zbar[:, None], zz]])
        xy = np.vstack([sums.mean()[None, :], zy])
    else:
        t1, xy = zz, zy
    return fosr_whitened(t1, plan.basis.coefficients(xy), plan)
