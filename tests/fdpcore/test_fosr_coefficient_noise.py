"""Each FoSR coefficient curve's stated noise (formula accuracy.fosr.coefficient_noise@1).

Trial S: on a real unbalanced design (67 of 595 units in one level, 43 in another) the released effects were often
of the wrong sign, while the release stated only T2's noise (7-19 x below the coefficients' realised error) and,
at epsilon 5, no caution at all. The release now states each coefficient's noise given the released T1~: T2's part
exactly, T1's part to first order with the released curves in place of the true ones. These tests check the exact
part against the noise it describes, the first-order part against the perturbation it approximates, and both
together against whole releases of the facade on an unbalanced design.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fdpcore.basis.grids import midpoint_grid
from fdpcore.summaries.fosr import (
    _t1_first_order,
    _t1_first_order_of_t2_noise,
    design_matrix,
    fosr_coefficient_noise,
    fosr_moments,
    plan_fosr_release,
    release_fosr,
    safe_inverse,
)
from fdpcore.summaries.mean import iclp_qr_shrinkage

KERNEL = {"name": "matern", "nu": 1.5, "rho": 0.2}
GRID = midpoint_grid(24)


def _unbalanced(n: int, seed: int, share: float = 0.1,
                effect: float = -0.2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Curves ``0.3 + 0.1 sin`` with a level effect ``effect`` (``share`` of the units) and a numeric covariate's 0.1."""
    rng = np.random.default_rng(seed)
    t = GRID.grid_points
    level = (rng.random(n) < share).astype(float)
    z = rng.uniform(-1.0, 1.0, n)
    covariates = np.column_stack([level, z]) / math.sqrt(2.0)
    beta = np.vstack([0.3 + 0.1 * np.sin(2 * math.pi * t), effect * math.sqrt(2.0) * np.ones_like(t),
                      0.1 * math.sqrt(2.0) * np.cos(math.pi * t)])
    curves = design_matrix(covariates, intercept=True) @ beta + rng.normal(0.0, 0.05, (n, t.size))
    return curves, covariates, beta


def test_t2_part_is_the_expected_energy_of_t2_noise_through_the_safe_inverse() -> None:
    plan = plan_fosr_release(GRID, KERNEL, n=300, n_covariates=2, intercept=True, bound=1.0, tau_y=1.0, epsilon=1.0,
                             secure=False)
    t1 = np.array([[1.0, 0.05, 0.0], [0.05, 0.08, 0.01], [0.0, 0.01, 0.3]])
    t2_part, _ = fosr_coefficient_noise(plan, t1, np.zeros((3, GRID.size)))
    rng = np.random.default_rng(1)
    lam, phi = plan.basis.eigenvalues, plan.basis.eigenfunctions
    xi = rng.laplace(0.0, plan.calibration2.scale, (20_000, 3, lam.size)) * np.sqrt(lam)
    curves = (safe_inverse(t1, plan.floor) @ xi) @ phi.T
    energy = np.mean(np.einsum("dmk,dmk,k->dm", curves, curves, GRID.weights), axis=0)
    np.testing.assert_allclose(t2_part, energy, rtol=0.03)
    assert t2_part[1] > 10 * t2_part[0]  # the rare level's direction is the noisy one


def test_t1_part_takes_off_exactly_what_the_released_curves_own_t2_noise_adds() -> None:
    """``E Q(T1~^+ xi)`` in closed form against the mean of ``Q`` over simulated T2 noise; and, on average over that
    noise, the estimate from the released curves (before its clip at 0) is the first-order energy at the true ones."""
    curves, covariates, _ = _unbalanced(600, 2)
    plan = plan_fosr_release(GRID, KERNEL, n=600, n_covariates=2, intercept=True, bound=1.0, tau_y=1.0, epsilon=2.0,
                             secure=False)
    t1, t2_coef = fosr_moments(design_matrix(covariates, intercept=True), plan.basis.coefficients(curves))
    beta = np.linalg.solve(t1, t2_coef @ plan.basis.eigenfunctions.T)
    inv = safe_inverse(t1, plan.floor)
    rng = np.random.default_rng(3)
    lam, phi = plan.basis.eigenvalues, plan.basis.eigenfunctions
    eta = (inv @ (rng.laplace(0.0, plan.calibration2.scale, (4000, 3, lam.size)) * np.sqrt(lam))) @ phi.T
    own = np.mean([_t1_first_order(plan, inv, e) for e in eta], axis=0)
    own_closed = _t1_first_order_of_t2_noise
    np.testing.assert_allclose(own_closed(plan, inv), own, rtol=0.05)
    # Q(beta + eta) - Q(eta) - Q(beta) is a cross term of mean 0: so, unclipped, the estimate from the released curves
    # beta + eta is unbiased for the energy at the true curves (the difference keeps the Monte Carlo error small)
    cross = np.mean([_t1_first_order(plan, inv, beta + e) - _t1_first_order(plan, inv, e) for e in eta], axis=0)
    np.testing.assert_allclose(cross, _t1_first_order(plan, inv, beta), rtol=0.1)


@pytest.mark.parametrize(("share", "epsilon"), [(0.1, 1.0), (0.1, 5.0), (0.5, 1.0)])
def test_stated_coefficient_noise_matches_whole_releases(share: float, epsilon: float) -> None:
    """Realised per-coefficient squared error of facade releases against the stated N2 + N1 (each draw's own), on an
    unbalanced design (a level held by a tenth of the units) and a balanced one. T2's part alone was 1.2-2.3 x low."""
    curves, covariates, _ = _unbalanced(600, 4, share)
    grid = GRID
    rel = release_fosr(curves, covariates, grid, epsilon=epsilon, tau_y=1.5, bound=1.0, kernel=KERNEL, draws=400,
                       secure=False, rng=np.random.default_rng(5))
    # the release each draw would give without noise: T1^{-1} times T2 smoothed at that draw's pair (no smoothing
    # bias in the comparison, which the figure leaves out and the plan's `with bias` states)
    plan = rel.plans[0]
    t1, t2_coef = fosr_moments(design_matrix(covariates, intercept=True), plan.basis.coefficients(curves))
    lam, phi = plan.basis.eigenvalues, plan.basis.eigenfunctions
    smoothed = np.stack([np.linalg.solve(t1, t2_coef * iclp_qr_shrinkage(lam, pl.eta, pl.psi)) @ phi.T
                         for pl in rel.plans])
    err = rel.coefficients - smoothed
    realised = np.mean(np.einsum("dmk,dmk,k->dm", err, err, grid.weights), axis=0)
    stated = np.mean([np.sum(fosr_coefficient_noise(pl, t1, c), axis=0)
                      for pl, t1, c in zip(rel.plans, rel.t1, rel.coefficients, strict=True)], axis=0)
    ratio = realised / stated
    assert np.all((ratio > 0.6) & (ratio < 1.5)), ratio  # higher orders in T1's noise are not in the figure


@pytest.mark.parametrize(("effect", "epsilon"), [(0.0, 5.0), (-0.2, 20.0)])
def test_an_effect_below_twice_its_stated_noise_is_the_one_that_can_be_told_from_zero(effect: float,
                                                                                      epsilon: float) -> None:
    """What the release's caution rests on (tasks._publish.DISTINCT_FROM_ZERO): with no effect, the released level
    curve is below twice its stated noise in nearly every release (measured 99.8 %); with an effect, the releases not
    flagged have its sign (measured 0.7 % wrong at epsilon 20, where 2.4 % of all releases had the wrong sign)."""
    curves, covariates, _ = _unbalanced(600, 4, effect=effect)
    rel = release_fosr(curves, covariates, GRID, epsilon=epsilon, tau_y=1.5, bound=1.0, kernel=KERNEL, draws=400,
                       secure=False, rng=np.random.default_rng(6))
    noise = np.array([math.sqrt(sum(part[1] for part in fosr_coefficient_noise(pl, t1, c)))
                      for pl, t1, c in zip(rel.plans, rel.t1, rel.coefficients, strict=True)])
    size = GRID.norm(rel.coefficients[:, 1])
    flagged = size < 2.0 * noise
    if effect == 0.0:
        assert flagged.mean() > 0.95
    else:
        assert (~flagged).sum() >= 20 and np.mean(rel.coefficients[~flagged, 1].mean(axis=1) > 0) < 0.05
