"""Covariance-surface release (MATH.md §6): stated bounds never exceeded and nearly attained, calibration, post-processing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, stats

from fdpcore.basis.grids import grid_from_nodes, midpoint_grid
from fdpcore.data.preprocess import align_long, clip_l2
from fdpcore.errors import DomainError, PrivacyParameterError
from fdpcore.summaries.covariance import (
    covariance_public_sensitivity,
    covariance_sample_mean_sensitivity,
    covariance_surface,
    covariance_weights,
    draw_covariance_release,
    empirical_covariance_coefficients,
    iclp_qr_covariance_coefficients,
    leading_eigenfunctions,
    plan_covariance_release,
    psd_projection,
    release_covariance,
    summarise_covariance,
)

KERNELS = [
    {"name": "matern", "nu": 0.5, "rho": 0.2},
    {"name": "matern", "nu": 1.5, "rho": 0.1},
    {"name": "gaussian", "length_scale": 0.2},
]


def _distance(plan, a, b) -> float:  # noqa: ANN001
    # summarise_covariance returns whitened upper-triangle coordinates: the 1,C(x)C norm is their l1 norm
    return float(np.sum(np.abs(summarise_covariance(a, plan) - summarise_covariance(b, plan))))


def _perron(plan) -> np.ndarray:  # noqa: ANN001
    a = covariance_weights(plan.basis.eigenvalues, plan.eta, plan.psi)
    vals, vecs = np.linalg.eigh(a + np.diag(np.diag(a)))
    v = np.abs(vecs[:, -1])
    return vals[-1], plan.basis.reconstruct(v / np.linalg.norm(v))


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k["name"] + str(list(k.values())[1]))
@pytest.mark.parametrize(("eta", "psi"), [(1.0, 1e-3), (1.5, 1e-2), (1.25, 0.1)])
def test_public_centring_lower_pair_reaches_half_the_bound(kernel: dict, eta: float, psi: float) -> None:
    rng = np.random.default_rng(3)
    grid = grid_from_nodes(np.sort(np.r_[0.0, rng.uniform(0, 1, 22), 1.0]))
    n, tau_c = 15, 1.3
    plan = plan_covariance_release(grid, kernel, n=n, tau=tau_c, epsilon=1.0, eta=eta, psi=psi, secure=False)
    lam_max, u = _perron(plan)
    others, _ = clip_l2(rng.normal(size=(n - 1, grid.size)), grid.weights, tau_c)
    d = np.vstack([tau_c * u, others])
    d_prime = np.vstack([np.zeros(grid.size), others])
    reached = _distance(plan, d, d_prime)
    # y' = 0, y = tau_c * Perron vector: exactly tau_c^2 lambda_max(A + Diag A) / (2n) (MATH.md §6 (a))
    assert reached == pytest.approx(tau_c**2 * lam_max / (2 * n), rel=1e-9)
    assert plan.sensitivity / 2 <= reached * (1 + 1e-9) <= plan.sensitivity


def test_public_centring_numerical_maximisation_stays_below_the_bound() -> None:
    grid = midpoint_grid(16)
    n, tau_c = 7, 1.0
    plan = plan_covariance_release(grid, KERNELS[1], n=n, tau=tau_c, epsilon=1.0, eta=1.0, psi=0.05, secure=False)
    j = plan.basis.n_basis
    others = np.zeros((n - 1, grid.size))

    def loss(v: np.ndarray) -> float:
        y = plan.basis.reconstruct(tau_c * v[:j] / max(np.linalg.norm(v[:j]), 1.0))
        y2 = plan.basis.reconstruct(tau_c * v[j:] / max(np.linalg.norm(v[j:]), 1.0))
        return -_distance(plan, np.vstack([y, others]), np.vstack([y2, others]))

    rng = np.random.default_rng(0)
    best = max(-optimize.minimize(loss, rng.normal(size=2 * j), method="Powell", options={"maxfev": 4000}).fun
               for _ in range(3))
    assert best <= plan.sensitivity * (1 + 1e-9)
    assert best >= plan.sensitivity / 2  # the search finds at least the analytic lower pair's value


def test_sample_mean_centring_structured_pair_and_exact_identity() -> None:
    rng = np.random.default_rng(5)
    grid = midpoint_grid(20)
    n, tau = 12, 1.0
    plan = plan_covariance_release(grid, KERNELS[1], n=n, tau=tau, epsilon=1.0, centering="sample_mean",
                                   eta=1.0, psi=1e-2, secure=False)
    lam_max, u = _perron(plan)
    # others at 0 (s = 0), x = tau u, x' = 0: (n-1) tau^2 lambda_max / (2 n^2), a sixth of the bound at least
    d = np.vstack([tau * u, np.zeros((n - 1, grid.size))])
    d_prime = np.zeros((n, grid.size))
    reached = _distance(plan, d, d_prime)
    assert reached == pytest.approx((n - 1) * tau**2 * lam_max / (2 * n**2), rel=1e-9)
    assert plan.sensitivity / 6 <= reached <= plan.sensitivity
    # the exact replace-one identity of MATH.md §6 (b)
    x = plan.basis.coefficients(clip_l2(rng.normal(size=(n, grid.size)), grid.weights, tau)[0])
    x2 = x.copy()
    x2[0] = rng.normal(size=x.shape[1]) * 0.1
    s = x[1:].sum(axis=0)
    dd = x[0] - x2[0]
    identity = (n - 1) / n**2 * (np.outer(x[0], x[0]) - np.outer(x2[0], x2[0])) - (np.outer(s, dd) + np.outer(dd, s)) / n**2
    got = (empirical_covariance_coefficients(x, centering="sample_mean")
           - empirical_covariance_coefficients(x2, centering="sample_mean"))
    assert np.allclose(got, identity, atol=1e-15)


@settings(max_examples=50, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    kernel=st.sampled_from(KERNELS),
    eta=st.floats(0.8, 2.5),
    log_psi=st.floats(-4, 0),
    centering=st.sampled_from(["public", "sample_mean"]),
    magnitude=st.sampled_from([1e-3, 1.0, 1e3, 1e150]),
)
def test_random_neighbours_never_exceed_the_bound(
    seed: int, kernel: dict, eta: float, log_psi: float, centering: str, magnitude: float
) -> None:
    rng = np.random.default_rng(seed)
    grid = midpoint_grid(18)
    n, tau = int(rng.integers(2, 9)), 1.0
    plan = plan_covariance_release(grid, kernel, n=n, tau=tau, epsilon=1.0, centering=centering, eta=eta,
                                   psi=10**log_psi, secure=False)
    x = rng.standard_t(3, size=(n, grid.size)) * magnitude
    if rng.uniform() < 0.5:  # adversarial others: all on one direction at the clip radius
        x[1:] = plan.basis.reconstruct(np.eye(plan.basis.n_basis)[0]) * magnitude * 10
    x_prime = x.copy()
    x_prime[rng.integers(n)] = rng.normal(size=grid.size) * magnitude * rng.uniform(0, 3)
    a, _ = clip_l2(x, grid.weights, tau)
    b, _ = clip_l2(x_prime, grid.weights, tau)
    assert _distance(plan, a, b) <= plan.sensitivity * (1 + 1e-9)


def test_unit_with_ten_curves_is_one_record_within_the_bound() -> None:
    # Privacy unit = household: unit 0 has 10 meter curves, averaged before clipping (one record per unit).
    rng = np.random.default_rng(11)
    grid = midpoint_grid(12)
    t = grid.grid_points

    def table(ten: np.ndarray) -> tuple[np.ndarray, ...]:
        units, curves, times, values = [], [], [], []
        for c in range(10):
            units += [0] * t.size; curves += [c] * t.size; times += list(t); values += list(ten[c])
        for u in range(1, 6):
            units += [u] * t.size; curves += [0] * t.size; times += list(t); values += list(np.sin(u * t))
        return np.array(units), np.array(curves), np.array(times), np.array(values)

    u1, c1, t1, v1 = table(rng.normal(size=(10, t.size)) * 5)
    u2, c2, t2, v2 = table(-rng.normal(size=(10, t.size)) * 5)
    first = align_long(u1, t1, v1, grid, curves=c1)
    second = align_long(u2, t2, v2, grid, curves=c2)
    assert first.n_samples == second.n_samples == 6
    assert np.allclose(first.data_matrix[0], v1[: 10 * t.size].reshape(10, t.size).mean(axis=0))
    assert np.array_equal(first.data_matrix[1:], second.data_matrix[1:])
    plan = plan_covariance_release(grid, KERNELS[1], n=6, tau=1.0, epsilon=1.0, eta=1.0, psi=1e-2, secure=False)
    x, _ = clip_l2(first.data_matrix, grid.weights, 1.0)
    y, _ = clip_l2(second.data_matrix, grid.weights, 1.0)
    assert 0 < _distance(plan, x, y) <= plan.sensitivity


@pytest.mark.parametrize("secure", [False, True])
def test_whitened_noise_is_laplace_at_the_calibrated_scale(secure: bool) -> None:
    grid = midpoint_grid(10)
    plan = plan_covariance_release(grid, KERNELS[1], n=50, tau=1.0, epsilon=0.7, eta=1.0, psi=1e-2, secure=secure)
    assert plan.calibration.scale == pytest.approx(plan.sensitivity / 0.7, rel=1e-12)
    z = np.linspace(-1, 1, plan.dimension)
    # OpenDP cannot be seeded: the KS check's false-alarm rate is 1e-7; 900 secure draws (was 400 at 1e-3) keep the
    # detectable deviation from the Laplace CDF as small as before
    draws = 900 if secure else 4000
    m = draw_covariance_release(plan, z, draws=draws, rng=np.random.default_rng(1))
    prod = np.outer(plan.basis.eigenvalues, plan.basis.eigenvalues)
    iu = np.triu_indices(plan.basis.n_basis)
    assert np.array_equal(m, np.swapaxes(m, 1, 2))
    white = (m[:, iu[0], iu[1]] / np.sqrt(prod[iu]) - z) / plan.calibration.scale
    assert stats.kstest(white.ravel(), stats.laplace.cdf).pvalue > 1e-7
    # expected squared L2 error on T x T: 2 b^2 (sum lambda)^2, checked against the draws
    w2 = np.outer(grid.weights, grid.weights)
    noise = covariance_surface(m, plan.basis) - covariance_surface(
        np.broadcast_to(_symmetric(z * np.sqrt(prod[iu]), plan.basis.n_basis), m.shape), plan.basis)
    mc = float(np.mean(np.einsum("dkl,kl,dkl->d", noise, w2, noise)))
    assert plan.expected_sq_l2_error == pytest.approx(2 * plan.calibration.scale**2 * plan.basis.trace**2, rel=1e-12)
    # the mean of 900 squared errors has a relative SD of 1.5 % (simulated): 15 % is 10 SD
    assert mc == pytest.approx(plan.expected_sq_l2_error, rel=0.15 if secure else 0.05)


def _symmetric(upper: np.ndarray, j: int) -> np.ndarray:
    out = np.zeros((j, j))
    out[np.triu_indices(j)] = upper
    return out + np.triu(out, 1).T


def test_estimator_is_the_tensor_qr_minimiser_and_matches_the_grid_covariance() -> None:
    rng = np.random.default_rng(4)
    grid = midpoint_grid(14)
    plan = plan_covariance_release(grid, KERNELS[0], n=30, tau=10.0, epsilon=1.0, eta=1.2, psi=0.03, secure=False)
    x = plan.basis.project(rng.normal(size=(30, 14)))
    kbar = empirical_covariance_coefficients(plan.basis.coefficients(x), centering="sample_mean")
    grid_cov = np.cov(x.T, bias=True)
    assert np.allclose(covariance_surface(kbar, plan.basis), grid_cov, atol=1e-12)
    lam = plan.basis.eigenvalues
    khat = iclp_qr_covariance_coefficients(kbar, lam, eta=1.2, psi=0.03)
    # coefficient-wise minimiser of (G - Kbar)^2 + psi G^2 / (lambda_j lambda_l)^eta
    prod = np.outer(lam, lam) ** 1.2
    assert np.allclose(khat, kbar * prod / (prod + 0.03))


def test_psd_projection_and_eigenfunctions_are_post_processing() -> None:
    rng = np.random.default_rng(8)
    grid = grid_from_nodes(np.sort(np.r_[0.0, rng.uniform(0, 1, 18), 1.0]))
    x = rng.normal(size=(200, grid.size)) * 0.1
    r = release_covariance(x, grid, epsilon=0.5, tau=1.0, kernel=KERNELS[1], draws=3, secure=False, rng=rng)
    m = r.coefficients
    p = psd_projection(m)
    assert np.all(np.linalg.eigvalsh(p) >= -1e-12)
    assert np.allclose(psd_projection(p), p)
    assert np.all(np.linalg.eigvalsh(m)[:, 0] < 0)  # the raw noisy surfaces are not PSD here
    # the W-operator of the projected surface has no negative eigenvalue either
    sw = np.sqrt(grid.weights)
    op = sw[:, None] * r.surfaces[0] * sw[None, :]
    assert np.linalg.eigvalsh(op)[0] >= -1e-10
    vals, funs = leading_eigenfunctions(p[0], r.plan.basis, 3)
    assert np.all(np.diff(vals) <= 0)
    assert np.allclose(funs.T @ (grid.weights[:, None] * funs), np.eye(3), atol=1e-10)
    # an eigenfunction of the surface operator: K W psi = d psi
    assert np.allclose(r.surfaces[0] @ (grid.weights * funs[:, 0]), vals[0] * funs[:, 0], atol=1e-10)


def test_bad_inputs_are_refused_before_any_data() -> None:
    grid = midpoint_grid(10)
    k = KERNELS[1]
    with pytest.raises(DomainError, match="centering"):
        plan_covariance_release(grid, k, n=10, tau=1.0, epsilon=1.0, centering="median")
    with pytest.raises(PrivacyParameterError, match="tau"):
        plan_covariance_release(grid, k, n=10, tau=0.0, epsilon=1.0)
    with pytest.raises(PrivacyParameterError, match="epsilon"):
        plan_covariance_release(grid, k, n=10, tau=1.0, epsilon=float("nan"))
    with pytest.raises(DomainError, match="n"):
        plan_covariance_release(grid, k, n=1, tau=1.0, epsilon=1.0, centering="sample_mean")
    with pytest.raises(DomainError, match="eta and psi"):
        plan_covariance_release(grid, k, n=10, tau=1.0, epsilon=1.0, eta=1.0)
    with pytest.raises(DomainError, match="tuning"):
        plan_covariance_release(grid, k, n=10, tau=1.0, epsilon=1.0, tuning="pcv")
    with pytest.raises(PrivacyParameterError, match="psi"):
        covariance_public_sensitivity([0.5, 0.2], eta=1.0, psi=-1.0, tau_c=1.0, n=3)
    with pytest.raises(DomainError, match="n"):
        covariance_sample_mean_sensitivity([0.5, 0.2], eta=1.0, psi=0.1, tau=1.0, n=1)
    plan = plan_covariance_release(grid, k, n=3, tau=1.0, epsilon=1.0, secure=False)
    with pytest.raises(DomainError, match="rows"):
        summarise_covariance(np.zeros((4, 10)), plan)
    with pytest.raises(DomainError, match="finite"):
        summarise_covariance(np.full((3, 10), np.nan), plan)
    with pytest.raises(PrivacyParameterError, match="center"):
        release_covariance(np.zeros((3, 10)), grid, epsilon=1.0, tau=1.0, kernel=k, centering="sample_mean",
                           center=np.zeros(10), secure=False)
