"""Power kernels and the norms used for sensitivity (MATH.md §1.5, §2.3).

Everything is spectral: with the kept eigenpairs ``(lambda_j, phi_j)``, ``j`` in ``J``,
of a kernel on a grid (a 1-D :class:`~fdpcore.basis.eigen.Eigenbasis` or a 2-D
:class:`~fdpcore.basis.tensor.TensorEigenbasis`),

* the power kernel ``C^(s) = Phi_J Lambda_J^s Phi_J^T`` (never the pointwise power ``k(r)^s``);
* ``||h||_{C^s}^2 = sum_j theta_j(h)^2 / lambda_j^s``, the Cameron–Martin norm ``||h||_C`` (s = 1);
* ``||h||_{1,C} = sum_j |theta_j(h)| / sqrt(lambda_j)``;

and all three norms are ``+inf`` when ``h`` has a component outside the kept span (the noise
has zero variance there, MATH.md §1.4). They satisfy
``||h||_C <= ||h||_{1,C} <= ||h||_{C^eta} sqrt(tr C^(eta-1))``.
"""

from __future__ import annotations

import numpy as np

from fdpcore import _validate
from fdpcore._typing import AnyArray, ArrayLike, NDArrayFloat
from fdpcore.basis.eigen import Eigenbasis
from fdpcore.basis.tensor import TensorEigenbasis
from fdpcore.errors import DomainError

__all__ = [
    "DEFAULT_SPAN_RTOL",
    "cameron_martin_norm",
    "one_c_norm",
    "power_kernel",
    "power_norm",
    "power_trace",
]

#: A vector counts as outside the kept span when ``||h - P_J h||_W > span_rtol * ||h||_W``.
DEFAULT_SPAN_RTOL = 1e-8

Basis = Eigenbasis | TensorEigenbasis


def _exponent(s: float) -> float:
    return _validate.finite("s", s)


def _kept_spectrum(basis: Basis) -> tuple[NDArrayFloat, NDArrayFloat]:
    """Kept eigenvalues (flat) and the matching eigenfunctions as columns of a flat-grid matrix."""
    if isinstance(basis, TensorEigenbasis):
        ii, jj = np.nonzero(basis.kept)
        phi1 = basis.first.eigenfunctions[:, ii]  # K1 x |J|
        phi2 = basis.second.eigenfunctions[:, jj]  # K2 x |J|
        phi = (phi1[:, None, :] * phi2[None, :, :]).reshape(basis.grid.size, ii.shape[0])
        return basis.eigenvalues[ii, jj], phi
    if isinstance(basis, Eigenbasis):
        return basis.eigenvalues, basis.eigenfunctions
    raise DomainError("basis must be an Eigenbasis or a TensorEigenbasis")


def _coefficients(h: ArrayLike, basis: Basis, span_rtol: float) -> tuple[NDArrayFloat, NDArrayFloat, AnyArray, bool]:
    """Kept coefficients ``(n, |J|)``, kept eigenvalues, per-row outside-span flags, and whether input was one vector."""
    x = np.asarray(h, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise DomainError("h must contain only finite values")
    if not (0 <= span_rtol < 1):
        raise DomainError(f"span_rtol ({span_rtol!r}) must be in [0, 1)")
    if isinstance(basis, TensorEigenbasis):
        single = x.ndim == 2
        x = x[None] if single else x
        theta = basis.kept_coefficients(x)
        residual = np.atleast_1d(basis.grid.norm(x - basis.from_kept(theta)))
        size = np.atleast_1d(basis.grid.norm(x))
        lam = basis.eigenvalues[basis.kept]
    elif isinstance(basis, Eigenbasis):
        single = x.ndim == 1
        x = x[None] if single else x
        if x.ndim != 2 or x.shape[1] != basis.grid.size:
            raise DomainError(f"h (shape {np.shape(h)}) must have {basis.grid.size} columns (one per grid point)")
        theta = basis.coefficients(x)
        residual = basis.grid.norm(x - basis.reconstruct(theta))
        size = basis.grid.norm(x)
        lam = basis.eigenvalues
    else:
        raise DomainError("basis must be an Eigenbasis or a TensorEigenbasis")
    outside = residual > span_rtol * size
    return theta, lam, outside, single


def _finish(values: NDArrayFloat, outside: AnyArray, single: bool) -> NDArrayFloat | float:
    out = np.where(outside, np.inf, values)
    return float(out[0]) if single else out


def power_kernel(basis: Basis, s: float) -> NDArrayFloat:
    """The power kernel on the grid, computed spectrally (formula ``kernel.power_spectral@1``, MATH.md §1.5, §2.3).

    .. math:: C^{(s)} = \\Phi_{\\mathcal J}\\Lambda_{\\mathcal J}^{s}\\Phi_{\\mathcal J}^\\top,
        \\qquad c_s(t_k,t_l)=\\sum_{j\\in\\mathcal J}\\lambda_j^s\\phi_j(t_k)\\phi_j(t_l).

    This is *not* the pointwise power ``k(r)^s`` and is not stationary on a bounded domain.
    For a tensor basis the result is the ``K1 K2 x K1 K2`` matrix in row-major order (meant for
    small grids). The kernel is that of the basis, i.e. divided by ``basis.trace_scale``.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> from fdpcore.basis.eigen import weighted_eigenbasis
    >>> from fdpcore.basis.kernels import kernel_matrix
    >>> g = midpoint_grid(30)
    >>> b = weighted_eigenbasis({"name": "matern", "nu": 0.5, "rho": 0.3}, g, normalize_trace=False)
    >>> bool(np.max(np.abs(power_kernel(b, 1.0) - kernel_matrix(b.kernel, g.grid_points))) < 1e-12)
    True
    """
    ex = _exponent(s)
    lam, phi = _kept_spectrum(basis)
    return np.asarray((phi * lam**ex) @ phi.T, dtype=np.float64)


def power_trace(basis: Basis, s: float) -> float:
    """``tr(C^s) = sum_{j in J} lambda_j^s`` over the kept set (formula ``kernel.power_trace@1``, MATH.md §1.5, §2.3).

    .. math:: \\mathrm{tr}(C^{s})=\\sum_{j\\in\\mathcal J}\\lambda_j^{s}

    Finite on any grid, but for ``s = eta - 1`` it grows with the grid size unless
    ``eta > 1 + 1/beta`` (MATH.md §2.3).

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> from fdpcore.basis.eigen import weighted_eigenbasis
    >>> b = weighted_eigenbasis({"name": "matern", "nu": 1.5, "rho": 0.1}, midpoint_grid(40))
    >>> round(power_trace(b, 1.0), 10), power_trace(b, 0.0) == b.n_basis
    (1.0, True)
    """
    ex = _exponent(s)
    if isinstance(basis, TensorEigenbasis):
        lam = basis.eigenvalues[basis.kept]
    elif isinstance(basis, Eigenbasis):
        lam = basis.eigenvalues
    else:
        raise DomainError("basis must be an Eigenbasis or a TensorEigenbasis")
    return float(np.sum(lam**ex))


def power_norm(h: ArrayLike, basis: Basis, s: float, *, span_rtol: float = DEFAULT_SPAN_RTOL) -> NDArrayFloat | float:
    """The ``C^s`` norm of a grid vector (formula ``norm.power@1``, MATH.md §1.5).

    .. math:: \\|h\\|_{C^s}^2=\\sum_{j\\in\\mathcal J}\\frac{\\theta_j(h)^2}{\\lambda_j^{s}},
        \\qquad +\\infty\\ \\text{if}\\ \\|h-P_{\\mathcal J}h\\|_W>\\text{span\\_rtol}\\,\\|h\\|_W .

    Args:
        h: one grid vector (``K``) or rows (``n x K``); for a tensor basis one field
            (``K1 x K2``) or a stack (``n x K1 x K2``).
        basis: the kept eigenbasis.
        s: the power (``s = 1``: Cameron–Martin norm; ``s = 0``: the ``W`` norm of ``P_J h``).
        span_rtol: relative tolerance for "outside the kept span" (rounding only).

    Returns:
        A float for one vector, an array for rows.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> from fdpcore.basis.eigen import weighted_eigenbasis
    >>> b = weighted_eigenbasis({"name": "matern", "nu": 1.5, "rho": 0.1}, midpoint_grid(40))
    >>> h = 3.0 * b.eigenfunctions[:, 2]
    >>> bool(np.isclose(power_norm(h, b, 2.0), 3.0 / b.eigenvalues[2]))
    True
    """
    ex = _exponent(s)
    theta, lam, outside, single = _coefficients(h, basis, span_rtol)
    return _finish(np.sqrt(np.sum(theta * theta / lam**ex, axis=-1)), outside, single)


def cameron_martin_norm(h: ArrayLike, basis: Basis, *, span_rtol: float = DEFAULT_SPAN_RTOL) -> NDArrayFloat | float:
    """The Cameron–Martin norm ``||h||_C = ||h||_{C^1}`` (formula ``norm.cameron_martin@1``, MATH.md §1.5).

    .. math:: \\|h\\|_C^2=\\sum_{j\\in\\mathcal J}\\frac{\\theta_j(h)^2}{\\lambda_j}=h^\\top C^{-1}h
        \\quad(C\\ \\text{invertible},\\ C^{-1}=W\\Phi\\Lambda^{-1}\\Phi^\\top W).

    The Mahalanobis form is the one [HRW] uses on function values; the spectral form is
    computed (no matrix inverse) and equals it whenever every eigenpair is kept.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> from fdpcore.basis.eigen import weighted_eigenbasis
    >>> from fdpcore.basis.kernels import kernel_matrix
    >>> g = midpoint_grid(20)
    >>> b = weighted_eigenbasis({"name": "exponential", "rho": 0.5}, g, normalize_trace=False)
    >>> h = np.sin(3 * g.grid_points)
    >>> bool(np.isclose(cameron_martin_norm(h, b) ** 2, h @ np.linalg.solve(kernel_matrix(b.kernel, g.grid_points), h)))
    True
    """
    return power_norm(h, basis, 1.0, span_rtol=span_rtol)


def one_c_norm(h: ArrayLike, basis: Basis, *, span_rtol: float = DEFAULT_SPAN_RTOL) -> NDArrayFloat | float:
    """The ``1,C`` norm, the sensitivity norm of the ICLP mechanism (formula ``norm.one_c@1``, MATH.md §1.5, §3.3).

    .. math:: \\|h\\|_{1,C}=\\sum_{j\\in\\mathcal J}\\frac{|\\theta_j(h)|}{\\sqrt{\\lambda_j}},
        \\qquad +\\infty\\ \\text{if}\\ \\|h-P_{\\mathcal J}h\\|_W>\\text{span\\_rtol}\\,\\|h\\|_W .

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> from fdpcore.basis.eigen import weighted_eigenbasis
    >>> b = weighted_eigenbasis({"name": "matern", "nu": 1.5, "rho": 0.1}, midpoint_grid(40))
    >>> h = b.eigenfunctions[:, 0] - 2.0 * b.eigenfunctions[:, 1]
    >>> lam = b.eigenvalues
    >>> bool(np.isclose(one_c_norm(h, b), 1 / np.sqrt(lam[0]) + 2 / np.sqrt(lam[1])))
    True
    """
    theta, lam, outside, single = _coefficients(h, basis, span_rtol)
    return _finish(np.sum(np.abs(theta) / np.sqrt(lam), axis=-1), outside, single)
