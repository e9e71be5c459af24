"""Estimators of functional summaries, in eigen-coefficients (MATH.md §4).

Estimators return coefficient vectors on the kept eigenbasis; they never add noise.
Their outputs are pre-noise statistics and must never be published or logged.
"""

from __future__ import annotations

import numpy as np

from fdpcore import _validate
from fdpcore._typing import ArrayLike, NDArrayFloat
from fdpcore.sensitivity import _eigenvalues

__all__ = ["iclp_qr_mean_coefficients", "iclp_qr_shrinkage"]


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
