"""Privacy of the ICLP-QR mean: exact sensitivity (worst case attained, neighbours never exceed) and calibration."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fdpcore.errors import DomainError, PrivacyParameterError
from fdpcore.grids import grid_from_nodes, midpoint_grid
from fdpcore.mechanisms import calibrate_iclp, sample_iclp_coefficients
from fdpcore.preprocess import clip_l2
from fdpcore.release import plan_mean_release, summarise_mean
from fdpcore.sensitivity import iclp_qr_paper_sensitivity, iclp_qr_sensitivity, iclp_qr_weights

KERNELS = [
    {"name": "matern", "nu": 0.5, "rho": 0.2},
    {"name": "matern", "nu": 1.5, "rho": 0.1},
    {"name": "matern", "nu": 2.5, "rho": 0.3},
    {"name": "gaussian", "length_scale": 0.2},
]


def _one_c_distance(plan, a, b) -> float:  # noqa: ANN001
    # summarise_mean returns whitened coordinates z_j = theta_j / sqrt(lambda_j): the 1,C norm is their l1 norm
    return float(np.sum(np.abs(summarise_mean(a, plan) - summarise_mean(b, plan))))


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: f"{k['name']}-{list(k.values())[1]}")
@pytest.mark.parametrize(("eta", "psi"), [(1.0, 1e-3), (1.5, 1e-2), (2.0, 1e-3), (1.25, 0.05)])
def test_worst_case_pair_attains_the_exact_bound(kernel: dict, eta: float, psi: float) -> None:
    rng = np.random.default_rng(7)
    grid = grid_from_nodes(np.sort(np.r_[0.0, rng.uniform(0, 1, 38), 1.0]))
    n, tau = 25, 1.7
    plan = plan_mean_release(grid, kernel, n=n, tau=tau, epsilon=1.0, eta=eta, psi=psi, secure=False)
    a = iclp_qr_weights(plan.basis.eigenvalues, eta, psi)
    u = plan.basis.reconstruct(a / np.linalg.norm(a))
    others, _ = clip_l2(rng.normal(size=(n - 1, grid.size)), grid.weights, tau)
    d = np.vstack([tau * u, others])
    d_prime = np.vstack([-tau * u, others])
    assert _one_c_distance(plan, d, d_prime) == pytest.approx(plan.sensitivity, rel=1e-9)
    assert plan.paper_sensitivity >= plan.sensitivity


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    kernel=st.sampled_from(KERNELS),
    eta=st.floats(0.8, 3.0),
    log_psi=st.floats(-5, 0),
    magnitude=st.sampled_from([1e-3, 1.0, 1e3, 1e150]),
)
def test_random_neighbours_never_exceed_the_exact_bound(seed: int, kernel: dict, eta: float, log_psi: float, magnitude: float) -> None:
    rng = np.random.default_rng(seed)
    grid = midpoint_grid(30)
    n, tau = 10, 1.0
    plan = plan_mean_release(grid, kernel, n=n, tau=tau, epsilon=1.0, eta=eta, psi=10**log_psi, secure=False)
    x = rng.standard_t(3, size=(n, grid.size)) * magnitude
    x_prime = x.copy()
    x_prime[rng.integers(n)] = rng.normal(size=grid.size) * magnitude * rng.uniform(0, 3)
    a, _ = clip_l2(x, grid.weights, tau)
    b, _ = clip_l2(x_prime, grid.weights, tau)
    assert _one_c_distance(plan, a, b) <= plan.sensitivity * (1 + 1e-9)


def test_sensitivity_rejects_bad_parameters() -> None:
    lam = np.array([0.5, 0.25])
    with pytest.raises(PrivacyParameterError, match="tau"):
        iclp_qr_sensitivity(lam, eta=1.0, psi=0.1, tau=0.0, n=10)
    with pytest.raises(DomainError, match="n"):
        iclp_qr_sensitivity(lam, eta=1.0, psi=0.1, tau=1.0, n=0)
    with pytest.raises(PrivacyParameterError, match="psi"):
        iclp_qr_paper_sensitivity(lam, eta=1.0, psi=-1.0, tau=1.0, n=10)
    with pytest.raises(DomainError, match="eigenvalues"):
        iclp_qr_sensitivity([0.5, -0.1], eta=1.0, psi=0.1, tau=1.0, n=10)


def test_example_ratio_paper_over_exact() -> None:
    """The shipped example: n = 508, eps = 1, Matern 3/2 (rho 0.1), PSS exact_balanced."""
    plan = plan_mean_release(midpoint_grid(48), {"name": "matern", "nu": 1.5, "rho": 0.1}, n=508, tau=1.0,
                             epsilon=1.0, secure=False)
    assert (plan.eta, plan.psi) == (1.25, 1 / 508)
    assert plan.paper_sensitivity / plan.sensitivity == pytest.approx(5.453, abs=1e-3)


@pytest.mark.parametrize("secure", [True, False], ids=["opendp", "numpy"])
def test_whitened_noise_matches_the_calibrated_laplace(secure: bool) -> None:
    lam = np.array([0.5, 0.2, 0.1, 0.05, 1e-3, 1e-6])
    theta = np.array([0.3, -0.2, 0.1, 0.0, 0.01, 1e-4])
    cal = calibrate_iclp(0.05, 0.7, n_basis=lam.size, secure=secure)
    assert cal.scale == pytest.approx(0.05 / 0.7, rel=1e-12) and cal.scale >= 0.05 / 0.7
    draws = sample_iclp_coefficients(theta, lam, cal, draws=3000, rng=np.random.default_rng(11))
    z = (draws - theta) / np.sqrt(lam)
    for j in range(lam.size):
        assert stats.kstest(z[:, j], "laplace", args=(0.0, cal.scale)).pvalue > 1e-3
        # mean |Lap(b)| = b; relative SE ~ 1/sqrt(3000)
        assert np.mean(np.abs(z[:, j])) == pytest.approx(cal.scale, rel=0.08)
    # the test can fail: half the scale is rejected
    assert stats.kstest(z[:, 0], "laplace", args=(0.0, cal.scale / 2)).pvalue < 1e-6


def test_coefficient_j_gets_scale_delta_sqrt_lambda_over_eps() -> None:
    lam = np.array([0.6, 0.01])
    cal = calibrate_iclp(0.2, 2.0, n_basis=2, secure=False)
    np.testing.assert_allclose(cal.coefficient_scales(lam), 0.2 * np.sqrt(lam) / 2.0)
    draws = sample_iclp_coefficients(np.zeros(2), lam, cal, draws=20000, rng=np.random.default_rng(3))
    np.testing.assert_allclose(draws.var(axis=0), 2 * (0.2 * np.sqrt(lam) / 2.0) ** 2, rtol=0.05)
