"""Mean-function release: the data-independent plan, the summary, and the Python facade.

Every mean mechanism of MATH.md §4 has the same shape: a pre-noise summary in *whitened
coordinates* ``z`` (dimension ``d``), i.i.d. noise on ``z`` (Laplace calibrated to the l1
sensitivity of ``z``, or Gaussian calibrated to its l2 = Cameron-Martin sensitivity), and a fixed
public linear map ``R`` (``d x K``) back to the grid, ``curve = z~ R``:

=============  ==========================================  ==========  ==============================
estimator      whitened coordinates ``z``                  noise       recolouring ``R``
=============  ==========================================  ==========  ==============================
``iclp_qr``    ``s_j xbar_j / sqrt(lambda_j)``, all of J    Laplace     ``diag(sqrt(lambda)) Phi^T``
``gp``         same summary as ``iclp_qr``                 Gaussian    ``diag(sqrt(lambda)) Phi^T``
``iclp_ar``    ``soft(xbar_j) / sqrt(lambda_j)``, j in A   Laplace     ``diag(sqrt(lambda_A)) Phi_A^T``
``frl``        ``xbar_1..xbar_M``                          Laplace     ``Phi_M^T``
``bernstein``  lattice values of the sup-clipped mean      Laplace     Bernstein basis on the grid
=============  ==========================================  ==========  ==============================

A release is split so that the budget can be charged between the steps:

1. :func:`plan_mean_release` fixes everything that sets the noise scale from public inputs
   (``n`` included, replace-one adjacency). No data enters.
2. Data-dependent tuning only: :func:`select_mean_parameters` runs the exponential mechanism
   (``dp_select``, charged as its own split) or PCV (not DP) and returns the finished plan.
3. :func:`summarise_mean` computes ``z`` (never published).
4. :func:`draw_mean_release` adds noise and recolours to the grid.

:func:`release_mean` chains them for methodologists and external auditors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from fdpcore import _validate
from fdpcore._typing import ArrayLike, NDArrayFloat
from fdpcore.basis.eigen import Eigenbasis, weighted_eigenbasis
from fdpcore.basis.grids import Grid, grid_from_nodes
from fdpcore.basis.kernels import KernelSpec, decay_rate, kernel_spec
from fdpcore.data.preprocess import add_reference, centre_on_reference, clip_l2
from fdpcore.errors import DomainError, InternalError, PrivacyParameterError
from fdpcore.noise.bernstein import (
    bernstein_basis,
    bernstein_interpolation_matrix,
    bernstein_sensitivity,
    bernstein_sensitivity_attained,
    clip_sup,
)
from fdpcore.noise.gaussian import CALIBRATIONS, GaussianCalibration, calibrate_gaussian, sample_gaussian_whitened
from fdpcore.noise.iclp import (
    LaplaceCalibration,
    calibrate_iclp,
    sample_laplace_whitened,
    whitened_expected_sq_error,
)
from fdpcore.noise.quantiles import (
    BOUND_PAYS_FORMULA,
    CENTRE_CANDIDATES,
    DEFAULT_CENTRE_SHARE,
    DEFAULT_TAU_SHARE,
    PublicChoice,
    a_priori_tau_choice,
    bound_pays,
    centre_choice,
    choice_epsilon,
    default_tau_range,
    draw_public_choice,
    epsilon_after_choices,
    one_draw_with_auto,
    prior_signal_fraction,
    record_norms,
    tau_candidates,
    tau_choice,
    tau_epsilon,
)
from fdpcore.noise.selection import (
    SelectionSpec,
    exponential_select,
    keyed_split,
    project_ball,
    selection_key,
    selection_normalisers,
    selection_score_sensitivity,
    selection_scores,
    split_sizes,
)
from fdpcore.privacy.accounting import exact
from fdpcore.privacy.formulas import formula
from fdpcore.privacy.tuning import (
    DEFAULT_RULES,
    DEFAULT_SIGNAL_FRACTION,
    PSS_RULES_BY_ESTIMATOR,
    RISK_RULES,
    PssChoice,
    prior_sq_bias,
    pss_mean,
    risk_prior_iclp_qr,
    smooth_prior_power,
)

__all__ = [
    "auto_public_choices",
    "candidate_plans",
    "dp_select_scores",
    "draw_mean_release",
    "ESTIMATORS",
    "frl_mean_coefficients",
    "frl_paper_sensitivity",
    "frl_sensitivity",
    "gp_cm_paper_sensitivity",
    "gp_cm_sensitivity",
    "gp_cm_spectrum_free_bound",
    "iclp_ar_active_set",
    "iclp_ar_attaining_pair",
    "iclp_ar_mean_coefficients",
    "iclp_ar_paper_sensitivity",
    "iclp_ar_sensitivity",
    "iclp_ar_thresholds",
    "iclp_qr_mean_coefficients",
    "iclp_qr_paper_sensitivity",
    "iclp_qr_sensitivity",
    "iclp_qr_shrinkage",
    "iclp_qr_weights",
    "MeanPlan",
    "MeanRelease",
    "plan_mean_release",
    "release_mean",
    "select_mean_parameters",
    "summarise_mean",
    "whitened_from_mean_coefficients",
]

#: Mean estimators and the formula id of the sensitivity that sets their noise.
ESTIMATORS: dict[str, str] = {
    "iclp_qr": "sensitivity.mean.iclp_qr.exact_l2@1",
    "iclp_ar": "sensitivity.mean.iclp_ar.l2@1",
    "frl": "sensitivity.mean.frl.exact@1",
    "gp": "sensitivity.mean.gp.cm_exact@1",
    "bernstein": "sensitivity.mean.bernstein.sup_upper@1",
}

#: Formula id of the paper's bound recorded next to the exact one.
PAPER_FORMULAS: dict[str, str] = {
    "iclp_qr": "sensitivity.mean.iclp_qr.paper_l1@1",
    "iclp_ar": "sensitivity.mean.iclp_ar.paper@1",
    "frl": "sensitivity.mean.frl.paper@1",
    "gp": "sensitivity.mean.gp.mrs_paper@1",
    "bernstein": "sensitivity.mean.bernstein.sup_upper@1",  # diffpriv's L * Delta_inf: the same value
}

#: Formula id of each estimator.
ESTIMATOR_FORMULAS: dict[str, str] = {
    "iclp_qr": "estimator.mean.iclp_qr@1",
    "gp": "estimator.mean.iclp_qr@1",
    "iclp_ar": "estimator.mean.iclp_ar@1",
    "frl": "estimator.mean.frl@1",
    "bernstein": "estimator.mean.bernstein@1",
}

#: Norm of each sensitivity (MATH.md §1.5).
SENSITIVITY_NORMS: dict[str, str] = {
    "iclp_qr": "1,C", "iclp_ar": "1,C", "frl": "l1 (first M coefficients)", "gp": "Cameron-Martin (C)",
    "bernstein": "l1 (lattice values)",
}

#: Tuning methods that use the data (MATH.md §5.2-5.3).
DATA_TUNING = ("dp_select", "pcv")

#: Multipliers of the PSS value that form the candidate grid of §5.3 (10^u, u in -1..1 by 0.5).
PSI_GRID = tuple(10.0**u for u in (-1.0, -0.5, 0.0, 0.5, 1.0))
#: Multipliers of the PSS ``M`` for FRL selection.
M_GRID = (0.25, 0.5, 1.0, 2.0, 4.0)
#: Number of PCV folds (MATH.md §5.2).
PCV_FOLDS = 10


#: The ``risk_prior`` prior of the mean (``tuning.risk.iclp_qr.prior@2``): ``w ~ lambda^a``, ``a`` from the kernel's
#: decay rate (:func:`fdpcore.privacy.tuning.smooth_prior_power`); the rule and ``fdp plan``'s ``with bias`` share it.
MEAN_PRIOR = "smooth"


@dataclass(frozen=True, eq=False)
class MeanPlan:
    """Everything that sets the noise of a mean release; all of it is public.

    Attributes:
        estimator: one of :data:`ESTIMATORS`.
        basis: kernel eigenbasis on the grid.
        n: number of records (public under replace-one adjacency).
        tau: L2 clipping radius.
        epsilon: total privacy cost of one draw (selection included).
        delta: see ``epsilon``.
        eta: regularisation (ICLP-QR, GP, ICLP-AR), else ``None``.
        psi: see ``eta``.
        n_basis: FRL's ``M``, else ``None``.
        lattice_k: Bernstein lattice resolution and sup-norm clip ``B``, else ``None``.
        sup_clip: see ``lattice_k``.
        tuning: ``"fixed"``, a PSS rule name, ``"dp_select"`` or ``"pcv"``.
        tuning_formula: formula id of the rule (``None`` when fixed).
        beta: kernel decay rate used by PSS.
        sensitivity: the sensitivity that sets the noise (``None`` until a selection finishes).
        sensitivity_formula: its formula id.
        paper_sensitivity: the paper's bound for the same setting (``None`` until selected).
        paper_formula: its formula id.
        calibration: Laplace or Gaussian calibration (``None`` until selected).
        recolour: ``R`` (``d x K``), whitened coordinates to grid values (``None`` until selected).
        selection: the pending or completed data-dependent selection, if any.
        gp_calibration: ``"analytic"`` or ``"classical"`` for GP, else ``None``.
        non_private: ``True`` only for PCV tuning: the release is then **not** DP.
        secure: OpenDP samplers (``False``: NumPy, simulations only).
        public_choices: public parameters bought with budget (``tau: auto``, ``value_offset: auto``),
            each a named split of ``epsilon`` charged with the release (:mod:`fdpcore.noise.quantiles`).
        signal_fraction: the prior signal scale of ``risk_prior`` as a fraction of ``tau`` (resolved:
            :func:`fdpcore.privacy.tuning.default_signal_fraction` when the caller left it unset).
    """

    estimator: str
    basis: Eigenbasis
    n: int
    tau: float
    epsilon: float
    delta: float
    eta: float | None
    psi: float | None
    n_basis: int | None
    lattice_k: int | None
    sup_clip: float | None
    tuning: str
    tuning_formula: str | None
    beta: float
    sensitivity: float | None
    sensitivity_formula: str
    paper_sensitivity: float | None
    paper_formula: str
    calibration: LaplaceCalibration | GaussianCalibration | None
    recolour: NDArrayFloat | None
    selection: SelectionSpec | None = None
    gp_calibration: str | None = None
    non_private: bool = False
    secure: bool = True
    public_choices: tuple[PublicChoice, ...] = ()
    signal_fraction: float = DEFAULT_SIGNAL_FRACTION

    @property
    def pending(self) -> bool:
        """Whether a data-dependent selection must run before summarising (see :func:`select_mean_parameters`)."""
        return self.calibration is None

    @property
    def sensitivity_status(self) -> str:
        """``"EXACT"`` when some neighbouring pair attains :attr:`sensitivity`, else ``"UPPER"``.

        The registry's status of :attr:`sensitivity_formula`, except for Bernstein, whose ``2BL/n``
        is attained (by the constant curves ``B`` and ``-B``) only when those survive the L2 clip,
        ``B ||1|| <= tau`` (:func:`fdpcore.noise.bernstein.bernstein_sensitivity_attained`).
        """
        if self.estimator == "bernstein":
            b = self.sup_clip if self.sup_clip is not None else float("inf")
            attained = bernstein_sensitivity_attained(b, tau=self.tau, weights=self.basis.grid.weights)
            return "EXACT" if attained else "UPPER"
        return formula(self.sensitivity_formula).status

    @property
    def noise(self) -> str:
        """``"gaussian"`` for GP-ADP, else ``"laplace"``."""
        return "gaussian" if self.estimator == "gp" else "laplace"

    @property
    def epsilon_select(self) -> float:
        """Epsilon spent on the exponential-mechanism selection (0 if none)."""
        return self.selection.epsilon if self.selection is not None else 0.0

    @property
    def epsilon_available(self) -> float:
        """Epsilon left for the tuning and the mean after the public choices (``tau``/centre) are paid."""
        return epsilon_after_choices(self.epsilon, self.public_choices)

    @property
    def epsilon_mean(self) -> float:
        """Epsilon of the noisy mean itself."""
        if self.selection is not None and self.selection.epsilon > 0:
            return _exact_split(self.epsilon_available, self.selection.epsilon)[1]
        return self.epsilon_available

    @property
    def budget_splits(self) -> list[dict[str, float | str]]:
        """Named parts of one draw's cost; they sum exactly to ``(epsilon, delta)``."""
        splits: list[dict[str, float | str]] = [
            {"name": c.name, "epsilon": c.epsilon, "delta": 0.0} for c in self.public_choices if not c.a_priori
        ]
        if self.selection is not None and self.selection.epsilon > 0:
            splits.append({"name": "tuning", "epsilon": self.selection.epsilon, "delta": 0.0})
        splits.append({"name": "mean", "epsilon": self.epsilon_mean, "delta": self.delta})
        return splits

    @property
    def rho(self) -> float | None:
        """ZCDP ``rho`` for Gaussian plans (``Delta^2/(2 sigma^2)``, plus ``eps_1^2/2`` for a selection), else ``None``."""
        if self.estimator != "gp":
            return None
        if isinstance(self.calibration, GaussianCalibration):
            rho = self.calibration.rho
        else:  # pending selection: sigma is proportional to Delta, so rho does not depend on the chosen psi
            rho = calibrate_gaussian(1.0, self.epsilon_mean, self.delta, n_basis=1,
                                     calibration=self.gp_calibration or "analytic", secure=False).rho
        return rho + self.epsilon_select**2 / 2.0 + sum(c.epsilon**2 / 2.0 for c in self.public_choices)

    @property
    def variance(self) -> float:
        """Variance of each whitened noise coordinate (``2 b^2`` Laplace, ``sigma^2`` Gaussian)."""
        cal = self._finished_calibration()
        return cal.scale**2 if self.noise == "gaussian" else 2.0 * cal.scale**2

    @property
    def expected_sq_l2_error(self) -> float:
        """``E||noise||_W^2`` of one draw (formula ``noise.whitened.expected_sq_l2@1``)."""
        if self.recolour is None:
            raise InternalError("the plan has no recolouring before its selection step")
        return whitened_expected_sq_error(self.recolour, self.basis.grid.weights, self.variance)

    @property
    def prior_sq_l2_risk(self) -> float | None:
        """``E||noise||^2`` plus the expected squared smoothing bias of a typical mean (ICLP-QR and GP only).

        The bias is :func:`fdpcore.privacy.tuning.prior_sq_bias` at this plan's ``(eta, psi)`` for a mean of norm
        ``signal_fraction * tau`` spread as the ``risk_prior`` prior (:data:`MEAN_PRIOR`,
        ``tuning.risk.iclp_qr.prior@2``): the criterion the default rule minimises, so it falls as epsilon grows. Public inputs only; the actual bias depends on the (unknown) mean.
        """
        if self.estimator not in ("iclp_qr", "gp") or self.pending or self.eta is None or self.psi is None:
            return None
        bias = float(prior_sq_bias(self.basis.eigenvalues, self.eta, self.psi, signal=self.signal_fraction * self.tau,
                                   prior=MEAN_PRIOR, power=smooth_prior_power(self.beta)))
        return self.expected_sq_l2_error + bias

    @property
    def calibration_formula(self) -> str:
        """Formula id of the calibration rule."""
        cal = self._finished_calibration()
        if isinstance(cal, GaussianCalibration):
            return cal.formula_id
        return "calibration.iclp.laplace_whitened@1"

    @property
    def formulas(self) -> list[str]:
        """Every formula id this plan relies on (cited by the manifest)."""
        grid = self.basis.grid
        ids = {
            "grid.midpoint@1" if grid.rule == "midpoint" else "grid.trapezoid@1",
            "eigen.weighted_kl@1", "preprocess.clip_l2@1", ESTIMATOR_FORMULAS[self.estimator],
            self.sensitivity_formula, self.paper_formula, self.calibration_formula, "noise.whitened.expected_sq_l2@1",
            "accounting.pure.sequential@1",
        }
        if self.tuning_formula is not None:
            ids.add(self.tuning_formula)
        if self.estimator == "bernstein":
            ids.add("preprocess.clip_sup@1")
        if self.selection is not None and self.selection.method == "dp_select":
            ids |= {"selection.exp_mech.score_sensitivity@2", "selection.exp_mech.gumbel@1"}
        for c in self.public_choices:
            ids.add(c.formula_id)
            if c.name == "tau" and not c.a_priori:
                ids.add("tuning.tau.quantile_level@3")
        return sorted(ids)

    def _finished_calibration(self) -> LaplaceCalibration | GaussianCalibration:
        if self.calibration is None:
            raise InternalError("the plan's noise is not calibrated before its selection step")
        return self.calibration


@dataclass(frozen=True, eq=False)
class MeanRelease:
    """A private mean release: ``values`` is ``draws x K`` on ``grid``; the rest is public metadata."""

    values: NDArrayFloat
    grid: Grid
    plan: MeanPlan

    @property
    def sensitivity(self) -> float:
        """The sensitivity that set the noise."""
        if self.plan.sensitivity is None:  # pragma: no cover - a release always has a finished plan
            raise InternalError("release without a finished plan")
        return self.plan.sensitivity

    @property
    def formula_id(self) -> str:
        """Formula id of the sensitivity."""
        return self.plan.sensitivity_formula

    @property
    def epsilon(self) -> float:
        """Epsilon of one draw (selection included)."""
        return self.plan.epsilon

    @property
    def delta(self) -> float:
        """Delta of one draw (0: pure DP)."""
        return self.plan.delta

    @property
    def private(self) -> bool:
        """``False`` when PCV chose a parameter from the data without budget (simulation only)."""
        return not self.plan.non_private


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
    tuning: str | None = None,
    delta: float = 0.0,
    secure: bool = True,
    n_basis: int | None = None,
    calibration: str = "analytic",
    lattice_k: int | None = None,
    sup_clip: float | None = None,
    select_epsilon: float | None = None,
    non_private: bool = False,
    public_choices: tuple[PublicChoice, ...] = (),
    signal_fraction: float | None = None,
    signal_rms: float | None = None,
) -> MeanPlan:
    """Fix the noise of a mean release from public inputs only (MATH.md §4, §5).

    Parameters are either fixed (``eta`` and ``psi`` together; ``n_basis`` for FRL; ``lattice_k``
    for Bernstein) or chosen by ``tuning``: a PSS rule of the estimator
    (:data:`fdpcore.privacy.tuning.PSS_RULES_BY_ESTIMATOR`, default :data:`fdpcore.privacy.tuning.DEFAULT_RULES`),
    ``"dp_select"`` (exponential mechanism, ``select_epsilon`` of the total ``epsilon``) or
    ``"pcv"`` (not DP: needs ``non_private=True``). With ``dp_select``/``pcv`` the returned plan is
    pending until :func:`select_mean_parameters` runs. The default rule of ``iclp_qr`` and ``gp`` is
    ``risk_prior`` (:func:`fdpcore.privacy.tuning.risk_prior_iclp_qr`, with ``signal_fraction``, or the fraction of
    ``tau`` that a stated ``signal_rms`` makes, ``tuning.risk.signal_stated@1``; unset, it is
    :func:`fdpcore.noise.quantiles.prior_signal_fraction` of the choices). ``public_choices`` (``tau: auto``,
    ``value_offset: auto``) are parts of ``epsilon`` paid before the tuning and the mean; ``tau`` is then the value
    they released.

    Privacy assumptions: grid, kernel, ``n``, ``tau``, ``sup_clip`` and the parameters (or the
    rule that picks them) are fixed without looking at the data.

    Raises:
        PrivacyParameterError: ``delta > 0`` for a pure-DP estimator, ``delta = 0`` for ``gp``,
            ``classical`` with ``epsilon > 1``, ICLP-AR ``eta < 1``, a bad ``select_epsilon``.
        DomainError: unknown estimator or rule, parameters not meant for the estimator.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> p = plan_mean_release(midpoint_grid(48), {"name": "matern", "nu": 1.5, "rho": 0.1},
    ...                       n=508, tau=1.0, epsilon=1.0, secure=False)
    >>> (p.tuning, p.sensitivity < p.paper_sensitivity)
    ('risk_prior', True)
    >>> q = plan_mean_release(midpoint_grid(48), {"name": "matern", "nu": 1.5, "rho": 0.1},
    ...                       n=508, tau=1.0, epsilon=1.0, tuning="exact_balanced", secure=False)
    >>> (q.eta, round(q.psi, 6))
    (1.25, 0.001969)
    """
    if estimator not in ESTIMATORS:
        raise DomainError(f"estimator ({estimator!r}) must be one of {sorted(ESTIMATORS)}")
    n = _validate.positive_int("n", n)
    tau = _validate.positive_finite("tau", tau)
    epsilon = _validate.positive_finite("epsilon", epsilon)
    delta = _validate.delta_value(delta)
    if estimator == "gp":
        if delta == 0.0:
            raise PrivacyParameterError("delta (0.0) must be > 0 for the gp estimator (Gaussian noise)")
        if calibration not in CALIBRATIONS:
            raise DomainError(f"calibration ({calibration!r}) must be one of {sorted(CALIBRATIONS)}")
    elif delta != 0.0:
        raise PrivacyParameterError(f"delta ({delta!r}) must be 0 for the pure-DP estimator {estimator!r}")
    _check_parameter_kinds(estimator, eta=eta, psi=psi, n_basis=n_basis, lattice_k=lattice_k, sup_clip=sup_clip)
    spec = kernel_spec(kernel)
    basis = weighted_eigenbasis(spec, grid)
    beta = decay_rate(spec, basis.eigenvalues)
    base = MeanPlan(
        estimator, basis, n, tau, epsilon, delta, None, None, None, None,
        _validate.positive_finite("sup_clip", sup_clip) if sup_clip is not None else None,
        "fixed", None, beta, None, ESTIMATORS[estimator], None, PAPER_FORMULAS[estimator], None, None,
        gp_calibration=calibration if estimator == "gp" else None, non_private=False, secure=secure,
        public_choices=tuple(public_choices),
        signal_fraction=prior_signal_fraction(signal_fraction, public_choices, signal_rms=signal_rms, tau=tau,
                                              domain_length=grid.domain_range[1] - grid.domain_range[0]),
    )
    epsilon_rest = base.epsilon_available
    fixed = {"iclp_qr": eta, "gp": eta, "iclp_ar": eta, "frl": n_basis, "bernstein": lattice_k}[estimator]
    if tuning in DATA_TUNING:
        if fixed is not None:
            raise DomainError(f"tuning ({tuning!r}) chooses the parameters; do not also fix them")
        return _plan_selection(base, tuning, select_epsilon=select_epsilon, non_private=non_private)
    if select_epsilon is not None:
        raise DomainError("select_epsilon is only used with tuning 'dp_select'")
    if non_private:
        raise DomainError("non_private is only meaningful with tuning 'pcv'")
    if fixed is not None:
        if tuning is not None and tuning != "fixed":
            raise DomainError(f"tuning ({tuning!r}) must be left unset when the parameters are fixed")
        return _finish(base, eta=eta, psi=psi, n_basis=n_basis, lattice_k=lattice_k, epsilon_mean=epsilon_rest)
    rule = tuning if tuning is not None else DEFAULT_RULES[estimator]
    if rule not in PSS_RULES_BY_ESTIMATOR[estimator]:
        allowed = sorted(PSS_RULES_BY_ESTIMATOR[estimator]) + ["dp_select"] + (["pcv"] if estimator != "bernstein" else [])
        raise DomainError(f"tuning.rule ({rule!r}) must be one of {allowed} for estimator {estimator!r}")
    choice = _rule_choice(base, rule, n=n, epsilon_mean=epsilon_rest)
    base = dataclasses.replace(base, tuning=rule, tuning_formula=choice.formula_id)
    return _finish(base, eta=choice.eta, psi=choice.psi, n_basis=choice.n_basis, lattice_k=choice.lattice_k,
                   epsilon_mean=epsilon_rest)


def _rule_choice(base: MeanPlan, rule: str, *, n: int, epsilon_mean: float) -> PssChoice:
    """The parameters a tuning rule picks for ``base`` at ``n`` records and ``epsilon_mean`` (public inputs)."""
    est = base.estimator
    if rule in RISK_RULES:
        if est == "gp":
            d = base.basis.n_basis
            sigma = calibrate_gaussian(1.0, epsilon_mean, base.delta, n_basis=d,
                                       calibration=base.gp_calibration or "analytic", secure=False).scale
            kappa, norm = sigma * sigma, "max"
        else:
            kappa, norm = 2.0 / epsilon_mean**2, "l2"
        return risk_prior_iclp_qr(base.basis.eigenvalues, n=n, noise_factor=kappa, sensitivity_norm=norm,
                                  signal_fraction=base.signal_fraction, prior=MEAN_PRIOR,
                                  power=smooth_prior_power(base.beta))
    return pss_mean(est, rule, beta=base.beta, n=n, epsilon=epsilon_mean, n_kept=base.basis.n_basis)


def _check_parameter_kinds(
    estimator: str, *, eta: float | None, psi: float | None, n_basis: int | None, lattice_k: int | None,
    sup_clip: float | None,
) -> None:
    uses_eta = estimator in ("iclp_qr", "gp", "iclp_ar")
    if (eta is None) != (psi is None):
        raise PrivacyParameterError("eta and psi must be given together, or both left to the tuning rule")
    if not uses_eta and eta is not None:
        raise DomainError(f"eta/psi are not parameters of estimator {estimator!r}")
    if estimator != "frl" and n_basis is not None:
        raise DomainError(f"n_basis is a parameter of frl only, not of {estimator!r}")
    if estimator != "bernstein" and (lattice_k is not None or sup_clip is not None):
        raise DomainError(f"lattice_k and sup_clip are parameters of bernstein only, not of {estimator!r}")
    if estimator == "bernstein" and sup_clip is None:
        raise PrivacyParameterError("sup_clip (None) must be given for bernstein: its sensitivity 2BL/n needs the sup-norm clip B")
    if estimator == "iclp_ar" and eta is not None and _validate.positive_finite("eta", eta) < 1.0:
        raise PrivacyParameterError(f"eta ({eta!r}) must be >= 1 for iclp_ar (MATH.md §4.2)")


def _finish(
    base: MeanPlan, *, eta: float | None, psi: float | None, n_basis: int | None, lattice_k: int | None,
    epsilon_mean: float, secure: bool | None = None,
) -> MeanPlan:
    """Sensitivity, paper bound, calibration and recolouring for fixed parameters."""
    est, lam, phi, n, tau = base.estimator, base.basis.eigenvalues, base.basis.eigenfunctions, base.n, base.tau
    sec = base.secure if secure is None else secure
    root = np.sqrt(lam)
    eta_v = psi_v = float("nan")  # validated eta and psi of the estimators that have them
    if est in ("iclp_qr", "gp", "iclp_ar"):
        eta_v = _validate.positive_finite("eta", eta if eta is not None else float("nan"))
        psi_v = _validate.positive_finite("psi", psi if psi is not None else float("nan"))
    if est in ("iclp_qr", "gp"):
        if est == "iclp_qr":
            sens = iclp_qr_sensitivity(lam, eta=eta_v, psi=psi_v, tau=tau, n=n)
            paper = iclp_qr_paper_sensitivity(lam, eta=eta_v, psi=psi_v, tau=tau, n=n)
        else:
            sens = gp_cm_sensitivity(lam, eta=eta_v, psi=psi_v, tau=tau, n=n)
            paper = gp_cm_paper_sensitivity(eta=eta_v, psi=psi_v, tau=tau, n=n)
        recolour = (phi * root).T
    elif est == "iclp_ar":
        if eta_v < 1.0:
            raise PrivacyParameterError(f"eta ({eta_v!r}) must be >= 1 for iclp_ar (MATH.md §4.2)")
        sens = iclp_ar_sensitivity(lam, eta=eta_v, psi=psi_v, tau=tau, n=n)
        paper = iclp_ar_paper_sensitivity(lam, eta=eta_v, psi=psi_v, tau=tau, n=n)
        j_star = iclp_ar_active_set(lam, eta=eta_v, psi=psi_v, tau=tau)
        recolour = (phi[:, :j_star] * root[:j_star]).T
    elif est == "frl":
        m = _validate.positive_int("n_basis", n_basis if n_basis is not None else 0)
        if m > base.basis.n_basis:
            raise DomainError(f"n_basis ({m}) must be <= the number of kept eigenpairs ({base.basis.n_basis})")
        n_basis = m
        sens = frl_sensitivity(m, tau=tau, n=n)
        paper = frl_paper_sensitivity(m, tau=tau, n=n)
        recolour = phi[:, :m].T.copy()
    else:  # bernstein
        k = _validate.positive_int("lattice_k", lattice_k if lattice_k is not None else 0)
        lattice_k = k
        if base.sup_clip is None:  # pragma: no cover - checked on entry
            raise InternalError("bernstein plan without sup_clip")
        sens = bernstein_sensitivity(base.sup_clip, k=k, n=n)
        paper = sens
        grid = base.basis.grid
        a, b = grid.domain_range
        recolour = bernstein_basis((grid.grid_points - a) / (b - a), k).T
    d = recolour.shape[0]
    cal: LaplaceCalibration | GaussianCalibration
    if est == "gp":
        cal = calibrate_gaussian(sens, epsilon_mean, base.delta, n_basis=d,
                                 calibration=base.gp_calibration or "analytic", secure=sec)
    else:
        cal = calibrate_iclp(sens, epsilon_mean, n_basis=d, secure=sec)
    recolour.setflags(write=False)
    return dataclasses.replace(
        base, eta=eta_v if est in ("iclp_qr", "gp", "iclp_ar") else None,
        psi=psi_v if est in ("iclp_qr", "gp", "iclp_ar") else None, n_basis=n_basis if est == "frl" else None,
        lattice_k=lattice_k if est == "bernstein" else None, sensitivity=sens, paper_sensitivity=paper,
        calibration=cal, recolour=recolour,
    )


def _exact_split(epsilon: float, epsilon_1: float) -> tuple[float, float]:
    """``(eps_1, eps_2)`` whose shortest decimals sum exactly to ``epsilon`` (the ledger's exact accounting).

    >>> _exact_split(1.0, 0.1)
    (0.1, 0.9)
    """
    rest = exact(epsilon) - exact(epsilon_1)
    e2 = float(rest)
    if rest <= 0 or exact(e2) != rest:
        raise PrivacyParameterError(
            f"select_epsilon ({epsilon_1!r}) must leave a remainder of epsilon ({epsilon!r}) that is an exact decimal"
        )
    return epsilon_1, e2


def _plan_selection(base: MeanPlan, method: str, *, select_epsilon: float | None, non_private: bool) -> MeanPlan:
    """A pending plan: candidates, split, score sensitivity and penalties (all public)."""
    est = base.estimator
    if est == "bernstein":
        raise DomainError("tuning ('dp_select'/'pcv') is not available for bernstein; fix lattice_k or use 'derived_c2'")
    n_t, n_v = split_sizes(base.n)
    if method == "dp_select":
        if non_private:
            raise DomainError("non_private is only meaningful with tuning 'pcv'")
        if select_epsilon is None:
            raise PrivacyParameterError("select_epsilon (None) must be given with tuning 'dp_select'")
        e1 = _validate.positive_finite("select_epsilon", select_epsilon)
        avail = base.epsilon_available
        if not e1 < avail:
            raise PrivacyParameterError(f"select_epsilon ({e1!r}) must be < epsilon ({avail!r}) after the public choices")
        e1, e2 = _exact_split(avail, e1)
        m_t, m_v = selection_normalisers(base.n)
        d_u = selection_score_sensitivity(base.tau, m_t, m_v)
        formula = "selection.exp_mech.gumbel@1"
    else:
        if not non_private:
            raise PrivacyParameterError(
                "tuning ('pcv') is not differentially private (MATH.md §5.2); it needs non_private=True"
            )
        if select_epsilon is not None:
            raise DomainError("select_epsilon is only used with tuning 'dp_select'")
        e1, e2, d_u, formula = 0.0, base.epsilon_available, 0.0, None
        m_t, m_v = float(n_t), float(n_v)
    rule = DEFAULT_RULES[est]
    if est == "frl":
        m0 = _rule_choice(base, rule, n=n_t, epsilon_mean=e2).n_basis or 1
        cands: tuple[float, ...] = tuple(sorted({float(min(max(round(m0 * g), 1), base.basis.n_basis)) for g in M_GRID}))
        parameter = "n_basis"
        pen = tuple(_finish(base, eta=None, psi=None, n_basis=int(c), lattice_k=None, epsilon_mean=e2,
                            secure=False).expected_sq_l2_error for c in cands)
        eta = None
    else:
        choice = _rule_choice(base, rule, n=n_t, epsilon_mean=e2)
        if choice.psi is None or choice.eta is None:  # pragma: no cover
            raise InternalError("PSS gave no (eta, psi)")
        eta = choice.eta
        cands = tuple(choice.psi * g for g in PSI_GRID)
        if est == "iclp_ar":  # drop candidates that leave no active coefficient (a data-independent rule)
            lam = base.basis.eigenvalues
            cands = tuple(c for c in cands if iclp_ar_active_set(lam, eta=eta, psi=c, tau=base.tau) > 0)
            if not cands:
                raise PrivacyParameterError("tuning ('dp_select'/'pcv'): every iclp_ar candidate psi leaves no active coefficient")
        parameter = "psi"
        pen = tuple(_finish(base, eta=eta, psi=c, n_basis=None, lattice_k=None, epsilon_mean=e2,
                            secure=False).expected_sq_l2_error for c in cands)
    spec = SelectionSpec(method, parameter, cands, pen, m_t, m_v, e1, d_u, PCV_FOLDS if method == "pcv" else 0)
    return dataclasses.replace(base, tuning=method, tuning_formula=formula, eta=eta, selection=spec,
                               non_private=method == "pcv")


def auto_public_choices(
    grid: Grid,
    kernel: Mapping[str, object] | KernelSpec,
    *,
    n: int,
    epsilon: float,
    tau_auto: bool,
    centre_range: tuple[float, float] | None = None,
    tau_share: float = DEFAULT_TAU_SHARE,
    centre_share: float = DEFAULT_CENTRE_SHARE,
    tau_range: tuple[float, float] | None = None,
    **plan_kwargs: object,
) -> tuple[PublicChoice, ...]:
    """The public choices a release buys, not yet drawn: the centre first, then ``tau`` (MATH.md §1.7).

    Each is a named split of ``epsilon`` (``share * epsilon``, an exact decimal, raised to the quantile's
    reliability floor when ``n`` is small: :func:`fdpcore.noise.quantiles.choice_epsilon`; ``tau``'s also up to a
    quarter of ``epsilon`` so that its level can reach 0.8: :func:`fdpcore.noise.quantiles.tau_epsilon`). The quantile level of
    ``tau`` comes from the release's expected noise at ``tau = 1`` (its plan, with the same splits and
    ``plan_kwargs`` as the release: estimator, tuning, ...), so only public inputs enter.

    Examples:
        >>> from fdpcore.basis.grids import midpoint_grid
        >>> ch = auto_public_choices(midpoint_grid(48), {"name": "matern", "nu": 1.5, "rho": 0.1}, n=508,
        ...                          epsilon=1.0, tau_auto=True, centre_range=(0.0, 4000.0))
        >>> [(c.name, c.epsilon) for c in ch]
        [('value_offset', 0.1307), ('tau', 0.25)]
    """
    choices: list[PublicChoice] = []
    if centre_range is not None:
        e_c = choice_epsilon("value_offset", n, epsilon, centre_share, CENTRE_CANDIDATES)
        choices.append(centre_choice(e_c, centre_range))
    if tau_auto:
        if tau_range is None:
            a, b = grid.domain_range
            rms = plan_kwargs.get("signal_rms")
            tau_range = default_tau_range(b - a, None if rms is None else float(rms))  # type: ignore[arg-type]
        try:
            e_tau = tau_epsilon(n, epsilon, tau_share, len(tau_candidates(*tau_range)))
        except PrivacyParameterError:  # n * epsilon too small for a DP quantile: the public upper end, for free
            return (*choices, a_priori_tau_choice(tau_range))
        if plan_kwargs.get("signal_rms") is not None and bound_pays(epsilon_after_choices(epsilon, tuple(choices)),
                                                                    e_tau, tau_range):
            return (*choices, a_priori_tau_choice(tau_range, BOUND_PAYS_FORMULA))
        provisional = tau_choice(n, e_tau, 1.0, tau_range)
        unit = plan_mean_release(grid, kernel, n=n, tau=1.0, epsilon=epsilon, secure=False,
                                 public_choices=(*choices, provisional), **plan_kwargs)  # type: ignore[arg-type]
        if unit.selection is not None:  # pending: the noise of the PSS-centred candidate
            spec = unit.selection
            r1 = float(np.sqrt(spec.penalties[len(spec.penalties) // 2]))
        else:
            r1 = float(np.sqrt(unit.expected_sq_l2_error))
        choices.append(tau_choice(n, e_tau, r1, tau_range))
    return tuple(choices)


def select_mean_parameters(
    clipped_curves: ArrayLike, plan: MeanPlan, *, unit_ids: Sequence[object] | None = None,
    rng: np.random.Generator | None = None,
) -> MeanPlan:
    """Run a pending plan's selection on the data and return the finished plan (MATH.md §5.2-5.3).

    ``dp_select``: the records are split by :func:`fdpcore.noise.selection.keyed_split` of ``unit_ids``
    (default: row numbers) under a fresh key (:func:`fdpcore.noise.selection.selection_key`, never kept);
    the exponential mechanism (Gumbel report-noisy-max, OpenDP when the plan is secure) scores
    ``-||P_tau(S_V/m_v) - fit_c(P_tau(S_T/m_t))||^2 - pi(c)`` with the public normalisers of the spec,
    ``epsilon_1``-DP by ``selection.exp_mech.score_sensitivity@2``; then ``psi = psi_hat m_t / n``
    (post-processing) or ``M = M_hat``. Call it only after the full cost has been charged, and mark
    the charge final before: its randomness depends on the data.

    ``pcv``: 10-fold cross-validation by position, scoring the squared distance of each training
    fit to the held-out fold mean plus the candidate's expected noise energy. **Not DP.**
    """
    spec = plan.selection
    if spec is None or not plan.pending:
        raise DomainError("the plan has no pending selection (tuning must be 'dp_select' or 'pcv')")
    x = _checked(clipped_curves, plan)
    theta = plan.basis.coefficients(x)
    if spec.method == "dp_select":
        ids: Sequence[object] = range(plan.n) if unit_ids is None else unit_ids
        scores = dp_select_scores(plan, theta, ids, selection_key(None if plan.secure else rng))
        idx = exponential_select(scores, epsilon=spec.epsilon, sensitivity=spec.score_sensitivity,
                                 secure=plan.secure, rng=rng)
    else:
        folds = np.array_split(np.arange(plan.n), min(spec.folds, plan.n))
        total = np.zeros(len(spec.candidates))
        for fold in folds:  # 10 folds, vectorised over curves and candidates
            mask = np.ones(plan.n, dtype=bool)
            mask[fold] = False
            fits = _fits(plan, theta[mask].mean(axis=0), spec.candidates)
            held = theta[fold].mean(axis=0)
            total += np.sum((fits - held) ** 2, axis=1) + np.asarray(spec.penalties)
        idx = int(np.argmin(total))
    return _finish_candidate(plan, spec.candidates[idx])


def _finish_candidate(plan: MeanPlan, chosen: float) -> MeanPlan:
    """The finished plan of a pending plan's candidate (as the selection finishes it)."""
    spec = plan.selection
    assert spec is not None  # noqa: S101 - a pending plan has a selection
    e2 = plan.epsilon_mean
    if spec.parameter == "n_basis":
        return _finish(plan, eta=None, psi=None, n_basis=int(chosen), lattice_k=None, epsilon_mean=e2)
    psi = chosen * spec.n_train / plan.n if spec.method == "dp_select" else chosen
    return _finish(plan, eta=plan.eta, psi=psi, n_basis=None, lattice_k=None, epsilon_mean=e2)


def candidate_plans(plan: MeanPlan) -> list[MeanPlan]:
    """The finished plan of every candidate of a pending plan, from public inputs only (MATH.md §5.3).

    Whichever candidate the selection picks, the release's noise is that of one of these plans, so
    their errors bound the error of the release before anything is charged (``fdp plan``).
    """
    if plan.selection is None:
        raise DomainError("candidate_plans needs a pending plan (tuning dp_select or pcv)")
    return [_finish_candidate(plan, c) for c in plan.selection.candidates]


def dp_select_scores(plan: MeanPlan, theta: NDArrayFloat, unit_ids: Sequence[object], key: bytes) -> NDArrayFloat:
    """``dp_select``'s scores of every candidate under split key ``key`` (pre-noise: never publish or log).

    ``theta`` are the clipped records' kept-basis coefficients, one row per unit of ``unit_ids``;
    the score is that of ``selection.exp_mech.score_sensitivity@2`` (MATH.md §5.3). The order of the
    rows does not matter: the split depends on each unit's id and the key only.
    """
    spec = plan.selection
    if spec is None or spec.method != "dp_select":
        raise DomainError("the plan has no pending dp_select selection")
    if len(unit_ids) != theta.shape[0]:
        raise DomainError(f"unit_ids ({len(unit_ids)} ids) must name the {theta.shape[0]} records")
    train = keyed_split(unit_ids, key)
    fits = _fits(plan, project_ball(theta[train].sum(axis=0) / spec.n_train, plan.tau), spec.candidates)
    return selection_scores(project_ball(theta[~train].sum(axis=0) / spec.n_val, plan.tau), fits, spec.penalties)


def _fits(plan: MeanPlan, xbar: NDArrayFloat, candidates: tuple[float, ...]) -> NDArrayFloat:
    """Estimator coefficients (full kept basis) of ``xbar`` for each candidate: ``L x J``."""
    lam = plan.basis.eigenvalues
    if plan.estimator == "frl":
        keep = np.arange(lam.shape[0])[None, :] < np.asarray(candidates)[:, None]
        return np.where(keep, xbar[None, :], 0.0)
    eta = plan.eta if plan.eta is not None else float("nan")
    if plan.estimator == "iclp_ar":
        return np.stack([iclp_ar_mean_coefficients(xbar, lam, eta=eta, psi=c) for c in candidates])
    return np.stack([iclp_qr_mean_coefficients(xbar, lam, eta=eta, psi=c) for c in candidates])


def _checked(clipped_curves: ArrayLike, plan: MeanPlan) -> NDArrayFloat:
    x = _validate.finite_matrix("curves", clipped_curves, plan.basis.grid.size)
    if x.shape[0] != plan.n:
        raise DomainError(f"curves has {x.shape[0]} rows but the plan is for n = {plan.n} records")
    return x


def summarise_mean(clipped_curves: ArrayLike, plan: MeanPlan) -> NDArrayFloat:
    """Pre-noise whitened coordinates ``z`` of the plan's estimator (never publish them).

    The projection onto the kept span (MATH.md §1.4) is implicit: only kept coefficients are
    computed. For Bernstein the curves are sup-clipped to ``B`` record by record and interpolated
    onto the lattice.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> p = plan_mean_release(midpoint_grid(20), {"name": "matern", "nu": 1.5, "rho": 0.1}, n=2, tau=1.0,
    ...                       epsilon=1.0, estimator="frl", n_basis=3, secure=False)
    >>> summarise_mean(np.zeros((2, 20)), p).tolist()
    [0.0, 0.0, 0.0]
    """
    if plan.pending:
        raise DomainError("the plan's parameters are not selected yet; run select_mean_parameters first")
    x = _checked(clipped_curves, plan)
    if plan.estimator == "bernstein":
        k = plan.lattice_k if plan.lattice_k is not None else 0
        b = plan.sup_clip if plan.sup_clip is not None else float("nan")
        grid = plan.basis.grid
        clipped, _ = clip_sup(x, b)
        r = bernstein_interpolation_matrix(grid.grid_points, grid.domain_range, k)
        lattice_mean: NDArrayFloat = (clipped @ r.T).mean(axis=0)
        return lattice_mean
    return whitened_from_mean_coefficients(plan.basis.coefficients(x).mean(axis=0), plan)


def whitened_from_mean_coefficients(xbar: NDArrayFloat, plan: MeanPlan) -> NDArrayFloat:
    """The eigen-coefficient summaries' pre-noise whitened coordinates from the mean coefficients ``xbar``.

    FRL, ICLP-AR and ICLP-QR (MATH.md §4.1-§4.3) depend on the records only through the mean of their
    eigen-coefficients, so the in-memory path (:func:`summarise_mean`) and the streaming path
    (:func:`fdpcore.data.accumulate.summarise_mean_sums`) share this step. Not for Bernstein (its summary is
    on the lattice, not the eigenbasis).

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> p = plan_mean_release(midpoint_grid(20), {"name": "matern", "nu": 1.5, "rho": 0.1}, n=2, tau=1.0,
    ...                       epsilon=1.0, estimator="frl", n_basis=2, secure=False)
    >>> whitened_from_mean_coefficients(np.array([0.5, -0.25, 0.1, 0.0]), p).tolist()
    [0.5, -0.25]
    """
    lam = plan.basis.eigenvalues
    if plan.estimator == "frl":
        return frl_mean_coefficients(xbar, plan.n_basis if plan.n_basis is not None else 0)
    eta = plan.eta if plan.eta is not None else float("nan")
    psi = plan.psi if plan.psi is not None else float("nan")
    if plan.estimator == "iclp_ar":
        d = plan.recolour.shape[0] if plan.recolour is not None else 0
        return iclp_ar_mean_coefficients(xbar, lam, eta=eta, psi=psi)[:d] / np.sqrt(lam[:d])
    return iclp_qr_mean_coefficients(xbar, lam, eta=eta, psi=psi) / np.sqrt(lam)


def draw_mean_release(
    plan: MeanPlan, z: ArrayLike, *, draws: int = 1, rng: np.random.Generator | None = None
) -> NDArrayFloat:
    """Add the calibrated noise to the whitened coordinates and recolour to the grid: ``draws x K``.

    Secure plans draw with OpenDP (``rng`` ignored); ``secure=False`` plans use NumPy and ``rng``.
    Each draw is a separate release.
    """
    cal = plan._finished_calibration()
    if plan.recolour is None:  # pragma: no cover - set together with the calibration
        raise InternalError("plan without recolouring")
    if isinstance(cal, GaussianCalibration):
        noisy = sample_gaussian_whitened(z, cal, draws=draws, rng=rng)
    else:
        noisy = sample_laplace_whitened(z, cal, draws=draws, rng=rng)
    return noisy @ plan.recolour


def release_mean(
    curves: ArrayLike,
    t: ArrayLike | Grid,
    *,
    epsilon: float,
    tau: float | str,
    kernel: Mapping[str, object],
    estimator: str = "iclp_qr",
    eta: float | None = None,
    psi: float | None = None,
    delta: float = 0.0,
    draws: int = 1,
    secure: bool = True,
    tuning: str | None = None,
    n_basis: int | None = None,
    calibration: str = "analytic",
    lattice_k: int | None = None,
    sup_clip: float | None = None,
    select_epsilon: float | None = None,
    unit_ids: Sequence[object] | None = None,
    rng: np.random.Generator | None = None,
    tau_share: float = DEFAULT_TAU_SHARE,
    tau_range: tuple[float, float] | None = None,
    signal_fraction: float | None = None,
    signal_rms: float | None = None,
    reference: ArrayLike | None = None,
) -> MeanRelease:
    """Release a differentially private mean curve (the Python facade; docs/python.md).

    Args:
        curves: ``n x K`` curve values on the grid (one row per privacy unit).
        t: the grid nodes (trapezoid weights on ``[t_1, t_K]``) or a :class:`Grid`.
        epsilon: privacy parameter of one draw (selection included).
        tau: L2 clipping radius; curves are clipped record-wise. ``"auto"``: bought with ``tau_share``
            of ``epsilon`` by OpenDP's DP quantile of the record norms over the geometric grid on
            ``tau_range`` (default ``[0.01, 1] * sqrt(|T|)``: :func:`auto_public_choices`), drawn once per call (also
            with ``secure=False``). It needs ``draws=1`` (:func:`fdpcore.noise.quantiles.one_draw_with_auto` refuses
            more: each draw is a separate release that buys its own ``tau``); call the facade once per draw.
        kernel: kernel mapping, e.g. ``{"name": "matern", "nu": 1.5, "rho": 0.1}``.
        estimator: ``"iclp_qr"``, ``"iclp_ar"``, ``"frl"``, ``"gp"`` or ``"bernstein"``.
        eta: regularisation (QR, GP, AR); ``None`` for both lets ``tuning`` choose.
        psi: see ``eta``.
        delta: 0 for the pure-DP estimators; ``> 0`` for ``gp``.
        draws: independent draws; each is a separate release costing ``epsilon``.
        secure: OpenDP's floating-point-safe samplers. ``False`` uses NumPy (simulations only).
        tuning: ``"risk_prior"``, a PSS rule of the estimator, ``"dp_select"`` or ``"pcv"`` (simulation only: needs
            ``secure=False`` and the result has ``private == False``); default
            (:data:`fdpcore.privacy.tuning.DEFAULT_RULES`): ``"risk_prior"`` for ``iclp_qr`` and ``gp`` (as ``fdp
            release``), the PSS rules ``tightened_l2`` for ``iclp_ar``, ``exact`` for ``frl`` and ``derived_c2`` for
            ``bernstein``.
        n_basis: FRL's ``M``.
        calibration: ``"analytic"`` or ``"classical"`` (gp).
        lattice_k: Bernstein lattice resolution ``k`` and sup-norm clip ``B``.
        sup_clip: see ``lattice_k``.
        select_epsilon: ``epsilon_1`` of ``dp_select`` (part of ``epsilon``).
        unit_ids: the privacy units' ids, one per row, for ``dp_select``'s keyed-hash split (default:
            row numbers); the same split as ``fdp release``, which passes the dataset's unit ids.
        rng: generator for ``secure=False`` (ignored when secure).
        tau_share: share of ``epsilon`` that buys ``tau: "auto"``.
        tau_range: the range of the candidate grid of ``tau: "auto"``.
        signal_fraction: prior signal scale of ``risk_prior`` as a fraction of ``tau``; default
            :func:`fdpcore.privacy.tuning.default_signal_fraction` (0.5, or 0.1 where ``tau: "auto"`` falls back to
            its a-priori bound).
        signal_rms: instead of ``signal_fraction``, the mean curve's root-mean-square distance from 0 (from
            ``reference`` where one is given) over the grid domain, in the units of ``curves``, known a priori: the
            fraction becomes ``min(1, signal_rms * sqrt(|T|) / tau)`` at the ``tau`` the release uses
            (:func:`fdpcore.privacy.tuning.stated_signal_fraction`).
        reference: a public reference curve on the grid (``K`` values, the units of ``curves``), as YAML's
            ``centering``: subtracted from every row before clipping (``tau`` and ``tau: "auto"`` then bound the
            centred rows) and added back to every draw (:func:`centre_on_reference`, formula
            ``preprocess.public_reference@1``); clipping and the shrinkage of the estimator then act on the
            deviations from it, not from 0. Default: none.

    Returns:
        :class:`MeanRelease` with ``.values`` (``draws x K``), ``.sensitivity``, ``.epsilon``,
        ``.delta`` and ``.formula_id``.

    Privacy assumptions: the grid, kernel, ``tau``, ``sup_clip``, ``reference``, the parameters (or the rule
    choosing them) and ``n`` are public and fixed before seeing the data; one row per privacy unit;
    replace-one adjacency.

    >>> rng = np.random.default_rng(1)
    >>> x = rng.normal(size=(200, 30)) * 0.1
    >>> r = release_mean(x, np.linspace(0, 1, 30), epsilon=1.0, tau=1.0,
    ...                  kernel={"name": "matern", "nu": 1.5, "rho": 0.1}, secure=False, rng=rng)
    >>> r.values.shape, r.formula_id
    ((1, 30), 'sensitivity.mean.iclp_qr.exact_l2@1')
    >>> g = release_mean(x, np.linspace(0, 1, 30), epsilon=1.0, delta=1e-5, tau=1.0, estimator="gp",
    ...                  kernel={"name": "matern", "nu": 1.5, "rho": 0.1}, secure=False, rng=rng)
    >>> g.formula_id, g.plan.rho is not None
    ('sensitivity.mean.gp.cm_exact@1', True)
    >>> r.plan.tuning, g.plan.tuning
    ('risk_prior', 'risk_prior')
    >>> release_mean(x, np.linspace(0, 1, 30), epsilon=1.0, tau="auto", draws=2,
    ...              kernel={"name": "matern", "nu": 1.5, "rho": 0.1}, secure=False, rng=rng)
    Traceback (most recent call last):
    ...
    fdpcore.errors.DomainError: draws (2) must be 1 with tau='auto': each draw is a separate release that would buy its own tau; call the facade once per draw
    """
    grid = t if isinstance(t, Grid) else grid_from_nodes(t)
    x = _validate.finite_matrix("curves", curves, grid.size)
    if reference is not None:
        x = centre_on_reference(x, reference)
    if tuning == "pcv" and secure:
        raise PrivacyParameterError("tuning ('pcv') is not differentially private; it is for simulations (secure=False) only")
    kwargs: dict[str, object] = dict(
        estimator=estimator, eta=eta, psi=psi, tuning=tuning, delta=delta, n_basis=n_basis, calibration=calibration,
        lattice_k=lattice_k, sup_clip=sup_clip, select_epsilon=select_epsilon, non_private=tuning == "pcv",
        signal_fraction=signal_fraction, signal_rms=signal_rms,
    )
    choices: tuple[PublicChoice, ...] = ()
    if isinstance(tau, str):
        if tau != "auto":
            raise DomainError(f"tau ({tau!r}) must be a positive number or 'auto'")
        one_draw_with_auto(draws)
        (pending_tau,) = auto_public_choices(grid, kernel, n=x.shape[0], epsilon=epsilon, tau_auto=True,
                                             tau_share=tau_share, tau_range=tau_range, **kwargs)  # type: ignore[arg-type]
        drawn = draw_public_choice(pending_tau, record_norms(x, grid.weights))
        choices, tau = (drawn,), float(drawn.value if drawn.value is not None else float("nan"))
    plan = plan_mean_release(grid, kernel, n=x.shape[0], tau=tau, epsilon=epsilon, secure=secure,
                             public_choices=choices, **kwargs)  # type: ignore[arg-type]
    clipped, _ = clip_l2(x, grid.weights, plan.tau)
    if plan.pending:
        plan = select_mean_parameters(clipped, plan, unit_ids=unit_ids, rng=rng)
    z = summarise_mean(clipped, plan)
    values = draw_mean_release(plan, z, draws=draws, rng=rng)
    return MeanRelease(values if reference is None else add_reference(values, reference), grid, plan)


# --- Sensitivities of the mean (MATH.md §4, table §4.6; formerly fdpcore/summaries/mean.py) -----------------
# Each function computes exactly one formula, registered under the formula id in its docstring
# (fdpcore.privacy.formulas). Every bound assumes replace-one adjacency with public n and
# record-wise clipping ||X_i||_W <= tau.


def iclp_qr_weights(eigenvalues: ArrayLike, eta: float, psi: float) -> NDArrayFloat:
    """The ICLP-QR weights ``a_j = lambda_j^(eta - 1/2) / (lambda_j^eta + psi)`` (MATH.md §0.3, §4.3).

    >>> iclp_qr_weights([1.0], 1.0, 1.0).tolist()
    [0.5]
    """
    lam = _eigenvalues(eigenvalues)
    eta = _validate.positive_finite("eta", eta)
    psi = _validate.positive_finite("psi", psi)
    return lam ** (eta - 0.5) / (lam**eta + psi)


def iclp_qr_sensitivity(eigenvalues: ArrayLike, *, eta: float, psi: float, tau: float, n: int) -> float:
    """Exact ``1,C``-norm sensitivity of the ICLP-QR mean (formula ``sensitivity.mean.iclp_qr.exact_l2@1``).

    .. math:: \\Delta_{QR} = \\frac{2\\tau}{n}\\Big(\\sum_{j\\in\\mathcal J}
              \\frac{\\lambda_j^{2\\eta-1}}{(\\lambda_j^\\eta+\\psi)^2}\\Big)^{1/2} = \\frac{2\\tau}{n}\\lVert a\\rVert_2

    Attained by ``X_1 = tau u``, ``X_1' = -tau u`` with ``u = sum_j (a_j/||a||_2) phi_j``
    (MATH.md §4.3, [EXACT]).

    Privacy assumptions: the grid, kernel, ``eta``, ``psi``, ``tau`` and ``n`` are public;
    every record is clipped to ``||X_i||_W <= tau``; adjacency is replace-one.

    >>> round(iclp_qr_sensitivity([1.0, 0.25], eta=1.0, psi=1.0, tau=1.0, n=2), 6)
    0.640312
    """
    tau = _validate.positive_finite("tau", tau)
    n = _validate.positive_int("n", n)
    a = iclp_qr_weights(eigenvalues, eta, psi)
    return float(2.0 * tau / n * np.sqrt(np.sum(a * a)))


def iclp_qr_paper_sensitivity(eigenvalues: ArrayLike, *, eta: float, psi: float, tau: float, n: int) -> float:
    """The paper's bound ``(2 tau / n) ||a||_1`` ([ICLP-v2] Thm 6.3; formula ``sensitivity.mean.iclp_qr.paper_l1@1``).

    Valid but loose; recorded next to the exact value so auditors see the tightening.

    >>> round(iclp_qr_paper_sensitivity([1.0, 0.25], eta=1.0, psi=1.0, tau=1.0, n=2), 6)
    0.9
    """
    tau = _validate.positive_finite("tau", tau)
    n = _validate.positive_int("n", n)
    a = iclp_qr_weights(eigenvalues, eta, psi)
    return float(2.0 * tau / n * np.sum(a))


def frl_sensitivity(n_basis: int, *, tau: float, n: int) -> float:
    """Exact l1 sensitivity of the FRL coefficient vector (formula ``sensitivity.mean.frl.exact@1``, MATH.md §4.1).

    .. math:: \\Delta_1 = \\frac{2\\tau\\sqrt M}{n}

    Attained by ``X_1 = d/2``, ``X_1' = -d/2`` with ``d_j = 2 tau / sqrt(M)`` on the first ``M``
    coefficients ([EXACT]).

    Privacy assumptions: ``M``, ``tau``, ``n`` public; records clipped to ``||X_i||_W <= tau``.

    >>> round(frl_sensitivity(10, tau=1.0, n=100), 4)
    0.0632
    """
    m = _validate.positive_int("n_basis", n_basis)
    tau = _validate.positive_finite("tau", tau)
    n = _validate.positive_int("n", n)
    return float(2.0 * tau * np.sqrt(m) / n)


def frl_paper_sensitivity(n_basis: int, *, tau: float, n: int) -> float:
    """The paper's FRL bound ``2 M tau / n`` ([ICLP-v2] Thm 6.1; formula ``sensitivity.mean.frl.paper@1``).

    >>> frl_paper_sensitivity(10, tau=1.0, n=100)
    0.2
    """
    m = _validate.positive_int("n_basis", n_basis)
    tau = _validate.positive_finite("tau", tau)
    n = _validate.positive_int("n", n)
    return float(2.0 * m * tau / n)


def iclp_ar_thresholds(eigenvalues: ArrayLike, eta: float, psi: float) -> NDArrayFloat:
    """Soft thresholds ``t_j = psi / (2 lambda_j^(eta/2))`` of ICLP-AR (MATH.md §4.2, corrected).

    >>> iclp_ar_thresholds([1.0, 0.25], 2.0, 0.5).tolist()
    [0.25, 1.0]
    """
    lam = _eigenvalues(eigenvalues)
    eta = _validate.positive_finite("eta", eta)
    psi = _validate.positive_finite("psi", psi)
    return psi / (2.0 * lam ** (eta / 2.0))


def iclp_ar_active_set(eigenvalues: ArrayLike, *, eta: float, psi: float, tau: float) -> int:
    """Size ``J*`` of the data-independent active set ``A = {j : t_j < tau} = {1..J*}`` (MATH.md §4.2).

    Outside ``A`` every soft-thresholded coefficient is exactly 0 because ``|xbar_j| <= tau``.

    >>> iclp_ar_active_set([1.0, 0.25, 0.01], eta=2.0, psi=0.5, tau=0.9)
    1
    """
    tau = _validate.positive_finite("tau", tau)
    return int(np.sum(iclp_ar_thresholds(eigenvalues, eta, psi) < tau))


def iclp_ar_sensitivity(eigenvalues: ArrayLike, *, eta: float, psi: float, tau: float, n: int) -> float:
    """Tightest valid 1,C-norm bound for ICLP-AR (formula ``sensitivity.mean.iclp_ar.l2@1``, MATH.md §4.2).

    .. math:: \\Delta_{AR} = \\frac{2\\tau}{n}\\Big(\\sum_{j\\in\\mathcal A}\\lambda_j^{-1}\\Big)^{1/2}

    Soft thresholding is 1-Lipschitz and the Lemma of §4 applies with weights ``lambda_j^(-1/2)``
    on ``A``. [UPPER]; [EXACT] when :func:`iclp_ar_attaining_pair` finds the feasibility condition
    met. It is never larger than the corrected l1 form ``(2tau/n) sum_A lambda_j^(-1/2)`` nor than
    the paper's bound when that one is valid, so it is the smallest valid bound of §4.2.

    >>> round(iclp_ar_sensitivity([1.0, 0.25, 0.01], eta=2.0, psi=0.5, tau=0.9, n=10), 6)
    0.18
    """
    lam = _eigenvalues(eigenvalues)
    n = _validate.positive_int("n", n)
    j_star = iclp_ar_active_set(lam, eta=eta, psi=psi, tau=tau)
    if j_star == 0:
        raise PrivacyParameterError(
            f"psi ({psi!r}) must leave at least one active ICLP-AR coefficient (t_1 < tau); lower psi"
        )
    return float(2.0 * tau / n * np.sqrt(np.sum(1.0 / lam[:j_star])))


def iclp_ar_paper_sensitivity(eigenvalues: ArrayLike, *, eta: float, psi: float, tau: float, n: int) -> float:
    """The paper's ICLP-AR bound ``(2tau/n) sum_{j<=J*} lambda_j^(-eta/2)`` (formula ``sensitivity.mean.iclp_ar.paper@1``).

    [ICLP-v2] Thm 6.2, read with the corrected ``J*``. It is valid only when ``lambda_j <= 1`` on
    the active set (true after trace normalisation); it is recorded, never used for noise.

    >>> round(iclp_ar_paper_sensitivity([1.0, 0.25, 0.01], eta=2.0, psi=0.5, tau=0.9, n=10), 6)
    0.18
    """
    lam = _eigenvalues(eigenvalues)
    n = _validate.positive_int("n", n)
    j_star = iclp_ar_active_set(lam, eta=eta, psi=psi, tau=tau)
    return float(2.0 * tau / n * np.sum(lam[:j_star] ** (-eta / 2.0)))


def iclp_ar_attaining_pair(
    eigenvalues: ArrayLike, *, eta: float, psi: float, tau: float, n: int
) -> tuple[NDArrayFloat, NDArrayFloat, NDArrayFloat] | None:
    """Coefficients ``(x, x', m)`` of a neighbouring pair attaining :func:`iclp_ar_sensitivity`, or ``None``.

    ``x = d*/2``, ``x' = -d*/2`` with ``d* = 2 tau lambda_A^(-1/2) / ||lambda_A^(-1/2)||`` and the
    other ``n - 1`` records all equal to ``m`` with ``m_j = n (t_j + |d*_j|/(2n)) / (n - 1)`` on ``A``.
    The pair exists when ``sum_A (t_j + |d*_j|/(2n))^2 <= ((n-1) tau / n)^2`` (MATH.md §4.2).

    >>> iclp_ar_attaining_pair([1.0, 0.25, 0.01], eta=2.0, psi=0.5, tau=0.9, n=10) is not None
    True
    """
    lam = _eigenvalues(eigenvalues)
    n = _validate.positive_int("n", n, minimum=2)
    tau = _validate.positive_finite("tau", tau)
    j_star = iclp_ar_active_set(lam, eta=eta, psi=psi, tau=tau)
    if j_star == 0:
        return None
    t = iclp_ar_thresholds(lam, eta, psi)[:j_star]
    w = lam[:j_star] ** -0.5
    d_star = 2.0 * tau * w / np.linalg.norm(w)
    need = t + d_star / (2.0 * n)
    if float(np.sum(need**2)) > ((n - 1) * tau / n) ** 2:
        return None
    full = np.zeros(lam.shape[0])
    x, m = full.copy(), full.copy()
    x[:j_star] = d_star / 2.0
    m[:j_star] = n * need / (n - 1)
    return x, -x, m


def gp_cm_sensitivity(eigenvalues: ArrayLike, *, eta: float, psi: float, tau: float, n: int) -> float:
    """Exact Cameron-Martin sensitivity of the ICLP-QR summary (formula ``sensitivity.mean.gp.cm_exact@1``).

    .. math:: \\Delta_{CM} = \\frac{2\\tau}{n}\\max_{j\\in\\mathcal J}
              \\frac{\\lambda_j^{\\eta-1/2}}{\\lambda_j^\\eta+\\psi}

    Attained by ``X_1 = tau phi_{j*}``, ``X_1' = -tau phi_{j*}`` (MATH.md §4.4, [EXACT]).

    Privacy assumptions: as :func:`iclp_qr_sensitivity`.

    >>> round(gp_cm_sensitivity([1.0, 0.25], eta=1.0, psi=1.0, tau=1.0, n=2), 6)
    0.5
    """
    tau = _validate.positive_finite("tau", tau)
    n = _validate.positive_int("n", n)
    return float(2.0 * tau / n * np.max(iclp_qr_weights(eigenvalues, eta, psi)))


def gp_cm_spectrum_free_bound(*, eta: float, psi: float, tau: float, n: int) -> float:
    """Spectrum-free bound ``(tau/n) psi^(-1/(2eta)) (2eta-1)^(1-1/(2eta)) / eta`` (formula ``sensitivity.mean.gp.cm_spectrum_free@1``).

    The maximum of ``2 a(lambda)`` over ``lambda > 0`` (at ``lambda^eta = (2eta - 1) psi``), valid
    for ``eta > 1/2`` ([UPPER], MATH.md §4.4).

    >>> gp_cm_spectrum_free_bound(eta=1.0, psi=1.0, tau=1.0, n=1)
    1.0
    """
    eta = _validate.positive_finite("eta", eta)
    if eta <= 0.5:
        raise PrivacyParameterError(f"eta ({eta!r}) must be > 1/2 for the spectrum-free GP bound")
    psi = _validate.positive_finite("psi", psi)
    tau = _validate.positive_finite("tau", tau)
    n = _validate.positive_int("n", n)
    return float(tau / n * psi ** (-1.0 / (2.0 * eta)) * (2.0 * eta - 1.0) ** (1.0 - 1.0 / (2.0 * eta)) / eta)


def gp_cm_paper_sensitivity(*, eta: float, psi: float, tau: float, n: int) -> float:
    """The [MRS] slide bound ``tau / (n psi^(1/(2eta)))`` (formula ``sensitivity.mean.gp.mrs_paper@1``).

    Equal to the spectrum-free bound at ``eta = 1``; for ``eta > 1`` it is too small (not a valid
    bound, MATH.md §4.4) — recorded for comparison only.

    >>> gp_cm_paper_sensitivity(eta=1.0, psi=0.25, tau=1.0, n=2)
    1.0
    """
    eta = _validate.positive_finite("eta", eta)
    psi = _validate.positive_finite("psi", psi)
    tau = _validate.positive_finite("tau", tau)
    n = _validate.positive_int("n", n)
    return float(tau / (n * psi ** (1.0 / (2.0 * eta))))


def _eigenvalues(eigenvalues: ArrayLike) -> NDArrayFloat:
    lam = np.asarray(eigenvalues, dtype=np.float64)
    if lam.ndim != 1 or lam.shape[0] == 0 or not np.all(np.isfinite(lam)) or np.any(lam <= 0):
        raise DomainError("eigenvalues must be a non-empty 1-D array of finite positive numbers (the kept set J)")
    return lam


# --- Mean estimators in eigen-coefficients (MATH.md §4; formerly fdpcore/summaries/mean.py) ------------------
# Pre-noise statistics: never published or logged.


def iclp_qr_shrinkage(eigenvalues: ArrayLike, eta: float, psi: float) -> NDArrayFloat:
    """Shrinkage factors ``s_j = lambda_j^eta / (lambda_j^eta + psi)`` of ICLP-QR (MATH.md §4.3).

    >>> iclp_qr_shrinkage([1.0, 0.25], 1.0, 0.25).tolist()
    [0.8, 0.5]
    """
    lam = _eigenvalues(eigenvalues)
    eta = _validate.positive_finite("eta", eta)
    psi = _validate.positive_finite("psi", psi)
    return lam**eta / (lam**eta + psi)


def iclp_qr_mean_coefficients(
    mean_coefficients: ArrayLike, eigenvalues: ArrayLike, *, eta: float, psi: float
) -> NDArrayFloat:
    """ICLP-QR mean estimator (formula ``estimator.mean.iclp_qr@1``, MATH.md §4.3).

    Minimises ``(1/n) sum_i ||X_i - theta||_W^2 + psi ||theta||_{C^eta}^2``:

    .. math:: \\theta_j(\\hat\\mu^{QR}) = \\frac{\\lambda_j^\\eta}{\\lambda_j^\\eta+\\psi}\\,\\bar x_j

    Args:
        mean_coefficients: ``xbar_j = theta_j(Xbar)`` on the kept set (projection included).
        eigenvalues: ``lambda_j`` on the kept set.
        eta: power of the kernel in the penalty ``||theta||_{C^eta}``.
        psi: weight ``psi`` of the penalty.

    >>> iclp_qr_mean_coefficients([1.0, 1.0], [1.0, 0.25], eta=1.0, psi=0.25).tolist()
    [0.8, 0.5]
    """
    return iclp_qr_shrinkage(eigenvalues, eta, psi) * np.asarray(mean_coefficients, dtype=np.float64)


def frl_mean_coefficients(mean_coefficients: ArrayLike, n_basis: int) -> NDArrayFloat:
    """FRL estimator: the first ``M`` eigen-coefficients of the mean (formula ``estimator.mean.frl@1``, MATH.md §4.1).

    .. math:: v = (\\bar x_1, \\dots, \\bar x_M),\\qquad \\hat\\mu^{FRL} = \\sum_{j\\le M} \\bar x_j\\phi_j

    >>> frl_mean_coefficients([0.5, -0.2, 0.1], 2).tolist()
    [0.5, -0.2]
    """
    x = np.asarray(mean_coefficients, dtype=np.float64)
    m = _validate.positive_int("n_basis", n_basis)
    if m > x.shape[-1]:
        raise DomainError(f"n_basis ({m}) must be <= the number of kept eigenpairs ({x.shape[-1]})")
    return x[..., :m].copy()


def iclp_ar_mean_coefficients(
    mean_coefficients: ArrayLike, eigenvalues: ArrayLike, *, eta: float, psi: float
) -> NDArrayFloat:
    """ICLP-AR estimator: soft thresholding (formula ``estimator.mean.iclp_ar@1``, MATH.md §4.2).

    Minimises ``(1/n) sum_i ||X_i - theta||_W^2 + psi ||theta||_{1,C^eta}``:

    .. math:: \\theta_j(\\hat\\mu^{AR}) = \\mathrm{sgn}(\\bar x_j)\\,(|\\bar x_j| - t_j)_+,
              \\qquad t_j = \\frac{\\psi}{2\\lambda_j^{\\eta/2}}

    >>> iclp_ar_mean_coefficients([0.5, -0.5], [1.0, 0.25], eta=2.0, psi=0.5).tolist()
    [0.25, -0.0]
    """
    t = iclp_ar_thresholds(eigenvalues, eta, psi)
    x = np.asarray(mean_coefficients, dtype=np.float64)
    return np.sign(x) * np.maximum(np.abs(x) - t, 0.0)
