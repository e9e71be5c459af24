"""Mean-function release: the data-independent plan, the summary, and the Python facade.

A release is split so that the budget can be charged between the steps:

1. :func:`plan_mean_release` fixes everything that sets the noise scale — grid,
   kernel eigenbasis, ``(eta, psi)``, sensitivity, calibration — from public inputs
   (``n`` included, replace-one adjacency). No data enters.
2. :func:`summarise_mean` computes the pre-noise coefficients (never published).
3. :func:`draw_mean_release` adds noise and returns curves on the grid.

:func:`release_mean` chains the three for methodologists and external auditors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from fdpcore import _validate
from fdpcore._typing import ArrayLike, NDArrayFloat
from fdpcore.eigen import Eigenbasis, weighted_eigenbasis
from fdpcore.errors import DomainError, PrivacyParameterError
from fdpcore.estimators import iclp_qr_mean_coefficients
from fdpcore.grids import Grid, grid_from_nodes
from fdpcore.kernels import KernelSpec, decay_rate, kernel_spec
from fdpcore.mechanisms import (
    LaplaceCalibration,
    calibrate_iclp,
    iclp_expected_sq_error,
    sample_iclp_coefficients,
)
from fdpcore.preprocess import clip_l2
from fdpcore.sensitivity import iclp_qr_paper_sensitivity, iclp_qr_sensitivity
from fdpcore.tuning import pss_iclp_qr

__all__ = ["ESTIMATORS", "MeanPlan", "MeanRelease", "draw_mean_release", "plan_mean_release", "release_mean", "summarise_mean"]

#: Mean estimators available in this version, with their sensitivity formula ids.
ESTIMATORS: dict[str, str] = {"iclp_qr": "sensitivity.mean.iclp_qr.exact_l2@1"}


@dataclass(frozen=True, eq=False)
class MeanPlan:
    """Everything that sets the noise of a mean release; all of it is public.

    Attributes:
        estimator: estimator name (``"iclp_qr"``).
        basis: kernel eigenbasis on the grid.
        n: number of records (public under replace-one adjacency).
        tau: L2 clipping radius.
        epsilon, delta: privacy parameters of one draw.
        eta, psi: regularisation parameters.
        tuning: ``"fixed"`` or the PSS rule that chose ``(eta, psi)``.
        tuning_formula: formula id of the tuning rule (``None`` when fixed).
        beta: kernel decay rate used by PSS.
        sensitivity: exact ``1,C``-norm sensitivity.
        sensitivity_formula: its formula id.
        paper_sensitivity: the paper's bound for the same setting.
        paper_formula: its formula id.
        calibration: the whitened Laplace calibration.
    """

    estimator: str
    basis: Eigenbasis
    n: int
    tau: float
    epsilon: float
    delta: float
    eta: float
    psi: float
    tuning: str
    tuning_formula: str | None
    beta: float
    sensitivity: float
    sensitivity_formula: str
    paper_sensitivity: float
    paper_formula: str
    calibration: LaplaceCalibration

    @property
    def budget_splits(self) -> list[dict[str, float | str]]:
        """Named parts of one draw's cost; they sum exactly to ``(epsilon, delta)``."""
        return [{"name": "mean", "epsilon": self.epsilon, "delta": self.delta}]

    @property
    def expected_sq_l2_error(self) -> float:
        """``E||noise||_W^2`` of one draw (MATH.md §3.5)."""
        return iclp_expected_sq_error(self.basis.eigenvalues, self.calibration.scale)


@dataclass(frozen=True, eq=False)
class MeanRelease:
    """A private mean release: ``values`` is ``draws x K`` on ``grid``; the rest is public metadata."""

    values: NDArrayFloat
    grid: Grid
    plan: MeanPlan

    @property
    def sensitivity(self) -> float:
        """Exact sensitivity that set the noise."""
        return self.plan.sensitivity

    @property
    def formula_id(self) -> str:
        """Formula id of the sensitivity."""
        return self.plan.sensitivity_formula

    @property
    def epsilon(self) -> float:
        """Epsilon of one draw."""
        return self.plan.epsilon

    @property
    def delta(self) -> float:
        """Delta of one draw (0: pure DP)."""
        return self.plan.delta


def plan_mean_release(
    grid: Grid,
    kernel: Mapping[str, object] | KernelSpec,
    *,
    n: int,
    tau: float,
    epsilon: float,
    estimator: str = "iclp_qr",
    eta: float | None = None,
    psi: float | None = None,
    tuning: str = "exact_balanced",
    delta: float = 0.0,
    secure: bool = True,
) -> MeanPlan:
    """Fix the noise of a mean release from public inputs only (MATH.md §4.3, §5.1, §3.3).

    ``eta`` and ``psi`` are either both given (``tuning = "fixed"``) or both chosen by
    the PSS rule ``tuning``; giving only one is an error (no silent mixing).

    Privacy assumptions: grid, kernel, ``n``, ``tau``, ``eta``/``psi`` (or the PSS rule)
    are fixed without looking at the data.

    >>> from fdpcore.grids import midpoint_grid
    >>> p = plan_mean_release(midpoint_grid(48), {"name": "matern", "nu": 1.5, "rho": 0.1},
    ...                       n=508, tau=1.0, epsilon=1.0, secure=False)
    >>> (p.eta, round(p.psi, 6), p.sensitivity < p.paper_sensitivity)
    (1.25, 0.001969, True)
    """
    if estimator not in ESTIMATORS:
        raise DomainError(f"estimator ({estimator!r}) must be one of {sorted(ESTIMATORS)}")
    n = _validate.positive_int("n", n)
    tau = _validate.positive_finite("tau", tau)
    epsilon = _validate.positive_finite("epsilon", epsilon)
    delta = _validate.delta_value(delta)
    if delta != 0.0:
        raise PrivacyParameterError(f"delta ({delta!r}) must be 0 for the pure-DP estimator {estimator!r}")
    spec = kernel_spec(kernel)
    basis = weighted_eigenbasis(spec, grid)
    beta = decay_rate(spec, basis.eigenvalues)
    if (eta is None) != (psi is None):
        raise PrivacyParameterError("eta and psi must be given together, or both left to the PSS rule")
    if eta is None or psi is None:
        choice = pss_iclp_qr(tuning, beta=beta, n=n, epsilon=epsilon)
        eta_v, psi_v, tuning_name, tuning_formula = choice.eta, choice.psi, choice.rule, choice.formula_id
    else:
        eta_v = _validate.positive_finite("eta", eta)
        psi_v = _validate.positive_finite("psi", psi)
        tuning_name, tuning_formula = "fixed", None
    lam = basis.eigenvalues
    sens = iclp_qr_sensitivity(lam, eta=eta_v, psi=psi_v, tau=tau, n=n)
    paper = iclp_qr_paper_sensitivity(lam, eta=eta_v, psi=psi_v, tau=tau, n=n)
    calibration = calibrate_iclp(sens, epsilon, n_basis=basis.n_basis, secure=secure)
    return MeanPlan(
        estimator, basis, n, tau, epsilon, delta, eta_v, psi_v, tuning_name, tuning_formula, beta,
        sens, ESTIMATORS[estimator], paper, "sensitivity.mean.iclp_qr.paper_l1@1", calibration,
    )


def summarise_mean(clipped_curves: ArrayLike, plan: MeanPlan) -> NDArrayFloat:
    """Pre-noise ICLP-QR coefficients of the mean of clipped curves (never publish them).

    The projection onto the kept span (MATH.md §1.4) is implicit: only kept
    coefficients are computed.
    """
    x = _validate.finite_matrix("curves", clipped_curves, plan.basis.grid.size)
    if x.shape[0] != plan.n:
        raise DomainError(f"curves has {x.shape[0]} rows but the plan is for n = {plan.n} records")
    xbar = plan.basis.coefficients(x).mean(axis=0)
    return iclp_qr_mean_coefficients(xbar, plan.basis.eigenvalues, eta=plan.eta, psi=plan.psi)


def draw_mean_release(
    plan: MeanPlan, coefficients: ArrayLike, *, draws: int = 1, rng: np.random.Generator | None = None
) -> NDArrayFloat:
    """Add calibrated ICLP noise and recolour to the grid: ``draws x K`` private curves."""
    noisy = sample_iclp_coefficients(coefficients, plan.basis.eigenvalues, plan.calibration, draws=draws, rng=rng)
    return plan.basis.reconstruct(noisy)


def release_mean(
    curves: ArrayLike,
    t: ArrayLike | Grid,
    *,
    epsilon: float,
    tau: float,
    kernel: Mapping[str, object],
    estimator: str = "iclp_qr",
    eta: float | None = None,
    psi: float | None = None,
    delta: float = 0.0,
    draws: int = 1,
    secure: bool = True,
    tuning: str = "exact_balanced",
    rng: np.random.Generator | None = None,
) -> MeanRelease:
    """Release a differentially private mean curve (the Python facade of DESIGN.md).

    Args:
        curves: ``n x K`` curve values on the grid (one row per privacy unit).
        t: the grid nodes (trapezoid weights on ``[t_1, t_K]``) or a :class:`Grid`.
        epsilon: privacy parameter of one draw.
        tau: L2 clipping radius; curves are clipped record-wise.
        kernel: kernel mapping, e.g. ``{"name": "matern", "nu": 1.5, "rho": 0.1}``.
        estimator: ``"iclp_qr"``.
        eta, psi: regularisation; ``None`` for both lets the PSS rule ``tuning`` choose.
        delta: must be 0 for the pure-DP estimators.
        draws: independent draws; each is a separate release costing ``epsilon``.
        secure: OpenDP's floating-point-safe sampler. ``False`` uses NumPy (simulations only).
        tuning: PSS rule name (see :data:`fdpcore.tuning.PSS_RULES`).
        rng: generator for ``secure=False`` (ignored when secure).

    Returns:
        :class:`MeanRelease` with ``.values`` (``draws x K``), ``.sensitivity``, ``.epsilon``,
        ``.delta`` and ``.formula_id``.

    Privacy assumptions: the grid, kernel, ``tau``, ``eta``/``psi`` and ``n`` are public and
    fixed before seeing the data; one row per privacy unit; replace-one adjacency.

    >>> rng = np.random.default_rng(1)
    >>> x = rng.normal(size=(200, 30)) * 0.1
    >>> r = release_mean(x, np.linspace(0, 1, 30), epsilon=1.0, tau=1.0,
    ...                  kernel={"name": "matern", "nu": 1.5, "rho": 0.1}, secure=False, rng=rng)
    >>> r.values.shape, r.formula_id
    ((1, 30), 'sensitivity.mean.iclp_qr.exact_l2@1')
    """
    grid = t if isinstance(t, Grid) else grid_from_nodes(t)
    x = _validate.finite_matrix("curves", curves, grid.size)
    plan = plan_mean_release(
        grid, kernel, n=x.shape[0], tau=tau, epsilon=epsilon, estimator=estimator, eta=eta, psi=psi,
        tuning=tuning, delta=delta, secure=secure,
    )
    clipped, _ = clip_l2(x, grid.weights, plan.tau)
    coefficients = summarise_mean(clipped, plan)
    return MeanRelease(draw_mean_release(plan, coefficients, draws=draws, rng=rng), grid, plan)
