"""``psi: auto`` for RKHS ERM (formula ``tuning.erm.psi.risk_prior@1``, issue 16): public, monotone in epsilon, and the
sensitivity at the chosen psi is exactly that of the same numeric psi."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

from fdpcore.basis.grids import midpoint_grid
from fdpcore.errors import DomainError, PrivacyParameterError
from fdpcore.summaries.erm import (
    ERM_PSIS,
    PSI_RULE_FORMULA,
    erm_prior_sq_error,
    erm_prior_sq_risk,
    erm_psi_risk_prior,
    plan_erm_release,
    release_erm,
    solve_erm,
)
from fdpcore.summaries.kde import point_space

KERNEL = {"name": "matern", "nu": 1.5, "rho": 0.2}
G = midpoint_grid(50)
EPSILONS = (0.25, 0.5, 1.0, 2.0, 5.0, 20.0)


@pytest.mark.parametrize(("loss", "mechanism", "bound", "delta"), [
    ("ridge", "iclp", 40.0, 0.0), ("ridge", "gp", 1.5, 1e-5), ("logistic", "iclp", None, 0.0),
    ("hinge", "gp", None, 1e-6)])
def test_psi_never_rises_and_the_prior_risk_falls_as_epsilon_grows(loss: str, mechanism: str, bound: float | None,
                                                                     delta: float) -> None:
    """The old default psi = 0.01 bought noise only with more budget; the rule buys less smoothing too."""
    s = point_space(KERNEL, [G])
    picks = [erm_psi_risk_prior(s, n=272, epsilon=e, loss=loss, mechanism=mechanism, label_bound=bound, delta=delta)
             for e in EPSILONS]
    psis = [c.psi for c in picks]
    risks = [c.prior_sq_risk for c in picks]
    assert all(a >= b for a, b in zip(psis, psis[1:], strict=False)), psis
    assert psis[-1] < psis[0]  # not flat over a factor 80 of epsilon
    assert all(a > b for a, b in zip(risks, risks[1:], strict=False)), risks
    assert all(c.formula_id == PSI_RULE_FORMULA and c.rule == "risk_prior" for c in picks)


def test_the_rule_reads_no_data() -> None:
    """Its inputs are the public ones the brief lists; nothing named like points, labels or units."""
    names = set(inspect.signature(erm_psi_risk_prior).parameters)
    assert names == {"space", "n", "epsilon", "loss", "eta", "mechanism", "label_bound", "delta", "calibration",
                     "tolerance", "smoothing", "signal_fraction", "psis"}
    assert set(inspect.signature(erm_prior_sq_error).parameters) == {
        "space", "eta", "psi", "loss", "n", "label_bound", "signal_fraction"}


@pytest.mark.parametrize(("loss", "mechanism", "bound", "delta"), [
    ("ridge", "iclp", 40.0, 0.0), ("ridge", "gp", 2.0, 1e-5), ("logistic", "iclp", None, 0.0)])
def test_auto_plan_is_the_numeric_plan_at_the_chosen_psi(loss: str, mechanism: str, bound: float | None,
                                                         delta: float) -> None:
    """The rule is public: the Lipschitz constant (ridge: it grows like 1/sqrt(psi)), the sensitivity, the work bound
    and the calibration are those of the same psi given as a number; only the recorded rule differs."""
    kw = {"n": 272, "epsilon": 1.0, "loss": loss, "mechanism": mechanism, "label_bound": bound, "delta": delta,
          "secure": False}
    auto = plan_erm_release(G, KERNEL, psi="auto", **kw)  # type: ignore[arg-type]
    psi = auto.parameters["psi"]
    fixed = plan_erm_release(G, KERNEL, psi=psi, **kw)  # type: ignore[arg-type]
    assert psi in ERM_PSIS
    assert auto.sensitivity == fixed.sensitivity and auto.paper_sensitivity == fixed.paper_sensitivity
    assert auto.calibration.scale == fixed.calibration.scale
    for key in ("lipschitz", "rkhs_sensitivity", "fallback_iterations", "kappa_eta"):
        assert auto.parameters[key] == fixed.parameters[key], key
    if loss == "ridge":
        kappa = auto.parameters["kappa_eta"]
        assert auto.parameters["lipschitz"] == pytest.approx(2 * bound * (1 + kappa / math.sqrt(psi)))  # type: ignore[operator]
    assert auto.parameters["psi_rule"] == "risk_prior" and auto.parameters["psi_formula"] == PSI_RULE_FORMULA
    assert fixed.parameters["psi_rule"] == "fixed" and fixed.parameters["psi_formula"] is None
    assert PSI_RULE_FORMULA in auto.formulas and PSI_RULE_FORMULA not in fixed.formulas
    for plan in (auto, fixed):  # the prior of the rule and the error under it, at the psi used, fixed or chosen
        prior = plan.parameters["psi_prior"]
        assert prior["signal_l2"] == (0.5 * bound if bound is not None else 1.0)
        assert prior["rms_error_with_bias"] == pytest.approx(math.sqrt(erm_prior_sq_risk(plan)))
    assert "candidates" in auto.parameters["psi_prior"] and "candidates" not in fixed.parameters["psi_prior"]
    assert erm_prior_sq_risk(auto) == pytest.approx(
        erm_psi_risk_prior(point_space(KERNEL, [G]), n=272, epsilon=1.0, loss=loss, mechanism=mechanism,
                           label_bound=bound, delta=delta).prior_sq_risk, rel=1e-6)


def test_the_issue_config_gets_a_usable_psi() -> None:
    """Faithful-like (n = 272, label_bound 40 minutes): psi = 0.01 put noise of RMS ~400 minutes on a +-40 response;
    the rule's psi keeps the noise a fraction of label_bound and is below the flat-function psi = 1 at epsilon 5."""
    kw = {"n": 272, "loss": "ridge", "label_bound": 40.0, "secure": False}
    old = plan_erm_release(G, KERNEL, epsilon=1.0, psi=0.01, **kw)  # type: ignore[arg-type]
    auto = plan_erm_release(G, KERNEL, epsilon=1.0, psi="auto", **kw)  # type: ignore[arg-type]
    assert math.sqrt(old.expected_sq_l2_error) > 100.0
    assert math.sqrt(auto.expected_sq_l2_error) < 0.25 * 40.0
    assert erm_prior_sq_risk(auto) < erm_prior_sq_risk(old) / 100.0
    at5 = plan_erm_release(G, KERNEL, epsilon=5.0, psi="auto", **kw)  # type: ignore[arg-type]
    assert 0.01 < at5.parameters["psi"] < 1.0


def test_bias_and_variance_term_matches_simulated_kernel_ridge_fits() -> None:
    """Draw f_0 from the prior, uniform covariates, residual sd r; the mean squared error of the exact kernel ridge
    fit over the draws is the formula's (first order in the design fluctuation: within 20 %)."""
    grid = midpoint_grid(30)
    s = point_space(KERNEL, [grid])
    lam, eta, n, bound = s.eigenvalues, 1.5, 400, 2.0
    sig = r = 0.5 * bound
    w = 0.5 * lam / lam.sum() + 0.5 * lam**2 / np.sum(lam**2)
    rng = np.random.default_rng(7)
    for psi in (1e-4, 1e-2, 1.0):
        errs = []
        for _ in range(60):
            theta0 = rng.normal(size=lam.shape[0]) * sig * np.sqrt(w)
            nodes = rng.integers(0, grid.size, size=n)  # uniform over the midpoint grid (equal weights)
            y = s.eigenfunctions[nodes] @ theta0 + r * rng.normal(size=n)
            sol = solve_erm(nodes, y, np.full(n, 1.0 / n), s, loss="ridge", eta=eta, psi=psi)
            errs.append(float(np.sum((sol.theta - theta0) ** 2)))
        expected = float(erm_prior_sq_error(s, eta=eta, psi=psi, loss="ridge", n=n, label_bound=bound))
        assert np.mean(errs) == pytest.approx(expected, rel=0.2), psi


def test_prior_terms_and_bad_inputs() -> None:
    s = point_space(KERNEL, [G])
    lo, hi = erm_prior_sq_error(s, eta=1.5, psi=[1e-12, 1e6], loss="ridge", n=100, label_bound=4.0)
    assert hi == pytest.approx(4.0, rel=1e-3)  # all bias: s^2 = (0.5 x 4)^2
    assert lo == pytest.approx(4.0 * s.n_basis / 100, rel=1e-3)  # all variance: r^2 J / n
    # logistic: psi' = 8 psi (curvature 1/4), signal 1, r^2 = 4
    lg = erm_prior_sq_error(s, eta=1.5, psi=[1e6], loss="logistic", n=100)
    assert lg[0] == pytest.approx(1.0, rel=1e-3)
    with pytest.raises(PrivacyParameterError, match="label_bound"):
        erm_prior_sq_error(s, eta=1.5, psi=0.1, loss="ridge", n=100)
    with pytest.raises(PrivacyParameterError, match="psi"):
        erm_prior_sq_error(s, eta=1.5, psi=[0.1, -1.0], loss="ridge", n=100, label_bound=1.0)
    with pytest.raises(DomainError, match="loss"):
        erm_psi_risk_prior(s, n=100, epsilon=1.0, loss="huber")
    with pytest.raises(PrivacyParameterError, match="delta"):
        erm_psi_risk_prior(s, n=100, epsilon=1.0, loss="logistic", mechanism="gp")
    with pytest.raises(PrivacyParameterError, match="'auto'"):
        plan_erm_release(G, KERNEL, n=100, epsilon=1.0, loss="logistic", psi="best", secure=False)


def test_candidates_respect_the_solver_work_limit() -> None:
    """A psi whose fallback bound the plan would refuse is never chosen; none fitting is a named refusal."""
    s = point_space(KERNEL, [G])
    c = erm_psi_risk_prior(s, n=10**6, epsilon=50.0, loss="hinge", tolerance=1e-12)
    plan_erm_release(G, KERNEL, n=10**6, epsilon=50.0, loss="hinge", psi=c.psi, tolerance=1e-12, secure=False)
    with pytest.raises(DomainError, match="work"):
        erm_psi_risk_prior(s, n=100, epsilon=1.0, loss="hinge", tolerance=1e-12, psis=(1e-12,))


def test_facade_releases_with_psi_auto() -> None:
    rng = np.random.default_rng(3)
    x = rng.uniform(size=(500, 1))
    y = 10.0 * np.sin(2 * math.pi * x[:, 0]) + rng.normal(size=500)
    values, plan = release_erm(x, y, axes=G, kernel=KERNEL, epsilon=5.0, loss="ridge", psi="auto", label_bound=20.0,
                               secure=False, rng=rng)
    assert values.shape == (1, G.size) and plan.parameters["psi_rule"] == "risk_prior"
    truth = 10.0 * np.sin(2 * math.pi * G.grid_points)
    assert float(np.sqrt(np.mean((values[0] - truth) ** 2))) < 5.0
