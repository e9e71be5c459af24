"""Weighted Karhunen-Loève eigenbasis of a kernel on a grid (MATH.md §1.3-1.4).

The operator ``f -> C W f`` is symmetrised as ``S = W^{1/2} C W^{1/2} = U Lambda U^T``
and ``phi_j = W^{-1/2} u_j``, so ``Phi^T W Phi = I`` and ``C W phi_j = lambda_j phi_j``.
Eigenvalues at or below ``rtol * lambda_1`` are dropped (never square-rooted); every
summary is projected onto the kept span before noise. The basis depends only on
the kernel and the grid, so it is computed once per (kernel, grid) and cached: in memory
(an LRU cache) and, when a store is installed with :func:`set_eigen_store` (the release tasks
install :class:`fdpcore.io.eigencache.DiskEigenCache`), on disk across processes and releases,
keyed by :func:`eigen_cache_key` (kernel, grid nodes and weights, rtol, normalisation and
:data:`EIGEN_CODE_VERSION`). This module does no I/O itself.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from fdpcore._typing import ArrayLike, NDArrayFloat
from fdpcore.basis.grids import Grid
from fdpcore.basis.kernels import KernelSpec, kernel_matrix, kernel_spec
from fdpcore.errors import DomainError

__all__ = [
    "DEFAULT_RTOL", "EIGEN_CODE_VERSION", "Eigenbasis", "EigenStore", "clear_memory_cache", "eigen_cache_key",
    "set_eigen_store",
    "weighted_eigenbasis",
]

#: Relative eigenvalue floor r_tol of MATH.md §1.4.
DEFAULT_RTOL = 1e-12

#: Version of the eigen routine (:func:`_compute`); part of every disk-cache key. Bump it whenever
#: the numbers :func:`_compute` returns could change (algorithm, sign convention, floor rule).
EIGEN_CODE_VERSION = "eigen.weighted_kl@1/numpy-eigh/sign-maxabs/1"


class EigenStore(Protocol):
    """A persistent store of eigenbases (see :class:`fdpcore.io.eigencache.DiskEigenCache`)."""

    def load(self, key: bytes) -> tuple[NDArrayFloat, NDArrayFloat, float, int] | None:
        """``(eigenvalues, eigenfunctions, trace_scale, n_dropped)`` for ``key``, or ``None`` (miss or corrupt)."""

    def save(self, key: bytes, eigenvalues: NDArrayFloat, eigenfunctions: NDArrayFloat, trace_scale: float,
             n_dropped: int) -> None:
        """Store an entry (atomically; failures are ignored: the cache is an optimisation only)."""


_STORE: list[EigenStore | None] = [None]


def set_eigen_store(store: EigenStore | None) -> EigenStore | None:
    """Install (or remove, with ``None``) the persistent eigenbasis store; returns the previous one.

    >>> previous = set_eigen_store(None)
    >>> set_eigen_store(previous) is None
    True
    """
    previous = _STORE[0]
    _STORE[0] = store
    return previous


@dataclass(frozen=True, eq=False)
class Eigenbasis:
    """Eigenpairs ``(lambda_j, phi_j)``, ``j`` in the kept set ``J``, of a kernel on a grid.

    Attributes:
        eigenvalues: ``lambda_j`` in decreasing order, all ``> rtol * lambda_1``.
        eigenfunctions: ``Phi`` (K x J), W-orthonormal columns.
        grid: the grid.
        kernel: the kernel spec.
        trace_scale: the factor the kernel was divided by (1 if not normalised).
        n_dropped: how many numerical eigenvalues fell below the floor.
    """

    eigenvalues: NDArrayFloat
    eigenfunctions: NDArrayFloat
    grid: Grid
    kernel: KernelSpec
    trace_scale: float
    n_dropped: int

    @property
    def n_basis(self) -> int:
        """Number of kept eigenpairs ``|J|``."""
        return int(self.eigenvalues.shape[0])

    def coefficients(self, curves: ArrayLike) -> NDArrayFloat:
        """``theta(f) = Phi^T W f`` for each row ``f`` of ``curves`` (MATH.md §1.3).

        >>> from fdpcore.basis.grids import midpoint_grid
        >>> b = weighted_eigenbasis({"name": "brownian"}, midpoint_grid(50))
        >>> bool(np.allclose(b.reconstruct(b.coefficients(b.eigenfunctions.T)), b.eigenfunctions.T))
        True
        """
        x = np.asarray(curves, dtype=np.float64)
        return (x * self.grid.weights) @ self.eigenfunctions

    def reconstruct(self, coefficients: ArrayLike) -> NDArrayFloat:
        """``f = Phi theta`` (rows in, rows out)."""
        return np.asarray(coefficients, dtype=np.float64) @ self.eigenfunctions.T

    def project(self, curves: ArrayLike) -> NDArrayFloat:
        """The data-independent projection ``P_J = Phi_J Phi_J^T W`` onto the kept span."""
        return self.reconstruct(self.coefficients(curves))

    @property
    def trace(self) -> float:
        """``sum_j lambda_j`` over the kept set."""
        return float(self.eigenvalues.sum())


def weighted_eigenbasis(
    kernel: Mapping[str, object] | KernelSpec,
    grid: Grid,
    *,
    normalize_trace: bool = True,
    rtol: float = DEFAULT_RTOL,
) -> Eigenbasis:
    """The weighted eigenbasis of ``kernel`` on ``grid`` (cached per kernel and grid).

    Args:
        kernel: kernel mapping or spec (MATH.md §2.1).
        grid: the public grid with its quadrature weights.
        normalize_trace: divide the kernel by ``sum_k w_k c(t_k, t_k)`` so that
            ``sum_j lambda_j = 1`` (MATH.md §2.4).
        rtol: relative eigenvalue floor (MATH.md §1.4).

    .. math:: S = W^{1/2} C W^{1/2} = U \\Lambda U^\\top,\\qquad \\phi_j = W^{-1/2} u_j .

    >>> from fdpcore.basis.grids import grid_from_nodes
    >>> g = grid_from_nodes(np.linspace(0, 1, 200))
    >>> b = weighted_eigenbasis({"name": "brownian"}, g, normalize_trace=False)
    >>> round(float(b.eigenvalues[0]), 4)  # ((1 - 1/2) pi)^-2 = 0.40528
    0.4053
    """
    spec = kernel_spec(kernel)
    if not (0 < rtol < 1):
        raise DomainError(f"rtol ({rtol!r}) must be in (0, 1)")
    return _cached_eigenbasis(spec, grid, bool(normalize_trace), float(rtol))


def eigen_cache_key(spec: KernelSpec, grid: Grid, normalize: bool, rtol: float) -> bytes:
    """Canonical bytes of everything the eigenbasis depends on (the disk cache hashes them).

    Floats are written in ``float.hex`` form and arrays as their exact little-endian bytes, so two
    specs give the same key exactly when they give the same computation.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> k = kernel_spec({"name": "brownian"})
    >>> eigen_cache_key(k, midpoint_grid(4), True, 1e-12) == eigen_cache_key(k, midpoint_grid(4), True, 1e-12)
    True
    >>> eigen_cache_key(k, midpoint_grid(4), True, 1e-12) == eigen_cache_key(k, midpoint_grid(5), True, 1e-12)
    False
    """
    def fl(x: float) -> bytes:
        return float(x).hex().encode()

    parts = [
        EIGEN_CODE_VERSION.encode(), b"kernel", spec.name.encode(),
        *(name.encode() + b"=" + fl(value) for name, value in spec.params),
        b"grid", grid.rule.encode(), fl(grid.domain_range[0]), fl(grid.domain_range[1]),
        np.ascontiguousarray(grid.grid_points, dtype="<f8").tobytes(),
        np.ascontiguousarray(grid.weights, dtype="<f8").tobytes(),
        b"normalize=" + (b"1" if normalize else b"0"), b"rtol=" + fl(rtol),
    ]
    # length-prefixed, so no two different part lists give the same bytes
    return b"".join(len(p).to_bytes(8, "little") + p for p in parts)


@functools.lru_cache(maxsize=64)
def _cached_eigenbasis(spec: KernelSpec, grid: Grid, normalize: bool, rtol: float) -> Eigenbasis:
    # Grid hashes and compares by its exact nodes and weights, so equal grids share one entry.
    store = _STORE[0]
    if store is None:
        return _compute(spec, grid, normalize, rtol)
    key = eigen_cache_key(spec, grid, normalize, rtol)
    hit = store.load(key)
    if hit is not None:
        lam, phi, scale, n_dropped = hit
        if phi.shape == (grid.size, lam.shape[0]) and lam.ndim == 1:
            lam.setflags(write=False)
            phi.setflags(write=False)
            return Eigenbasis(lam, phi, grid, spec, float(scale), int(n_dropped))
    basis = _compute(spec, grid, normalize, rtol)
    store.save(key, basis.eigenvalues, basis.eigenfunctions, basis.trace_scale, basis.n_dropped)
    return basis


def clear_memory_cache() -> None:
    """Empty the in-process LRU cache (the disk store, if any, is kept).

    >>> clear_memory_cache()
    """
    _cached_eigenbasis.cache_clear()


def _compute(spec: KernelSpec, grid: Grid, normalize: bool, rtol: float) -> Eigenbasis:
    t, w = grid.grid_points, grid.weights
    c = kernel_matrix(spec, t)
    scale = 1.0
    if normalize:
        scale = float(np.sum(w * np.diag(c)))
        if not scale > 0:
            raise DomainError("the kernel has zero trace on this grid and cannot be normalised")
        c = c / scale
    sw = np.sqrt(w)
    s = sw[:, None] * c * sw[None, :]
    s = (s + s.T) / 2.0
    lam, u = np.linalg.eigh(s)
    order = np.argsort(lam)[::-1]
    lam, u = lam[order], u[:, order]
    if not lam[0] > 0:
        raise DomainError("the kernel matrix has no positive eigenvalue on this grid")
    keep = lam > rtol * lam[0]
    # keep a leading block only: eigenvalues are sorted, so `keep` is a prefix
    j = int(np.argmin(keep)) if not keep.all() else keep.shape[0]
    lam_j = lam[:j].copy()
    phi = u[:, :j] / sw[:, None]
    # fix the sign convention (largest-magnitude entry positive) for reproducibility
    idx = np.argmax(np.abs(phi), axis=0)
    signs = np.sign(phi[idx, np.arange(j)])
    signs[signs == 0] = 1.0
    phi = phi * signs
    lam_j.setflags(write=False)
    phi.setflags(write=False)
    return Eigenbasis(lam_j, phi, grid, spec, scale, int(lam.shape[0] - j))
