"""Grids and quadrature weights (MATH.md §1.1).

A curve is its vector of values on a fixed, public grid; inner products use the
quadrature weights, ``<f, g>_W = sum_k w_k f_k g_k`` (MATH.md §1.2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fdpcore._typing import ArrayLike, NDArrayFloat
from fdpcore.errors import DomainError

__all__ = ["Grid", "grid_from_nodes", "make_grid", "midpoint_grid", "trapezoid_weights"]


@dataclass(frozen=True, eq=False)
class Grid:
    """A public 1-D grid with quadrature weights.

    Attributes:
        grid_points: strictly increasing nodes ``t_1 < ... < t_K``.
        weights: positive quadrature weights ``w_k``.
        domain_range: the domain ``(a, b)`` containing the nodes.
        rule: ``"midpoint"`` or ``"trapezoid"``.
    """

    grid_points: NDArrayFloat
    weights: NDArrayFloat
    domain_range: tuple[float, float]
    rule: str

    @property
    def size(self) -> int:
        """Number of grid points ``K``."""
        return int(self.grid_points.shape[0])

    def norm(self, curves: ArrayLike) -> NDArrayFloat:
        """Weighted L2 norms ``||f||_W`` of the rows of ``curves``.

        >>> g = midpoint_grid(4)
        >>> float(g.norm(np.ones(4))[0])
        1.0
        """
        x = np.atleast_2d(np.asarray(curves, dtype=np.float64))
        norms: NDArrayFloat = np.sqrt(np.einsum("ik,k,ik->i", x, self.weights, x))
        return norms

    def key(self) -> tuple[object, ...]:
        """A hashable, exact identity of the grid (used to cache eigenbases)."""
        return (self.rule, self.domain_range, self.grid_points.tobytes(), self.weights.tobytes())

    def __hash__(self) -> int:
        return hash(self.key())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Grid) and self.key() == other.key()


def trapezoid_weights(grid_points: ArrayLike) -> NDArrayFloat:
    """Trapezoid-rule weights (MATH.md §1.1), ``sum(w) = t_K - t_1``.

    .. math:: w_1 = (t_2-t_1)/2,\\; w_K = (t_K-t_{K-1})/2,\\; w_k = (t_{k+1}-t_{k-1})/2.

    >>> trapezoid_weights([0.0, 0.5, 1.0]).tolist()
    [0.25, 0.5, 0.25]
    """
    t = _check_nodes(grid_points)
    w = np.empty_like(t)
    w[0] = (t[1] - t[0]) / 2
    w[-1] = (t[-1] - t[-2]) / 2
    w[1:-1] = (t[2:] - t[:-2]) / 2
    return w


def midpoint_grid(size: int, domain_range: tuple[float, float] = (0.0, 1.0)) -> Grid:
    """Equispaced midpoint grid ``t_k = a + (k - 1/2)(b - a)/K`` with ``w_k = (b - a)/K``.

    >>> midpoint_grid(2).grid_points.tolist()
    [0.25, 0.75]
    """
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 2:
        raise DomainError(f"grid size ({size!r}) must be an integer >= 2")
    a, b = _check_domain(domain_range)
    k = np.arange(1, int(size) + 1, dtype=np.float64)
    t = a + (k - 0.5) * (b - a) / size
    w = np.full(int(size), (b - a) / size)
    return Grid(t, w, (a, b), "midpoint")


def grid_from_nodes(grid_points: ArrayLike, domain_range: tuple[float, float] | None = None) -> Grid:
    """A trapezoid-rule grid on given (possibly unequally spaced) nodes.

    >>> grid_from_nodes([0.0, 0.25, 1.0]).weights.tolist()
    [0.125, 0.5, 0.375]
    """
    t = _check_nodes(grid_points)
    dom = (float(t[0]), float(t[-1])) if domain_range is None else _check_domain(domain_range)
    if t[0] < dom[0] or t[-1] > dom[1]:
        raise DomainError(f"grid points must lie in the domain {dom}")
    return Grid(t, trapezoid_weights(t), dom, "trapezoid")


def _check_nodes(grid_points: ArrayLike) -> NDArrayFloat:
    t = np.asarray(grid_points, dtype=np.float64)
    if t.ndim != 1 or t.shape[0] < 2:
        raise DomainError(f"grid points (shape {t.shape}) must be a 1-D array with at least 2 nodes")
    if not np.all(np.isfinite(t)):
        raise DomainError("grid points must be finite")
    if not np.all(np.diff(t) > 0):
        raise DomainError("grid points must be strictly increasing")
    return t


def _check_domain(domain_range: tuple[float, float]) -> tuple[float, float]:
    try:
        a, b = (float(domain_range[0]), float(domain_range[1]))
    except (TypeError, ValueError, IndexError):
        raise DomainError(f"domain_range ({domain_range!r}) must be a pair (a, b)") from None
    if not (np.isfinite(a) and np.isfinite(b) and a < b):
        raise DomainError(f"domain_range ({domain_range!r}) must satisfy a < b, both finite")
    return a, b


def make_grid(
    rule: str, *, size: int | None = None, points: ArrayLike | None = None, domain_range: tuple[float, float] = (0.0, 1.0)
) -> Grid:
    """Build a grid from its config form: ``midpoint`` with ``size``, or ``trapezoid`` with ``points``.

    >>> make_grid("midpoint", size=4).size
    4
    """
    if rule == "midpoint":
        if size is None:
            raise DomainError("grid.size is required for the midpoint rule")
        return midpoint_grid(size, domain_range)
    if rule == "trapezoid":
        if points is None:
            raise DomainError("grid.points is required for the trapezoid rule")
        return grid_from_nodes(points, domain_range)
    raise DomainError(f"grid.rule ({rule!r}) must be 'midpoint' or 'trapezoid'")
