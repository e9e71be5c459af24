"""Sensitivities of the mean-function summaries (MATH.md §4, table §4.6).

Each function computes exactly one formula, registered under the formula id in
its docstring (see :mod:`fdpcore.formulas`). Every bound assumes replace-one
adjacency with public ``n`` and record-wise clipping ``||X_i||_W <= tau``.
"""

from __future__ import annotations

import numpy as np

from fdpcore import _validate
from fdpcore._typing import ArrayLike, NDArrayFloat
from fdpcore.errors import DomainError, PrivacyParameterError

__all__ = [
    "frl_paper_sensitivity",
    "frl_sensitivity",
    "gp_cm_paper_sensitivity",
    "gp_cm_sensitivity",
    "gp_cm_spectrum_free_bound",
    "iclp_ar_active_set",
    "iclp_ar_attaining_pair",
    "iclp_ar_paper_sensitivity",
    "iclp_ar_sensitivity",
    "iclp_ar_thresholds",
    "iclp_qr_paper_sensitivity",
    "iclp_qr_sensitivity",
    "iclp_qr_weights",
]


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


def frl_sensitivity(n_basis: int, *, tau: float, n: int) -> float:
    """Exact l1 sensitivity of the FRL coefficient vector (formula ``sensitivity.mean.frl.exact@1``, MATH.md §4.1).

    .. math:: \\Delta_1 = \\frac{2\\tau\\sqrt M}{n}

    Attained by ``X_1 = d/2``, ``X_1' = -d/2`` with ``d_j = 2 tau / sqrt(M)`` on the first ``M``
    coefficients ([EXACT]).

    Privacy assumptions: ``M``, ``tau``, ``n`` public; records clipped to ``||X_i||_W <= tau``.

    >>> round(frl_sensitivity(10, tau=1.0, n=100), 4)
    0.0632
    """
    m = _validate.positive_int("n_basis", n_basis)
    tau = _validate.positive_finite("tau", tau)
    n = _validate.positive_int("n", n)
    return float(2.0 * tau * np.sqrt(m) / n)


def frl_paper_sensitivity(n_basis: int, *, tau: float, n: int) -> float:
    """The paper's FRL bound ``2 M tau / n`` ([ICLP-v2] Thm 6.1; formula ``sensitivity.mean.frl.paper@1``).

    >>> frl_paper_sensitivity(10, tau=1.0, n=100)
    0.2
    """
    m = _validate.positive_int("n_basis", n_basis)
    tau = _validate.positive_finite("tau", tau)
    n = _validate.positive_int("n", n)
    return float(2.0 * m * tau / n)


def iclp_ar_thresholds(eigenvalues: ArrayLike, eta: float, psi: float) -> NDArrayFloat:
    """Soft thresholds ``t_j = psi / (2 lambda_j^(eta/2))`` of ICLP-AR (MATH.md §4.2, corrected).

    >>> iclp_ar_thresholds([1.0, 0.25], 2.0, 0.5).tolist()
    [0.25, 1.0]
    """
    lam = _eigenvalues(eigenvalues)
    eta = _validate.positive_finite("eta", eta)
    psi = _validate.positive_finite("psi", psi)
    return psi / (2.0 * lam ** (eta / 2.0))


def iclp_ar_active_set(eigenvalues: ArrayLike, *, eta: float, psi: float, tau: float) -> int:
    """Size ``J*`` of the data-independent active set ``A = {j : t_j < tau} = {1..J*}`` (MATH.md §4.2).

    Outside ``A`` every soft-thresholded coefficient is exactly 0 because ``|xbar_j| <= tau``.

    >>> iclp_ar_active_set([1.0, 0.25, 0.01], eta=2.0, psi=0.5, tau=0.9)
    1
    """
    tau = _validate.positive_finite("tau", tau)
    return int(np.sum(iclp_ar_thresholds(eigenvalues, eta, psi) < tau))


def iclp_ar_sensitivity(eigenvalues: ArrayLike, *, eta: float, psi: float, tau: float, n: int) -> float:
    """Tightest valid 1,C-norm bound for ICLP-AR (formula ``sensitivity.mean.iclp_ar.l2@1``, MATH.md §4.2).

    .. math:: \\Delta_{AR} = \\frac{2\\tau}{n}\\Big(\\sum_{j\\in\\mathcal A}\\lambda_j^{-1}\\Big)^{1/2}

    Soft thresholding is 1-Lipschitz and the Lemma of §4 applies with weights ``lambda_j^(-1/2)``
    on ``A``. [UPPER]; [EXACT] when :func:`iclp_ar_attaining_pair` finds the feasibility condition
    met. It is never larger than the corrected l1 form ``(2tau/n) sum_A lambda_j^(-1/2)`` nor than
    the paper's bound when that one is valid, so it is the smallest valid bound of §4.2.

    >>> round(iclp_ar_sensitivity([1.0, 0.25, 0.01], eta=2.0, psi=0.5, tau=0.9, n=10), 6)
    0.18
    """
    lam = _eigenvalues(eigenvalues)
    n = _validate.positive_int("n", n)
    j_star = iclp_ar_active_set(lam, eta=eta, psi=psi, tau=tau)
    if j_star == 0:
        raise PrivacyParameterError(
            f"psi ({psi!r}) must leave at least one active ICLP-AR coefficient (t_1 < tau); lower psi"
        )
    return float(2.0 * tau / n * np.sqrt(np.sum(1.0 / lam[:j_star])))


def iclp_ar_paper_sensitivity(eigenvalues: ArrayLike, *, eta: float, psi: float, tau: float, n: int) -> float:
    """The paper's ICLP-AR bound ``(2tau/n) sum_{j<=J*} lambda_j^(-eta/2)`` (formula ``sensitivity.mean.iclp_ar.paper@1``).

    [ICLP-v2] Thm 6.2, read with the corrected ``J*``. It is valid only when ``lambda_j <= 1`` on
    the active set (true after trace normalisation); it is recorded, never used for noise.

    >>> round(iclp_ar_paper_sensitivity([1.0, 0.25, 0.01], eta=2.0, psi=0.5, tau=0.9, n=10), 6)
    0.18
    """
    lam = _eigenvalues(eigenvalues)
    n = _validate.positive_int("n", n)
    j_star = iclp_ar_active_set(lam, eta=eta, psi=psi, tau=tau)
    return float(2.0 * tau / n * np.sum(lam[:j_star] ** (-eta / 2.0)))


def iclp_ar_attaining_pair(
    eigenvalues: ArrayLike, *, eta: float, psi: float, tau: float, n: int
) -> tuple[NDArrayFloat, NDArrayFloat, NDArrayFloat] | None:
    """Coefficients ``(x, x', m)`` of a neighbouring pair attaining :func:`iclp_ar_sensitivity`, or ``None``.

    ``x = d*/2``, ``x' = -d*/2`` with ``d* = 2 tau lambda_A^(-1/2) / ||lambda_A^(-1/2)||`` and the
    other ``n - 1`` records all equal to ``m`` with ``m_j = n (t_j + |d*_j|/(2n)) / (n - 1)`` on ``A``.
    The pair exists when ``sum_A (t_j + |d*_j|/(2n))^2 <= ((n-1) tau / n)^2`` (MATH.md §4.2).

    >>> iclp_ar_attaining_pair([1.0, 0.25, 0.01], eta=2.0, psi=0.5, tau=0.9, n=10) is not None
    True
    """
    lam = _eigenvalues(eigenvalues)
    n = _validate.positive_int("n", n, minimum=2)
    tau = _validate.positive_finite("tau", tau)
    j_star = iclp_ar_active_set(lam, eta=eta, psi=psi, tau=tau)
    if j_star == 0:
        return None
    t = iclp_ar_thresholds(lam, eta, psi)[:j_star]
    w = lam[:j_star] ** -0.5
    d_star = 2.0 * tau * w / np.linalg.norm(w)
    need = t + d_star / (2.0 * n)
    if float(np.sum(need**2)) > ((n - 1) * tau / n) ** 2:
        return None
    full = np.zeros(lam.shape[0])
    x, m = full.copy(), full.copy()
    x[:j_star] = d_star / 2.0
    m[:j_star] = n * need / (n - 1)
    return x, -x, m


def gp_cm_sensitivity(eigenvalues: ArrayLike, *, eta: float, psi: float, tau: float, n: int) -> float:
    """Exact Cameron-Martin sensitivity of the ICLP-QR summary (formula ``sensitivity.mean.gp.cm_exact@1``).

    .. math:: \\Delta_{CM} = \\frac{2\\tau}{n}\\max_{j\\in\\mathcal J}
              \\frac{\\lambda_j^{\\eta-1/2}}{\\lambda_j^\\eta+\\psi}

    Attained by ``X_1 = tau phi_{j*}``, ``X_1' = -tau phi_{j*}`` (MATH.md §4.4, [EXACT]).

    Privacy assumptions: as :func:`iclp_qr_sensitivity`.

    >>> round(gp_cm_sensitivity([1.0, 0.25], eta=1.0, psi=1.0, tau=1.0, n=2), 6)
    0.5
    """
    tau = _validate.positive_finite("tau", tau)
    n = _validate.positive_int("n", n)
    return float(2.0 * tau / n * np.max(iclp_qr_weights(eigenvalues, eta, psi)))


def gp_cm_spectrum_free_bound(*, eta: float, psi: float, tau: float, n: int) -> float:
    """Spectrum-free bound ``(tau/n) psi^(-1/(2eta)) (2eta-1)^(1-1/(2eta)) / eta`` (formula ``sensitivity.mean.gp.cm_spectrum_free@1``).

    The maximum of ``2 a(lambda)`` over ``lambda > 0`` (at ``lambda^eta = (2eta - 1) psi``), valid
    for ``eta > 1/2`` ([UPPER], MATH.md §4.4).

    >>> gp_cm_spectrum_free_bound(eta=1.0, psi=1.0, tau=1.0, n=1)
    1.0
    """
    eta = _validate.positive_finite("eta", eta)
    if eta <= 0.5:
        raise PrivacyParameterError(f"eta ({eta!r}) must be > 1/2 for the spectrum-free GP bound")
    psi = _validate.positive_finite("psi", psi)
    tau = _validate.positive_finite("tau", tau)
    n = _validate.positive_int("n", n)
    return float(tau / n * psi ** (-1.0 / (2.0 * eta)) * (2.0 * eta - 1.0) ** (1.0 - 1.0 / (2.0 * eta)) / eta)


def gp_cm_paper_sensitivity(*, eta: float, psi: float, tau: float, n: int) -> float:
    """The [MRS] slide bound ``tau / (n psi^(1/(2eta)))`` (formula ``sensitivity.mean.gp.mrs_paper@1``).

    Equal to the spectrum-free bound at ``eta = 1``; for ``eta > 1`` it is too small (not a valid
    bound, MATH.md §4.4) — recorded for comparison only.

    >>> gp_cm_paper_sensitivity(eta=1.0, psi=0.25, tau=1.0, n=2)
    1.0
    """
    eta = _validate.positive_finite("eta", eta)
    psi = _validate.positive_finite("psi", psi)
    tau = _validate.positive_finite("tau", tau)
    n = _validate.positive_int("n", n)
    return float(tau / (n * psi ** (1.0 / (2.0 * eta))))


def _eigenvalues(eigenvalues: ArrayLike) -> NDArrayFloat:
    lam = np.asarray(eigenvalues, dtype=np.float64)
    if lam.ndim != 1 or lam.shape[0] == 0 or not np.all(np.isfinite(lam)) or np.any(lam <= 0):
        raise DomainError("eigenvalues must be a non-empty 1-D array of finite positive numbers (the kept set J)")
    return lam
