"""ERM solver never stops a release (MATH.md §9, formula estimator.erm.fixed_iterations@1).

When Newton does not certify the tolerance, Nesterov's accelerated gradient runs for at most the
theorem's ``T`` iterations (public constants only) and its output is within the tolerance; the
only refusal left is the plan's work limit, which depends on the configuration alone.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fdpcore.basis.grids import midpoint_grid
from fdpcore.errors import DomainError
from fdpcore.summaries import erm
from fdpcore.summaries.erm import (
    HINGE_SMOOTHING,
    WORK_LIMIT,
    erm_fallback_iterations,
    plan_erm_release,
    solve_erm,
    summarise_erm,
)
from fdpcore.summaries.kde import point_space

KERNEL = {"name": "matern", "nu": 1.5, "rho": 0.2}
ETA = 1.5


def _objective(beta: np.ndarray, feats: np.ndarray, y: np.ndarray, w: np.ndarray, psi: float, loss: str) -> float:
    f = feats @ beta
    if loss == "ridge":
        lv = (f - y) ** 2
    elif loss == "logistic":
        lv = np.logaddexp(0.0, -y * f)
    else:
        u, mu = 1.0 - y * f, HINGE_SMOOTHING
        lv = np.where(u >= mu, u - mu / 2.0, np.where(u > 0.0, u * u / (2.0 * mu), 0.0))
    return float(w @ lv + psi * beta @ beta)


def _problem(seed: int, loss: str, size: int = 300, grid: int = 25) -> tuple[Any, ...]:
    s = point_space(KERNEL, [midpoint_grid(grid)])
    rng = np.random.default_rng(seed)
    x = rng.uniform(size=(size, 1))
    if loss == "ridge":
        y = np.clip(np.sin(6 * x[:, 0]) + rng.normal(0, 0.3, size), -1.0, 1.0)
    else:
        y = np.where(rng.uniform(size=size) < 1 / (1 + np.exp(-8 * (x[:, 0] - 0.5))), 1.0, -1.0)
    w = rng.uniform(0.5, 1.5, size)
    return s, s.snap(x), y, w / w.sum()


def _uncertified(*args: Any) -> tuple[np.ndarray, float, int]:
    """A Newton routine that gives up at once (the case the old code turned into an abort)."""
    return np.zeros(args[0].shape[1]), math.inf, 0


def _fail_newton(mp: pytest.MonkeyPatch) -> None:
    for name in ("_ridge", "_newton_logistic", "_newton_hinge"):
        mp.setattr(erm, name, _uncertified)


@pytest.mark.parametrize("loss", ["ridge", "logistic", "hinge"])
def test_uncertified_newton_still_returns_a_solution_within_the_tolerance(loss: str) -> None:
    s, idx, y, w = _problem(3, loss)
    psi, tol = 0.01, 1e-9
    ref = solve_erm(idx, y, w, s, loss=loss, eta=ETA, psi=psi, tolerance=1e-13)
    assert ref.route == "newton"  # reference: certified to 1e-13 by Newton
    with pytest.MonkeyPatch.context() as mp:
        _fail_newton(mp)
        sol = solve_erm(idx, y, w, s, loss=loss, eta=ETA, psi=psi, tolerance=tol)  # the old code raised here
    assert sol.route in ("certified", "theorem") and sol.gap <= tol
    root = s.eigenvalues ** (ETA / 2)
    feats = s.eigenfunctions[idx] * root
    beta, beta_ref = sol.theta / root, ref.theta / root
    gap = _objective(beta, feats, y, w, psi, loss) - _objective(beta_ref, feats, y, w, psi, loss)
    assert gap <= tol + 1e-13
    assert psi * float((beta - beta_ref) @ (beta - beta_ref)) <= tol + 1e-13  # the distance the sensitivity uses


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), loss=st.sampled_from(["ridge", "logistic", "hinge"]),
       psi=st.sampled_from([0.005, 0.05, 0.5]), tol=st.sampled_from([1e-6, 1e-8, 1e-9]),
       grid=st.integers(8, 30))
def test_exactly_t_iterations_reach_the_tolerance(seed: int, loss: str, psi: float, tol: float, grid: int) -> None:
    s, idx, y, w = _problem(seed, loss, size=60, grid=grid)
    keys, yy, ww = erm._aggregate(idx, y, w, loss)
    nodes, node_loss = erm._node_loss(keys, yy, ww, loss, HINGE_SMOOTHING)
    root = s.eigenvalues ** (ETA / 2)
    kappa_sq = float(((s.eigenfunctions**2) @ s.eigenvalues**ETA).max())
    beta, bound, its, route = erm._accelerated(s.eigenfunctions[nodes] * root, node_loss, psi, tol,
                                               kappa_sq=kappa_sq, early_stop=False)
    steps = erm_fallback_iterations(loss, kappa_sq=kappa_sq, psi=psi, tolerance=tol,
                                    objective_at_zero=node_loss.value(np.zeros(nodes.size)))
    assert route == "theorem" and its == steps and bound <= tol
    ref = solve_erm(idx, y, w, s, loss=loss, eta=ETA, psi=psi, tolerance=1e-13)
    feats = s.eigenfunctions[idx] * root
    gap = _objective(beta, feats, y, w, psi, loss) - _objective(ref.theta / root, feats, y, w, psi, loss)
    assert gap <= tol + 1e-13


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), loss=st.sampled_from(["ridge", "logistic", "hinge"]), m=st.integers(1, 6))
def test_neighbours_on_the_fallback_route_stay_within_the_sensitivity(seed: int, loss: str, m: int) -> None:
    n, psi = 12, 0.02
    kw: dict[str, Any] = {"label_bound": 1.0} if loss == "ridge" else {}
    plan = plan_erm_release(midpoint_grid(20), KERNEL, n=n, epsilon=1.0, loss=loss, psi=psi, eta=ETA, secure=False,
                            **kw)
    rng = np.random.default_rng(seed)
    base = rng.uniform(size=(n - 1, 1))
    ybase = rng.choice([-1.0, 1.0], size=n - 1)
    a = rng.uniform(size=(3, 1))
    ya = np.where(a[:, 0] > 0.5, 1.0, -1.0)  # unit 0 in D: labels that agree with a threshold...
    b = rng.uniform(size=(m, 1))
    yb = np.where(b[:, 0] > 0.5, -1.0, 1.0)  # ...and in D': flipped (worst case for a classifier)
    units_a = np.concatenate([np.zeros(3, int), np.arange(1, n)])
    units_b = np.concatenate([np.zeros(m, int), np.arange(1, n)])
    with pytest.MonkeyPatch.context() as mp:
        _fail_newton(mp)
        za = summarise_erm(np.vstack([a, base]), np.concatenate([ya, ybase]), units_a, plan)
        zb = summarise_erm(np.vstack([b, base]), np.concatenate([yb, ybase]), units_b, plan)
    lam = plan.space.eigenvalues
    theta = (za - zb) * np.sqrt(lam)
    assert math.sqrt(float(np.sum(theta**2 / lam**ETA))) <= plan.parameters["rkhs_sensitivity"] * (1 + 1e-9)
    assert np.abs(za - zb).sum() <= plan.sensitivity * (1 + 1e-9)


def test_plan_refuses_an_unbounded_solve_whatever_the_data() -> None:
    kw: dict[str, Any] = {"epsilon": 1.0, "loss": "hinge", "psi": 1e-8, "eta": ETA, "secure": False}
    messages = set()
    for n in (10, 10_000):  # the refusal uses the configuration only: the same message for any table
        with pytest.raises(DomainError, match=r"erm\.tolerance.*psi") as err:
            plan_erm_release(midpoint_grid(100), KERNEL, n=n, **kw)
        messages.add(str(err.value))
    assert len(messages) == 1
    # a fitting tolerance is named when one exists, and it does fit
    kw |= {"loss": "logistic", "psi": 1e-13}
    with pytest.raises(DomainError, match=r"erm\.tolerance >= ") as err:
        plan_erm_release(midpoint_grid(100), KERNEL, n=10, **kw)
    fits = float(str(err.value).split("erm.tolerance >= ")[1].split(" ")[0])
    plan = plan_erm_release(midpoint_grid(100), KERNEL, n=10, tolerance=fits, **kw)
    assert plan.parameters["fallback_iterations"] * 100 * plan.space.n_basis <= WORK_LIMIT


def test_shipped_examples_are_not_refused_and_state_t() -> None:
    grid1, grid2 = [midpoint_grid(100)], [midpoint_grid(30)] * 2
    logistic = plan_erm_release(grid1, KERNEL, n=1000, epsilon=1.0, loss="logistic", psi=0.01, secure=False)
    ridge = plan_erm_release(grid1, KERNEL, n=1000, epsilon=1.0, loss="ridge", psi=0.2, label_bound=1.5, secure=False)
    svm = plan_erm_release(grid2, {"name": "matern", "nu": 1.5, "rho": 0.3}, n=1000, epsilon=1.0, delta=1e-5,
                           mechanism="gp", loss="hinge", psi=0.01, secure=False)
    assert [p.parameters["fallback_iterations"] for p in (logistic, ridge, svm)] == [45, 29, 9074]
