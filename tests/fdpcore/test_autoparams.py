"""tau: auto and value_offset: auto — OpenDP's DP quantile, its privacy, its law and the public rules around it."""

from __future__ import annotations

import math

import numpy as np
import opendp.prelude as dp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from fdpcore.errors import DomainError, PrivacyParameterError
from fdpcore.noise.quantiles import (
    DEFAULT_TAU_RANGE,
    MAX_SHARE,
    PublicChoice,
    _certified_quantile,
    centre_candidates,
    centre_choice,
    choice_epsilon,
    dp_quantile,
    draw_public_choice,
    quantile_rank_margin,
    record_levels,
    record_norms,
    split_epsilon,
    summary_tau_level,
    tau_candidates,
    tau_choice,
    tau_epsilon,
    tau_quantile_level,
)


def _scores(values: list[float], candidates: list[float], alpha: float) -> tuple[list[int], int]:
    """OpenDP's integer scores and their certified sensitivity at one replacement (exact integers: no float rounding)."""
    dp.enable_features("contrib")
    t = dp.t.make_quantile_score_candidates(
        dp.vector_domain(dp.atom_domain(T=float, nan=False), size=len(values)), dp.symmetric_distance(),
        candidates, alpha=alpha)
    return [int(v) for v in t(values)], int(t.map(2))


@pytest.mark.parametrize("alpha", [0.5, 0.75, 0.9])
@pytest.mark.parametrize("epsilon", [0.05, 1.0, 7.0])
def test_opendp_map_certifies_epsilon_at_one_replacement(alpha: float, epsilon: float) -> None:
    meas = _certified_quantile(50, [0.1, 1.0, 10.0], alpha, epsilon)
    assert meas.map(2) <= epsilon
    assert meas.map(2) >= epsilon * (1 - 1e-9)  # not wastefully loose


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(0.0, 5.0, allow_nan=False), min_size=3, max_size=30), st.integers(0, 29),
       st.floats(-10.0, 10.0, allow_nan=False), st.sampled_from([0.5, 0.75, 0.9]))
def test_score_sensitivity_under_replace_one_is_the_certified_one(xs: list[float], i: int, new: float, alpha: float) -> None:
    """Property: replacing any one record moves every candidate's score by at most the map's d_in = 2 sensitivity."""
    cands = [0.01, 0.5, 1.0, 2.0, 4.0, 100.0]
    i %= len(xs)
    ys = list(xs)
    ys[i] = new
    sx, sens = _scores(xs, cands, alpha)
    sy, _ = _scores(ys, cands, alpha)
    assert max(abs(a - b) for a, b in zip(sx, sy, strict=True)) <= sens


def _noisy_max_law(scores: np.ndarray, theta: float) -> np.ndarray:
    """P(argmin_j (s_j - E_j) = i), E_j ~ Exp(theta) i.i.d.: the integral of E_i's density times the others' CDFs."""
    out = []
    for i, s_i in enumerate(scores):
        others = np.delete(scores, i)

        def density(y: float, s_i: float = s_i, others: np.ndarray = others) -> float:  # y = E_i - s_i >= -s_i
            u = np.maximum(y + others, 0.0) / theta
            return float(np.exp(-(y + s_i) / theta) / theta * np.prod(-np.expm1(-u)))

        breaks = sorted({-s_i, *(-o for o in others if -o > -s_i)})
        ends = [*breaks, -s_i + 60.0 * theta]
        out.append(sum(integrate.quad(density, a, b, epsabs=1e-14, epsrel=1e-12)[0]
                       for a, b in zip(ends[:-1], ends[1:], strict=True)))
    return np.asarray(out)


def test_selection_law_is_report_noisy_max_with_exponential_noise() -> None:
    """OpenDP's draws follow argmin(score - Exp(2 Delta / epsilon)) (permute-and-flip), the law the proof uses.

    The law is computed exactly (quadrature), and the chi-square test (3 degrees of freedom) rejects at p = 1e-7:
    OpenDP cannot be seeded, so that is the chance of a false alarm. 12000 draws keep the power of the former
    6000-draw test at p = 0.001 against a noise scale off by 10 % (0.94 and 0.98 for 1.1x and 0.9x, were 0.92 and
    0.96); a Gumbel law of the same scale (the classic exponential mechanism) gives a chi-square of about 430.
    """
    x = [0.1 * k for k in range(1, 11)]
    cands = [0.05, 0.35, 0.65, 2.0]
    eps = 1.0
    meas = _certified_quantile(len(x), cands, 0.5, eps)
    int_scores, int_sens = _scores(x, cands, 0.5)
    scores, sens = np.asarray(int_scores, dtype=float), float(int_sens)
    expected = _noisy_max_law(scores, 2 * sens / eps)
    assert expected.sum() == pytest.approx(1.0, abs=1e-9)
    n_draws = 12000
    counts = np.array([0, 0, 0, 0])
    for _ in range(n_draws):
        counts[cands.index(meas(x))] += 1
    chi2 = float(np.sum((counts - n_draws * expected) ** 2 / (n_draws * expected)))
    assert chi2 < stats.chi2.isf(1e-7, 3)  # 35.4


def test_neighbouring_datasets_worst_case_output_laws_within_e_epsilon() -> None:
    """Worst case: one record moves from below every candidate to above every candidate; the output laws of D and
    D' stay within e^epsilon of each other (empirical, with a sampling tolerance)."""
    eps = 1.0
    cands = [0.5, 1.5, 2.5, 3.5]
    d = [1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 0.0, 0.0]
    d2 = [*d[:-1], 10.0]
    meas = _certified_quantile(len(d), cands, 0.5, eps)
    n_draws = 8000
    p = np.array([0.0] * 4)
    q = np.array([0.0] * 4)
    for _ in range(n_draws):
        p[cands.index(meas(d))] += 1
        q[cands.index(meas(d2))] += 1
    p, q = p / n_draws, q / n_draws
    keep = (p > 0.03) & (q > 0.03)
    assert keep.sum() >= 2
    assert np.all(p[keep] / q[keep] <= math.exp(eps) * 1.25) and np.all(q[keep] / p[keep] <= math.exp(eps) * 1.25)
    assert np.abs(p - q).sum() > 0.02  # the laws do differ: the test can fail


def test_dithered_tau_draw_on_worst_case_neighbours_stays_within_e_epsilon() -> None:
    """tuning.tau.dp_norm_quantile@2 end to end (dither, then OpenDP's quantile): one record moves from the smallest
    candidate to beyond the largest; the laws of the released tau on D and D' stay within e^epsilon (empirical, with
    a sampling tolerance), and they differ (the test can fail)."""
    eps = 1.0
    cands = tau_candidates(0.1, 0.1 * 10 ** 0.25)  # 6 candidates, ratio 10^(1/20)
    choice = PublicChoice("tau", eps, "tuning.tau.dp_norm_quantile@2", 0.5, cands)
    d = [cands[2]] * 3 + [cands[3]] * 3 + [cands[0]]
    d2 = [*d[:-1], cands[-1] * 2]
    n_draws = 6000
    p = np.zeros(len(cands))
    q = np.zeros(len(cands))
    for _ in range(n_draws):
        p[cands.index(draw_public_choice(choice, d).value)] += 1
        q[cands.index(draw_public_choice(choice, d2).value)] += 1
    p, q = p / n_draws, q / n_draws
    keep = (p > 0.03) & (q > 0.03)
    assert keep.sum() >= 2
    assert np.all(p[keep] / q[keep] <= math.exp(eps) * 1.25) and np.all(q[keep] / p[keep] <= math.exp(eps) * 1.25)
    assert np.abs(p - q).sum() > 0.02


def test_dp_quantile_rejects_bad_inputs() -> None:
    with pytest.raises(DomainError, match="values must be a finite"):
        dp_quantile([1.0, float("nan")], (0.0, 1.0), alpha=0.5, epsilon=1.0)
    with pytest.raises(DomainError, match="strictly increasing"):
        dp_quantile([1.0, 2.0], (1.0, 1.0), alpha=0.5, epsilon=1.0)
    with pytest.raises(DomainError, match="alpha"):
        dp_quantile([1.0, 2.0], (0.0, 1.0), alpha=1.5, epsilon=1.0)
    with pytest.raises(PrivacyParameterError, match="epsilon"):
        dp_quantile([1.0, 2.0], (0.0, 1.0), alpha=0.5, epsilon=0.0)


def test_candidate_grids() -> None:
    c = tau_candidates(0.01, 100.0)
    assert len(c) == 81 and c[0] == 0.01 and c[-1] == 100.0
    assert tau_candidates(*DEFAULT_TAU_RANGE) == c[:41]
    assert np.allclose(np.diff(np.log10(c)), 0.05)
    assert centre_candidates(-1.0, 1.0, 5) == (-1.0, -0.5, 0.0, 0.5, 1.0)
    with pytest.raises(DomainError, match="tau_range"):
        tau_candidates(2.0, 1.0)
    with pytest.raises(DomainError, match="value_offset_range"):
        centre_candidates(1.0, 1.0)


def test_record_norms_and_levels() -> None:
    x = np.array([[3.0, 4.0], [1.0, -1.0]])
    w = np.array([0.5, 0.5])
    assert record_norms(x, w).tolist() == pytest.approx([math.sqrt(12.5), 1.0])
    assert record_levels(x, w).tolist() == [3.5, 0.0]


def test_a_huge_finite_record_ranks_as_the_largest_and_never_stops_the_draw() -> None:
    """Independent audit: a record of 1e200 (finite) squared to inf in its norm (and its level to inf - inf), and
    the DP quantile refused the vector after the charge, while its neighbour published: one record decided whether
    the release happened. Now its norm or level ranks beyond every candidate, and both neighbours draw."""
    w = np.full(48, 10.0 / 48)  # a grid domain of length 10
    huge = np.vstack([np.full((1, 48), 1e200), np.tile([1e308, -1e308], (1, 24)), np.full((1, 48), 1e308)])
    assert record_norms(huge, w).tolist() == [pytest.approx(1e200 * math.sqrt(10.0)), math.inf, math.inf]  # no nan
    assert not np.isnan(record_levels(huge, w)).any()
    clean = np.full((60, 48), 0.3)
    for x in (clean, np.vstack([clean[:-3], huge])):  # neighbours: three records replaced
        tau = draw_public_choice(tau_choice(60, 2.0, 0.01, DEFAULT_TAU_RANGE), record_norms(x, w))
        centre = draw_public_choice(centre_choice(2.0, (0.0, 1.0)), record_levels(x, w))
        assert tau.value in tau.candidates and centre.value in centre.candidates


@pytest.mark.parametrize("n", [50, 508, 5000])
def test_quantile_level_bounds_and_monotone_in_epsilon(n: int) -> None:
    levels = [tau_quantile_level(n, e, 41, 0.001) for e in (0.01, 0.1, 1.0, 10.0, 100.0)]
    assert all(0.5 <= a <= 1 - 1 / n for a in levels)
    assert levels == sorted(levels)
    # more noise per unit tau -> clip more records (lower level)
    assert tau_quantile_level(5000, 100.0, 41, 0.1) < tau_quantile_level(5000, 100.0, 41, 0.001)
    assert quantile_rank_margin(2.0, 41) == pytest.approx(quantile_rank_margin(1.0, 41) / 2)


def test_choice_epsilon_share_floor_and_refusal() -> None:
    assert split_epsilon(1.0, 0.1) == 0.1
    assert choice_epsilon("tau", 100_000, 1.0, 0.1, 41) == 0.1
    floor = choice_epsilon("tau", 508, 1.0, 0.1, 41)
    assert 0.1 < floor <= MAX_SHARE
    assert floor * 508 >= 2 * quantile_rank_margin(1.0, 41)  # the median is reachable
    with pytest.raises(PrivacyParameterError, match="tau: auto needs at least .* of privacy.epsilon .* Give tau a public value"):
        choice_epsilon("tau", 93, 0.25, 0.1, 41)


@pytest.mark.parametrize("n", [60, 93, 150])
def test_choice_epsilon_takes_half_of_epsilon_between_half_the_floor_and_the_floor(n: int) -> None:
    """tuning.tau.quantile_level@2: F/2 <= eps/2 < F gives eps/2 (not the a-priori fallback); below, refused."""
    floor = 2 * quantile_rank_margin(1.0, 21) / n  # F: the slack-2 margin fits below the median
    for eps in np.linspace(floor * 1.001, 2 * floor * 0.999, 7):
        e_q = choice_epsilon("tau", n, float(eps), 0.1, 21)
        assert e_q == pytest.approx(MAX_SHARE * eps, rel=1e-3)
        assert e_q * n >= quantile_rank_margin(1.0, 21)  # the bound without the slack keeps the median inside
    assert choice_epsilon("tau", n, 2 * floor * 1.01, 0.1, 21) < MAX_SHARE * 2 * floor * 1.01  # the floor itself
    with pytest.raises(PrivacyParameterError):
        choice_epsilon("tau", n, floor * 0.99, 0.1, 21)


@pytest.mark.parametrize("n", [60, 93, 150, 508, 2000, 100_000])
def test_tau_epsilon_raises_the_split_only_where_the_margin_forces_the_level_below_0_8(n: int) -> None:
    """tuning.tau.quantile_level@3: never below @2's split; above it only up to a quarter of epsilon, and only where
    @2's split leaves the level below 0.8; where the raise applies in full, the level reaches 0.8."""
    for eps in (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 100.0):
        try:
            base = choice_epsilon("tau", n, eps, 0.1, 41)
        except PrivacyParameterError:
            with pytest.raises(PrivacyParameterError):
                tau_epsilon(n, eps, 0.1, 41)
            continue
        e_tau = tau_epsilon(n, eps, 0.1, 41)
        assert e_tau >= base
        level_before = tau_quantile_level(n, base, 41, 1e-9)  # r_1 -> 0: the margin alone sets the level
        if level_before >= 0.8 - 1e-9:
            assert e_tau == base  # 10 % (or the floor) already reaches 0.8: nothing changes
            continue
        if e_tau > base:
            assert e_tau <= split_epsilon(eps, 0.25) + 1e-12  # the raise's cap
            level = tau_quantile_level(n, e_tau, 41, 1e-9)
            assert level > level_before
            if e_tau < split_epsilon(eps, 0.25):  # not capped: the margin is a fifth of n
                assert level == pytest.approx(0.8, abs=1e-3)
        else:
            assert base >= split_epsilon(eps, 0.25)  # @2's split (half of epsilon) is already above the cap
    assert tau_epsilon(508, 1.0, 0.1, 41) == 0.25 and choice_epsilon("tau", 508, 1.0, 0.1, 41) == 0.1057


def test_raised_split_clips_fewer_records_of_a_heavy_tail() -> None:
    """Statistical (fixed data), the reason for @3: 600 log-normal norms (sd 0.6) at epsilon 1 (10 % gives a margin of
    268 ranks, so the target is the 0.553 quantile); the raised split (0.2237, level 0.8) clips at most a quarter of
    the records in at least 95 % of 200 draws, @2's split clips more than a third in most (its target clips 45 %)."""
    rng = np.random.default_rng(11)
    norms = 0.2 * rng.lognormal(0.0, 0.6, 600)
    cands = tau_candidates(*DEFAULT_TAU_RANGE)
    old, new = choice_epsilon("tau", 600, 1.0, 0.1, 41), tau_epsilon(600, 1.0, 0.1, 41)
    assert (old, new) == (0.1, 0.2237)
    clipped = {}
    for e in (old, new):
        choice = tau_choice(600, e, 1e-9, DEFAULT_TAU_RANGE)
        assert len(choice.candidates) == len(cands)
        clipped[e] = [np.mean(norms > draw_public_choice(choice, norms).value) for _ in range(200)]
    assert np.mean(np.asarray(clipped[new]) <= 0.25) >= 0.95
    assert np.mean(np.asarray(clipped[old]) > 1 / 3) >= 0.5


@pytest.mark.parametrize("epsilon", [0.5, 0.3])  # the floor (share raised), and half of a budget below the floor
def test_drawn_tau_lands_inside_the_data_at_the_reliability_floor(epsilon: float) -> None:
    """Statistical (fixed data): at the floor epsilon the drawn tau is a candidate inside [min, max] of the norms."""
    rng = np.random.default_rng(7)
    norms = rng.lognormal(-1.0, 0.4, 300)
    eps = choice_epsilon("tau", norms.size, epsilon, 0.1, 41)
    assert eps == (MAX_SHARE * epsilon if epsilon == 0.3 else pytest.approx(2 * quantile_rank_margin(1.0, 41) / 300, rel=1e-3))
    choice = tau_choice(norms.size, eps, 0.01, (0.01, 100.0))
    cands = np.asarray(choice.candidates)
    lo = cands[cands <= norms.min()].max() if np.any(cands <= norms.min()) else cands[0]
    hi = cands[cands >= norms.max()].min()
    inside = [lo <= draw_public_choice(choice, norms).value <= hi for _ in range(200)]
    assert np.mean(inside) >= 0.95


@pytest.mark.parametrize("n", [20, 50, 150])
def test_bunched_norms_are_spread_by_the_dither_so_tau_lands_near_them(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """tuning.tau.dp_norm_quantile@2, statistical (fixed data): every norm in one gap of the grid (the new user's
    ChickWeight and nottem norms) leaves the rank score flat over all 41 candidates, so without the dither tau is
    about uniform on them (most draws far below the data: a catastrophic clipping bias); with it, at the floor
    epsilon, tau lands within the dither's reach of the norms in at least 95 % of draws."""
    cands = tau_candidates(*DEFAULT_TAU_RANGE)
    gap = math.sqrt(cands[30] * cands[31])  # the middle of one gap, in log scale
    norms = np.full(n, gap)
    floor = 2 * quantile_rank_margin(1.0, len(cands)) / n  # choice_epsilon's reliability floor F
    choice = tau_choice(n, float(f"{floor:.4g}"), 0.01, DEFAULT_TAU_RANGE, alpha=0.5)
    near = (cands[28], cands[33])  # within two steps of the gap's ends: the dither's reach
    # a draw lands outside with probability about 5e-4 (simulated): more than 10 of 200 has probability < 1e-17
    assert np.mean([near[0] <= draw_public_choice(choice, norms).value <= near[1] for _ in range(200)]) >= 0.95
    monkeypatch.setattr("fdpcore.noise.quantiles.dither_norms", lambda values, candidates: np.asarray(values))
    # the failure the dither removes: without it most draws clip every record to below half its norm. A draw does
    # so with probability 0.609 (OpenDP's law at these flat scores: about uniform, 25 of the 41 candidates lie below
    # gap / 2; 20000 draws agree); at most half of 800 draws then has probability 3e-10 (1e-3 with 200 draws)
    far = np.mean([draw_public_choice(choice, norms).value < gap / 2 for _ in range(800)])
    assert far > 0.5


def test_public_choice_is_drawn_once_and_recorded() -> None:
    choice = centre_choice(5.0, (0.0, 10.0))
    drawn = draw_public_choice(choice, [4.0] * 100)
    assert drawn.value in choice.candidates and drawn.epsilon == 5.0
    rec = drawn.as_manifest()
    assert rec["name"] == "value_offset" and rec["formula"] == "preprocess.centre.dp_median@1"
    assert rec["candidates"] == {"first": 0.0, "last": 10.0, "count": 201}
    with pytest.raises(DomainError, match="already drawn"):
        draw_public_choice(drawn, [4.0] * 100)


# ----------------------------------------------------------------------------- tau: auto of covariance, FoSR, FPCA


def test_summary_levels_from_public_inputs() -> None:
    """tuning.tau.summary_level@1: the mean's rule with the summary's unit noise; the median for FPCA."""
    n, e, count = 1000, 1.0, 21
    assert summary_tau_level("fpca", n, e, count) == 0.5
    for r1 in (1e-4, 0.02, 0.05, 2.0):
        assert summary_tau_level("covariance", n, e, count, unit_noise_rmse=r1) == tau_quantile_level(n, e, count, r1)
        fosr = summary_tau_level("fosr", n, e, count, unit_noise_rmse=r1, x_bound=math.sqrt(2.0))
        assert fosr == tau_quantile_level(n, e, count, r1 / math.sqrt(2.0)) >= tau_quantile_level(n, e, count, r1)
    # more noise at tau = 1 clips more records (a lower level), down to the median
    levels = [summary_tau_level("covariance", n, 50.0, count, unit_noise_rmse=r) for r in (1e-4, 0.01, 0.1, 1.0)]
    assert levels == sorted(levels, reverse=True) and levels[-1] == 0.5 and levels[0] == 1.0 - 1.0 / n
    with pytest.raises(DomainError):
        summary_tau_level("covariance", n, e, count)
    with pytest.raises(DomainError):
        summary_tau_level("mean", n, e, count, unit_noise_rmse=0.1)
    with pytest.raises(DomainError, match="x_bound"):
        summary_tau_level("fosr", n, e, count, unit_noise_rmse=0.1)


def _choice(eps: float, value: float | None = None) -> PublicChoice:
    return PublicChoice("tau", eps, "tuning.tau.dp_norm_quantile@2", 0.5, tau_candidates(0.01, 1.0), value)


def test_summary_plans_pay_the_tau_split_first_and_their_cost_does_not_depend_on_tau() -> None:
    """Covariance, FoSR and FPCA plans: splits ``tau`` then the mechanism's parts, summing exactly to epsilon; the
    mechanism runs at what the split leaves; re-planning at the drawn tau keeps the cost (check_same_cost)."""
    from fdpcore.basis.grids import midpoint_grid
    from fdpcore.summaries.covariance import plan_covariance_release
    from fdpcore.summaries.fosr import plan_fosr_release
    from fdpcore.summaries.fpca import fpca_basis, plan_fpca_release

    grid, kernel = midpoint_grid(24), {"name": "matern", "nu": 1.5, "rho": 0.1}
    basis = fpca_basis(grid, {"name": "gaussian", "length_scale": 0.2}, 5)
    plans = {
        "covariance": lambda tau, ch: plan_covariance_release(grid, kernel, n=300, tau=tau, epsilon=1.0,
                                                              secure=False, public_choices=ch),
        "fosr": lambda tau, ch: plan_fosr_release(grid, kernel, n=300, n_covariates=2, intercept=True, bound=1.5,
                                                  tau_y=tau, epsilon=1.0, secure=False, public_choices=ch),
        "fpca": lambda tau, ch: plan_fpca_release(basis, n_components=2, epsilon=1.0, tau=tau, public_choices=ch),
    }
    for name, plan in plans.items():
        priced, drawn = plan(1.0, (_choice(0.1),)), plan(0.37, (_choice(0.1, 0.37),))
        assert priced.budget_splits == drawn.budget_splits and priced.epsilon == drawn.epsilon == 1.0, name
        assert priced.budget_splits[0] == {"name": "tau", "epsilon": 0.1, "delta": 0.0}, name
        assert math.fsum(float(s["epsilon"]) for s in priced.budget_splits) == 1.0, name
        assert priced.epsilon_mechanism == 0.9 and {"tuning.tau.summary_level@1",
                                                    "tuning.tau.dp_norm_quantile@2"} <= set(priced.formulas), name
        alone = plan(1.0, ())
        assert alone.epsilon_mechanism == 1.0 and "tuning.tau.summary_level@1" not in alone.formulas, name
    cov = plans["covariance"](1.0, (_choice(0.1),))
    assert cov.calibration.scale == pytest.approx(cov.sensitivity / 0.9)  # Laplace at epsilon 0.9
    fosr = plans["fosr"](1.0, (_choice(0.1),))
    assert fosr.epsilon1 + fosr.epsilon2 == pytest.approx(0.9) and fosr.epsilon1 == pytest.approx(fosr.gamma * 0.9)
    fpca = plans["fpca"](1.0, (_choice(0.1),))
    assert fpca.epsilon_step == pytest.approx(0.45) and fpca.prior_strength == pytest.approx(0.45)  # c = 0.9 / 2
    with pytest.raises(PrivacyParameterError):
        plans["fpca"](1.0, (_choice(1.0),))  # nothing left for the mechanism
