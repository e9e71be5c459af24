"""``tau="auto"`` in the Python facades of the covariance, FoSR and FPCA releases (MATH.md §1.7, §6, §7, §10).

Each facade plans the choice from public inputs (``summary_tau_choice``, the rule ``fdp release`` uses), draws
OpenDP's DP quantile **once** on the norms of exactly the records its clip applies to, and plans the release at the
drawn radius with the choice paid first: the ``tau`` split and the mechanism's epsilon sum exactly to ``epsilon``.
A spy on :func:`fdpcore.noise.quantiles.dp_quantile` (the only place the quantile reads values) captures what it reads.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pytest

import fdpcore.noise.quantiles as quantiles
from fdpcore.basis.grids import midpoint_grid
from fdpcore.errors import DomainError
from fdpcore.noise.quantiles import (
    DEFAULT_TAU_SHARE,
    choice_epsilon,
    record_norms,
    summary_tau_level,
    tau_candidates,
    tau_choice,
    tau_epsilon,
)
from fdpcore.privacy.accounting import exact
from fdpcore.summaries.covariance import plan_covariance_release, release_covariance
from fdpcore.summaries.fosr import plan_fosr_release, release_fosr
from fdpcore.summaries.fpca import fpca_basis, release_fpca

GRID = midpoint_grid(24)
KERNEL = {"name": "matern", "nu": 1.5, "rho": 0.1}
CANDIDATES = tau_candidates(0.01, 1.0)  # the default range on the domain [0, 1]


class QuantileSpy:
    """Wraps ``dp_quantile``: records the values it reads, candidates, level and epsilon of every draw, then draws.

    ``values`` are the records' values before :func:`fdpcore.noise.quantiles.dither_norms` (``tau``'s draw dithers
    them first: ``dithered`` is then True and the quantile read exactly the dither's output)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[dict[str, Any]] = []
        self.norm_calls = 0
        draw, norms, dither = quantiles.dp_quantile, quantiles.record_norms, quantiles.dither_norms
        last: list[tuple[np.ndarray, np.ndarray]] = []

        def dither_spy(values: Any, candidates: tuple[float, ...]) -> Any:
            out = dither(values, candidates)
            last[:] = [(np.array(values, dtype=float), out)]
            return out

        def spy(values: Any, candidates: tuple[float, ...], *, alpha: float, epsilon: float) -> float:
            read = np.array(values, dtype=float)
            dithered = bool(last) and np.array_equal(read, last[0][1])
            self.calls.append({"values": last[0][0] if dithered else read, "dithered": dithered,
                               "candidates": tuple(candidates), "alpha": alpha, "epsilon": epsilon})
            last.clear()
            return draw(values, candidates, alpha=alpha, epsilon=epsilon)

        def norm_spy(curves: Any, weights: Any) -> Any:
            self.norm_calls += 1
            return norms(curves, weights)

        monkeypatch.setattr(quantiles, "dp_quantile", spy)
        monkeypatch.setattr(quantiles, "dither_norms", dither_spy)
        monkeypatch.setattr(quantiles, "record_norms", norm_spy)


def _curves(n: int, level: float = 0.5, spread: float = 0.05, seed: int = 0) -> np.ndarray:
    """Curves around a constant ``level``: raw norms about ``level``, centred norms about ``spread``."""
    return level + spread * np.random.default_rng(seed).normal(size=(n, GRID.size))


def _covariates(n: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).choice([-1.0, 1.0], size=(n, 1))


def _basis() -> Any:
    return fpca_basis(GRID, {"name": "gaussian", "length_scale": 0.2}, 5)


#: summary -> (facade call with tau "auto" and keywords, the records whose norms the clip applies to)
Case = Callable[[np.ndarray, dict[str, Any]], Any]
CASES: dict[str, tuple[Case, Callable[[np.ndarray], np.ndarray]]] = {
    "covariance public": (
        lambda x, kw: release_covariance(x, GRID, tau="auto", kernel=KERNEL, center=np.full(GRID.size, 0.5),
                                         secure=False, rng=np.random.default_rng(3), **kw),
        lambda x: x - 0.5),
    "covariance sample_mean": (
        lambda x, kw: release_covariance(x, GRID, tau="auto", kernel=KERNEL, centering="sample_mean", secure=False,
                                         rng=np.random.default_rng(3), **kw),
        lambda x: x),
    "fosr": (
        lambda x, kw: release_fosr(x, _covariates(x.shape[0]), GRID, tau_y="auto", bound=1.0, kernel=KERNEL,
                                   secure=False, rng=np.random.default_rng(3), **kw),
        lambda x: x),
    "fpca": (
        lambda x, kw: release_fpca(x - 0.5, _basis(), n_components=2, tau="auto", rng=np.random.default_rng(3), **kw),
        lambda x: x - 0.5),
}


def _radius(plan: Any) -> float:
    return float(plan.tau_y if hasattr(plan, "tau_y") else plan.tau)


@pytest.mark.parametrize("case", sorted(CASES))
def test_tau_auto_is_one_quantile_of_the_clipped_records_paid_first_and_exactly(
        case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One draw, on exactly the norms the clip uses; the released tau is a public candidate and the plan's radius;
    the ``tau`` split plus the mechanism's epsilon is ``epsilon`` exactly, and the splits list ``tau`` first."""
    call, records = CASES[case]
    x, epsilon, n = _curves(500), 0.7, 500
    spy = QuantileSpy(monkeypatch)
    plan = call(x, {"epsilon": epsilon}).plan
    assert len(spy.calls) == 1
    drawn = spy.calls[0]
    np.testing.assert_array_equal(drawn["values"], record_norms(records(x), GRID.weights))
    assert drawn["dithered"]  # tuning.tau.dp_norm_quantile@2: the quantile reads the dithered norms
    (choice,) = plan.public_choices
    assert choice.name == "tau" and choice.formula_id == "tuning.tau.dp_norm_quantile@2" and not choice.a_priori
    assert choice.value == _radius(plan) and choice.value in CANDIDATES and choice.candidates == CANDIDATES
    assert drawn["candidates"] == CANDIDATES and drawn["alpha"] == choice.alpha and drawn["epsilon"] == choice.epsilon
    # the split: share * epsilon raised to the quantile's reliability floor at n = 500 (0.07 -> 0.1074), and for a
    # covariance or FoSR further, up to a quarter of epsilon, so the level can reach 0.8 (-> 0.175); FPCA: the floor
    raised = case != "fpca"
    expected = (tau_epsilon if raised else partial(choice_epsilon, "tau"))(n, epsilon, DEFAULT_TAU_SHARE, len(CANDIDATES))
    assert choice.epsilon == expected == (0.175 if raised else 0.1074)
    assert exact(choice.epsilon) + exact(plan.epsilon_mechanism) == exact(epsilon) and plan.epsilon == epsilon
    splits = plan.budget_splits
    assert splits[0] == {"name": "tau", "epsilon": choice.epsilon, "delta": 0.0}
    assert sum((exact(float(s["epsilon"])) for s in splits), exact(0.0)) == exact(epsilon)
    assert {"tuning.tau.dp_norm_quantile@2", "tuning.tau.summary_level@1",
            f"tuning.tau.quantile_level@{3 if raised else 2}"} <= set(plan.formulas)
    if case == "fosr":  # gamma splits what tau leaves
        assert exact(plan.epsilon1) + exact(plan.epsilon2) == exact(plan.epsilon_mechanism)


@pytest.mark.parametrize("summary", ["covariance", "fosr"])
def test_level_comes_from_the_release_s_own_noise_at_unit_radius(summary: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """tuning.tau.summary_level@1 with the unit noise of the facade's plan (covariance: the surface; FoSR: T2 over
    x_bound); FPCA takes the median. Recomputed here from the public plan alone."""
    x, epsilon, n = _curves(500), 0.7, 500
    spy = QuantileSpy(monkeypatch)
    e_tau = tau_epsilon(n, epsilon, DEFAULT_TAU_SHARE, len(CANDIDATES))
    provisional = (tau_choice(n, e_tau, 1.0, (0.01, 1.0)),)
    if summary == "covariance":
        release_covariance(x, GRID, epsilon=epsilon, tau="auto", kernel=KERNEL, secure=False,
                           rng=np.random.default_rng(0))
        unit = plan_covariance_release(GRID, KERNEL, n=n, tau=1.0, epsilon=epsilon, secure=False,
                                       public_choices=provisional)
        alpha = summary_tau_level(summary, n, e_tau, len(CANDIDATES),
                                  unit_noise_rmse=math.sqrt(unit.expected_sq_l2_error))
    else:
        release_fosr(x, _covariates(n), GRID, epsilon=epsilon, tau_y="auto", bound=1.0, kernel=KERNEL, secure=False,
                     rng=np.random.default_rng(0))
        fosr = plan_fosr_release(GRID, KERNEL, n=n, n_covariates=1, intercept=True, bound=1.0, tau_y=1.0,
                                 epsilon=epsilon, secure=False, public_choices=provisional)
        alpha = summary_tau_level(summary, n, e_tau, len(CANDIDATES),
                                  unit_noise_rmse=math.sqrt(fosr.expected_sq_l2_error_t2), x_bound=fosr.x_bound)
    assert 0.5 < alpha < 1.0 and spy.calls[0]["alpha"] == alpha
    release_fpca(x - 0.5, _basis(), n_components=1, epsilon=epsilon, tau="auto", rng=np.random.default_rng(0))
    assert spy.calls[-1]["alpha"] == 0.5


@pytest.mark.parametrize("centering", ["sample_mean", "public"])
def test_covariance_tau_lands_near_the_quantile_of_the_norms_the_clip_uses(
        centering: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Records ``s_i`` times the constant curve, ``s_i`` log-uniform on [0.1, 0.9]: raw norms ``s_i``, norms centred
    on the public constant 0.5 ``|s_i - 0.5|``, two quantiles about 3.5 candidates apart. Sample-mean centring reads
    the raw curves (its clip comes before the centring), public centring the centred ones; the released tau is
    within 1.5 candidate steps of the quantile of the norms read, and not of the other quantile.

    The released tau is one draw of OpenDP's exponential mechanism (unseeded): with public centring its law puts
    about 0.035 % on each candidate above every norm (their scores tie), 0.22 % in all outside the band (exact law
    given the dither, averaged over 300 dithers; 100000 simulated draws agree). One release would fail one run in
    450, so five are drawn and their median must lie in the band: at least 3 of 5 outside has probability 1e-7.
    A release that read the other norms would put its median near the other quantile, more than step^3 away."""
    rng = np.random.default_rng(7)
    s = np.exp(rng.uniform(np.log(0.1), np.log(0.9), size=500))
    x = s[:, None] * (1.0 + 0.01 * rng.normal(size=(500, GRID.size)))
    raw, centred = record_norms(x, GRID.weights), record_norms(x - 0.5, GRID.weights)
    spy = QuantileSpy(monkeypatch)
    center = None if centering == "sample_mean" else np.full(GRID.size, 0.5)
    releases = [release_covariance(x, GRID, epsilon=50.0, tau="auto", kernel=KERNEL, centering=centering,
                                   center=center, secure=False, rng=np.random.default_rng(0)) for _ in range(5)]
    read, other = (raw, centred) if centering == "sample_mean" else (centred, raw)
    assert len(spy.calls) == 5
    for call in spy.calls:
        np.testing.assert_array_equal(call["values"], read)
    alpha = releases[0].plan.public_choices[0].alpha
    step = 10.0 ** (1.0 / 10)  # one candidate apart
    near = float(np.quantile(read, alpha))
    far = float(np.quantile(other, alpha))
    assert max(near, far) / min(near, far) > step**3
    assert near / step**1.5 <= float(np.median([r.plan.tau for r in releases])) <= near * step**1.5


@pytest.mark.parametrize("case", sorted(CASES))
def test_small_n_epsilon_takes_the_a_priori_upper_end_reads_no_norm_and_buys_nothing(
        case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """n * epsilon below the quantile's floor (tuning.tau.a_priori_fallback@2): tau is the public upper end of the
    range, its epsilon is 0, no norm is computed and no quantile drawn; the mechanism gets all of epsilon."""
    call, _ = CASES[case]
    spy = QuantileSpy(monkeypatch)
    plan = call(_curves(30), {"epsilon": 0.1, "tau_range": (0.02, 0.8)}).plan
    assert spy.calls == [] and spy.norm_calls == 0
    (choice,) = plan.public_choices
    assert choice.a_priori and choice.epsilon == 0.0 and choice.value == _radius(plan) == 0.8
    assert choice.formula_id == "tuning.tau.a_priori_fallback@2" in plan.formulas
    assert "tau" not in [s["name"] for s in plan.budget_splits] and plan.epsilon_mechanism == 0.1


@pytest.mark.parametrize("case", sorted(CASES))
def test_tau_share_and_tau_range_set_the_split_and_the_candidates(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    call, _ = CASES[case]
    spy = QuantileSpy(monkeypatch)
    plan = call(_curves(500), {"epsilon": 2.0, "tau_share": 0.2, "tau_range": (0.05, 2.0)}).plan
    (choice,) = plan.public_choices
    assert choice.epsilon == spy.calls[0]["epsilon"] == 0.4 and plan.epsilon_mechanism == 1.6
    assert choice.candidates == tau_candidates(0.05, 2.0) and choice.value in choice.candidates


def test_draws_above_one_and_unknown_words_are_refused_before_any_data(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each draw is a separate release that would buy its own tau: ``draws > 1`` with ``"auto"`` is refused (naming
    ``draws``), as are invalid public parameters, before any norm is read."""
    spy = QuantileSpy(monkeypatch)
    x = _curves(200)
    with pytest.raises(DomainError, match=r"draws \(3\) must be 1 with tau='auto'"):
        release_covariance(x, GRID, epsilon=1.0, tau="auto", kernel=KERNEL, draws=3, secure=False)
    with pytest.raises(DomainError, match=r"draws \(2\) must be 1 with tau_y='auto'"):
        release_fosr(x, _covariates(200), GRID, epsilon=1.0, tau_y="auto", bound=1.0, kernel=KERNEL, draws=2,
                     secure=False)
    with pytest.raises(DomainError, match=r"tau \('Auto'\) must be a positive number or 'auto'"):
        release_covariance(x, GRID, epsilon=1.0, tau="Auto", kernel=KERNEL, secure=False)
    with pytest.raises(DomainError, match=r"tau_y \('median'\) must be a positive number or 'auto'"):
        release_fosr(x, _covariates(200), GRID, epsilon=1.0, tau_y="median", bound=1.0, kernel=KERNEL, secure=False)
    with pytest.raises(DomainError, match=r"n_components \(5\) must be < n_basis \(5\)"):
        release_fpca(x, _basis(), n_components=5, epsilon=1.0, tau="auto", rng=np.random.default_rng(0))
    with pytest.raises(DomainError, match="centering"):
        release_covariance(x, GRID, epsilon=1.0, tau="auto", kernel=KERNEL, centering="median", secure=False)
    assert spy.calls == [] and spy.norm_calls == 0
    # a fixed tau keeps several draws, and buys nothing
    r = release_covariance(x, GRID, epsilon=1.0, tau=0.5, kernel=KERNEL, draws=3, secure=False,
                           rng=np.random.default_rng(0))
    assert r.coefficients.shape[0] == 3 and r.plan.public_choices == () and spy.calls == []
