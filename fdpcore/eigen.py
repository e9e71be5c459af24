"""Weighted Karhunen-Loève eigenbasis of a kernel on a grid (MATH.md §1.3-1.4).

The operator ``f -> C W f`` is symmetrised as ``S = W^{1/2} C W^{1/2} = U Lambda U^T``
and ``phi_j = W^{-1/2} u_j``, so ``Phi^T W Phi = I`` and ``C W phi_j = lambda_j phi_j``.
Eigenvalues at or below ``rtol * lambda_1`` are dropped (never square-rooted); every
summary is projected onto the kept span before noise. The basis depends only on
the kernel and the grid, so it is computed once per (kernel, grid) and cached.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from fdpcore._typing import ArrayLike, NDArrayFloat
from fdpcore.errors import DomainError
from fdpcore.grids import Grid
from fdpcore.kernels import KernelSpec, kernel_matrix, kernel_spec

__all__ = ["DEFAULT_RTOL", "Eigenbasis", "weighted_eigenbasis"]

#: Relative eigenvalue floor r_tol of MATH.md §1.4.
DEFAULT_RTOL = 1e-12


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

        >>> from fdpcore.grids import midpoint_grid
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

    >>> from fdpcore.grids import grid_from_nodes
    >>> g = grid_from_nodes(np.linspace(0, 1, 200))
    >>> b = weighted_eigenbasis({"name": "brownian"}, g, normalize_trace=False)
    >>> round(float(b.eigenvalues[0]), 4)  # ((1 - 1/2) pi)^-2 = 0.40528
    0.4053
    """
    spec = kernel_spec(kernel)
    if not (0 < rtol < 1):
        raise DomainError(f"rtol ({rtol!r}) must be in (0, 1)")
    return _cached_eigenbasis(spec, grid, bool(normalize_trace), float(rtol))


@functools.lru_cache(maxsize=64)
def _cached_eigenbasis(spec: KernelSpec, grid: Grid, normalize: bool, rtol: float) -> Eigenbasis:
    # Grid hashes and compares by its exact nodes and weights, so equal grids share one entry.
    return _compute(spec, grid, normalize, rtol)


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
