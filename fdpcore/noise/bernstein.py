"""The Bernstein mechanism of [AR] as implemented by R ``diffpriv`` (``DPMechBernstein``), MATH.md §4.5.

The target is evaluated on the lattice ``nu / k``, ``nu in {0..k}^d`` (stored in ``expand.grid``
order: the first coordinate varies fastest), each lattice value receives i.i.d.
``Lap(Delta_1 / epsilon)`` with ``Delta_1`` the l1 sensitivity of the lattice vector, and the
release is the Bernstein polynomial ``sum_nu c~_nu B_nu(x)`` with the noisy coefficients. For the
mean of sup-clipped curves (``|X_i(t)| <= B``) the diffpriv rule ``L Delta_inf`` is exact:
``Delta_1 = 2 B L / n`` with ``L = (k + 1)^d``.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from fdpcore import _validate
from fdpcore._typing import ArrayLike, NDArrayFloat
from fdpcore.errors import DomainError
from fdpcore.noise.iclp import LaplaceCalibration, calibrate_iclp, sample_laplace_whitened

__all__ = [
    "bernstein_basis",
    "bernstein_expected_sq_error",
    "bernstein_interpolation_matrix",
    "bernstein_lattice",
    "bernstein_mechanism",
    "bernstein_sensitivity",
    "clip_sup",
]


def bernstein_lattice(k: int, d: int = 1) -> NDArrayFloat:
    """Lattice points ``nu / k`` (``L x d``) in ``expand.grid`` order (first coordinate fastest).

    >>> bernstein_lattice(1, 2).tolist()
    [[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    """
    k = _validate.positive_int("lattice_k", k)
    d = _validate.positive_int("d", d)
    flat = np.arange((k + 1) ** d)
    # expand.grid order: coordinate i of row r is digit i of r in base k + 1 (first coordinate fastest)
    idx = (flat[:, None] // (k + 1) ** np.arange(d)[None, :]) % (k + 1)
    return idx.astype(np.float64) / k


def bernstein_basis(points: ArrayLike, k: int) -> NDArrayFloat:
    """Tensor Bernstein basis ``B_nu(x) = prod_i C(k, nu_i) x_i^nu_i (1 - x_i)^(k - nu_i)`` (``m x L``).

    ``points`` is ``m x d`` (or a 1-D array of ``m`` points for ``d = 1``) in ``[0, 1]^d``; the
    columns follow :func:`bernstein_lattice`. Computed as binomial probabilities (scipy), so it is
    stable for large ``k``. Each row sums to 1.

    >>> bernstein_basis([0.5], 2).tolist()
    [[0.25, 0.5, 0.25]]
    """
    k = _validate.positive_int("lattice_k", k)
    x = np.asarray(points, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or not np.all(np.isfinite(x)) or np.any(x < 0) or np.any(x > 1):
        raise DomainError("points must be an m x d array of finite values in [0, 1]")
    nu = np.arange(k + 1, dtype=np.float64)
    per_dim = [special.comb(k, nu) * _pow(x[:, [i]], nu) * _pow(1.0 - x[:, [i]], k - nu) for i in range(x.shape[1])]
    out = per_dim[0]
    for b in per_dim[1:]:
        # new coordinate varies slower: column index = nu_1 + (k+1) nu_2 + ...
        out = (b[:, :, None] * out[:, None, :]).reshape(x.shape[0], -1)
    values: NDArrayFloat = out
    return values


def _pow(base: NDArrayFloat, exponent: NDArrayFloat) -> NDArrayFloat:
    # 0 ** 0 = 1, as in the binomial probability mass function
    return np.where(exponent == 0, 1.0, base**exponent)


def bernstein_sensitivity(sup_clip: float, *, k: int, n: int, d: int = 1) -> float:
    """l1 sensitivity bound of the lattice values of the mean (formula ``sensitivity.mean.bernstein.sup_upper@1``).

    .. math:: \\Delta_1 = \\frac{2 B L}{n},\\qquad L = (k + 1)^d

    Under sup-norm clipping ``|X_i(t)| <= B`` each lattice value of the mean moves by at most
    ``2B/n`` (diffpriv's ``Delta_inf``), so ``L Delta_inf`` bounds the l1 change ([UPPER], MATH.md §4.5).
    The constant curves ``X_1 = B``, ``X_1' = -B`` attain it only when they pass the release's L2 clip
    too (:func:`bernstein_sensitivity_attained`); otherwise the bound may be strict.

    >>> bernstein_sensitivity(1.0, k=4, n=10)
    1.0
    """
    b = _validate.positive_finite("sup_clip", sup_clip)
    k = _validate.positive_int("lattice_k", k)
    n = _validate.positive_int("n", n)
    d = _validate.positive_int("d", d)
    return float(2.0 * b * (k + 1) ** d / n)


def bernstein_sensitivity_attained(sup_clip: float, *, tau: float, weights: NDArrayFloat) -> bool:
    """Whether the constant curves ``B`` and ``-B`` pass the L2 clip ``tau``, so ``2BL/n`` is attained.

    .. math:: B\\,\\lVert 1\\rVert_W = B\\sqrt{\\textstyle\\sum_k w_k} \\le \\tau

    (a sufficient condition; when it fails :func:`bernstein_sensitivity` is reported as an upper bound).

    >>> bernstein_sensitivity_attained(1.5, tau=1.0, weights=np.full(4, 0.25))
    False
    >>> bernstein_sensitivity_attained(1.0, tau=1.0, weights=np.full(4, 0.25))
    True
    """
    b = _validate.positive_finite("sup_clip", sup_clip)
    t = _validate.positive_finite("tau", tau)
    return bool(b * float(np.sqrt(np.sum(weights))) <= t)


def bernstein_expected_sq_error(sensitivity: float, epsilon: float, *, k: int, d: int = 1) -> float:
    """``E||f~ - f^B||^2_{L2([0,1]^d)}`` of the Bernstein release (formula ``noise.bernstein.expected_sq_l2@1``).

    .. math:: \\frac{2\\Delta_1^2}{\\epsilon^2}\\sum_{\\nu}\\prod_i\\int_0^1 b_{\\nu_i,k}^2,\\qquad
              \\int_0^1 b_{\\nu,k}^2 = \\binom{k}{\\nu}^2\\frac{(2\\nu)!\\,(2k-2\\nu)!}{(2k+1)!}

    >>> round(bernstein_expected_sq_error(1.0, 1.0, k=1), 6)  # 2 * (1/3 + 1/3)
    1.333333
    """
    s = _validate.positive_finite("sensitivity", sensitivity)
    eps = _validate.positive_finite("epsilon", epsilon)
    k = _validate.positive_int("lattice_k", k)
    d = _validate.positive_int("d", d)
    nu = np.arange(k + 1)
    log_int = (2 * special.gammaln(k + 1) - 2 * special.gammaln(nu + 1) - 2 * special.gammaln(k - nu + 1)
               + special.gammaln(2 * nu + 1) + special.gammaln(2 * k - 2 * nu + 1) - special.gammaln(2 * k + 2))
    one_dim = float(np.exp(log_int).sum())
    return float(2.0 * s * s / (eps * eps) * one_dim**d)


def clip_sup(data_matrix: ArrayLike, sup_clip: float) -> tuple[NDArrayFloat, int]:
    """Record-wise sup-norm clipping ``X_i(t_k) <- max(-B, min(B, X_i(t_k)))`` (formula ``preprocess.clip_sup@1``).

    Returns the clipped matrix and the number of records changed (internal only; never publish it).

    >>> clip_sup([[0.5, -3.0], [0.1, 0.2]], 1.0)[0].tolist()
    [[0.5, -1.0], [0.1, 0.2]]
    """
    x = _validate.finite_matrix("curves", data_matrix)
    b = _validate.positive_finite("sup_clip", sup_clip)
    clipped = np.clip(x, -b, b)
    return clipped, int(np.any(clipped != x, axis=1).sum())


def bernstein_interpolation_matrix(grid_points: ArrayLike, domain_range: tuple[float, float], k: int) -> NDArrayFloat:
    """Linear-interpolation matrix ``R`` (``(k+1) x K``): lattice values ``X R^T`` of grid curves.

    Lattice point ``nu/k`` maps affinely to ``a + (b - a) nu / k`` in the grid domain; the value
    there is linear interpolation between neighbouring nodes (the end value beyond the first/last
    node), record by record. Each row of ``R`` is a convex combination, so ``|X| <= B`` on the grid
    implies ``|X R^T| <= B`` on the lattice.

    >>> bernstein_interpolation_matrix([0.0, 1.0], (0.0, 1.0), 2).tolist()
    [[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]]
    """
    t = np.asarray(grid_points, dtype=np.float64)
    k = _validate.positive_int("lattice_k", k)
    a, b = domain_range
    q = a + (b - a) * np.arange(k + 1) / k
    eye = np.eye(t.shape[0])
    # column j of R^T is the interpolant of the j-th unit vector (a public matrix, K small)
    return np.stack([np.interp(q, t, eye[j]) for j in range(t.shape[0])], axis=1)


def bernstein_mechanism(
    lattice_values: ArrayLike,
    points: ArrayLike,
    *,
    k: int,
    sensitivity: float,
    epsilon: float,
    draws: int = 1,
    secure: bool = True,
    rng: np.random.Generator | None = None,
) -> NDArrayFloat:
    """Diffpriv's ``DPMechBernstein`` release: noisy lattice values, evaluated at ``points`` (``draws x m``).

    ``lattice_values`` is the target on :func:`bernstein_lattice` (``L`` values, ``expand.grid``
    order); each gets ``Lap(sensitivity / epsilon)`` where ``sensitivity`` is the l1 sensitivity of
    that vector (diffpriv's ``L * Delta_inf``); the output is ``sum_nu c~_nu B_nu(x)``.

    Privacy assumptions: ``sensitivity`` bounds the l1 change of ``lattice_values`` between
    neighbours; ``k`` and ``points`` are public.

    >>> out = bernstein_mechanism(np.zeros(9), [[0.5, 0.5]], k=2, sensitivity=1.0, epsilon=1.0,
    ...                           secure=False, rng=np.random.default_rng(0))
    >>> out.shape
    (1, 1)
    """
    c = np.asarray(lattice_values, dtype=np.float64)
    basis = bernstein_basis(points, k)
    if c.ndim != 1 or c.shape[0] != basis.shape[1]:
        raise DomainError(f"lattice_values (shape {c.shape}) must have (k + 1)^d = {basis.shape[1]} entries")
    cal: LaplaceCalibration = calibrate_iclp(sensitivity, epsilon, n_basis=c.shape[0], secure=secure)
    noisy = sample_laplace_whitened(c, cal, draws=draws, rng=rng)
    return noisy @ basis.T
