"""Tuning: PSS rules per mechanism, the exponential-mechanism selection (MATH.md §5.3) and PCV (§5.2)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fdpcore.accounting import exact
from fdpcore.errors import DomainError, PrivacyParameterError
from fdpcore.grids import midpoint_grid
from fdpcore.preprocess import clip_l2
from fdpcore.release import _fits, plan_mean_release, release_mean, select_mean_parameters
from fdpcore.selection import exponential_select, selection_score_sensitivity, selection_scores, split_sizes
from fdpcore.tuning import pss_bernstein, pss_frl, pss_iclp_ar, pss_iclp_qr, pss_mean

MATERN = {"name": "matern", "nu": 1.5, "rho": 0.1}


def test_pss_values_per_mechanism() -> None:
    assert (pss_iclp_qr("paper_balanced", beta=4.0, n=100, epsilon=1.0).eta) == 1.5
    assert pss_frl("exact", n=100, epsilon=1.0, n_kept=50).n_basis == 10
    assert pss_frl("paper", n=1000, epsilon=1.0, n_kept=50).n_basis == 10
    assert pss_frl("exact", n=10**6, epsilon=1.0, n_kept=48).n_basis == 48  # clipped to |J|
    c = pss_iclp_ar("derived_l1", beta=4.0, n=400, epsilon=0.5)
    assert c.eta == 3.0 and c.psi == pytest.approx(1 / 100)  # eta beta / (2 (beta + 2)) = 1
    assert pss_bernstein("derived_c2", n=128, epsilon=1.0).lattice_k == round(128 ** (4 / 7))
    assert pss_mean("gp", "exact_free", beta=4.0, n=100, epsilon=1.0, n_kept=9).formula_id == "tuning.pss.iclp_qr.exact_free@1"
    with pytest.raises(DomainError, match=r"tuning.rule \('balanced'\) must be one of"):
        pss_iclp_ar("balanced", beta=4.0, n=10, epsilon=1.0)


def test_exponential_mechanism_frequencies_match_the_exponential_law() -> None:
    u = np.array([0.0, 0.02, 0.05, 0.01])
    eps, d_u = 1.0, 0.01
    rng = np.random.default_rng(0)
    counts = np.bincount([exponential_select(u, epsilon=eps, sensitivity=d_u, secure=False, rng=rng)
                          for _ in range(20000)], minlength=4)
    w = np.exp(eps * u / (2 * d_u))
    assert stats.chisquare(counts, 20000 * w / w.sum()).pvalue > 1e-3
    wrong = np.exp(eps * u / d_u)  # the common factor-2 slip is detected
    assert stats.chisquare(counts, 20000 * wrong / wrong.sum()).pvalue < 1e-6


def test_secure_selection_draws_with_opendp() -> None:
    picks = {exponential_select([0.0, 10.0, 0.0], epsilon=1.0, sensitivity=0.01) for _ in range(5)}
    assert picks == {1}
    with pytest.raises(DomainError, match="scores"):
        exponential_select([np.nan], epsilon=1.0, sensitivity=0.1)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), estimator=st.sampled_from(["iclp_qr", "iclp_ar", "frl"]),
       in_train=st.booleans())
def test_score_changes_by_at_most_delta_u_between_neighbours(seed: int, estimator: str, in_train: bool) -> None:
    rng = np.random.default_rng(seed)
    grid, n, tau = midpoint_grid(20), 30, 1.0
    plan = plan_mean_release(grid, MATERN, n=n, tau=tau, epsilon=1.0, estimator=estimator, tuning="dp_select",
                             select_epsilon=0.2, secure=False)
    spec = plan.selection
    assert spec is not None and spec.score_sensitivity == selection_score_sensitivity(tau, spec.n_train, spec.n_val)
    x, _ = clip_l2(rng.normal(size=(n, grid.size)) * rng.uniform(0.1, 5), grid.weights, tau)
    x2 = x.copy()
    i = rng.integers(0, spec.n_train) if in_train else rng.integers(spec.n_train, n)
    x2[i] = clip_l2(-x[i] * 10 + rng.normal(size=grid.size), grid.weights, tau)[0][0]

    def scores(data: np.ndarray) -> np.ndarray:
        theta = plan.basis.coefficients(data)
        fits = _fits(plan, theta[: spec.n_train].mean(axis=0), spec.candidates)
        return selection_scores(theta[spec.n_train :], grid.norm(data[spec.n_train :]) ** 2, fits, spec.penalties)

    assert np.max(np.abs(scores(x) - scores(x2))) <= spec.score_sensitivity * (1 + 1e-9)


def test_dp_select_plan_splits_the_budget_exactly_and_rescales_psi() -> None:
    grid, n = midpoint_grid(24), 90
    plan = plan_mean_release(grid, MATERN, n=n, tau=1.0, epsilon=0.7, tuning="dp_select", select_epsilon=0.2,
                             secure=False)
    assert plan.pending and [s["name"] for s in plan.budget_splits] == ["tuning", "mean"]
    assert sum((exact(s["epsilon"]) for s in plan.budget_splits), Fraction(0)) == exact(0.7)
    assert split_sizes(n) == (plan.selection.n_train, plan.selection.n_val) == (60, 30)
    x, _ = clip_l2(np.random.default_rng(1).normal(size=(n, 24)) * 0.2, grid.weights, 1.0)
    done = select_mean_parameters(x, plan, rng=np.random.default_rng(2))
    assert not done.pending and done.calibration.epsilon == 0.5
    assert any(done.psi == pytest.approx(c * 60 / 90) for c in plan.selection.candidates)
    with pytest.raises(DomainError, match="no pending selection"):
        select_mean_parameters(x, done)


def test_pcv_is_simulation_only_and_marked_non_private() -> None:
    grid = midpoint_grid(20)
    x = np.random.default_rng(0).normal(size=(60, 20)) * 0.2
    with pytest.raises(PrivacyParameterError, match=r"tuning \('pcv'\) is not differentially private"):
        release_mean(x, grid, epsilon=1.0, tau=1.0, kernel=MATERN, tuning="pcv")
    with pytest.raises(PrivacyParameterError, match="non_private=True"):
        plan_mean_release(grid, MATERN, n=60, tau=1.0, epsilon=1.0, tuning="pcv", secure=False)
    r1 = release_mean(x, grid, epsilon=1.0, tau=1.0, kernel=MATERN, tuning="pcv", secure=False,
                      rng=np.random.default_rng(1))
    r2 = release_mean(x, grid, epsilon=1.0, tau=1.0, kernel=MATERN, tuning="pcv", secure=False,
                      rng=np.random.default_rng(2))
    assert not r1.private and r1.plan.non_private and r1.plan.psi == r2.plan.psi  # deterministic in the data
    assert r1.plan.budget_splits == [{"name": "mean", "epsilon": 1.0, "delta": 0.0}]
