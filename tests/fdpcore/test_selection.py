"""Tuning: PSS rules per mechanism, the exponential-mechanism selection (MATH.md §5.3) and PCV (§5.2)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fdpcore.basis.grids import midpoint_grid
from fdpcore.data.preprocess import clip_l2
from fdpcore.errors import DomainError, PrivacyParameterError
from fdpcore.noise.selection import (
    exponential_select,
    keyed_split,
    selection_key,
    selection_normalisers,
    selection_score_sensitivity,
)
from fdpcore.privacy.accounting import exact
from fdpcore.privacy.tuning import pss_bernstein, pss_frl, pss_iclp_ar, pss_iclp_qr, pss_mean
from fdpcore.summaries.mean import dp_select_scores, plan_mean_release, release_mean, select_mean_parameters

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


SIDES = [("train", "train"), ("val", "val"), ("train", "val"), ("val", "train")]


def _id_on_side(key: bytes, side: str, taken: set[str], stem: str) -> str:
    """A fresh unit id that the keyed hash puts on ``side``."""
    for j in range(10_000):
        uid = f"{stem}-{j}"
        if uid not in taken and bool(keyed_split([uid], key)[0]) == (side == "train"):
            return uid
    raise AssertionError("no id found")  # pragma: no cover


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), estimator=st.sampled_from(["iclp_qr", "iclp_ar", "frl"]),
       sides=st.sampled_from(SIDES))
def test_a_replaced_unit_moves_one_contribution_and_scores_by_at_most_delta_u(
        seed: int, estimator: str, sides: tuple[str, str]) -> None:
    """issue 17 finding 2: with the keyed-hash split no other unit changes side when one unit is replaced
    by a unit with another id, and every candidate's score moves by at most Delta_u (score_sensitivity@2)."""
    rng = np.random.default_rng(seed)
    grid, n, tau = midpoint_grid(20), 30, 1.0
    plan = plan_mean_release(grid, MATERN, n=n, tau=tau, epsilon=1.0, estimator=estimator, tuning="dp_select",
                             select_epsilon=0.2, secure=False)
    spec = plan.selection
    assert spec is not None and spec.score_sensitivity == selection_score_sensitivity(tau, spec.n_train, spec.n_val)
    assert spec.score_sensitivity == pytest.approx(8 * tau**2 / min(2 * n / 3, n / 3))
    key = rng.bytes(32)
    ids = [f"u{j}" for j in range(n)]
    old = _id_on_side(key, sides[0], set(ids), "old")
    new = _id_on_side(key, sides[1], set(ids), "new")
    ids[0] = old
    x, _ = clip_l2(rng.normal(size=(n, grid.size)) * rng.uniform(0.1, 5), grid.weights, tau)
    # the replaced unit: the old record at +tau, the new one at -tau along the leading eigenfunction (worst direction)
    x[0] = tau * plan.basis.eigenfunctions[:, 0] / grid.norm(plan.basis.eigenfunctions[:, 0][None, :])[0]
    x2, ids2 = x.copy(), [new, *ids[1:]]
    x2[0] = -x[0]
    # move the replaced row elsewhere: a position shift must not matter (flow: sorted ids; facade: row order)
    perm = rng.permutation(n)
    x2, ids2 = x2[perm], [ids2[p] for p in perm]
    shared = ids[1:]
    m1, m2 = keyed_split(ids, key), keyed_split(ids2, key)
    assert dict(zip(ids, m1, strict=True))[old] == (sides[0] == "train")
    assert [dict(zip(ids, m1, strict=True))[u] for u in shared] == [dict(zip(ids2, m2, strict=True))[u] for u in shared]
    u1 = dp_select_scores(plan, plan.basis.coefficients(x), ids, key)
    u2 = dp_select_scores(plan, plan.basis.coefficients(x2), ids2, key)
    assert np.max(np.abs(u1 - u2)) <= spec.score_sensitivity * (1 + 1e-9)


@pytest.mark.parametrize("estimator", ["iclp_qr", "iclp_ar", "frl"])
def test_worst_case_pair_comes_close_to_delta_u(estimator: str) -> None:
    """A pair built to be worst for one candidate: the change reaches a large share of Delta_u and never exceeds it."""
    grid, n, tau = midpoint_grid(20), 30, 1.0
    plan = plan_mean_release(grid, MATERN, n=n, tau=tau, epsilon=1.0, estimator=estimator, tuning="dp_select",
                             select_epsilon=0.2, secure=False)
    spec = plan.selection
    key = b"k" * 32
    ids = [f"u{j}" for j in range(n)]
    train = keyed_split(ids, key)
    phi = plan.basis.eigenfunctions[:, 0] / grid.norm(plan.basis.eigenfunctions[:, 0][None, :])[0]
    x = np.zeros((n, grid.size))
    x[train] = tau * phi  # training mean near +tau phi: the fit is far from the validation mean
    x[~train] = -tau * phi
    worst = 0.0
    for side in ("train", "val"):
        old = ids[int(np.flatnonzero(train if side == "val" else ~train)[0])]  # a validation (or training) unit
        for new_side in ("train", "val"):
            new = _id_on_side(key, new_side, set(ids), f"n{side}")
            ids2 = [new if u == old else u for u in ids]
            x2 = x.copy()
            x2[ids.index(old)] = -x[ids.index(old)]
            u1 = dp_select_scores(plan, plan.basis.coefficients(x), ids, key)
            u2 = dp_select_scores(plan, plan.basis.coefficients(x2), ids2, key)
            worst = max(worst, float(np.max(np.abs(u1 - u2))))
    assert 0.2 * spec.score_sensitivity < worst <= spec.score_sensitivity * (1 + 1e-9)


def test_flow_and_facade_split_alike_and_the_key_is_fresh() -> None:
    """The split depends on (unit id, key) only: the same in fdp release (unit ids) and release_mean (unit_ids)."""
    ids = [f"day-{j}" for j in range(600)]
    key = b"x" * 32
    mask = keyed_split(ids, key)
    assert 0.55 < mask.mean() < 0.78  # a unit trains with probability 2/3
    order = np.random.default_rng(0).permutation(600)
    assert keyed_split([ids[i] for i in order], key).tolist() == mask[order].tolist()
    assert keyed_split(ids, selection_key()).tolist() != keyed_split(ids, selection_key()).tolist()
    with pytest.raises(DomainError, match="key length"):
        keyed_split(ids, b"short")


def test_dp_select_plan_splits_the_budget_exactly_and_rescales_psi() -> None:
    grid, n = midpoint_grid(24), 90
    plan = plan_mean_release(grid, MATERN, n=n, tau=1.0, epsilon=0.7, tuning="dp_select", select_epsilon=0.2,
                             secure=False)
    assert plan.pending and [s["name"] for s in plan.budget_splits] == ["tuning", "mean"]
    assert sum((exact(s["epsilon"]) for s in plan.budget_splits), Fraction(0)) == exact(0.7)
    assert selection_normalisers(n) == (plan.selection.n_train, plan.selection.n_val) == (60.0, 30.0)

    x, _ = clip_l2(np.random.default_rng(1).normal(size=(n, 24)) * 0.2, grid.weights, 1.0)
    done = select_mean_parameters(x, plan, rng=np.random.default_rng(2))
    assert not done.pending and done.calibration.epsilon == 0.5
    assert "selection.exp_mech.score_sensitivity@2" in done.formulas
    assert any(done.psi == pytest.approx(c * 60 / 90) for c in plan.selection.candidates)
    with pytest.raises(DomainError, match="no pending selection"):
        select_mean_parameters(x, done)
    with pytest.raises(DomainError, match="unit_ids"):
        select_mean_parameters(x, plan, unit_ids=["a"], rng=np.random.default_rng(2))
    r = release_mean(x, grid, epsilon=0.7, tau=1.0, kernel=MATERN, tuning="dp_select", select_epsilon=0.2,
                     unit_ids=[f"u{j}" for j in range(n)], secure=False, rng=np.random.default_rng(3))
    assert r.plan.selection is not None and not r.plan.pending


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
