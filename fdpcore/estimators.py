"""Estimators of functional summaries, in eigen-coefficients (MATH.md §4).

Estimators return coefficient vectors on the kept eigenbasis; they never add noise.
Their outputs are pre-noise statistics and must never be published or logged.
"""

from __future__ import annotations

import numpy as np

from fdpcore import _validate
from fdpcore._typing import ArrayLike, NDArrayFloat
from fdpcore.errors import DomainError
from fdpcore.sensitivity import _eigenvalues, iclp_ar_thresholds

__all__ = ["frl_mean_coefficients", "iclp_ar_mean_coefficients", "iclp_qr_mean_coefficients", "iclp_qr_shrinkage"]


def iclp_qr_shrinkage(eigenvalues: ArrayLike, eta: float, psi: float) -> NDArrayFloat:
    """Shrinkage factors ``s_j = lambda_j^eta / (lambda_j^eta + psi)`` of ICLP-QR (MATH.md §4.3).

    >>> iclp_qr_shrinkage([1.0, 0.25], 1.0, 0.25).tolist()
    [0.8, 0.5]
    """
    lam = _eigenvalues(eigenvalues)
    eta = _validate.positive_finite("eta", eta)
    psi = _validate.positive_finite("psi", psi)
    return lam**eta / (lam**eta + psi)


def iclp_qr_mean_coefficients(
    mean_coefficients: ArrayLike, eigenvalues: ArrayLike, *, eta: float, psi: float
) -> NDArrayFloat:
    """ICLP-QR mean estimator (formula ``estimator.mean.iclp_qr@1``, MATH.md §4.3).

    Minimises ``(1/n) sum_i ||X_i - theta||_W^2 + psi ||theta||_{C^eta}^2``:

    .. math:: \\theta_j(\\hat\\mu^{QR}) = \\frac{\\lambda_j^\\eta}{\\lambda_j^\\eta+\\psi}\\,\\bar x_j

    Args:
        mean_coefficients: ``xbar_j = theta_j(Xbar)`` on the kept set (projection included).
        eigenvalues: ``lambda_j`` on the kept set.

    >>> iclp_qr_mean_coefficients([1.0, 1.0], [1.0, 0.25], eta=1.0, psi=0.25).tolist()
    [0.8, 0.5]
    """
    return iclp_qr_shrinkage(eigenvalues, eta, psi) * np.asarray(mean_coefficients, dtype=np.float64)


def frl_mean_coefficients(mean_coefficients: ArrayLike, n_basis: int) -> NDArrayFloat:
    """FRL estimator: the first ``M`` eigen-coefficients of the mean (formula ``estimator.mean.frl@1``, MATH.md §4.1).

    .. math:: v = (\\bar x_1, \\dots, \\bar x_M),\\qquad \\hat\\mu^{FRL} = \\sum_{j\\le M} \\bar x_j\\phi_j

    >>> frl_mean_coefficients([0.5, -0.2, 0.1], 2).tolist()
    [0.5, -0.2]
    """
    x = np.asarray(mean_coefficients, dtype=np.float64)
    m = _validate.positive_int("n_basis", n_basis)
    if m > x.shape[-1]:
        raise DomainError(f"n_basis ({m}) must be <= the number of kept eigenpairs ({x.shape[-1]})")
    return x[..., :m].copy()


def iclp_ar_mean_coefficients(
    mean_coefficients: ArrayLike, eigenvalues: ArrayLike, *, eta: float, psi: float
) -> NDArrayFloat:
    """ICLP-AR estimator: soft thresholding (formula ``estimator.mean.iclp_ar@1``, MATH.md §4.2).

    Minimises ``(1/n) sum_i ||X_i - theta||_W^2 + psi ||theta||_{1,C^eta}``:

    .. math:: \\theta_j(\\hat\\mu^{AR}) = \\mathrm{sgn}(\\bar x_j)\\,(|\\bar x_j| - t_j)_+,
              \\qquad t_j = \\frac{\\psi}{2\\lambda_j^{\\eta/2}}

    >>> iclp_ar_mean_coefficients([0.5, -0.5], [1.0, 0.25], eta=2.0, psi=0.5).tolist()
    [0.25, -0.0]
    """
    t = iclp_ar_thresholds(eigenvalues, eta, psi)
    x = np.asarray(mean_coefficients, dtype=np.float64)
    return np.sign(x) * np.maximum(np.abs(x) - t, 0.0)
