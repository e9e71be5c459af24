"""T2's smoothing chosen from the released T1~ (formula tuning.fosr.t2_given_t1@1, MATH.md §7, §12.1).

The choice reads only T1~ and public inputs; T2 is then noised at the exact sensitivity of the chosen pair. These
tests check that the re-shrunk summary is the summary at the chosen pair, that neighbours stay within that pair's
bound (worst case attained), that each draw's T2 noise has its own plan's spread, and that the rule does what it
is for: on a poorly conditioned design the error falls as epsilon grows, where the public pair's does not.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fdpcore.basis.grids import midpoint_grid
from fdpcore.data.preprocess import clip_l2
from fdpcore.summaries.fosr import (
    _reshrink,
    clip_covariates,
    draw_fosr_release,
    given_t1,
    plan_fosr_release,
    release_fosr,
    safe_inverse,
    summarise_fosr,
    t2_amplification,
)
from fdpcore.summaries.mean import iclp_qr_shrinkage, iclp_qr_weights

KERNEL = {"name": "matern", "nu": 1.5, "rho": 0.15}
GRID = midpoint_grid(20)
NEAR_SINGULAR = np.array([[1.0, 0.5, 0.5], [0.5, 0.5, 0.45], [0.5, 0.45, 0.5]])


def _plan(epsilon: float = 2.0, **kw: object):  # noqa: ANN202
    return plan_fosr_release(GRID, KERNEL, n=kw.pop("n", 200), n_covariates=2, intercept=True, bound=math.sqrt(2.0),
                             tau_y=kw.pop("tau_y", 0.7), epsilon=epsilon, secure=kw.pop("secure", False), **kw)


def _reshrunk(plan, drawn, z2):  # noqa: ANN001, ANN202
    lam = plan.basis.eigenvalues
    rows = np.asarray(z2).reshape(plan.p, -1)
    return (rows * _reshrink(lam, iclp_qr_shrinkage(lam, plan.eta, plan.psi), drawn)).ravel()


def test_amplification_is_the_mean_squared_inverse_eigenvalue_and_bounded_by_the_floor() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        a = rng.normal(size=(3, 3))
        t1 = a @ a.T / 3 + rng.normal(scale=0.3, size=(3, 3))
        floor = 0.2
        rho = np.linalg.eigvalsh((t1 + t1.T) / 2)
        assert t2_amplification(t1, floor) == pytest.approx(np.mean(1 / np.maximum(rho, floor) ** 2), rel=1e-10)
        assert t2_amplification(t1, floor) <= 1 / floor**2 * (1 + 1e-12)
    assert t2_amplification(np.eye(4), 0.5) == pytest.approx(1.0)


def test_a_poorly_conditioned_t1_buys_more_smoothing_and_keeps_the_budget_split() -> None:
    plan = _plan()
    assert plan.tuning == "risk_prior" and plan.t2_amplification is None
    well, poor = given_t1(plan, np.eye(3)), given_t1(plan, NEAR_SINGULAR)
    assert poor.t2_amplification > 10 * well.t2_amplification
    assert poor.psi > well.psi  # more smoothing where the inverse amplifies the noise
    assert poor.delta2 < well.delta2 and poor.calibration2.scale < well.calibration2.scale
    for drawn in (well, poor):
        # T1's part, the floor, gamma and the budget are the plan's: only T2's pair and its exact calibration move
        assert (drawn.epsilon1, drawn.epsilon2, drawn.gamma, drawn.floor) == (plan.epsilon1, plan.epsilon2,
                                                                             plan.gamma, plan.floor)
        assert drawn.calibration1 is plan.calibration1 and drawn.budget_splits == plan.budget_splits
        assert drawn.calibration2.scale >= drawn.delta2 / drawn.epsilon2 * (1 - 1e-12)
        assert {"tuning.fosr.t2_given_t1@1", "tuning.risk.iclp_qr.prior@1"} <= set(drawn.formulas)


def test_fixed_pairs_and_pss_rules_are_not_re_chosen() -> None:
    fixed = _plan(eta=1.0, psi=1e-2)
    pss = _plan(tuning="exact_free")
    for plan in (fixed, pss):
        assert given_t1(plan, NEAR_SINGULAR) is plan
        _, _, plans = draw_fosr_release(plan, np.zeros(len(plan.t1_index[0])), np.zeros(plan.p * plan.basis.n_basis),
                                        draws=3, rng=np.random.default_rng(1))
        assert all(p is plan for p in plans)


def _records(n: int, seed: int, plan) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001
    rng = np.random.default_rng(seed)
    z, _ = clip_covariates(rng.choice([0.0, 1.0], size=(n, 2)), plan.bound)
    y, _ = clip_l2(rng.normal(size=(n, GRID.size)) * 0.3, GRID.weights, plan.tau_y)
    return z, y


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.sampled_from([0.01, 0.1, 0.5]))
def test_neighbours_stay_within_the_chosen_pairs_bound_and_the_summary_is_that_pairs(seed: int, scale: float) -> None:
    """Any released T1~ (near-singular ones included): the re-shrunk T2 of two neighbours differs by <= delta2."""
    plan = _plan()
    rng = np.random.default_rng(seed)
    t1 = NEAR_SINGULAR + rng.normal(scale=scale, size=(3, 3))
    drawn = given_t1(plan, (t1 + t1.T) / 2)
    z, y = _records(plan.n, seed, plan)
    # the worst case: one record at the eigenfunction with the largest shrunk weight, sign flipped, covariates at B
    a = iclp_qr_weights(plan.basis.eigenvalues, drawn.eta, drawn.psi)
    u = plan.basis.reconstruct(a / np.linalg.norm(a))
    z_star = np.full(2, plan.bound / math.sqrt(2.0))
    z[0], y[0] = z_star, plan.tau_y * u
    y2 = y.copy()
    y2[0] = -plan.tau_y * u
    _, g = summarise_fosr(z, y, plan)
    _, g2 = summarise_fosr(z, y2, plan)
    r, r2 = _reshrunk(plan, drawn, g), _reshrunk(plan, drawn, g2)
    at_pair = plan_fosr_release(GRID, KERNEL, n=plan.n, n_covariates=2, intercept=True, bound=plan.bound,
                                tau_y=plan.tau_y, epsilon=plan.epsilon, gamma=plan.gamma, eta=drawn.eta,
                                psi=drawn.psi, secure=False)
    assert np.allclose(r, summarise_fosr(z, y, at_pair)[1], rtol=1e-9, atol=1e-15)  # exactly the chosen pair's summary
    assert at_pair.delta2 == pytest.approx(drawn.delta2, rel=1e-12)
    assert float(np.abs(r - r2).sum()) == pytest.approx(drawn.delta2, rel=1e-8)  # attained
    y3 = y.copy()
    y3[0] = clip_l2(rng.normal(size=(1, GRID.size)), GRID.weights, plan.tau_y)[0][0]
    assert float(np.abs(r - _reshrunk(plan, drawn, summarise_fosr(z, y3, plan)[1])).sum()) <= drawn.delta2 * (1 + 1e-9)


@pytest.mark.parametrize("secure", [False, True])
def test_each_draws_t2_noise_has_its_own_plans_laplace_scale(secure: bool) -> None:
    plan = _plan(epsilon=3.0, secure=secure, floor=0.03)  # a low public floor: it rarely binds
    z, y = _records(plan.n, 3, plan)
    z1, z2 = summarise_fosr(z, y, plan)
    draws = 200 if secure else 600  # OpenDP cannot be seeded; the KS false-alarm rate is 1e-7
    coef, t1, plans = draw_fosr_release(plan, z1, z2, draws=draws, rng=np.random.default_rng(5))
    assert len({(p.eta, p.psi) for p in plans}) > 1  # the pair follows the noisy T1~
    lam, phi, w = plan.basis.eigenvalues, plan.basis.eigenfunctions, GRID.weights
    white = []
    for c, m, drawn in zip(coef, t1, plans, strict=True):
        assert drawn.t2_amplification == pytest.approx(t2_amplification(m, plan.floor), rel=1e-12)
        if np.linalg.eigvalsh(m)[0] <= plan.floor:
            continue  # the floor binds: T1~ beta~ is not T2~
        g = (m @ c) @ (w[:, None] * phi)
        white.append(((g / np.sqrt(lam)).ravel() - _reshrunk(plan, drawn, z2)) / drawn.calibration2.scale)
    assert len(white) > draws // 2
    assert stats.kstest(np.concatenate(white), stats.laplace.cdf).pvalue > 1e-7


def test_on_a_poorly_conditioned_design_the_error_falls_with_epsilon_where_the_public_pair_does_not() -> None:
    """One-hot 3-level factor with an intercept (smallest design eigenvalue about 0.1): 40 releases per cell."""
    n = 90
    t = GRID.grid_points
    level = np.arange(n) % 3
    z = np.column_stack([level == 1, level == 2]).astype(float)
    rng = np.random.default_rng(11)
    y = (0.4 * np.sin(2 * np.pi * t) + 0.05 * z[:, :1] - 0.03 * z[:, 1:] * t
         + 0.05 * rng.normal(size=(n, GRID.size)))
    x = np.column_stack([np.ones(n), z])
    beta = np.linalg.solve(x.T @ x, x.T @ y)

    def rmse(eps: float, public_pair: bool) -> float:
        kw = {}
        if public_pair:  # the pair the plan chose from public inputs, kept for every draw
            p0 = plan_fosr_release(GRID, KERNEL, n=n, n_covariates=2, intercept=True, bound=math.sqrt(2.0), tau_y=1.0,
                                   epsilon=eps, secure=False)
            kw = {"eta": p0.eta, "psi": p0.psi, "gamma": p0.gamma}
        r = release_fosr(y, z, GRID, epsilon=eps, tau_y=1.0, bound=math.sqrt(2.0), kernel=KERNEL, draws=40,
                         secure=False, rng=np.random.default_rng(int(eps * 10)), **kw)
        err = np.sum((r.coefficients - beta[None]) ** 2 * GRID.weights, axis=(1, 2))
        return math.sqrt(float(err.mean()))

    chosen = [rmse(e, False) for e in (2.0, 8.0, 32.0)]
    public = [rmse(e, True) for e in (2.0, 8.0, 32.0)]
    assert chosen[0] > chosen[1] > chosen[2]
    assert chosen[1] < 0.7 * public[1] and chosen[2] < 0.7 * public[2]



@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), floor=st.sampled_from([0.01, 0.2, 1.0]))
def test_pass_through_is_what_the_floored_inverse_keeps_of_each_coefficient(seed: int, floor: float) -> None:
    """postprocess.fosr.safe_inverse@1: without noise beta~ = S beta; S_mm in [0, 1], 1 when the floor does not bind."""
    from fdpcore.summaries.fosr import safe_inverse_pass_through

    rng = np.random.default_rng(seed)
    a = rng.normal(size=(4, 4))
    t1 = a @ a.T / 4 + 0.01 * np.eye(4)
    kept = safe_inverse_pass_through(t1, floor)
    s = safe_inverse(t1, floor) @ t1  # PSD T1~: S = T1~^+ T1~ exactly
    assert np.allclose(kept, np.diag(s), atol=1e-10)
    assert np.all((kept >= -1e-12) & (kept <= 1 + 1e-12))
    if np.linalg.eigvalsh(t1)[0] >= floor:
        assert np.allclose(kept, 1.0)
    noisy = t1 - 2.0 * np.eye(4)  # negative, noise-made eigenvalues pass nothing
    assert np.all(safe_inverse_pass_through(noisy, floor) <= kept + 1e-12)
