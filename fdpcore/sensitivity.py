"""Sensitivities of the mean-function summaries (MATH.md §4, table §4.6).

Each function computes exactly one formula, registered under the formula id in
its docstring (see :mod:`fdpcore.formulas`). Every bound assumes replace-one
adjacency with public ``n`` and record-wise clipping ``||X_i||_W <= tau``.
"""

from __future__ import annotations

import numpy as np

from fdpcore import _validate
from fdpcore._typing import ArrayLike, NDArrayFloat
from fdpcore.errors import DomainError

__all__ = ["iclp_qr_paper_sensitivity", "iclp_qr_sensitivity", "iclp_qr_weights"]


def iclp_qr_weights(eigenvalues: ArrayLike, eta: float, psi: float) -> NDArrayFloat:
    """The ICLP-QR weights ``a_j = lambda_j^(eta - 1/2) / (lambda_j^eta + psi)`` (MATH.md §0.3, §4.3).

    >>> iclp_qr_weights([1.0], 1.0, 1.0).tolist()
    [0.5]
    """
    lam = _eigenvalues(eigenvalues)
    eta = _validate.positive_finite("eta", eta)
    psi = _validate.positive_finite("psi", psi)
    return lam ** (eta - 0.5) / (lam**eta + psi)


def iclp_qr_sensitivity(eigenvalues: ArrayLike, *, eta: float, psi: float, tau: float, n: int) -> float:
    """Exact ``1,C``-norm sensitivity of the ICLP-QR mean (formula ``sensitivity.mean.iclp_qr.exact_l2@1``).

    .. math:: \\Delta_{QR} = \\frac{2\\tau}{n}\\Big(\\sum_{j\\in\\mathcal J}
              \\frac{\\lambda_j^{2\\eta-1}}{(\\lambda_j^\\eta+\\psi)^2}\\Big)^{1/2} = \\frac{2\\tau}{n}\\lVert a\\rVert_2

    Attained by ``X_1 = tau u``, ``X_1' = -tau u`` with ``u = sum_j (a_j/||a||_2) phi_j``
    (MATH.md §4.3, [EXACT]).

    Privacy assumptions: the grid, kernel, ``eta``, ``psi``, ``tau`` and ``n`` are public;
    every record is clipped to ``||X_i||_W <= tau``; adjacency is replace-one.

    >>> round(iclp_qr_sensitivity([1.0, 0.25], eta=1.0, psi=1.0, tau=1.0, n=2), 6)
    0.640312
    """
    tau = _validate.positive_finite("tau", tau)
    n = _validate.positive_int("n", n)
    a = iclp_qr_weights(eigenvalues, eta, psi)
    return float(2.0 * tau / n * np.sqrt(np.sum(a * a)))


def iclp_qr_paper_sensitivity(eigenvalues: ArrayLike, *, eta: float, psi: float, tau: float, n: int) -> float:
    """The paper's bound ``(2 tau / n) ||a||_1`` ([ICLP-v2] Thm 6.3; formula ``sensitivity.mean.iclp_qr.paper_l1@1``).

    Valid but loose; recorded next to the exact value so auditors see the tightening.

    >>> round(iclp_qr_paper_sensitivity([1.0, 0.25], eta=1.0, psi=1.0, tau=1.0, n=2), 6)
    0.9
    """
    tau = _validate.positive_finite("tau", tau)
    n = _validate.positive_int("n", n)
    a = iclp_qr_weights(eigenvalues, eta, psi)
    return float(2.0 * tau / n * np.sum(a))


def _eigenvalues(eigenvalues: ArrayLike) -> NDArrayFloat:
    lam = np.asarray(eigenvalues, dtype=np.float64)
    if lam.ndim != 1 or lam.shape[0] == 0 or not np.all(np.isfinite(lam)) or np.any(lam <= 0):
        raise DomainError("eigenvalues must be a non-empty 1-D array of finite positive numbers (the kept set J)")
    return lam
