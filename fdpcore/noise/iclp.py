"""Noise for functional releases: the ICLP mechanism on whitened coefficients (MATH.md §3).

Coefficient ``j`` of the release receives ``Lap(b_j)`` with ``b_j = Delta sqrt(lambda_j) / epsilon``
(MATH.md §3.3, convention-free form). Equivalently, the *whitened* coefficients
``z_j = theta_j / sqrt(lambda_j)`` receive i.i.d. ``Lap(Delta / epsilon)``; their
l1 sensitivity is exactly the ``1,C``-norm sensitivity ``Delta``. That is the form
handed to OpenDP's floating-point-safe vector Laplace, whose own privacy map is
checked against ``epsilon`` before any draw. The result is recoloured by ``sqrt(lambda_j)``.

``secure=False`` uses NumPy's Laplace sampler: for simulations only, never for a
published release (``fdp release`` always passes ``secure=True``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import opendp.prelude as dp
from scipy import stats

from fdpcore import _validate
from fdpcore._typing import ArrayLike, NDArrayFloat
from fdpcore.errors import DomainError, InternalError

__all__ = [
    "BAND_SEED",
    "LaplaceCalibration",
    "calibrate_iclp",
    "iclp_expected_sq_error",
    "iclp_pointwise_band",
    "iclp_pointwise_sd",
    "sample_iclp_coefficients",
    "sample_laplace_whitened",
    "whitened_expected_sq_error",
    "whitened_pointwise_band",
]

#: Public seed of the Monte Carlo that computes a Laplace noise band (a property of the noise law, never the noise of
#: a release): fixed so that the band ``fdp plan`` states is the band the manifest publishes.
BAND_SEED = 20261125


@dataclass(frozen=True)
class LaplaceCalibration:
    """Calibration of the whitened Laplace noise.

    Attributes:
        sensitivity: ``Delta`` in the ``1,C`` norm (= l1 norm of the whitened coefficients).
        epsilon: the privacy parameter.
        scale: the whitened Laplace scale actually used (``>= Delta/epsilon``; OpenDP may
            round it up by a few ulps so that its own privacy map certifies ``epsilon``).
        secure: whether OpenDP's sampler certified and will draw the noise.
    """

    sensitivity: float
    epsilon: float
    scale: float
    secure: bool

    def coefficient_scales(self, eigenvalues: ArrayLike) -> NDArrayFloat:
        """Per-coefficient Laplace scales ``b_j = scale * sqrt(lambda_j)``."""
        return self.scale * np.sqrt(np.asarray(eigenvalues, dtype=np.float64))


def calibrate_iclp(sensitivity: float, epsilon: float, *, n_basis: int, secure: bool = True) -> LaplaceCalibration:
    """Whitened Laplace scale for the ICLP mechanism (formula ``calibration.iclp.laplace_whitened@1``).

    .. math:: b_j = \\frac{\\Delta\\sqrt{\\lambda_j}}{\\epsilon},\\qquad \\text{whitened scale } \\Delta/\\epsilon

    With ``secure=True`` the scale is the smallest float ``>= Delta/epsilon`` for which
    OpenDP's ``make_laplace`` privacy map gives ``map(Delta) <= epsilon``.

    >>> calibrate_iclp(0.5, 1.0, n_basis=3).scale
    0.5
    """
    delta_s = _validate.positive_finite("sensitivity", sensitivity)
    eps = _validate.positive_finite("epsilon", epsilon)
    n_basis = _validate.positive_int("n_basis", n_basis)
    scale = delta_s / eps
    if secure:
        meas = _opendp_laplace(n_basis, scale)
        for _ in range(64):
            if meas.map(delta_s) <= eps:  # type: ignore[no-untyped-call]  # OpenDP's map is untyped
                break
            scale = math.nextafter(scale, math.inf)
            meas = _opendp_laplace(n_basis, scale)
        else:  # pragma: no cover - OpenDP's map is within a few ulps of Delta/scale
            raise InternalError("OpenDP could not certify the Laplace scale")
    return LaplaceCalibration(delta_s, eps, scale, secure)


def sample_iclp_coefficients(
    coefficients: ArrayLike,
    eigenvalues: ArrayLike,
    calibration: LaplaceCalibration,
    *,
    draws: int = 1,
    rng: np.random.Generator | None = None,
) -> NDArrayFloat:
    """Add ICLP noise to coefficients on the kept eigenbasis (MATH.md §3.3-3.4).

    Returns a ``draws x J`` array of private coefficients. Every draw is a separate
    ``epsilon``-DP release (``draws`` releases cost ``draws * epsilon``).

    Privacy assumptions: ``coefficients`` is a summary whose ``1,C``-norm sensitivity
    is at most ``calibration.sensitivity``; eigenvalues are the kept set of a public
    kernel on a public grid.

    >>> cal = calibrate_iclp(0.1, 1.0, n_basis=2, secure=False)
    >>> sample_iclp_coefficients([0.0, 0.0], [1.0, 0.5], cal, rng=np.random.default_rng(0)).shape
    (1, 2)
    """
    theta = np.asarray(coefficients, dtype=np.float64)
    lam = np.asarray(eigenvalues, dtype=np.float64)
    if theta.shape != lam.shape or theta.ndim != 1:
        raise DomainError("coefficients and eigenvalues must be 1-D arrays of the same length")
    if not np.all(np.isfinite(theta)):
        raise DomainError("coefficients must be finite")
    draws = _validate.positive_int("draws", draws)
    root = np.sqrt(lam)
    noisy = sample_laplace_whitened(theta / root, calibration, draws=draws, rng=rng)
    return noisy * root


def sample_laplace_whitened(
    z: ArrayLike, calibration: LaplaceCalibration, *, draws: int = 1, rng: np.random.Generator | None = None
) -> NDArrayFloat:
    """Add i.i.d. ``Lap(scale)`` to each whitened coordinate: ``draws x d`` (MATH.md §3.3, §4.1, §4.5).

    Secure: OpenDP's vector Laplace, whose l1 privacy map is checked against ``epsilon`` first.

    Privacy assumptions: ``z`` has l1 sensitivity at most ``calibration.sensitivity``.

    >>> cal = calibrate_iclp(0.1, 1.0, n_basis=2, secure=False)
    >>> sample_laplace_whitened([0.0, 1.0], cal, draws=2, rng=np.random.default_rng(0)).shape
    (2, 2)
    """
    zz = _whitened(z)
    meas = _opendp_laplace(zz.shape[0], calibration.scale) if calibration.secure else None
    return draw_whitened(zz, meas, calibration.sensitivity, calibration.epsilon, draws,
                         lambda gen, size: gen.laplace(0.0, calibration.scale, size=size), rng)


def _whitened(z: ArrayLike) -> NDArrayFloat:
    zz = np.asarray(z, dtype=np.float64)
    if zz.ndim != 1 or not np.all(np.isfinite(zz)):
        raise DomainError("z must be a finite 1-D array of whitened coordinates")
    return zz


def draw_whitened(
    z: NDArrayFloat,
    measurement: dp.Measurement | None,
    sensitivity: float,
    budget: float,
    draws: int,
    fast: Callable[[np.random.Generator, tuple[int, int]], NDArrayFloat],
    rng: np.random.Generator | None,
) -> NDArrayFloat:
    """``draws x d`` noisy copies of whitened ``z``: the shared body of the Laplace and Gaussian samplers.

    With an OpenDP ``measurement`` (secure), its privacy map at ``sensitivity`` is checked against
    ``budget`` (epsilon, or rho for the Gaussian) before any draw; otherwise ``fast(gen, shape)`` gives
    NumPy noise for simulations.
    """
    draws = _validate.positive_int("draws", draws)
    if measurement is not None:
        if measurement.map(sensitivity) > budget:  # type: ignore[no-untyped-call]  # OpenDP's map is untyped
            raise InternalError("OpenDP privacy map exceeds the calibrated budget")
        return np.array([measurement(z.tolist()) for _ in range(draws)], dtype=np.float64)
    gen = rng if rng is not None else np.random.default_rng()
    return z + fast(gen, (draws, z.shape[0]))


def whitened_expected_sq_error(recolour: ArrayLike, weights: ArrayLike, variance: float) -> float:
    """``E||xi R||_W^2 = v sum_i R_i W R_i^T`` for i.i.d. whitened noise of variance ``v`` (formula ``noise.whitened.expected_sq_l2@1``).

    ``R`` (d x K) maps whitened coordinates to grid values. For ICLP (``R_j = sqrt(lambda_j) phi_j``,
    ``v = 2 b^2``) it is ``2 b^2 sum_j lambda_j`` (MATH.md §3.5); for GP-ADP ``sigma^2 tr(C)`` (§4.4).

    >>> whitened_expected_sq_error([[1.0, 0.0], [0.0, 2.0]], [0.5, 0.5], 2.0)
    5.0
    """
    r = np.asarray(recolour, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    return float(variance * np.einsum("ik,k,ik->", r, w, r))


def whitened_pointwise_band(
    recolour: ArrayLike,
    scale: float,
    distribution: str,
    *,
    level: float = 0.95,
    n_sim: int = 20000,
    rng: np.random.Generator | None = None,
) -> NDArrayFloat:
    """Half-width ``h_k`` with ``P(|noise(t_k)| <= h_k) = level`` of the noise alone (a public property of its law).

    ``distribution`` is ``"laplace"`` (scale ``b``) or ``"gaussian"`` (sd ``sigma``) on the whitened
    coordinates; ``recolour`` (d x K) maps them to the grid. Gaussian: exact, ``z_{(1+level)/2} sigma ||r_k||``.
    Laplace (a sum of independent Laplace terms has no closed-form quantile): the empirical quantile of ``n_sim``
    simulated noise vectors, drawn by default from a fixed public seed (:data:`BAND_SEED`) so that ``fdp plan`` and
    the release state the same number. These simulations are not the release's noise (OpenDP draws that, unseeded)
    and no data enters, so the band may be published.

    >>> h = whitened_pointwise_band([[1.0]], 1.0, "gaussian")
    >>> round(float(h[0]), 4)
    1.96
    >>> bool(np.array_equal(whitened_pointwise_band([[1.0]], 2.0, "laplace"), whitened_pointwise_band([[1.0]], 2.0, "laplace")))
    True
    """
    r = np.asarray(recolour, dtype=np.float64)
    if not 0 < level < 1:
        raise DomainError(f"level ({level!r}) must be in (0, 1)")
    if distribution not in ("laplace", "gaussian"):
        raise DomainError(f"distribution ({distribution!r}) must be 'laplace' or 'gaussian'")
    if distribution == "gaussian":
        out: NDArrayFloat = float(stats.norm.ppf(0.5 + level / 2.0)) * scale * np.sqrt(np.sum(r * r, axis=0))
        return out
    gen = rng if rng is not None else np.random.default_rng(BAND_SEED)
    noise = gen.laplace(0.0, scale, size=(n_sim, r.shape[0]))
    band: NDArrayFloat = np.empty(r.shape[1])
    step = max(1, _BAND_BLOCK // n_sim)  # grid points per block: the n_sim x K products never exist at once
    for start in range(0, r.shape[1], step):
        band[start:start + step] = np.quantile(np.abs(noise @ r[:, start:start + step]), level, axis=0)
    return band


#: Simulated values held at once per block of grid points in :func:`whitened_pointwise_band` (16 MB of float64).
_BAND_BLOCK = 2**21


def iclp_expected_sq_error(eigenvalues: ArrayLike, scale: float) -> float:
    """``E||noise||_W^2 = sum_j 2 b_j^2 = 2 scale^2 sum_j lambda_j`` (formula ``noise.iclp.expected_sq_l2@1``, MATH.md §3.5).

    >>> round(iclp_expected_sq_error([0.5, 0.5], 0.1), 12)
    0.02
    """
    lam = np.asarray(eigenvalues, dtype=np.float64)
    return float(2.0 * scale**2 * lam.sum())


def iclp_pointwise_sd(eigenfunctions: ArrayLike, eigenvalues: ArrayLike, scale: float) -> NDArrayFloat:
    """Pointwise noise standard deviation ``sd(t_k) = (sum_j 2 b_j^2 phi_j(t_k)^2)^{1/2}`` on the grid.

    >>> iclp_pointwise_sd([[1.0, 0.0]], [1.0, 1.0], 1.0).tolist()
    [1.4142135623730951]
    """
    phi = np.asarray(eigenfunctions, dtype=np.float64)
    lam = np.asarray(eigenvalues, dtype=np.float64)
    return np.sqrt(2.0 * scale**2 * (phi * phi) @ lam)


def iclp_pointwise_band(
    eigenfunctions: ArrayLike,
    eigenvalues: ArrayLike,
    scale: float,
    *,
    level: float = 0.95,
    n_sim: int = 20000,
    rng: np.random.Generator | None = None,
) -> NDArrayFloat:
    """Half-width ``h_k`` with ``P(|noise(t_k)| <= h_k) = level`` at each grid point.

    Computed by simulating the mechanism's noise alone (no data enters), so it may be
    published. It describes the privacy error only, not the sampling error.
    """
    phi = np.asarray(eigenfunctions, dtype=np.float64)
    lam = np.asarray(eigenvalues, dtype=np.float64)
    if not 0 < level < 1:
        raise DomainError(f"level ({level!r}) must be in (0, 1)")
    gen = rng if rng is not None else np.random.default_rng()
    noise = gen.laplace(0.0, 1.0, size=(n_sim, lam.shape[0])) * (scale * np.sqrt(lam))
    return np.quantile(np.abs(noise @ phi.T), level, axis=0)


def _opendp_laplace(size: int, scale: float) -> dp.Measurement:
    dp.enable_features("contrib")
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=size)
    return dp.m.make_laplace(domain, dp.l1_distance(T=float), scale=scale)
