"""RKHS ERM (MATH.md §9): solver against closed forms and certified gaps, sensitivity never exceeded on neighbours (10-point unit), calibration, bad inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fdpcore.basis.grids import midpoint_grid
from fdpcore.errors import DomainError, PrivacyParameterError
from fdpcore.summaries.erm import (
    erm_gp_sensitivity,
    erm_iclp_sensitivity,
    erm_lipschitz,
    erm_rkhs_sensitivity,
    plan_erm_release,
    release_erm,
    solve_erm,
    summarise_erm,
)
from fdpcore.summaries.kde import draw_point_release, point_space

KERNEL = {"name": "matern", "nu": 1.5, "rho": 0.2}
G = midpoint_grid(25)


def test_ridge_matches_kernel_ridge_closed_form() -> None:
    s = point_space(KERNEL, [G])
    rng = np.random.default_rng(0)
    n, eta, psi = 40, 1.5, 0.05
    x = rng.uniform(size=(n, 1))
    y = np.sin(6 * x[:, 0])
    idx = s.snap(x)
    sol = solve_erm(idx, y, np.full(n, 1 / n), s, loss="ridge", eta=eta, psi=psi)
    k_eta = s.eigenfunctions @ np.diag(s.eigenvalues**eta) @ s.eigenfunctions.T  # c_eta on the grid
    alpha = np.linalg.solve(k_eta[np.ix_(idx, idx)] + n * psi * np.eye(n), y)
    assert np.allclose(s.eigenfunctions @ sol.theta, k_eta[:, idx] @ alpha, atol=1e-9)
    assert sol.gap <= 1e-20


@pytest.mark.parametrize("loss", ["logistic", "hinge"])
def test_classifiers_reach_the_certified_gap_and_are_optimal(loss: str) -> None:
    s = point_space(KERNEL, [G])
    rng = np.random.default_rng(1)
    x = rng.uniform(size=(300, 1))
    y = np.where(rng.uniform(size=300) < 1 / (1 + np.exp(-8 * (x[:, 0] - 0.5))), 1.0, -1.0)
    w = np.full(300, 1 / 300)
    sol = solve_erm(s.snap(x), y, w, s, loss=loss, eta=1.5, psi=0.01, tolerance=1e-10)
    assert sol.gap <= 1e-10
    beta = sol.theta / s.eigenvalues**0.75
    feats = s.eigenfunctions[s.snap(x)] * s.eigenvalues**0.75

    def objective(b: np.ndarray) -> float:
        m = y * (feats @ b)
        lossv = np.logaddexp(0, -m) if loss == "logistic" else np.maximum(0, 1 - m)
        return float(w @ lossv + 0.01 * b @ b)

    best = objective(beta)
    for _ in range(50):  # no random perturbation improves the certified solution by more than the gap
        assert objective(beta + 1e-3 * rng.normal(size=beta.shape)) >= best - 1e-10


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), loss=st.sampled_from(["ridge", "logistic", "hinge"]), m=st.integers(1, 10))
def test_neighbours_never_exceed_the_rkhs_1c_and_cm_bounds(seed: int, loss: str, m: int) -> None:
    n, eta, psi = 15, 1.5, 0.02
    kw = {"label_bound": 1.0} if loss == "ridge" else {}
    plan = plan_erm_release(G, KERNEL, n=n, epsilon=1.0, loss=loss, psi=psi, eta=eta, secure=False, **kw)
    gp = plan_erm_release(G, KERNEL, n=n, epsilon=1.0, delta=1e-5, mechanism="gp", loss=loss, psi=psi, eta=eta,
                          secure=False, **kw)
    rng = np.random.default_rng(seed)
    base = rng.uniform(size=(n - 1, 1))
    ybase = rng.choice([-1.0, 1.0], size=n - 1)
    a, b = rng.uniform(size=(10, 1)), rng.uniform(size=(m, 1))  # unit 0: 10 points in D, m points in D'
    ya, yb = rng.choice([-1.0, 1.0], size=10), rng.choice([-1.0, 1.0], size=m)
    units_a = np.concatenate([np.zeros(10, int), np.arange(1, n)])
    units_b = np.concatenate([np.zeros(m, int), np.arange(1, n)])
    za = summarise_erm(np.vstack([a, base]), np.concatenate([ya, ybase]), units_a, plan)
    zb = summarise_erm(np.vstack([b, base]), np.concatenate([yb, ybase]), units_b, plan)
    lam = plan.space.eigenvalues
    theta = (za - zb) * np.sqrt(lam)
    h_norm = math.sqrt(float(np.sum(theta**2 / lam**eta)))
    assert h_norm <= plan.parameters["rkhs_sensitivity"] * (1 + 1e-9)
    assert np.abs(za - zb).sum() <= plan.sensitivity * (1 + 1e-9)
    assert np.linalg.norm(za - zb) <= gp.sensitivity * (1 + 1e-9)


def test_flipping_one_label_moves_the_minimiser_by_a_large_share_of_the_bound() -> None:
    # Linear-loss tightness (MATH.md §9) carries over approximately to the hinge in its linear zone:
    # a single unit far from the margin flips its label.
    n, psi, eta = 200, 0.5, 1.0
    s = point_space({"name": "gaussian", "length_scale": 5.0}, [G])  # nearly constant kernel: k ~ 1
    x = np.full((n, 1), 0.5)
    y = np.ones(n)
    y2 = y.copy()
    y2[0] = -1.0
    w = np.full(n, 1 / n)
    t1 = solve_erm(s.snap(x), y, w, s, loss="hinge", eta=eta, psi=psi).theta
    t2 = solve_erm(s.snap(x), y2, w, s, loss="hinge", eta=eta, psi=psi).theta
    dist = math.sqrt(float(np.sum((t1 - t2) ** 2 / s.eigenvalues**eta)))
    kappa = math.sqrt(float(np.max((s.eigenfunctions**2) @ s.eigenvalues**eta)))  # sup of the reproducing kernel
    bound = erm_rkhs_sensitivity(1.0, kappa=kappa, psi=psi, n=n)
    assert 0.9 * bound <= dist <= bound * (1 + 1e-9)


def test_lipschitz_and_sensitivity_formulas() -> None:
    assert erm_lipschitz("logistic", kappa=2.0, psi=0.1) == 1.0
    assert erm_lipschitz("ridge", kappa=1.0, psi=0.04, label_bound=2.0) == pytest.approx(2 * 2 * (1 + 5))
    assert erm_rkhs_sensitivity(1.0, kappa=1.0, psi=0.01, n=100, tolerance=1e-8) == pytest.approx(1.0 + 2e-3)
    s = point_space(KERNEL, [G])
    assert erm_iclp_sensitivity(1.0, s, eta=2.0) == pytest.approx(math.sqrt(float(np.sum(s.eigenvalues))))
    assert erm_gp_sensitivity(1.0, s, eta=2.0) == pytest.approx(math.sqrt(float(s.eigenvalues[0])))


@pytest.mark.parametrize("mechanism", ["iclp", "gp"])
def test_noise_spread_matches_the_calibration(mechanism: str) -> None:
    plan = plan_erm_release(G, KERNEL, n=500, epsilon=1.0, delta=1e-5 if mechanism == "gp" else 0.0, mechanism=mechanism,
                            loss="hinge", psi=0.05, secure=False)
    draws = draw_point_release(plan, np.zeros(plan.space.n_basis), draws=20000, rng=np.random.default_rng(2))
    white = plan.space.coefficients(draws) / np.sqrt(plan.space.eigenvalues)
    expected_var = plan.variance
    assert float(white.var(axis=0).mean()) == pytest.approx(expected_var, rel=0.03)
    if mechanism == "iclp":
        assert plan.calibration.scale == pytest.approx(plan.sensitivity)  # epsilon = 1
    assert plan.parameters["rkhs_sensitivity"] > plan.parameters["rkhs_sensitivity_exact_minimiser"]


def test_two_covariates_on_a_tensor_grid() -> None:
    rng = np.random.default_rng(4)
    x = rng.uniform(size=(400, 2))
    y = np.where(x[:, 0] + x[:, 1] > 1, 1.0, -1.0)
    values, plan = release_erm(x, y, axes=(midpoint_grid(12), midpoint_grid(10)), kernel=KERNEL, epsilon=1.0,
                               loss="hinge", psi=0.01, secure=False, rng=rng)
    assert values.shape == (1, 120) and plan.space.shape == (12, 10)
    assert "eigen.tensor_kron@1" in plan.formulas


def test_bad_inputs() -> None:
    plan = plan_erm_release(G, KERNEL, n=3, epsilon=1.0, loss="hinge", psi=0.1, secure=False)
    with pytest.raises(DomainError, match="must be -1 or \\+1 for loss 'hinge'"):
        summarise_erm(np.array([[0.1], [0.5], [0.9]]), np.array([1.0, 0.0, 1.0]), np.arange(3), plan)
    with pytest.raises(PrivacyParameterError, match="label_bound"):
        plan_erm_release(G, KERNEL, n=3, epsilon=1.0, loss="ridge", psi=0.1, secure=False)
    with pytest.raises(PrivacyParameterError, match="delta"):
        plan_erm_release(G, KERNEL, n=3, epsilon=1.0, loss="hinge", psi=0.1, mechanism="gp", secure=False)
    with pytest.raises(PrivacyParameterError, match="eta"):
        plan_erm_release(G, KERNEL, n=3, epsilon=1.0, loss="hinge", psi=0.1, eta=0.5, secure=False)
    with pytest.raises(DomainError, match="loss"):
        plan_erm_release(G, KERNEL, n=3, epsilon=1.0, loss="huber", psi=0.1, secure=False)
    with pytest.raises(DomainError, match="unit box"):
        summarise_erm(np.array([[0.1], [1.5], [0.9]]), np.ones(3), np.arange(3), plan)


def test_release_erm_label_offset_is_a_public_shift_of_the_ridge_release() -> None:
    """Ridge on y + c with label_offset c is the release on y, shifted by c (same NumPy noise draws)."""
    from fdpcore.summaries.erm import release_erm

    rng = np.random.default_rng(3)
    x = rng.uniform(size=(200, 1))
    y = np.sin(6 * x[:, 0])
    kw = dict(axes=midpoint_grid(20), kernel={"name": "matern", "nu": 1.5, "rho": 0.2}, epsilon=1.0, loss="ridge",
              psi=0.2, label_bound=1.5, secure=False)
    base, _ = release_erm(x, y, rng=np.random.default_rng(7), **kw)  # type: ignore[arg-type]
    shifted, _ = release_erm(x, y + 250.0, label_offset=250.0, rng=np.random.default_rng(7), **kw)  # type: ignore[arg-type]
    np.testing.assert_allclose(shifted, base + 250.0, rtol=0, atol=1e-9)
    unshifted, _ = release_erm(x, y + 250.0, rng=np.random.default_rng(7), **kw)  # type: ignore[arg-type]
    assert np.abs(unshifted - base - 250.0).max() > 100  # without the offset the responses are clipped to 1.5
    with pytest.raises(DomainError, match="label_offset"):
        release_erm(x, np.sign(y), label_offset=1.0, **{**kw, "loss": "logistic", "label_bound": None})  # type: ignore[arg-type]
