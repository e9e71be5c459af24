"""Empirical privacy audit (fast sampler): Clopper-Pearson lower bounds on epsilon from many draws.

For each mechanism a worst-case neighbouring pair (D, D') is run through the real summary
(``summarise_mean``) and the plan's own calibration; the noise is drawn with the plan's sampler on the
few whitened coordinates that carry the shift (>= 95% of its norm; the rest is post-processing-free
noise that only dilutes the test). For Laplace plans the test event is "every such coordinate lands on
the far side of D's value", whose likelihood ratio is exactly ``exp(sum |h_j| / b)``; for the Gaussian
plan it is a threshold on the single shifted coordinate, and the bound is ``log((p - delta) / q)``.
The claimed mechanism must give a lower bound <= epsilon (and close to it: the audit has power), and
the same mechanism with half the noise scale must be caught (lower bound > epsilon).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

from fdpcore.gaussian import sample_gaussian_whitened
from fdpcore.grids import midpoint_grid
from fdpcore.mechanisms import sample_laplace_whitened
from fdpcore.release import MeanPlan, plan_mean_release, summarise_mean
from fdpcore.sensitivity import iclp_ar_attaining_pair, iclp_qr_weights

ALPHA = 1e-4  # per Clopper-Pearson bound
N_LAPLACE = 200_000
N_GAUSS = 1_000_000
EPS = 1.0


def _cp_lower(k: int, n: int) -> float:
    return float(stats.beta.ppf(ALPHA, k, n - k + 1)) if k > 0 else 0.0


def _cp_upper(k: int, n: int) -> float:
    return float(stats.beta.ppf(1 - ALPHA, k + 1, n - k)) if k < n else 1.0


def _pair(estimator: str) -> tuple[MeanPlan, np.ndarray, np.ndarray]:
    """A plan and the whitened summaries of a worst-case neighbouring pair."""
    grid = midpoint_grid(16)
    n, tau = 50, 1.0
    if estimator == "iclp_qr":
        plan = plan_mean_release(grid, {"name": "gaussian", "length_scale": 1.0}, n=n, tau=tau, epsilon=EPS,
                                 eta=1.0, psi=1.0, secure=False)
        a = iclp_qr_weights(plan.basis.eigenvalues, 1.0, 1.0)
        x1 = tau * plan.basis.reconstruct(a / np.linalg.norm(a))
        base = np.zeros((n, grid.size))
    elif estimator == "iclp_ar":
        plan = plan_mean_release(grid, {"name": "gaussian", "length_scale": 0.5}, n=n, tau=tau, epsilon=EPS,
                                 estimator="iclp_ar", eta=1.0, psi=0.05, secure=False)
        pair = iclp_ar_attaining_pair(plan.basis.eigenvalues, eta=1.0, psi=0.05, tau=tau, n=n)
        assert pair is not None
        x1 = plan.basis.reconstruct(pair[0])
        base = np.tile(plan.basis.reconstruct(pair[2]), (n, 1))
    elif estimator == "frl":
        plan = plan_mean_release(grid, {"name": "matern", "nu": 1.5, "rho": 0.1}, n=n, tau=tau, epsilon=EPS,
                                 estimator="frl", n_basis=2, secure=False)
        x1 = plan.basis.reconstruct(np.r_[1.0, 1.0, np.zeros(plan.basis.n_basis - 2)] * tau / np.sqrt(2))
        base = np.zeros((n, grid.size))
    elif estimator == "bernstein":
        plan = plan_mean_release(grid, {"name": "matern", "nu": 1.5, "rho": 0.1}, n=n, tau=100.0, epsilon=EPS,
                                 estimator="bernstein", sup_clip=1.0, lattice_k=1, secure=False)
        x1 = np.ones(grid.size)
        base = np.zeros((n, grid.size))
    else:  # gp
        plan = plan_mean_release(grid, {"name": "matern", "nu": 1.5, "rho": 0.1}, n=n, tau=tau, epsilon=EPS,
                                 delta=1e-2, estimator="gp", eta=1.0, psi=1e-3, secure=False)
        a = iclp_qr_weights(plan.basis.eigenvalues, 1.0, 1e-3)
        x1 = tau * plan.basis.eigenfunctions[:, int(np.argmax(a))]
        base = np.zeros((n, grid.size))
    d, d_prime = base.copy(), base.copy()
    d[0], d_prime[0] = x1, -x1
    return plan, summarise_mean(d, plan), summarise_mean(d_prime, plan)


def _laplace_lower_bound(plan: MeanPlan, z: np.ndarray, z_prime: np.ndarray, scale: float, seed: int) -> float:
    h = z - z_prime
    order = np.argsort(-np.abs(h))
    cover = np.cumsum(np.abs(h[order])) / np.sum(np.abs(h))
    s = order[: int(np.searchsorted(cover, 0.95)) + 1]
    assert s.size <= 3, "the audit pair must concentrate on few coordinates"
    assert plan.calibration is not None
    cal = dataclasses.replace(plan.calibration, scale=scale)
    rng = np.random.default_rng(seed)
    y = sample_laplace_whitened(z[s], cal, draws=N_LAPLACE, rng=rng)
    y_prime = sample_laplace_whitened(z_prime[s], cal, draws=N_LAPLACE, rng=rng)
    far = lambda draws: np.all(np.sign(h[s]) * (draws - z[s]) >= 0, axis=1)  # noqa: E731
    k, k_prime = int(far(y).sum()), int(far(y_prime).sum())
    return math.log(_cp_lower(k, N_LAPLACE) / _cp_upper(k_prime, N_LAPLACE))


def _gaussian_lower_bound(plan: MeanPlan, z: np.ndarray, z_prime: np.ndarray, sigma: float, seed: int) -> float:
    assert plan.calibration is not None
    h = z - z_prime
    j = int(np.argmax(np.abs(h)))
    assert abs(h[j]) == pytest.approx(np.linalg.norm(h), rel=1e-9)  # the pair moves one coordinate only
    shift, sign = abs(h[j]), np.sign(h[j])
    cal = dataclasses.replace(plan.calibration, scale=sigma)
    rng = np.random.default_rng(seed)
    y = sign * (sample_gaussian_whitened(z[j : j + 1], cal, draws=N_GAUSS, rng=rng)[:, 0] - z_prime[j])
    y_prime = sign * (sample_gaussian_whitened(z_prime[j : j + 1], cal, draws=N_GAUSS, rng=rng)[:, 0] - z_prime[j])
    best = -math.inf
    s0 = plan.calibration.scale
    for s in (s0, s0 / 2):  # thresholds fixed in advance: the optimal ones for sigma and sigma / 2 (Bonferroni)
        c = s * s * EPS / shift + shift / 2
        p = _cp_lower(int((y > c).sum()), N_GAUSS) - plan.delta
        q = _cp_upper(int((y_prime > c).sum()), N_GAUSS)
        if p > 0:
            best = max(best, math.log(p / q))
    return best


@pytest.mark.parametrize("estimator", ["iclp_qr", "iclp_ar", "frl", "bernstein"])
def test_laplace_mechanisms_pass_the_audit_and_half_noise_is_caught(estimator: str) -> None:
    plan, z, z_prime = _pair(estimator)
    h = z - z_prime
    assert np.sum(np.abs(h)) == pytest.approx(plan.sensitivity, rel=0.05)  # (near-)worst-case pair
    assert plan.calibration is not None
    scale = plan.calibration.scale
    claimed = _laplace_lower_bound(plan, z, z_prime, scale, seed=1)
    assert 0.8 * EPS < claimed <= EPS
    under = _laplace_lower_bound(plan, z, z_prime, scale / 2, seed=2)
    assert under > EPS


def test_gaussian_mechanism_passes_the_audit_and_half_noise_is_caught() -> None:
    plan, z, z_prime = _pair("gp")
    assert np.linalg.norm(z - z_prime) == pytest.approx(plan.sensitivity, rel=1e-9)  # exact worst case
    assert plan.calibration is not None
    sigma = plan.calibration.scale
    claimed = _gaussian_lower_bound(plan, z, z_prime, sigma, seed=3)
    assert 0.8 * EPS < claimed <= EPS
    assert _gaussian_lower_bound(plan, z, z_prime, sigma / 2, seed=4) > EPS
