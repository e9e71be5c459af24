"""Gaussian noise on whitened coefficients: calibrations and the sampler (MATH.md §4.4, §12.1).

A Gaussian-process release ``mu + sigma G`` with ``G ~ GP(0, C)`` is, on the kept eigenbasis,
i.i.d. ``N(0, sigma^2)`` noise on the *whitened* coefficients ``z_j = theta_j / sqrt(lambda_j)``;
the l2 norm of a whitened difference is its Cameron-Martin norm. ``sigma`` is set from the
Cameron-Martin sensitivity ``Delta`` by one of two calibrations, each one registered formula:

* ``classical``: ``sigma = sqrt(2 log(2/delta)) Delta / epsilon`` ([HRW] Prop. 2.4), valid for
  ``epsilon <= 1`` only (refused otherwise);
* ``analytic``: the smallest ``sigma`` meeting the [BW] Thm 8 condition (bisection), valid for every
  ``epsilon``.

Published noise is drawn by OpenDP's floating-point-safe ``make_gaussian`` (zCDP measure), whose
privacy map certifies ``rho = Delta^2 / (2 sigma^2)`` before any draw. ``secure=False`` uses NumPy
(simulations only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import opendp.prelude as dp
from scipy import special

from fdpcore import _validate
from fdpcore._typing import ArrayLike, NDArrayFloat
from fdpcore.errors import DomainError, InternalError, PrivacyParameterError
from fdpcore.noise.iclp import _whitened, draw_whitened

__all__ = [
    "CALIBRATIONS",
    "GaussianCalibration",
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "calibrate_gaussian",
    "classical_gaussian_sigma",
    "sample_gaussian_whitened",
]

#: Calibration names -> formula ids.
CALIBRATIONS: dict[str, str] = {
    "analytic": "calibration.gaussian.analytic@1",
    "classical": "calibration.gaussian.classical@1",
}


@dataclass(frozen=True)
class GaussianCalibration:
    """Calibration of i.i.d. Gaussian noise on whitened coefficients.

    Attributes:
        sensitivity: Cameron-Martin (= whitened l2) sensitivity ``Delta``.
        epsilon: the (epsilon, delta)-DP guarantee.
        delta: see ``epsilon``.
        scale: the whitened standard deviation ``sigma``.
        rho: zCDP parameter ``Delta^2/(2 sigma^2)`` (OpenDP's privacy map when secure).
        calibration: ``"analytic"`` or ``"classical"``.
        secure: whether OpenDP certified and will draw the noise.
    """

    sensitivity: float
    epsilon: float
    delta: float
    scale: float
    rho: float
    calibration: str
    secure: bool

    @property
    def formula_id(self) -> str:
        """Formula id of the calibration rule."""
        return CALIBRATIONS[self.calibration]


def classical_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """Classical Gaussian scale (formula ``calibration.gaussian.classical@1``, MATH.md §4.4).

    .. math:: \\sigma = \\frac{\\sqrt{2\\log(2/\\delta)}\\,\\Delta}{\\epsilon}\\qquad(\\epsilon\\le 1)

    Raises:
        PrivacyParameterError: ``epsilon > 1`` (the proof does not cover it) or ``delta`` not in (0, 1).

    >>> round(classical_gaussian_sigma(1.0, 1.0, 0.01), 3)
    3.255
    """
    d = _validate.positive_finite("sensitivity", sensitivity)
    eps = _validate.positive_finite("epsilon", epsilon)
    dl = _positive_delta(delta)
    if eps > 1.0:
        raise PrivacyParameterError(
            f"epsilon ({eps!r}) must be <= 1 for the classical Gaussian calibration; use calibration 'analytic'"
        )
    return math.sqrt(2.0 * math.log(2.0 / dl)) * d / eps


def analytic_gaussian_delta(sigma: float, sensitivity: float, epsilon: float) -> float:
    """The exact ``delta(epsilon)`` of the Gaussian mechanism ([BW] Thm 8, MATH.md §4.4).

    ``Phi(D/(2s) - eps s/D) - e^eps Phi(-D/(2s) - eps s/D)``, computed with log-CDFs so that
    large ``epsilon`` does not overflow. Used by :func:`analytic_gaussian_sigma`.

    >>> analytic_gaussian_delta(1.878, 1.0, 1.0) < 0.01 < analytic_gaussian_delta(1.87, 1.0, 1.0)
    True
    """
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    first = special.log_ndtr(a - b)
    second = epsilon + special.log_ndtr(-a - b)
    if second >= first:
        return 0.0
    return float(math.exp(first) * -math.expm1(second - first))


def analytic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """Smallest ``sigma`` of the analytic Gaussian mechanism (formula ``calibration.gaussian.analytic@1``).

    .. math:: \\Phi_N\\Big(\\frac{\\Delta}{2\\sigma}-\\frac{\\epsilon\\sigma}{\\Delta}\\Big)
              - e^{\\epsilon}\\Phi_N\\Big(-\\frac{\\Delta}{2\\sigma}-\\frac{\\epsilon\\sigma}{\\Delta}\\Big)\\le\\delta

    The left side decreases in ``sigma``: ``hi`` is doubled until the condition holds, then 200
    bisection steps; the returned value is the upper end, so the condition holds at it ([BW] Thm 8).

    >>> round(analytic_gaussian_sigma(1.0, 1.0, 0.01), 3), round(analytic_gaussian_sigma(1.0, 1.0, 1e-5), 3)
    (1.878, 3.731)
    """
    d = _validate.positive_finite("sensitivity", sensitivity)
    eps = _validate.positive_finite("epsilon", epsilon)
    dl = _positive_delta(delta)
    lo, hi = 0.0, d
    while analytic_gaussian_delta(hi, d, eps) > dl:
        lo, hi = hi, 2.0 * hi
        if hi > 1e12 * d:  # pragma: no cover - delta > 0 always admits a finite sigma
            raise InternalError("analytic Gaussian bisection did not bracket sigma")
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if analytic_gaussian_delta(mid, d, eps) <= dl:
            hi = mid
        else:
            lo = mid
    return hi


def calibrate_gaussian(
    sensitivity: float,
    epsilon: float,
    delta: float,
    *,
    n_basis: int,
    calibration: str = "analytic",
    secure: bool = True,
) -> GaussianCalibration:
    """Whitened Gaussian scale for a Cameron-Martin sensitivity (MATH.md §4.4, §12.1).

    With ``secure=True`` OpenDP's ``make_gaussian`` on ``n_basis`` whitened coordinates is built at
    that scale and its zCDP privacy map gives ``rho``; it must not exceed ``Delta^2/(2 sigma^2)``
    by more than rounding. The (epsilon, delta) guarantee is the [BW] profile of that same law.

    >>> c = calibrate_gaussian(0.1, 1.0, 0.01, n_basis=3)
    >>> round(c.scale / 0.1, 3), round(c.rho, 4)
    (1.878, 0.1418)
    """
    if calibration not in CALIBRATIONS:
        raise DomainError(f"calibration ({calibration!r}) must be one of {sorted(CALIBRATIONS)}")
    d = _validate.positive_finite("sensitivity", sensitivity)
    n_basis = _validate.positive_int("n_basis", n_basis)
    if calibration == "classical":
        sigma = classical_gaussian_sigma(d, epsilon, delta)
    else:
        sigma = analytic_gaussian_sigma(d, epsilon, delta)
    rho = d * d / (2.0 * sigma * sigma)
    if secure:
        certified = float(_opendp_gaussian(n_basis, sigma).map(d))  # type: ignore[no-untyped-call]  # OpenDP's map is untyped
        if certified > rho * (1.0 + 1e-9):
            raise InternalError("OpenDP's zCDP map exceeds Delta^2/(2 sigma^2) for the calibrated scale")
        rho = max(rho, certified)
    return GaussianCalibration(d, float(epsilon), float(delta), sigma, rho, calibration, secure)


def sample_gaussian_whitened(
    z: ArrayLike, calibration: GaussianCalibration, *, draws: int = 1, rng: np.random.Generator | None = None
) -> NDArrayFloat:
    """Add ``N(0, sigma^2)`` to each whitened coordinate: ``draws x d`` (MATH.md §4.4).

    Privacy assumptions: ``z`` has whitened l2 (Cameron-Martin) sensitivity at most
    ``calibration.sensitivity``. Each draw is a separate release.

    >>> cal = calibrate_gaussian(1.0, 1.0, 1e-5, n_basis=2, secure=False)
    >>> sample_gaussian_whitened([0.0, 0.0], cal, draws=3, rng=np.random.default_rng(0)).shape
    (3, 2)
    """
    zz = _whitened(z)
    meas = _opendp_gaussian(zz.shape[0], calibration.scale) if calibration.secure else None
    return draw_whitened(zz, meas, calibration.sensitivity, calibration.rho, draws,
                         lambda gen, size: gen.normal(0.0, calibration.scale, size=size), rng)


def _positive_delta(delta: float) -> float:
    dl = _validate.delta_value(delta)
    if dl == 0.0:
        raise PrivacyParameterError("delta (0.0) must be > 0 for a Gaussian mechanism")
    return dl


def _opendp_gaussian(size: int, scale: float) -> dp.Measurement:
    dp.enable_features("contrib")
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=size)
    return dp.m.make_gaussian(domain, dp.l2_distance(T=float), scale=scale)
