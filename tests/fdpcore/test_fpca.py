"""Private FPCA (MATH.md §10): exact tau^2 sensitivity, the mechanism's density, metrics, diagnostic, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fdpcore.basis.grids import grid_from_nodes, midpoint_grid
from fdpcore.errors import DomainError, PrivacyParameterError
from fdpcore.noise.bingham import sample_matrix_bingham, sample_vector_bingham
from fdpcore.summaries.fpca import (
    _split_rhat,
    draw_fpca_components,
    fpca_basis,
    fpca_bingham_parameter,
    fpca_coefficients,
    fpca_deflated_sensitivity,
    fpca_deflation_parameter,
    fpca_energy_shortfall,
    fpca_gram,
    fpca_sensitivity,
    gaussian_length_scale,
    gibbs_diagnostic,
    plan_fpca_release,
    projection_distance,
    release_fpca,
    top_components,
    variance_ratio,
    variance_ratio_paper,
)

GROWTH_AGES = np.r_[1.0, 1.25, 1.5, 1.75, np.arange(2.0, 8.0), np.arange(8.0, 18.5, 0.5)]


def _basis(m: int = 5):  # noqa: ANN202
    g = grid_from_nodes((GROWTH_AGES - 1.0) / 17.0, (0.0, 1.0))
    return fpca_basis(g, {"name": "gaussian", "length_scale": gaussian_length_scale(g, m)}, m)


def _utility(curves: np.ndarray, basis, tau: float, v: np.ndarray) -> float:  # noqa: ANN001
    """xi_D(P) = sum_i ||P X_i||^2 for the clipped curves, computed on the grid."""
    g = fpca_gram(curves, basis, tau)
    return float(np.trace(v.T @ g @ v))


def _random_frame(rng: np.random.Generator, m: int, k: int) -> np.ndarray:
    return np.linalg.qr(rng.standard_normal((m, k)))[0]


def test_sensitivity_worst_case_is_attained() -> None:
    b = _basis()
    rng = np.random.default_rng(0)
    tau = 0.7
    v = _random_frame(rng, 5, 2)
    others = rng.standard_normal((20, b.grid.size))
    inside = b.functions @ v[:, 0] * tau  # in range(P), norm tau
    full = np.linalg.qr(np.c_[v, rng.standard_normal((5, 3))])[0][:, 2]  # a unit direction orthogonal to range(V)
    outside = b.functions @ full * tau
    d1, d2 = np.vstack([inside, others]), np.vstack([outside, others])
    gap = abs(_utility(d1, b, tau, v) - _utility(d2, b, tau, v))
    assert gap == pytest.approx(fpca_sensitivity(tau), rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 4), tau=st.floats(0.1, 3.0), scale=st.floats(0.01, 10.0))
def test_neighbours_never_exceed_tau_squared(seed: int, k: int, tau: float, scale: float) -> None:
    b = _basis()
    rng = np.random.default_rng(seed)
    d1 = rng.standard_normal((15, b.grid.size)) * scale
    d2 = d1.copy()
    d2[rng.integers(15)] = rng.standard_normal(b.grid.size) * scale * 3  # replace one record
    v = _random_frame(rng, 5, k)
    assert abs(_utility(d1, b, tau, v) - _utility(d2, b, tau, v)) <= fpca_sensitivity(tau) * (1 + 1e-9)
    # hence the data term of log p_D(V) moves by at most eps/2 (the base measure does not move)
    a1 = fpca_bingham_parameter(fpca_gram(d1, b, tau), b.sigma, epsilon=0.8, tau=tau)
    a2 = fpca_bingham_parameter(fpca_gram(d2, b, tau), b.sigma, epsilon=0.8, tau=tau)
    assert abs(np.trace(v.T @ (a1 - a2) @ v)) <= 0.4 * (1 + 1e-9)


def test_bingham_parameter_is_the_stated_formula() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((30, 4))
    sigma = np.array([0.5, 0.3, 0.15, 0.05])
    a = fpca_bingham_parameter(x.T @ x, sigma, epsilon=0.5, tau=2.0)
    assert np.allclose(a, 0.5 / (2 * 4.0) * x.T @ x - 0.25 * np.diag(1 / sigma))
    a_c = fpca_bingham_parameter(x.T @ x, sigma, epsilon=0.5, tau=2.0, prior_strength=0.0)
    assert np.allclose(a_c, x.T @ x / 16)


def test_mechanism_law_matches_the_exponential_mechanism_density() -> None:
    """k = 1: the release follows p(v) ∝ exp(eps/(2 tau^2) sum_i <v, x_i>^2 - c v^T Sigma^-1 v) on the sphere."""
    b = _basis(4)
    rng = np.random.default_rng(2)
    curves = rng.standard_normal((40, b.grid.size)) * 0.4 + 0.6 * np.outer(rng.standard_normal(40), b.functions[:, 1])
    tau, eps = 1.0, 2.0
    plan = plan_fpca_release(b, n_components=1, epsilon=eps, tau=tau)
    gram = fpca_gram(curves, b, tau)
    a = fpca_bingham_parameter(gram, b.sigma, epsilon=eps, tau=tau, prior_strength=plan.prior_strength)
    v = sample_matrix_bingham(a, 1, rng, n_sweeps=0, n_chains=20_000)[:, :, 0]
    assert draw_fpca_components(plan, gram, rng).shape == (4, 1)
    # independent reference: importance sampling of the density written from the data directly
    xc = fpca_coefficients(np.asarray(curves) * np.minimum(1, tau / b.grid.norm(curves))[:, None], b)
    u = rng.standard_normal((200_000, 4))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    logw = eps / (2 * tau**2) * ((u @ xc.T) ** 2).sum(axis=1) - (eps / 2) * (u**2 / b.sigma).sum(axis=1)
    w = np.exp(logw - logw.max())
    ref = np.einsum("n,ni,nj->ij", w / w.sum(), u, u)
    assert np.abs(v.T @ v / v.shape[0] - ref).max() < 0.015


def test_deflation_step_law_is_the_exponential_mechanism_on_the_complement() -> None:
    """issue 17 finding 3: step j draws exactly p(v) ∝ exp(eps_j/(2 tau^2) sum_i <v, x_i>^2 - c_j v^T Sigma^-1 v)
    over unit v orthogonal to the released v_1 (the deflated problem; sensitivity tau^2 by contraction)."""
    b = _basis(4)
    rng = np.random.default_rng(12)
    curves = rng.standard_normal((40, b.grid.size)) * 0.4 + 0.6 * np.outer(rng.standard_normal(40), b.functions[:, 1])
    tau, eps_j, c_j = 1.0, 1.5, 0.75
    gram = fpca_gram(curves, b, tau)
    v1 = np.linalg.qr(rng.standard_normal((4, 1)))[0]
    q, a_j = fpca_deflation_parameter(gram, b.sigma, v1, epsilon=eps_j, tau=tau, prior_strength=c_j)
    assert np.allclose(q.T @ v1, 0.0) and np.allclose(q.T @ q, np.eye(3))
    v = sample_vector_bingham(a_j, rng, size=20_000) @ q.T
    xc = fpca_coefficients(np.asarray(curves) * np.minimum(1, tau / b.grid.norm(curves))[:, None], b)
    u = rng.standard_normal((200_000, 4))
    u -= (u @ v1) @ v1.T
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    logw = eps_j / (2 * tau**2) * ((u @ xc.T) ** 2).sum(axis=1) - c_j * (u**2 / b.sigma).sum(axis=1)
    w = np.exp(logw - logw.max())
    ref = np.einsum("n,ni,nj->ij", w / w.sum(), u, u)
    assert np.abs(v.T @ v / v.shape[0] - ref).max() < 0.015


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), j=st.integers(0, 3))
def test_deflated_utility_moves_by_at_most_tau_squared(seed: int, j: int) -> None:
    rng = np.random.default_rng(seed)
    tau, m = 0.7, 5
    released = np.linalg.qr(rng.standard_normal((m, m)))[0][:, :j]
    x = rng.standard_normal((6, m))
    x *= np.minimum(1, tau / np.linalg.norm(x, axis=1))[:, None]
    x2 = x.copy()
    x2[0] = rng.standard_normal(m)
    x2[0] *= min(1, tau / np.linalg.norm(x2[0]))
    q, _ = fpca_deflation_parameter(np.eye(m), np.ones(m), released, epsilon=1.0, tau=tau, prior_strength=0.0)
    z = rng.standard_normal((100, q.shape[1]))
    vs = (z / np.linalg.norm(z, axis=1, keepdims=True)) @ q.T
    change = np.abs(((vs @ x.T) ** 2).sum(axis=1) - ((vs @ x2.T) ** 2).sum(axis=1))
    assert change.max() <= fpca_deflated_sensitivity(tau) * (1 + 1e-12)
    # attained: a record of norm tau inside the complement replaced by one orthogonal to the direction
    v = vs[0]
    worst = abs((tau * v @ v) ** 2 - 0.0)
    assert worst == pytest.approx(fpca_deflated_sensitivity(tau))


def test_release_recovers_a_strong_signal_and_is_uninformative_at_tiny_epsilon() -> None:
    b = _basis()
    rng = np.random.default_rng(3)
    truth = b.functions @ np.linalg.qr(rng.standard_normal((5, 2)))[0]
    curves = (rng.standard_normal((400, 2)) * [0.6, 0.4]) @ truth.T + 0.01 * rng.standard_normal((400, b.grid.size))
    v_hat = top_components(fpca_coefficients(curves, b), 2)
    big = release_fpca(curves, b, n_components=2, epsilon=50.0, tau=1.0, rng=rng, prior_strength=0.0)
    assert big.plan.exact and big.private
    assert projection_distance(big.frame, v_hat) < 0.05
    assert variance_ratio(fpca_coefficients(curves, b), big.frame) > 0.95
    gibbs = release_fpca(curves, b, n_components=2, epsilon=50.0, tau=1.0, rng=rng, prior_strength=0.0, burn_in=200,
                         sampler="gibbs", non_private=True)
    assert not gibbs.private and gibbs.epsilon is None and projection_distance(gibbs.frame, v_hat) < 0.05
    plan = plan_fpca_release(b, n_components=2, epsilon=1e-4, tau=1.0, prior_strength=0.0, burn_in=20,
                             sampler="gibbs", non_private=True)
    a = fpca_bingham_parameter(fpca_gram(curves, b, 1.0), b.sigma, epsilon=1e-4, tau=1.0, prior_strength=0.0)
    tiny = sample_matrix_bingham(a, 2, rng, n_sweeps=plan.burn_in, n_chains=2000)
    # uniform subspace: E[d] = k - k^2/m = 2 - 4/5
    assert np.mean(projection_distance(tiny, v_hat)) == pytest.approx(1.2, abs=0.05)


@pytest.mark.parametrize("k", [1, 2])
def test_energy_shortfall_figure_matches_the_mechanism_and_bounds_it_when_unresolved(k: int) -> None:
    """accuracy.fpca.energy_shortfall@1: with no base measure (c = 0) the released subspace falls short of the best one by
    k (m - k) tau^2 / (n epsilon_step) per record where the mechanism resolves the spectrum (the Laplace
    approximation), and by less where it does not (the shortfall cannot exceed the records' own spread)."""
    b, m, n = _basis(6), 6, 300
    rng = np.random.default_rng(11)
    frame = np.linalg.qr(rng.standard_normal((m, m)))[0]
    curves = (rng.standard_normal((n, m)) * [0.5, 0.35, 0.2, 0.1, 0.05, 0.02]) @ (b.functions @ frame).T
    tau = float(np.sqrt(np.max(np.sum(curves**2 * b.grid.weights, axis=1))))  # nothing clipped
    x = fpca_coefficients(curves, b)
    s = x.T @ x / n
    best = float(np.sum(np.linalg.eigvalsh(s)[::-1][:k]))

    def realised(eps: float) -> float:
        frames = [release_fpca(curves, b, n_components=k, epsilon=eps, tau=tau, rng=rng, prior_strength=0.0).frame
                  for _ in range(60)]
        return best - float(np.mean([np.trace(v.T @ s @ v) for v in frames]))

    resolved = plan_fpca_release(b, n_components=k, epsilon=40.0, tau=tau, prior_strength=0.0)
    figure = resolved.expected_energy_shortfall(n)
    assert figure == fpca_energy_shortfall(m, k, n=n, epsilon_step=40.0 / k, tau=tau)
    assert 0.7 < realised(40.0) / figure < 1.4
    coarse = plan_fpca_release(b, n_components=k, epsilon=0.05, tau=tau, prior_strength=0.0)  # near-uniform draws
    assert realised(0.05) < 0.5 * coarse.expected_energy_shortfall(n)


def test_metrics_ranges_invariances_and_extremes() -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((50, 6)) * np.arange(6, 0, -1)
    v_hat = top_components(x, 3)
    assert variance_ratio(x, v_hat) == pytest.approx(1.0)
    assert variance_ratio_paper(x, v_hat) == pytest.approx(1.0)
    assert projection_distance(v_hat, v_hat) == pytest.approx(0.0, abs=1e-12)
    frames = np.linalg.qr(rng.standard_normal((200, 6, 3)))[0]
    vr = variance_ratio(x, frames)
    assert np.all((vr >= 0) & (vr <= 1 + 1e-12))
    assert np.all((variance_ratio_paper(x, frames) >= 0) & (variance_ratio_paper(x, frames) <= 1 + 1e-12))
    pd = projection_distance(frames, v_hat)
    assert np.all((pd >= -1e-12) & (pd <= 3 + 1e-12))
    # rotations and sign flips inside the subspace change nothing (a release is a subspace)
    o = np.linalg.qr(rng.standard_normal((3, 3)))[0] * [1, -1, 1]
    assert np.allclose(variance_ratio(x, frames @ o), vr)
    assert np.allclose(projection_distance(frames @ o, v_hat), pd)
    # orthogonal subspaces are at distance k
    assert projection_distance(np.eye(6)[:, :3], np.eye(6)[:, 3:]) == pytest.approx(3.0)


def test_gaussian_length_scale_rule_is_the_smallest_meeting_the_share() -> None:
    g = midpoint_grid(40)
    ell = gaussian_length_scale(g, 5, explained=0.99)
    assert fpca_basis(g, {"name": "gaussian", "length_scale": ell}, 5).explained >= 0.99
    assert fpca_basis(g, {"name": "gaussian", "length_scale": ell * 0.98}, 5).explained < 0.99
    with pytest.raises(DomainError, match=r"explained \(1.5\) must be in \(0, 1\)"):
        gaussian_length_scale(g, 5, explained=1.5)


def test_split_rhat_separates_mixed_from_stuck_chains() -> None:
    rng = np.random.default_rng(5)
    mixed = rng.standard_normal((4, 400, 1))
    stuck = mixed + np.array([0.0, 0.0, 3.0, 3.0])[:, None, None]
    assert _split_rhat(mixed)[0] < 1.02
    assert _split_rhat(stuck)[0] > 1.5


def test_gibbs_diagnostic_reports_convergence_on_an_easy_target() -> None:
    a = np.diag([3.0, 2.0, 0.5, 0.0, -1.0])
    d = gibbs_diagnostic(a, 2, np.random.default_rng(6), n_sweeps=400, n_chains=6)
    assert d.converged_after is not None and d.converged_after <= 400
    assert d.energy.shape == (6, 400)


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"n_components": 5}, DomainError, r"n_components \(5\) must be < n_basis \(5\)"),
        ({"n_components": 7}, DomainError, r"n_components \(7\) must be < n_basis \(5\)"),
        ({"n_components": 0}, DomainError, r"n_components \(0\) must be an integer >= 1"),
        ({"epsilon": 0.0}, PrivacyParameterError, r"epsilon \(0.0\) must be finite and > 0"),
        ({"tau": -1.0}, PrivacyParameterError, r"tau \(-1.0\) must be finite and > 0"),
        ({"prior_strength": -1.0}, DomainError, r"prior_strength \(-1.0\) must be finite and >= 0"),
        ({"burn_in": 0, "sampler": "gibbs", "non_private": True}, DomainError, r"burn_in \(0\) must be"),
        ({"burn_in": 20000}, DomainError, r"burn_in \(20000\) is a parameter of the gibbs sampler only"),
        ({"sampler": "gibbs"}, DomainError, r"no certified bound .* not differentially private"),
        ({"sampler": "mcmc"}, DomainError, r"sampler \('mcmc'\) must be one of"),
        ({"non_private": True}, DomainError, r"non_private is only meaningful with sampler 'gibbs'"),
        ({"method": "mh"}, DomainError, r"method \('mh'\) must be"),
    ],
)
def test_plan_rejects_bad_inputs(kwargs: dict[str, object], err: type[Exception], match: str) -> None:
    args: dict[str, object] = {"n_components": 2, "epsilon": 1.0, "tau": 1.0, **kwargs}
    with pytest.raises(err, match=match):
        plan_fpca_release(_basis(), **args)  # type: ignore[arg-type]


@pytest.mark.parametrize("sigma", [[1.0, 0.0, 0.5], [1.0, -0.2, 0.5], [1.0, np.inf, 0.5]])
def test_non_positive_definite_sigma_is_rejected(sigma: list[float]) -> None:
    with pytest.raises(DomainError, match="Sigma positive definite"):
        fpca_bingham_parameter(np.eye(3), sigma, epsilon=1.0, tau=1.0)


def test_basis_size_is_checked() -> None:
    with pytest.raises(DomainError, match=r"n_basis \(200\) must be <="):
        fpca_basis(midpoint_grid(20), {"name": "gaussian", "length_scale": 0.2}, 200)
