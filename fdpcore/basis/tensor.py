"""2-D tensor grids, separable kernels and their Kronecker eigenbasis (MATH.md §1.1, §1.6).

A field on the tensor grid ``T1 x T2`` is a ``K1 x K2`` array ``F``; flattened row-major
(index ``a K2 + b``) its weight matrix is ``W = W1 (x) W2``. For a separable kernel
``c((s, u), (s', u')) = c1(s, s') c2(u, u')`` the symmetrised operator is
``S = S1 (x) S2``, so its eigenpairs are products of the 1-D weighted eigenpairs:
``lambda_ij = lambda_i lambda_j`` and ``phi_ij(s_a, u_b) = phi_i(s_a) phi_j(u_b)``.
Nothing here ever forms or decomposes the ``K1 K2 x K1 K2`` matrix: the cost is that of the
two 1-D eigendecompositions, ``O(K1^3 + K2^3)``, and both are cached by
:func:`fdpcore.basis.eigen.weighted_eigenbasis`.

Separable kernels (MATH.md §1.6): the Gaussian kernel with Euclidean distance
(= Gaussian x Gaussian with the same length scale), the exponential kernel with l1
distance ``exp(-||x - y||_1 / rho)`` (= exponential x exponential), and products of 1-D
Matérn kernels. The isotropic Matérn kernel with finite ``nu`` is *not* separable and is
not represented here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from fdpcore._typing import AnyArray, ArrayLike, NDArrayFloat
from fdpcore.basis.eigen import DEFAULT_RTOL, Eigenbasis, weighted_eigenbasis
from fdpcore.basis.grids import Grid
from fdpcore.basis.kernels import KernelSpec, kernel_matrix, kernel_spec
from fdpcore.errors import DomainError
from fdpcore.noise.iclp import LaplaceCalibration, sample_iclp_coefficients

__all__ = [
    "SeparableKernel",
    "TensorEigenbasis",
    "TensorGrid",
    "sample_iclp_field",
    "separable_kernel",
    "separable_kernel_matrix",
    "tensor_eigenbasis",
    "tensor_grid",
]


@dataclass(frozen=True, eq=False)
class TensorGrid:
    """A public 2-D tensor grid ``T1 x T2`` with product weights ``w_ab = w1_a w2_b`` (MATH.md §1.1).

    Attributes:
        first: the 1-D grid of the first (row) coordinate, ``K1`` nodes.
        second: the 1-D grid of the second (column) coordinate, ``K2`` nodes.
    """

    first: Grid
    second: Grid

    @property
    def shape(self) -> tuple[int, int]:
        """``(K1, K2)``: the shape of a field on this grid."""
        return (self.first.size, self.second.size)

    @property
    def size(self) -> int:
        """Number of nodes ``K1 K2``."""
        return self.first.size * self.second.size

    @property
    def weights(self) -> NDArrayFloat:
        """The ``K1 x K2`` array of product weights ``w1_a w2_b``."""
        return np.outer(self.first.weights, self.second.weights)

    @property
    def flat_weights(self) -> NDArrayFloat:
        """The diagonal of ``W = W1 (x) W2`` in row-major order (``np.kron(w1, w2)``)."""
        return np.asarray(np.kron(self.first.weights, self.second.weights), dtype=np.float64)

    @property
    def grid_points(self) -> NDArrayFloat:
        """The ``K1 K2 x 2`` array of nodes ``(s_a, u_b)`` in row-major order."""
        s, u = np.meshgrid(self.first.grid_points, self.second.grid_points, indexing="ij")
        return np.column_stack([s.ravel(), u.ravel()])

    def flatten(self, fields: ArrayLike) -> NDArrayFloat:
        """Row-major flattening ``(..., K1, K2) -> (..., K1 K2)``."""
        f = self._check(fields)
        return f.reshape(*f.shape[:-2], self.size)

    def unflatten(self, values: ArrayLike) -> NDArrayFloat:
        """Inverse of :meth:`flatten`: ``(..., K1 K2) -> (..., K1, K2)``."""
        v = np.asarray(values, dtype=np.float64)
        if v.ndim < 1 or v.shape[-1] != self.size:
            raise DomainError(f"values (shape {v.shape}) must have last axis of length {self.size}")
        return v.reshape(*v.shape[:-1], *self.shape)

    def inner(self, f: ArrayLike, g: ArrayLike) -> NDArrayFloat | float:
        """``<F, G>_W = tr(F^T W1 G W2) = sum_ab w1_a w2_b F_ab G_ab`` (MATH.md §1.6).

        >>> from fdpcore.basis.grids import midpoint_grid
        >>> tg = tensor_grid(midpoint_grid(4), midpoint_grid(5))
        >>> round(float(tg.inner(np.ones((4, 5)), np.ones((4, 5)))), 12)
        1.0
        """
        a, b = self._check(f), self._check(g)
        out = np.einsum("...ab,a,b,...ab->...", a, self.first.weights, self.second.weights, b)
        return float(out) if np.ndim(out) == 0 else np.asarray(out, dtype=np.float64)

    def norm(self, fields: ArrayLike) -> NDArrayFloat | float:
        """Weighted L2 norm ``||F||_W`` of one field (float) or a stack of fields (array)."""
        return np.sqrt(self.inner(fields, fields))

    def _check(self, fields: ArrayLike) -> NDArrayFloat:
        f = np.asarray(fields, dtype=np.float64)
        if f.ndim < 2 or f.shape[-2:] != self.shape:
            raise DomainError(f"fields (shape {f.shape}) must end in the grid shape {self.shape}")
        return f

    def __hash__(self) -> int:
        return hash((self.first, self.second))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorGrid) and self.first == other.first and self.second == other.second


def tensor_grid(first: Grid, second: Grid) -> TensorGrid:
    """The tensor product of two public 1-D grids.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> tensor_grid(midpoint_grid(3), midpoint_grid(2)).grid_points[:2].tolist()
    [[0.16666666666666666, 0.25], [0.16666666666666666, 0.75]]
    """
    if not isinstance(first, Grid) or not isinstance(second, Grid):
        raise DomainError("first and second must be fdpcore.basis.grids.Grid objects")
    return TensorGrid(first, second)


@dataclass(frozen=True)
class SeparableKernel:
    """A product kernel ``c1(s, s') c2(u, u')`` of two validated 1-D kernels (MATH.md §1.6)."""

    first: KernelSpec
    second: KernelSpec

    def as_dict(self) -> dict[str, object]:
        """The mapping form used in configs and manifests."""
        return {"name": "separable", "factors": [self.first.as_dict(), self.second.as_dict()]}


def separable_kernel(
    kernel: Mapping[str, object] | KernelSpec | SeparableKernel | Sequence[Mapping[str, object] | KernelSpec],
) -> SeparableKernel:
    """Validate a separable 2-D kernel.

    Accepted forms: ``{"name": "separable", "factors": [k1, k2]}``; a pair ``(k1, k2)`` of
    1-D kernel mappings; or one 1-D kernel mapping, used on both axes. With one mapping,
    ``gaussian`` is the Gaussian kernel with Euclidean distance and ``exponential`` is the
    exponential kernel with l1 distance; ``matern`` is the *product* Matérn kernel (not the
    isotropic one, which is not separable).

    Raises:
        DomainError: a factor is not a valid 1-D kernel, or the mapping is malformed.

    >>> separable_kernel({"name": "gaussian", "length_scale": 0.2}).second.name
    'gaussian'
    >>> separable_kernel({"name": "separable", "factors": [
    ...     {"name": "matern", "nu": 1.5, "rho": 0.1}, {"name": "exponential", "rho": 0.3}]}).second.name
    'exponential'
    """
    if isinstance(kernel, SeparableKernel):
        return kernel
    if isinstance(kernel, KernelSpec):
        return SeparableKernel(kernel, kernel)
    if isinstance(kernel, Mapping):
        if str(kernel.get("name", "")).lower() == "separable":
            extra = set(kernel) - {"name", "factors"}
            if extra:
                raise DomainError(f"kernel ({sorted(extra)}) must have only 'name' and 'factors'")
            factors = kernel.get("factors")
            if not isinstance(factors, Sequence) or isinstance(factors, str) or len(factors) != 2:
                raise DomainError("kernel.factors must be a list of two 1-D kernel mappings")
            return SeparableKernel(kernel_spec(factors[0]), kernel_spec(factors[1]))
        spec = kernel_spec(kernel)
        return SeparableKernel(spec, spec)
    if isinstance(kernel, Sequence) and not isinstance(kernel, str) and len(kernel) == 2:
        return SeparableKernel(kernel_spec(kernel[0]), kernel_spec(kernel[1]))
    raise DomainError(f"kernel ({kernel!r}) must be a kernel mapping or a pair of 1-D kernel mappings")


def separable_kernel_matrix(kernel: SeparableKernel | Mapping[str, object], x: ArrayLike, y: ArrayLike | None = None) -> NDArrayFloat:
    """The matrix ``[c1(x_a1, y_b1) c2(x_a2, y_b2)]`` between 2-D point sets (rows are points).

    >>> k = separable_kernel({"name": "exponential", "rho": 1.0})
    >>> round(float(separable_kernel_matrix(k, [[0.0, 0.0]], [[1.0, 2.0]])[0, 0]), 6)  # exp(-|1| - |2|)
    0.049787
    """
    k = separable_kernel(kernel)
    xa = _points2d("x", x)
    ya = xa if y is None else _points2d("y", y)
    return kernel_matrix(k.first, xa[:, 0], ya[:, 0]) * kernel_matrix(k.second, xa[:, 1], ya[:, 1])


def _points2d(name: str, x: ArrayLike) -> NDArrayFloat:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] != 2:
        raise DomainError(f"{name} (shape {a.shape}) must be an m x 2 array of points")
    if not np.all(np.isfinite(a)):
        raise DomainError(f"{name} must contain only finite values")
    return a


@dataclass(frozen=True, eq=False)
class TensorEigenbasis:
    """Eigenpairs of a separable kernel on a tensor grid, kept in factored form (MATH.md §1.6).

    Attributes:
        first: weighted eigenbasis of ``c1`` on the first grid (``J1`` pairs).
        second: weighted eigenbasis of ``c2`` on the second grid (``J2`` pairs).
        grid: the tensor grid.
        kernel: the separable kernel.
        eigenvalues: ``J1 x J2`` array ``lambda_i lambda_j``, set to 0 outside the kept set.
        kept: ``J1 x J2`` boolean mask of the kept products ``lambda_i lambda_j > rtol * lambda_11``.
        rtol: the relative eigenvalue floor of MATH.md §1.4, applied to the products.
    """

    first: Eigenbasis
    second: Eigenbasis
    grid: TensorGrid
    kernel: SeparableKernel
    eigenvalues: NDArrayFloat
    kept: AnyArray
    rtol: float

    @property
    def n_basis(self) -> int:
        """Number of kept product eigenpairs ``|J|``."""
        return int(self.kept.sum())

    @property
    def trace(self) -> float:
        """``sum_ij lambda_i lambda_j`` over the kept set."""
        return float(self.eigenvalues.sum())

    @property
    def trace_scale(self) -> float:
        """The factor the product kernel was divided by (1 if not normalised)."""
        return self.first.trace_scale * self.second.trace_scale

    def coefficients(self, fields: ArrayLike) -> NDArrayFloat:
        """``Theta = Phi1^T W1 F W2 Phi2`` for one field or a stack ``(..., K1, K2)`` (MATH.md §1.6).

        Returns the full ``J1 x J2`` array; entries outside :attr:`kept` are not zeroed
        (use :meth:`project` for the data-independent projection of §1.4).

        >>> from fdpcore.basis.grids import midpoint_grid
        >>> tb = tensor_eigenbasis({"name": "gaussian", "length_scale": 0.3}, tensor_grid(midpoint_grid(6), midpoint_grid(5)))
        >>> f = tb.eigenfunction(1, 2)
        >>> th = tb.coefficients(f)
        >>> bool(abs(th[1, 2] - 1) < 1e-10 and abs(th).sum() - 1 < 1e-9)
        True
        """
        f = self.grid._check(fields)
        left = self.first.eigenfunctions.T * self.first.grid.weights  # J1 x K1
        right = self.second.grid.weights[:, None] * self.second.eigenfunctions  # K2 x J2
        return np.asarray(left @ f @ right, dtype=np.float64)

    def reconstruct(self, coefficients: ArrayLike) -> NDArrayFloat:
        """``F = Phi1 Theta Phi2^T`` for one ``J1 x J2`` array or a stack of them."""
        th = np.asarray(coefficients, dtype=np.float64)
        shape = (self.first.n_basis, self.second.n_basis)
        if th.ndim < 2 or th.shape[-2:] != shape:
            raise DomainError(f"coefficients (shape {th.shape}) must end in {shape}")
        return np.asarray(self.first.eigenfunctions @ th @ self.second.eigenfunctions.T, dtype=np.float64)

    def project(self, fields: ArrayLike) -> NDArrayFloat:
        """The data-independent projection ``P_J`` onto the span of the kept products (MATH.md §1.4)."""
        return self.reconstruct(self.coefficients(fields) * self.kept)

    def eigenfunction(self, i: int, j: int) -> NDArrayFloat:
        """``phi_ij(s_a, u_b) = phi_i(s_a) phi_j(u_b)`` as a ``K1 x K2`` field."""
        return np.outer(self.first.eigenfunctions[:, i], self.second.eigenfunctions[:, j])

    def sorted_eigenvalues(self) -> tuple[NDArrayFloat, NDArrayFloat]:
        """Kept product eigenvalues in decreasing order and their ``(i, j)`` indices (``|J| x 2``).

        Sorting is done only here, for callers that need an ordering (FRL truncation,
        effective decay rate).
        """
        ii, jj = np.nonzero(self.kept)
        vals = self.eigenvalues[ii, jj]
        order = np.argsort(-vals, kind="stable")
        return vals[order], np.column_stack([ii[order], jj[order]]).astype(np.int64)

    def kept_coefficients(self, fields: ArrayLike) -> NDArrayFloat:
        """Coefficients on the kept set, flattened row-major over the mask (``(..., |J|)``)."""
        return self.coefficients(fields)[..., self.kept]

    def from_kept(self, values: ArrayLike) -> NDArrayFloat:
        """Inverse of :meth:`kept_coefficients`: fields from ``(..., |J|)`` kept coefficients."""
        v = np.asarray(values, dtype=np.float64)
        if v.ndim < 1 or v.shape[-1] != self.n_basis:
            raise DomainError(f"values (shape {v.shape}) must have last axis of length {self.n_basis}")
        th = np.zeros((*v.shape[:-1], *self.kept.shape))
        th[..., self.kept] = v
        return self.reconstruct(th)


def tensor_eigenbasis(
    kernel: Mapping[str, object] | KernelSpec | SeparableKernel | Sequence[Mapping[str, object] | KernelSpec],
    grid: TensorGrid,
    *,
    normalize_trace: bool = True,
    rtol: float = DEFAULT_RTOL,
) -> TensorEigenbasis:
    """Weighted eigenbasis of a separable kernel on a tensor grid (formula ``eigen.tensor_kron@1``).

    .. math::
        S = S_1\\otimes S_2,\\quad \\lambda_{ij}=\\lambda^{(1)}_i\\lambda^{(2)}_j,\\quad
        \\phi_{ij}(s_a,u_b)=\\phi^{(1)}_i(s_a)\\,\\phi^{(2)}_j(u_b),\\quad
        \\mathcal J=\\{(i,j):\\lambda_{ij}>r_{\\rm tol}\\lambda_{11}\\}.

    The two factor bases come from :func:`fdpcore.basis.eigen.weighted_eigenbasis` (cached) with
    the same ``rtol``; a factor eigenvalue it drops would also give products below the
    product floor, so nothing in :math:`\\mathcal J` is lost. Trace normalisation
    (MATH.md §2.4) of the product kernel equals normalising each factor, because
    ``sum_ab w1_a w2_b c1(s_a, s_a) c2(u_b, u_b) = tr1 * tr2``.

    Args:
        kernel: a separable kernel (see :func:`separable_kernel`).
        grid: the public tensor grid.
        normalize_trace: divide the product kernel by its weighted trace so ``sum lambda = 1``.
        rtol: relative eigenvalue floor (MATH.md §1.4), applied to the products.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> tb = tensor_eigenbasis({"name": "exponential", "rho": 0.5}, tensor_grid(midpoint_grid(12), midpoint_grid(9)))
    >>> tb.eigenvalues.shape, round(tb.trace, 10)
    ((12, 9), 1.0)
    """
    k = separable_kernel(kernel)
    if not isinstance(grid, TensorGrid):
        raise DomainError("grid must be a TensorGrid (see tensor_grid)")
    if not (0 < rtol < 1):
        raise DomainError(f"rtol ({rtol!r}) must be in (0, 1)")
    b1 = weighted_eigenbasis(k.first, grid.first, normalize_trace=normalize_trace, rtol=rtol)
    b2 = weighted_eigenbasis(k.second, grid.second, normalize_trace=normalize_trace, rtol=rtol)
    lam = np.outer(b1.eigenvalues, b2.eigenvalues)
    kept = lam > rtol * lam[0, 0]
    lam = np.where(kept, lam, 0.0)
    lam.setflags(write=False)
    kept.setflags(write=False)
    return TensorEigenbasis(b1, b2, grid, k, lam, kept, float(rtol))


def sample_iclp_field(
    field: ArrayLike,
    basis: TensorEigenbasis,
    calibration: LaplaceCalibration,
    *,
    draws: int = 1,
    rng: np.random.Generator | None = None,
) -> NDArrayFloat:
    """Release a 2-D field with ICLP noise on the kept product eigenbasis (MATH.md §3.3-3.4, §1.6).

    The field is first projected onto the kept span (data-independent, §1.4); its kept
    coefficients ``Theta_ij`` then receive ``Lap(scale sqrt(lambda_i lambda_j))`` through
    :func:`fdpcore.noise.iclp.sample_iclp_coefficients` (OpenDP when ``calibration.secure``),
    and the fields are rebuilt as ``Phi1 Theta Phi2^T``. Returns ``draws x K1 x K2``; each
    draw is a separate ``epsilon``-DP release.

    Privacy assumptions: ``field`` is a summary whose ``1,C``-norm sensitivity (over the kept
    product set) is at most ``calibration.sensitivity``; kernel and grid are public.
    Build the calibration with ``calibrate_iclp(Delta, epsilon, n_basis=basis.n_basis)``.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> from fdpcore.noise.iclp import calibrate_iclp
    >>> tb = tensor_eigenbasis({"name": "gaussian", "length_scale": 0.3}, tensor_grid(midpoint_grid(8), midpoint_grid(6)))
    >>> cal = calibrate_iclp(0.1, 1.0, n_basis=tb.n_basis, secure=False)
    >>> sample_iclp_field(np.zeros((8, 6)), tb, cal, draws=2, rng=np.random.default_rng(0)).shape
    (2, 8, 6)
    """
    f = basis.grid._check(field)
    if f.ndim != 2:
        raise DomainError(f"field (shape {f.shape}) must be one K1 x K2 array")
    if not np.all(np.isfinite(f)):
        raise DomainError("field must contain only finite values")
    theta = basis.kept_coefficients(f)
    lam = basis.eigenvalues[basis.kept]
    noisy = sample_iclp_coefficients(theta, lam, calibration, draws=draws, rng=rng)
    return basis.from_kept(noisy)
