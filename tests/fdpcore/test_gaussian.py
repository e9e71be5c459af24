"""GP-ADP noise: analytic and classical Gaussian calibrations, OpenDP zCDP certification, sampler spread."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fdpcore.basis.grids import midpoint_grid
from fdpcore.errors import PrivacyParameterError
from fdpcore.noise.gaussian import (
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
    calibrate_gaussian,
    classical_gaussian_sigma,
    sample_gaussian_whitened,
)
from fdpcore.summaries.mean import draw_mean_release, plan_mean_release


@pytest.mark.parametrize(("eps", "delta", "sigma", "classical"),
                         [(1.0, 0.01, 1.878, 3.255), (1.0, 1e-5, 3.731, 4.941), (0.25, 0.01, 5.185, 13.02)])
def test_reference_sigmas_per_unit_sensitivity(eps: float, delta: float, sigma: float, classical: float) -> None:
    assert analytic_gaussian_sigma(1.0, eps, delta) == pytest.approx(sigma, abs=5e-4)
    assert classical_gaussian_sigma(1.0, eps, delta) == pytest.approx(classical, abs=5e-3 * classical)


@settings(max_examples=60, deadline=None)
@given(eps=st.floats(0.01, 20.0), log_delta=st.floats(-12, -1), sens=st.floats(1e-4, 1e3))
def test_analytic_sigma_is_the_smallest_valid_scale(eps: float, log_delta: float, sens: float) -> None:
    delta = 10**log_delta
    s = analytic_gaussian_sigma(sens, eps, delta)
    assert analytic_gaussian_delta(s, sens, eps) <= delta
    assert analytic_gaussian_delta(s * (1 - 1e-9), sens, eps) > delta * (1 - 1e-6) or s < 1e-300
    if eps <= 1:
        assert classical_gaussian_sigma(sens, eps, delta) >= s  # classical is valid but looser


def test_classical_is_refused_above_epsilon_one() -> None:
    with pytest.raises(PrivacyParameterError, match=r"epsilon \(1.5\) must be <= 1 for the classical"):
        classical_gaussian_sigma(1.0, 1.5, 1e-5)
    with pytest.raises(PrivacyParameterError, match=r"delta \(0.0\) must be > 0"):
        analytic_gaussian_sigma(1.0, 1.0, 0.0)


def test_opendp_certifies_rho_of_the_calibrated_scale() -> None:
    cal = calibrate_gaussian(0.3, 1.0, 0.01, n_basis=5, secure=True)
    assert cal.rho == pytest.approx(0.3**2 / (2 * cal.scale**2), rel=1e-9)
    assert cal.rho == pytest.approx(0.142, abs=1e-3)  # MATH.md §12.1: analytic (1, 0.01) has rho = 0.142


@pytest.mark.parametrize("secure", [True, False], ids=["opendp", "numpy"])
def test_whitened_gaussian_noise_matches_the_calibration(secure: bool) -> None:
    cal = calibrate_gaussian(0.05, 0.7, 1e-5, n_basis=4, secure=secure)
    z = np.array([0.3, -0.2, 0.0, 5.0])
    # OpenDP cannot be seeded: each KS check has a false-alarm rate of 1e-7 (4e-7 for the four); 6600 draws (was
    # 3000 at 1e-3) keep the detectable deviation from the normal CDF as small as before. The variance's relative
    # SD is sqrt(2/6600) = 1.7 %: 10 % is 5.7 SD (false alarm about 1e-8 per coordinate)
    draws = sample_gaussian_whitened(z, cal, draws=6600, rng=np.random.default_rng(5))
    for j in range(z.size):
        assert stats.kstest(draws[:, j] - z[j], "norm", args=(0.0, cal.scale)).pvalue > 1e-7
        assert np.var(draws[:, j]) == pytest.approx(cal.scale**2, rel=0.1)
    assert stats.kstest(draws[:, 0] - z[0], "norm", args=(0.0, cal.scale / 2)).pvalue < 1e-6


def test_gp_release_noise_on_the_grid_has_covariance_sigma2_c() -> None:
    grid = midpoint_grid(20)
    plan = plan_mean_release(grid, {"name": "matern", "nu": 1.5, "rho": 0.2}, n=100, tau=1.0, epsilon=1.0,
                             delta=1e-5, estimator="gp", secure=False)
    noise = draw_mean_release(plan, np.zeros(plan.recolour.shape[0]), draws=20000, rng=np.random.default_rng(2))
    b = plan.basis
    c = (b.eigenfunctions * b.eigenvalues) @ b.eigenfunctions.T  # kernel on the kept span
    np.testing.assert_allclose(np.cov(noise.T), plan.calibration.scale**2 * c, atol=0.05 * plan.calibration.scale**2 * c.max())
    assert plan.expected_sq_l2_error == pytest.approx(plan.calibration.scale**2 * b.trace, rel=1e-9)
