"""Function-on-scalar regression with a budget split between ``T1`` and ``T2`` (MATH.md §7, §14 item 9).

Model ``Y_i(t) = x_i^T beta(t) + e_i(t)``; the OLS estimator is ``beta = T1^{-1} T2`` with
``T1 = (1/n) sum_i x_i x_i^T`` (``p x p``) and ``T2 = (1/n) sum_i Y_i x_i`` (``p`` curves). Both are
released privately and combined afterwards (post-processing only):

* ``T1``: classical Laplace on its upper triangle, epsilon ``gamma eps`` (with an intercept the
  ``(1, 1)`` entry is the constant 1 and is released without noise);
* ``T2``: ICLP-QR shrinkage of its ``p`` coefficient curves and ICLP noise, epsilon ``(1 - gamma) eps``;
* ``beta~ = T1~^+ T2~`` with a *safe inverse* (eigenvalues floored at a public ``rho_min``).

``T1`` is drawn first. With the default rule ``risk_prior`` the smoothing ``(eta, psi)`` of ``T2`` is then chosen
from the released ``T1~`` (formula ``tuning.fosr.t2_given_t1@1``): ``T2``'s noise reaches the coefficients through
``T1~^+``, so a poorly conditioned design gets more smoothing. The plan's ``(eta, psi)`` are those of an orthonormal
design; the plan of each draw (:attr:`FosrRelease.plans`) holds the ones used.

Records: covariates clipped record-wise to ``||z_i||_2 <= B`` (``B_x`` on the whole ``x`` without an
intercept; ``B_z`` on the non-constant part with one), curves clipped to ``||Y_i||_W <= tau_Y``.
Whitened coordinates and OpenDP sampling are those of :mod:`fdpcore.noise.iclp`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from fdpcore import _validate
from fdpcore._typing import ArrayLike, NDArrayFloat
from fdpcore.basis.eigen import Eigenbasis
from fdpcore.basis.grids import Grid, grid_from_nodes
from fdpcore.basis.kernels import KernelSpec, decay_rate, kernel_spec
from fdpcore.data.preprocess import clip_l2
from fdpcore.errors import DomainError, PrivacyParameterError
from fdpcore.noise.iclp import LaplaceCalibration, calibrate_iclp, iclp_expected_sq_error, sample_laplace_whitened
from fdpcore.noise.quantiles import (
    DEFAULT_TAU_SHARE,
    PublicChoice,
    choice_formulas,
    choice_splits,
    epsilon_after_choices,
    plan_with_tau,
)
from fdpcore.privacy.accounting import exact
from fdpcore.privacy.tuning import DEFAULT_SIGNAL_FRACTION, prior_sq_bias, pss_iclp_qr, risk_prior_search
from fdpcore.summaries.covariance import qr_regularisation
from fdpcore.summaries.mean import iclp_qr_shrinkage, iclp_qr_weights

__all__ = [
    "FosrPlan",
    "FosrRelease",
    "clip_covariates",
    "design_matrix",
    "draw_fosr_release",
    "one_hot_zero_pairs",
    "zero_structural",
    "STRUCTURAL_ZEROS_FORMULA",
    "fosr_coefficient_noise",
    "fosr_floor",
    "fosr_gamma_balanced",
    "fosr_moments",
    "fosr_t2_coefficient_noise",
    "fosr_t2_noise_band",
    "fosr_t1_sensitivity",
    "fosr_t2_sensitivity",
    "fosr_whitened",
    "given_t1",
    "plan_fosr_release",
    "release_fosr",
    "safe_inverse",
    "safe_inverse_pass_through",
    "safe_inverse_shrinkage",
    "summarise_fosr",
    "t2_amplification",
]


def clip_covariates(covariates: ArrayLike, bound: float) -> tuple[NDArrayFloat, int]:
    """Record-wise Euclidean clipping ``z_i <- z_i min(1, B/||z_i||_2)`` (``preprocess.clip_l2@1`` with unit weights).

    >>> clip_covariates([[3.0, 4.0], [0.3, 0.4]], 1.0)[0].round(6).tolist()
    [[0.6, 0.8], [0.3, 0.4]]
    """
    z = _validate.finite_matrix("covariates", covariates)
    return clip_l2(z, np.ones(z.shape[1]), bound)


def design_matrix(covariates: ArrayLike, *, intercept: bool) -> NDArrayFloat:
    """Rows ``x_i = (1, z_i)`` with an intercept, else ``z_i``.

    >>> design_matrix([[2.0], [3.0]], intercept=True).tolist()
    [[1.0, 2.0], [1.0, 3.0]]
    """
    z = _validate.finite_matrix("covariates", covariates)
    return np.hstack([np.ones((z.shape[0], 1)), z]) if intercept else z


def _t1_index(p: int, intercept: bool) -> tuple[NDArrayFloat, NDArrayFloat]:
    """Upper-triangle indices of ``T1`` that receive noise (``(0, 0)`` excluded with an intercept)."""
    iu = np.triu_indices(p)
    keep = ~((iu[0] == 0) & (iu[1] == 0)) if intercept else np.ones(iu[0].shape, dtype=bool)
    return iu[0][keep], iu[1][keep]


def fosr_t1_sensitivity(p: int, *, bound: float, n: int, intercept: bool) -> float:
    """l1 sensitivity of the noised upper triangle of ``T1`` (formula ``sensitivity.fosr.t1.l1@1``).

    .. math:: \\Delta_1(T_1)\\le\\frac{(p+1)B_x^2}{n}\\ \\text{(no intercept)},\\qquad
              \\Delta_1(T_1)\\le\\frac{2\\sqrt{p-1}\\,B_z+pB_z^2}{n}\\ \\text{(intercept, } x=(1,z))

    [UPPER] (MATH.md §7): from ``sum_{j<=k} |x_j x_k| = (||x||_1^2 + ||x||_2^2)/2 <= (p+1) B^2 / 2``
    for each of the two records; not attained in general (``p = 2``, no intercept: the supremum is
    ``sqrt(5) B^2 / n`` against the bound ``3 B^2 / n``).

    Privacy assumptions: ``p``, ``B`` (``B_x`` or ``B_z``) and ``n`` are public; covariates are
    clipped record-wise to ``B``; replace-one adjacency.

    >>> fosr_t1_sensitivity(2, bound=1.0, n=10, intercept=False), fosr_t1_sensitivity(2, bound=1.0, n=10, intercept=True)
    (0.3, 0.4)
    """
    p = _validate.positive_int("p", p, minimum=2 if intercept else 1)
    b = _validate.positive_finite("bound", bound)
    n = _validate.positive_int("n", n)
    if intercept:
        return float((2.0 * math.sqrt(p - 1) * b + p * b * b) / n)
    return float((p + 1) * b * b / n)


def _x_l1_bound(p: int, bound: float, intercept: bool) -> float:
    """``sup ||x||_1``: ``sqrt(p) B_x`` without an intercept, ``1 + sqrt(p - 1) B_z`` with one."""
    return 1.0 + math.sqrt(p - 1) * bound if intercept else math.sqrt(p) * bound


def fosr_t2_sensitivity(
    eigenvalues: ArrayLike, *, eta: float, psi: float, tau_y: float, p: int, bound: float, n: int, intercept: bool
) -> float:
    """Exact ``1,C``-norm sensitivity of the shrunk ``T2`` on ``H_K^p`` (formula ``sensitivity.fosr.t2.exact@1``).

    .. math:: \\Delta_2=\\frac{2\\,\\sup\\lVert x\\rVert_1\\,\\tau_Y}{n}\\lVert a\\rVert_2,\\qquad
              \\sup\\lVert x\\rVert_1=\\sqrt p\\,B_x\\ \\text{(no intercept)},\\quad 1+\\sqrt{p-1}\\,B_z\\ \\text{(intercept)}

    with ``a_l = lambda_l^(eta-1/2)/(lambda_l^eta + psi)``. Without an intercept this is MATH.md §7's
    boxed ``2 sqrt(p) B_x tau_Y ||a||_2 / n``. [EXACT]: ``sum_{m,l} a_l |x_m y_l - x'_m y'_l| <=
    (||x||_1 + ||x'||_1) sum_l a_l |y_l|`` (Cauchy-Schwarz on ``y``), attained by ``x' = x`` with the
    largest l1 norm and ``Y' = -Y = -tau_Y sum_l a_l phi_l / ||a||_2`` (feasible with an intercept too).

    Privacy assumptions: as :func:`fosr_t1_sensitivity`, plus ``||Y_i||_W <= tau_Y`` and public
    kernel, grid, ``eta`` and ``psi``.

    >>> round(fosr_t2_sensitivity([1.0, 0.25], eta=1.0, psi=1.0, tau_y=1.0, p=1, bound=1.0, n=2, intercept=False), 6)
    0.640312
    """
    p = _validate.positive_int("p", p, minimum=2 if intercept else 1)
    b = _validate.positive_finite("bound", bound)
    tau_y = _validate.positive_finite("tau_y", tau_y)
    n = _validate.positive_int("n", n)
    a = iclp_qr_weights(eigenvalues, eta, psi)
    return float(2.0 * _x_l1_bound(p, b, intercept) * tau_y / n * np.sqrt(np.sum(a * a)))


def fosr_gamma_balanced(*, delta1: float, n_t1: int, delta2: float, p: int, tau_y: float, x_bound: float,
                        trace: float) -> float:
    """Default budget share of ``T1`` (formula ``tuning.fosr.gamma_balanced@1``), from public quantities only.

    .. math:: \\gamma=\\frac{r}{1+r},\\qquad r=\\Big(\\frac{d_1\\Delta_1^2\\,(\\tau_Y/B)^2}{p\\,\\Delta_2^2\\,\\mathrm{tr}(C)}\\Big)^{1/3}

    It minimises ``a/gamma^2 + b/(1-gamma)^2``, the two privacy-error terms of ``beta~`` to first order:
    ``T1`` noise moves ``beta`` by ``T1^{-1} E_1 beta`` (``E||E_1||_F^2 = 2 d1 (Delta1/(gamma eps))^2``)
    and ``T2`` noise by ``T1^{-1} E_2`` (``E||E_2||^2 = 2 p (Delta2/((1-gamma) eps))^2 tr(C)``); the
    unknown ``||beta||`` is replaced by its public scale ``tau_Y / B`` (``||T2|| <= B tau_Y`` and
    ``T1 ~ B^2``), ``B = sup ||x||_2``. Epsilon cancels, so ``gamma`` depends on the design of the
    release only.

    >>> round(fosr_gamma_balanced(delta1=0.04, n_t1=2, delta2=0.5, p=2, tau_y=1.0, x_bound=1.4, trace=1.0), 4)
    0.1292
    """
    for name, v in (("delta1", delta1), ("delta2", delta2), ("tau_y", tau_y), ("x_bound", x_bound), ("trace", trace)):
        _validate.positive_finite(name, v)
    r = (n_t1 * delta1**2 * (tau_y / x_bound) ** 2 / (p * delta2**2 * trace)) ** (1.0 / 3.0)
    return float(r / (1.0 + r))


def fosr_floor(delta1: float, epsilon1: float, p: int) -> float:
    """Public eigenvalue floor ``rho_min = c Delta1 / (gamma eps)``, ``c = max(sqrt(2 log(p^2)), 1)`` (MATH.md §7, step 2).

    ``Delta1 / (gamma eps)`` is the Laplace scale of each noised ``T1`` entry; ``c`` follows MATH.md
    (``sqrt(2 log p^2)``) and is held at 1 or more so that ``p = 1`` still has a positive floor.

    >>> round(fosr_floor(0.1, 0.5, 2), 6)
    0.333022
    """
    d = _validate.positive_finite("delta1", delta1)
    e = _validate.positive_finite("epsilon1", epsilon1)
    c = max(math.sqrt(2.0 * math.log(p * p)) if p > 1 else 0.0, 1.0)
    return c * d / e


def safe_inverse(t1: ArrayLike, floor: float) -> NDArrayFloat:
    """Safe inverse ``T1~^+ = Q diag(max(rho, rho_min))^{-1} Q^T`` (formula ``postprocess.fosr.safe_inverse@1``).

    .. math:: \\tilde T_1=Q\\,\\mathrm{diag}(\\varrho)\\,Q^\\top,\\qquad
              \\tilde T_1^{+}=Q\\,\\mathrm{diag}(\\max(\\varrho,\\varrho_{\\min}))^{-1}Q^\\top

    Post-processing of the released ``T1~`` with a public floor (MATH.md §7): never touches the
    data, never fails on a singular or indefinite noisy design, and ``||T1~^+||_op <= 1/rho_min``.

    >>> safe_inverse([[2.0, 0.0], [0.0, -1.0]], 0.5).tolist()
    [[0.5, 0.0], [0.0, 2.0]]
    """
    m = _validate.finite_matrix("t1", t1)
    f = _validate.positive_finite("floor", floor, privacy=False)
    rho, q = np.linalg.eigh((m + m.T) / 2.0)
    out: NDArrayFloat = (q / np.maximum(rho, f)) @ q.T
    return out


def safe_inverse_shrinkage(t1_released: ArrayLike, floor: float) -> NDArrayFloat:
    """What the floored inverse does to the coefficients: ``S = T1~^+ T1~`` with its eigenvalues clipped to [0, 1] (formula ``postprocess.fosr.safe_inverse@1``).

    .. math:: S=Q\\,\\mathrm{diag}\\Big(\\mathrm{clip}\\Big(\\frac{\\varrho_k}{\\max(\\varrho_k,\\varrho_{\\min})},0,1\\Big)\\Big)Q^\\top

    Without noise ``beta~ = T1~^+ T2 = S beta``: where ``T1~`` has eigenvalues below the floor, ``S`` shrinks those
    design directions towards 0 (by ``rho_k / rho_min``; a negative, noise-made eigenvalue passes nothing).
    Post-processing of the released ``T1~`` and the public floor.

    >>> safe_inverse_shrinkage([[1.0, 0.0], [0.0, 0.05]], 0.2).tolist()
    [[1.0, 0.0], [0.0, 0.25]]
    """
    m = _validate.finite_matrix("t1", t1_released)
    f = _validate.positive_finite("floor", floor, privacy=False)
    rho, q = np.linalg.eigh((m + m.T) / 2.0)
    out: NDArrayFloat = (q * np.clip(rho / np.maximum(rho, f), 0.0, 1.0)) @ q.T
    return out


def safe_inverse_pass_through(t1_released: ArrayLike, floor: float) -> NDArrayFloat:
    """How much of each coefficient the safe inverse lets through: the diagonal of :func:`safe_inverse_shrinkage`.

    ``S_mm`` near 1: coefficient ``m`` is estimated; well below 1: its curve is shrunk towards 0 (mixed with the
    others') by an amount that depends on the unknown coefficients — a bias the published noise band does not contain,
    so a flat curve there says nothing about the effect's size (formula ``postprocess.fosr.safe_inverse@1``).

    >>> safe_inverse_pass_through([[1.0, 0.0], [0.0, 0.05]], 0.2).tolist()
    [1.0, 0.25]
    """
    out: NDArrayFloat = np.clip(np.diag(safe_inverse_shrinkage(t1_released, floor)), 0.0, 1.0)
    return out


#: The formula id of :func:`zero_structural` (``T1~`` set to 0 where the public encoding makes ``T1`` zero).
STRUCTURAL_ZEROS_FORMULA = "postprocess.fosr.structural_zeros@1"


def one_hot_zero_pairs(blocks: Sequence[Sequence[int]]) -> tuple[tuple[int, int], ...]:
    """The design entries ``(j, k)``, ``j < k``, that one-hot blocks make zero for every record (public).

    ``blocks``: the design column indices (intercept 0) of each one-hot covariate's indicators. A record takes at most
    one level of a covariate, so two indicators of one block are never both non-zero, before or after the record-wise
    clipping of the covariates (which scales a row, never moves a zero), and their product is 0.

    >>> one_hot_zero_pairs([[1, 2, 3], [5]])
    ((1, 2), (1, 3), (2, 3))
    """
    return tuple(sorted((min(a, b), max(a, b)) for block in blocks for i, a in enumerate(block) for b in block[i + 1:]))


def _checked_zero_pairs(pairs: Sequence[tuple[int, int]], p: int, intercept: bool) -> tuple[tuple[int, int], ...]:
    out = []
    for pair in pairs:
        j, k = (int(v) for v in pair)
        if not (0 <= j < k < p) or (intercept and j == 0):
            raise DomainError(f"zero_pairs: ({j}, {k}) is not an off-diagonal pair of two covariate columns of the "
                              f"{p}-column design (j < k, the intercept's column 0 excluded)")
        out.append((j, k))
    return tuple(sorted(set(out)))


def zero_structural(t1: ArrayLike, pairs: Sequence[tuple[int, int]]) -> NDArrayFloat:
    """``T1~`` (one ``p x p`` matrix or a stack) with the entries ``pairs`` and their mirrors set to 0 (``postprocess.fosr.structural_zeros@1``).

    Post-processing of the released ``T1~`` with public knowledge: the encoding makes those entries of ``T1`` zero on
    every dataset, so the result is as private as ``T1~`` and exact there.

    >>> zero_structural([[1.0, 0.2, 0.1], [0.2, 0.3, 0.05], [0.1, 0.05, 0.2]], [(1, 2)]).tolist()
    [[1.0, 0.2, 0.1], [0.2, 0.3, 0.0], [0.1, 0.0, 0.2]]
    """
    out = np.array(t1, dtype=np.float64)
    for j, k in pairs:
        out[..., j, k] = 0.0
        out[..., k, j] = 0.0
    return out


def fosr_moments(design: ArrayLike, curve_coefficients: ArrayLike) -> tuple[NDArrayFloat, NDArrayFloat]:
    """``T1 = X^T X / n`` (``p x p``) and ``G = X^T Theta / n`` (``p x J``, the coefficients of ``T2``) (formula ``estimator.fosr.ols@1``).

    .. math:: \\hat\\beta=T_1^{-1}T_2,\\qquad T_1=\\frac1n\\sum_ix_ix_i^\\top,\\qquad
              G_{ml}=\\frac1n\\sum_ix_{im}\\,\\theta_l(Y_i)

    Pre-noise: never publish or log them.

    >>> t1, g = fosr_moments([[1.0, 1.0], [1.0, -1.0]], [[2.0], [0.0]])
    >>> t1.tolist(), g.tolist()
    ([[1.0, 0.0], [0.0, 1.0]], [[1.0], [1.0]])
    """
    x = _validate.finite_matrix("design", design)
    th = _validate.finite_matrix("curve_coefficients", curve_coefficients)
    if th.shape[0] != x.shape[0]:
        raise DomainError(f"curve_coefficients has {th.shape[0]} rows but design has {x.shape[0]}")
    n = x.shape[0]
    return (x.T @ x) / n, (x.T @ th) / n


#: Formula id of the default rule's T2 pair chosen from the released T1~ (:func:`given_t1`).
T2_GIVEN_T1 = "tuning.fosr.t2_given_t1@1"


def _exact_parts(epsilon: float, gamma: float) -> tuple[float, float]:
    """``(gamma eps, (1 - gamma) eps)`` rounded to decimals that sum exactly to ``eps`` (the ledger's accounting)."""
    e1 = float(f"{gamma * epsilon:.12g}")
    rest = exact(epsilon) - exact(e1)
    e2 = float(rest)
    if not (0 < e1 < epsilon) or rest <= 0 or exact(e2) != rest:
        raise PrivacyParameterError(f"gamma ({gamma!r}) must split epsilon ({epsilon!r}) into two exact decimals in (0, epsilon)")
    return e1, e2


@dataclass(frozen=True, eq=False)
class FosrPlan:
    """Everything that sets the noise of a FoSR release; all of it is public.

    Attributes:
        basis: kernel eigenbasis of the response curves.
        n: records and columns of the design (intercept included).
        p: see ``n``.
        intercept: whether ``x = (1, z)``.
        bound: ``B_x`` (no intercept) or ``B_z`` (intercept): covariate clip radius.
        tau_y: response clip radius.
        epsilon: total (the public choices included), share of ``T1`` in what is left
            (:attr:`epsilon_mechanism`), and the two parts (exact decimals).
        gamma: see ``epsilon``.
        epsilon1: see ``epsilon``.
        epsilon2: see ``epsilon``.
        gamma_rule: ``"fixed"`` or ``"balanced"`` (formula ``tuning.fosr.gamma_balanced@1``).
        eta: ICLP-QR regularisation of ``T2``; tuning / tuning_formula: how they were set.
        psi: see ``eta``.
        delta1: sensitivities of ``T1`` (l1) and of the shrunk ``T2`` (``1,C``).
        delta2: see ``delta1``.
        calibration1: OpenDP-certified Laplace calibrations of the two parts.
        calibration2: see ``calibration1``.
        floor: ``rho_min`` of the safe inverse.
        public_choices: ``tau: auto`` (:mod:`fdpcore.noise.quantiles`), a named split of ``epsilon`` paid before
            ``T1`` and ``T2``; ``tau_y`` is then the value it released.
        signal_fraction: the ``risk_prior`` prior's signal per cross-moment curve, a fraction of ``tau_y``.
        t2_amplification: ``None`` in a plan made from public inputs; in the plan of a draw whose ``(eta, psi)`` were
            chosen from the released ``T1~`` (:func:`given_t1`), the factor ``tr(T1~^+ T1~^+) / p`` they were chosen
            with (post-processing of ``T1~``).
        zero_pairs: design entries ``(j, k)``, ``j < k``, that are zero for every record by the public encoding (two
            indicators of one one-hot covariate, :func:`one_hot_zero_pairs`); ``T1~`` is set to 0 there after its
            noise (``postprocess.fosr.structural_zeros@1``).
    """

    basis: Eigenbasis
    n: int
    p: int
    intercept: bool
    bound: float
    tau_y: float
    epsilon: float
    gamma: float
    epsilon1: float
    epsilon2: float
    gamma_rule: str
    eta: float
    psi: float
    tuning: str
    tuning_formula: str | None
    beta: float
    delta1: float
    delta2: float
    calibration1: LaplaceCalibration
    calibration2: LaplaceCalibration
    floor: float
    public_choices: tuple[PublicChoice, ...] = ()
    signal_fraction: float = DEFAULT_SIGNAL_FRACTION
    t2_amplification: float | None = None
    zero_pairs: tuple[tuple[int, int], ...] = ()

    @property
    def epsilon_mechanism(self) -> float:
        """Epsilon of ``T1`` and ``T2`` together: ``epsilon`` minus the public choices (``epsilon1 + epsilon2``)."""
        return epsilon_after_choices(self.epsilon, self.public_choices)

    @property
    def x_bound(self) -> float:
        """``sup ||x_i||_2``: ``B_x`` without an intercept, ``sqrt(1 + B_z^2)`` with one."""
        return math.sqrt(1.0 + self.bound * self.bound) if self.intercept else self.bound

    @property
    def t1_index(self) -> tuple[NDArrayFloat, NDArrayFloat]:
        """Upper-triangle entries of ``T1`` that receive noise."""
        return _t1_index(self.p, self.intercept)

    @property
    def budget_splits(self) -> list[dict[str, float | str]]:
        """The named parts of the release (the public choices, T1, T2); they sum exactly to ``(epsilon, 0)``."""
        return [*choice_splits(self.public_choices),
                {"name": "T1 (design moments)", "epsilon": self.epsilon1, "delta": 0.0},
                {"name": "T2 (cross-moment curves)", "epsilon": self.epsilon2, "delta": 0.0}]

    @property
    def expected_sq_l2_error_t2(self) -> float:
        """``E||T2~ - T2hat||^2`` summed over the ``p`` curves: ``p 2 b^2 tr(C)`` (``noise.iclp.expected_sq_l2@1``)."""
        return self.p * iclp_expected_sq_error(self.basis.eigenvalues, self.calibration2.scale)

    @property
    def prior_sq_l2_risk(self) -> float:
        """:attr:`expected_sq_l2_error_t2` plus the expected squared smoothing bias of ``p`` typical ``T2`` curves.

        The bias is :func:`fdpcore.privacy.tuning.prior_sq_bias` (``paths`` weights) at this plan's ``(eta, psi)`` for
        curves of norm ``signal_fraction * tau_y`` (formula ``tuning.risk.iclp_qr.prior@1``): the criterion the default
        rule minimises per curve, so it falls as epsilon grows while the noise alone may not. Public inputs only.
        """
        bias = float(prior_sq_bias(self.basis.eigenvalues, self.eta, self.psi, signal=self.signal_fraction * self.tau_y,
                                   prior="paths"))
        return self.expected_sq_l2_error_t2 + self.p * bias

    @property
    def formulas(self) -> list[str]:
        """Every formula id this plan relies on."""
        ids = {"grid.midpoint@1" if self.basis.grid.rule == "midpoint" else "grid.trapezoid@1", "eigen.weighted_kl@1",
               "preprocess.clip_l2@1", "estimator.fosr.ols@1", "estimator.mean.iclp_qr@1", "sensitivity.fosr.t1.l1@1",
               "sensitivity.fosr.t2.exact@1", "calibration.iclp.laplace_whitened@1", "noise.iclp.expected_sq_l2@1",
               "postprocess.fosr.safe_inverse@1", "accounting.pure.sequential@1"}
        if self.gamma_rule == "balanced":
            ids.add("tuning.fosr.gamma_balanced@1")
        if self.tuning_formula is not None:
            ids.add(self.tuning_formula)
        if self.tuning_formula == T2_GIVEN_T1:  # the risk_prior rule, with T1~'s amplification
            ids.add("tuning.risk.iclp_qr.prior@1")
        if self.zero_pairs:
            ids.add(STRUCTURAL_ZEROS_FORMULA)
        return sorted(ids | choice_formulas(self.public_choices))


def _t2_noise_sq(lam: NDArrayFloat, *, p: int, bound: float, n: int, intercept: bool,
                 epsilon2: float) -> Callable[[float, float], float]:
    """``(eta, psi) -> E||T2 noise||^2`` of one cross-moment curve at ``tau_Y = 1`` (MATH.md §7, §3.5): public."""
    def noise_sq(e: float, q: float) -> float:
        d = fosr_t2_sensitivity(lam, eta=e, psi=q, tau_y=1.0, p=p, bound=bound, n=n, intercept=intercept)
        return 2.0 * d * d * float(lam.sum()) / epsilon2**2

    return noise_sq


def plan_fosr_release(
    grid: Grid,
    kernel: Mapping[str, object] | KernelSpec,
    *,
    n: int,
    n_covariates: int,
    intercept: bool,
    bound: float,
    tau_y: float,
    epsilon: float,
    gamma: float | None = None,
    eta: float | None = None,
    psi: float | None = None,
    tuning: str | None = None,
    floor: float | None = None,
    secure: bool = True,
    signal_fraction: float = DEFAULT_SIGNAL_FRACTION,
    public_choices: tuple[PublicChoice, ...] = (),
    zero_pairs: Sequence[tuple[int, int]] = (),
) -> FosrPlan:
    """Fix the noise of a FoSR release from public inputs only (MATH.md §7).

    Args:
        grid: the release grid (public).
        kernel: noise kernel mapping or spec, e.g. ``{"name": "matern", "nu": 1.5, "rho": 0.2}``.
        n: number of privacy units (public).
        n_covariates: number ``q`` of scalar covariates; ``p = q + 1`` with an intercept, else ``q``.
        intercept: add the constant covariate column.
        bound: ``B_z`` (with an intercept) or ``B_x``: the covariates' Euclidean clip radius.
        tau_y: clip radius ``tau_Y`` of the response curves.
        epsilon: total privacy parameter of one draw (``gamma`` of it for ``T1``).
        gamma: share of epsilon spent on ``T1``; ``None`` uses :func:`fosr_gamma_balanced`.
        eta: ``T2``'s ICLP-QR regularisation, fixed (with ``psi``), by a PSS rule, or by the default
            ``risk_prior`` (:func:`fdpcore.privacy.tuning.risk_prior_search` per cross-moment curve, with the noise at
            the balanced ``gamma`` of the ``exact_balanced`` point; prior signal ``signal_fraction * tau_Y``).
        psi: see ``eta``.
        tuning: the rule that chooses ``(eta, psi)`` when they are not given; see ``eta``.
        floor: ``rho_min`` of the safe inverse (a public lower bound on the design's smallest
            eigenvalue); ``None`` uses :func:`fosr_floor`.
        secure: OpenDP's floating-point-safe samplers; ``False`` uses NumPy (simulations only).
        signal_fraction: prior signal scale of ``risk_prior`` as a fraction of ``tau_Y``.
        public_choices: ``tau: auto``, a part of ``epsilon`` paid first; ``gamma`` splits the rest between
            ``T1`` and ``T2``, and ``tau_y`` is the value it released. The balanced ``gamma`` and the rule are
            computed at ``tau_Y = 1`` (they do not depend on ``tau_Y``), so the cost priced before the draw
            is the cost after it.
        zero_pairs: design entries ``(j, k)`` (column indices, the intercept 0) zero for every record by the public
            encoding (:func:`one_hot_zero_pairs`): ``T1~`` is set to 0 there after the noise
            (``postprocess.fosr.structural_zeros@1``); the noise and the cost are unchanged.

    Raises:
        PrivacyParameterError: non-positive epsilon, radii or parameters; ``gamma`` outside (0, 1).
        DomainError: unknown rule; ``p >= n``.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> pl = plan_fosr_release(midpoint_grid(31), {"name": "matern", "nu": 1.5, "rho": 0.1}, n=93, n_covariates=1,
    ...                        intercept=True, bound=1.0, tau_y=1.0, epsilon=1.0, secure=False)
    >>> pl.p, pl.epsilon1 + pl.epsilon2, pl.gamma_rule
    (2, 1.0, 'balanced')
    """
    q = _validate.positive_int("n_covariates", n_covariates)
    p = q + 1 if intercept else q
    n = _validate.positive_int("n", n)
    if p >= n:
        raise DomainError(f"n ({n}) must exceed the number of regression coefficients p ({p})")
    bound = _validate.positive_finite("bound", bound)
    tau_y = _validate.positive_finite("tau_y", tau_y)
    total = _validate.positive_finite("epsilon", epsilon)
    epsilon = epsilon_after_choices(total, tuple(public_choices))  # T1 and T2 share what the choices leave
    d1 = fosr_t1_sensitivity(p, bound=bound, n=n, intercept=intercept)
    n_t1 = _t1_index(p, intercept)[0].shape[0]
    x_bound = math.sqrt(1.0 + bound * bound) if intercept else bound

    def risk(basis: Eigenbasis) -> tuple[NDArrayFloat, Callable[[float, float], float], float]:
        lam = basis.eigenvalues
        # T2's epsilon under the balanced split at the exact_balanced PSS point (public): a provisional share
        pss = pss_iclp_qr("exact_balanced", beta=decay_rate(kernel_spec(kernel), lam), n=n, epsilon=epsilon)
        d2_0 = fosr_t2_sensitivity(lam, eta=float(pss.eta or 1.0), psi=float(pss.psi or 1.0), tau_y=1.0, p=p,
                                   bound=bound, n=n, intercept=intercept)
        g0 = fosr_gamma_balanced(delta1=d1, n_t1=n_t1, delta2=d2_0, p=p, tau_y=1.0, x_bound=x_bound,
                                 trace=basis.trace) if gamma is None else float(gamma)
        return lam, _t2_noise_sq(lam, p=p, bound=bound, n=n, intercept=intercept, epsilon2=epsilon * (1.0 - g0)), \
            signal_fraction

    basis, beta, eta, psi, rule, rule_formula = qr_regularisation(grid, kernel, n=n, epsilon=epsilon, eta=eta, psi=psi,
                                                                   tuning=tuning, risk=risk)
    lam = basis.eigenvalues
    d2 = fosr_t2_sensitivity(lam, eta=eta, psi=psi, tau_y=tau_y, p=p, bound=bound, n=n, intercept=intercept)
    if gamma is None:  # at tau_Y = 1: gamma depends on tau_Y / Delta2 only, which is free of tau_Y (exactly so here)
        d2_unit = fosr_t2_sensitivity(lam, eta=eta, psi=psi, tau_y=1.0, p=p, bound=bound, n=n, intercept=intercept)
        g, gamma_rule = fosr_gamma_balanced(delta1=d1, n_t1=n_t1, delta2=d2_unit, p=p, tau_y=1.0, x_bound=x_bound,
                                            trace=basis.trace), "balanced"
        g = float(f"{g:.2g}")  # two significant digits: a readable public share
    else:
        g, gamma_rule = float(gamma), "fixed"
    if not (math.isfinite(g) and 0.0 < g < 1.0):
        raise PrivacyParameterError(f"gamma ({gamma!r}) must be in (0, 1)")
    e1, e2 = _exact_parts(epsilon, g)
    cal1 = calibrate_iclp(d1, e1, n_basis=n_t1, secure=secure)
    cal2 = calibrate_iclp(d2, e2, n_basis=p * basis.n_basis, secure=secure)
    rho_min = fosr_floor(d1, e1, p) if floor is None else _validate.positive_finite("floor", floor)
    return FosrPlan(basis, n, p, bool(intercept), bound, tau_y, total, g, e1, e2, gamma_rule, eta, psi, rule,
                    rule_formula, beta, d1, d2, cal1, cal2, rho_min, tuple(public_choices), signal_fraction,
                    zero_pairs=_checked_zero_pairs(zero_pairs, p, intercept))


def summarise_fosr(
    clipped_covariates: ArrayLike, clipped_curves: ArrayLike, plan: FosrPlan
) -> tuple[NDArrayFloat, NDArrayFloat]:
    """Pre-noise whitened coordinates: the noised ``T1`` entries and ``s_l G_ml / sqrt(lambda_l)`` (``p J``).

    Never publish them. Covariates (without the intercept column) must already be clipped to
    ``plan.bound`` and curves to ``plan.tau_y``.
    """
    z = _validate.finite_matrix("covariates", clipped_covariates)
    y = _validate.finite_matrix("curves", clipped_curves, plan.basis.grid.size)
    q = plan.p - 1 if plan.intercept else plan.p
    if z.shape != (plan.n, q) or y.shape[0] != plan.n:
        raise DomainError(f"covariates (shape {z.shape}) and curves ({y.shape[0]} rows) must have n = {plan.n} rows "
                          f"and {q} covariate columns")
    t1, g = fosr_moments(design_matrix(z, intercept=plan.intercept), plan.basis.coefficients(y))
    return fosr_whitened(t1, g, plan)


def fosr_whitened(t1: ArrayLike, g: ArrayLike, plan: FosrPlan) -> tuple[NDArrayFloat, NDArrayFloat]:
    """The noised ``T1`` entries and the whitened shrunk ``T2`` coefficients ``s_l G_ml / sqrt(lambda_l)``.

    Shared by :func:`summarise_fosr` (records in memory) and
    :func:`fdpcore.data.accumulate.summarise_fosr_sums` (exact streamed sums). Pre-noise: never publish them.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> pl = plan_fosr_release(midpoint_grid(8), {"name": "matern", "nu": 1.5, "rho": 0.2}, n=3, n_covariates=1,
    ...                        intercept=True, bound=1.0, tau_y=1.0, epsilon=1.0, secure=False)
    >>> a, b = fosr_whitened([[1.0, 0.5], [0.5, 1.0]], np.zeros((2, pl.basis.n_basis)), pl)
    >>> a.tolist(), b.shape == (2 * pl.basis.n_basis,)
    ([0.5, 1.0], True)
    """
    t = _validate.finite_matrix("t1", t1, plan.p)
    gm = _validate.finite_matrix("g", g, plan.basis.n_basis)
    if t.shape[0] != plan.p or gm.shape[0] != plan.p:
        raise DomainError(f"t1 (shape {t.shape}) and g ({gm.shape[0]} rows) must have p = {plan.p} rows")
    lam = plan.basis.eigenvalues
    z2 = iclp_qr_shrinkage(lam, plan.eta, plan.psi) * gm / np.sqrt(lam)
    return t[plan.t1_index], z2.ravel()


@dataclass(frozen=True, eq=False)
class FosrRelease:
    """A private FoSR release: ``coefficients`` (``draws x p x K`` curves ``beta~_m``), ``t1`` (``draws x p x p``).

    ``plans`` holds each draw's plan (``T2``'s ``(eta, psi)`` chosen from that draw's ``T1~`` by
    :func:`given_t1`); ``plan`` is the first of them.
    """

    coefficients: NDArrayFloat
    t1: NDArrayFloat
    plan: FosrPlan
    plans: tuple[FosrPlan, ...] = ()


def t2_amplification(t1_released: ArrayLike, floor: float) -> float:
    """``tr(T1~^+ T1~^+) / p``: how much the safe inverse scales ``T2``'s noise energy on average (formula ``tuning.fosr.t2_given_t1@1``).

    ``beta~ - T1~^+ T2hat = T1~^+ xi`` with ``xi``'s ``p`` rows independent and of equal expected energy ``N``, so
    ``E||T1~^+ xi||^2 = tr((T1~^+)^2) N``: ``p N`` times this factor. A function of the released ``T1~`` and the
    public floor only (post-processing). At most ``1 / floor^2``.

    >>> t2_amplification([[1.0, 0.0], [0.0, 0.25]], 0.1)
    8.5
    """
    inv = safe_inverse(t1_released, floor)
    return float(np.sum(inv * inv)) / float(inv.shape[0])


def fosr_coefficient_noise(plan: FosrPlan, t1_released: ArrayLike,
                           coefficients: ArrayLike) -> tuple[NDArrayFloat, NDArrayFloat]:
    r"""The expected squared L2 noise of each released coefficient curve (formula ``accuracy.fosr.coefficient_noise@1``).

    .. math:: \tilde\beta-\hat\beta\approx\tilde T_1^{+}\xi-\tilde T_1^{+}E_1\beta,\qquad
              N_{2,m}=(\tilde T_1^{+2})_{mm}\,s,\quad s=2b_2^2\textstyle\sum_l\lambda_l,\qquad
              N_{1,m}=\max\big(Q_m(\tilde\beta)-\mathrm{E}\,Q_m(\tilde T_1^{+}\xi),\ 0\big)

    with :math:`Q_m(\beta)=2b_1^2\sum_{a\le b}\|(\tilde T_1^{+})_{ma}\beta_b+[a\ne b](\tilde T_1^{+})_{mb}\beta_a\|^2`,
    the expected energy of the first-order term of ``T1``'s noise ``E_1`` (Laplace ``b_1`` on each noised
    upper-triangle entry, symmetric) in coefficient ``m``. ``N_2`` (``T2``'s noise ``xi``, Laplace ``b_2 sqrt(lambda_l)``
    on coefficient ``(m, l)``, through the safe inverse) is exact given the released ``T1~``. ``N_1`` needs the unknown
    ``beta``: the released curves stand in for it, and since ``Q`` is quadratic the part their own ``T2`` noise adds,
    ``E Q(T1~^+ xi)`` (closed form from ``E<(T1~^+ xi)_a, (T1~^+ xi)_b> = (T1~^{+2})_{ab} s``), is taken off; it is an
    estimate (first order in ``E_1``; higher orders add to it where ``T1~`` has eigenvalues near its noise). Both read
    only the released ``T1~``, the released curves and public parameters: post-processing, publishable. Returns
    ``(N_2, N_1)`` per coefficient, in the squared grid L2 norm of the curves given (rescaled units, as drawn). Neither
    includes the safe inverse's shrinkage of a weak direction (``safe_inverse_pass_through``), clipping or smoothing.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> pl = plan_fosr_release(midpoint_grid(10), {"name": "matern", "nu": 1.5, "rho": 0.1}, n=50, n_covariates=1,
    ...                        intercept=True, bound=1.0, tau_y=1.0, epsilon=1.0, secure=False)
    >>> t2, t1 = fosr_coefficient_noise(pl, [[1.0, 0.0], [0.0, 4.0]], np.zeros((2, 10)))
    >>> round(float(t2[1] / t2[0]), 6), t1.tolist()  # four times the weight: a sixteenth of the noise energy
    (0.0625, [0.0, 0.0])
    """
    inv = _safe_inverse_of(plan, t1_released)
    beta = _validate.finite_matrix("coefficients", coefficients, plan.basis.grid.size)
    if beta.shape[0] != plan.p:
        raise DomainError(f"coefficients ({beta.shape[0]} rows) must have p = {plan.p} rows")
    t1_part: NDArrayFloat = np.maximum(_t1_first_order(plan, inv, beta) - _t1_first_order_of_t2_noise(plan, inv), 0.0)
    return _t2_part(plan, inv), t1_part


def fosr_t2_coefficient_noise(plan: FosrPlan, t1_released: ArrayLike) -> NDArrayFloat:
    """``N_2`` of :func:`fosr_coefficient_noise` alone: ``T2``'s noise energy in each coefficient through ``T1~^+``.

    Exact given ``T1~`` and public parameters; ``fdp plan`` states it at the design of the public level shares.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> pl = plan_fosr_release(midpoint_grid(10), {"name": "matern", "nu": 1.5, "rho": 0.1}, n=50, n_covariates=1,
    ...                        intercept=True, bound=1.0, tau_y=1.0, epsilon=1.0, secure=False)
    >>> bool(np.all(fosr_t2_coefficient_noise(pl, np.eye(2)) == fosr_coefficient_noise(pl, np.eye(2), np.zeros((2, 10)))[0]))
    True
    """
    return _t2_part(plan, _safe_inverse_of(plan, t1_released))


def _safe_inverse_of(plan: FosrPlan, t1_released: ArrayLike) -> NDArrayFloat:
    inv = safe_inverse(_validate.finite_matrix("t1_released", t1_released, plan.p), plan.floor)
    if inv.shape[0] != plan.p:
        raise DomainError(f"t1_released ({inv.shape}) must be p x p with p = {plan.p}")
    return inv


def _t2_part(plan: FosrPlan, inv: NDArrayFloat) -> NDArrayFloat:
    """``(T1~^{+2})_{mm} s``: ``T2``'s noise energy in coefficient ``m`` through the safe inverse ``inv``."""
    out: NDArrayFloat = np.diag(inv @ inv) * _t2_row_energy(plan)
    return out


def _t2_row_energy(plan: FosrPlan) -> float:
    """``s = 2 b_2^2 sum_l lambda_l``: the expected squared L2 norm of one row of ``T2``'s noise (grid norm)."""
    return 2.0 * plan.calibration2.scale**2 * float(np.sum(plan.basis.eigenvalues))


def _t1_first_order(plan: FosrPlan, inv: NDArrayFloat, beta: NDArrayFloat) -> NDArrayFloat:
    """``Q_m(beta)`` of :func:`fosr_coefficient_noise`: ``E||(inv E_1 beta)_m||^2`` over ``T1``'s noise ``E_1``."""
    a, b = plan.t1_index
    off = (a != b)[:, None, None]
    # c[e, m, :] = inv[m, a] beta[b] + [a != b] inv[m, b] beta[a] for each noised entry e = (a, b)
    c = inv.T[a][:, :, None] * beta[b][:, None, :] + off * inv.T[b][:, :, None] * beta[a][:, None, :]
    out: NDArrayFloat = 2.0 * plan.calibration1.scale**2 * np.einsum("emk,emk,k->m", c, c, plan.basis.grid.weights)
    return out


def _t1_first_order_of_t2_noise(plan: FosrPlan, inv: NDArrayFloat) -> NDArrayFloat:
    """``E Q_m(inv xi)`` over ``T2``'s noise ``xi``: ``Q`` with ``<eta_a, eta_b>`` replaced by ``(inv^2)_{ab} s``."""
    a, b = plan.t1_index
    inv2 = inv @ inv
    off = (a != b)[:, None]
    own = (inv.T[a] ** 2 * np.diag(inv2)[b][:, None]
           + off * (inv.T[b] ** 2 * np.diag(inv2)[a][:, None] + 2.0 * inv.T[a] * inv.T[b] * inv2[a, b][:, None]))
    out: NDArrayFloat = 2.0 * plan.calibration1.scale**2 * _t2_row_energy(plan) * own.sum(axis=0)
    return out


def given_t1(plan: FosrPlan, t1_released: ArrayLike) -> FosrPlan:
    """The plan of one draw: ``T2``'s ``(eta, psi)`` chosen after ``T1~`` is released (formula ``tuning.fosr.t2_given_t1@1``).

    .. math:: (\\hat\\eta,\\hat\\psi)=\\arg\\min\\ s^2\\sum_l\\Big(\\frac{\\psi}{\\lambda_l^\\eta+\\psi}\\Big)^2
              \\frac{\\lambda_l}{\\mathrm{tr}\\,C}+A\\,N(\\eta,\\psi),\\qquad A=\\frac{\\mathrm{tr}(\\tilde T_1^{+2})}{p}

    the ``risk_prior`` rule of each coefficient curve: ``N`` is the expected squared noise of one cross-moment curve
    at ``epsilon2`` (unit radius) and :func:`t2_amplification` ``A`` what the safe inverse does to it. Only for the
    rule ``risk_prior``; a fixed pair or a PSS rule returns ``plan`` unchanged. ``epsilon1``, ``epsilon2``, the floor
    and ``T1``'s calibration are those of ``plan``; ``delta2`` and ``T2``'s calibration are recomputed exactly for
    the chosen pair, so ``T2~`` is ``epsilon2``-DP whichever pair is chosen, and the choice reads only ``T1~``
    (already released) and public inputs: adaptive sequential composition (``accounting.pure.sequential@1``) keeps
    the release ``epsilon``-DP.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> pl = plan_fosr_release(midpoint_grid(20), {"name": "matern", "nu": 1.5, "rho": 0.2}, n=100, n_covariates=2,
    ...                        intercept=True, bound=1.0, tau_y=1.0, epsilon=2.0, secure=False)
    >>> near_singular = given_t1(pl, [[1.0, 0.5, 0.5], [0.5, 0.5, 0.49], [0.5, 0.49, 0.5]])
    >>> near_singular.psi > given_t1(pl, np.eye(3)).psi, near_singular.epsilon2 == pl.epsilon2
    (True, True)
    """
    if plan.tuning != "risk_prior":
        return plan
    amp = t2_amplification(t1_released, plan.floor)
    lam = plan.basis.eigenvalues
    noise = _t2_noise_sq(lam, p=plan.p, bound=plan.bound, n=plan.n, intercept=plan.intercept, epsilon2=plan.epsilon2)
    choice = risk_prior_search(lam, lambda e, q: amp * noise(e, q), signal_fraction=plan.signal_fraction)
    eta, psi = float(choice.eta or 0.0), float(choice.psi or 0.0)
    d2 = fosr_t2_sensitivity(lam, eta=eta, psi=psi, tau_y=plan.tau_y, p=plan.p, bound=plan.bound, n=plan.n,
                             intercept=plan.intercept)
    cal2 = calibrate_iclp(d2, plan.epsilon2, n_basis=plan.p * plan.basis.n_basis, secure=plan.calibration2.secure)
    return replace(plan, eta=eta, psi=psi, delta2=d2, calibration2=cal2, tuning_formula=T2_GIVEN_T1,
                   t2_amplification=amp)


def draw_fosr_release(
    plan: FosrPlan, z1: ArrayLike, z2: ArrayLike, *, draws: int = 1, rng: np.random.Generator | None = None
) -> tuple[NDArrayFloat, NDArrayFloat, tuple[FosrPlan, ...]]:
    """Noise ``T1``, choose ``T2``'s smoothing from it, noise ``T2``, assemble ``beta~ = T1~^+ T2~`` (post-processing).

    Returns ``(draws x p x K, draws x p x p, plans)``. ``T1``'s noised entries receive ``Lap(Delta1/(gamma eps))``;
    then each draw's plan is :func:`given_t1` of its ``T1~`` (the default rule; otherwise ``plan``), ``z2`` (whitened
    ``T2`` shrunk at ``plan``'s pair) is re-shrunk to that plan's pair (exactly what :func:`summarise_fosr` gives
    with it) and coefficient ``(m, l)`` receives ``Lap(Delta2 sqrt(lambda_l)/((1-gamma) eps))`` with that plan's
    ``Delta2`` (OpenDP when the plan is secure). Each draw is a separate ``epsilon``-DP release.
    """
    lam, phi = plan.basis.eigenvalues, plan.basis.eigenfunctions
    noisy1 = sample_laplace_whitened(z1, plan.calibration1, draws=draws, rng=rng)
    t1 = np.zeros((noisy1.shape[0], plan.p, plan.p))
    iu = plan.t1_index
    t1[:, iu[0], iu[1]] = noisy1
    t1[:, iu[1], iu[0]] = noisy1
    if plan.intercept:
        t1[:, 0, 0] = 1.0
    t1 = zero_structural(t1, plan.zero_pairs)
    plans = tuple(given_t1(plan, m) for m in t1)
    inv = np.stack([safe_inverse(m, plan.floor) for m in t1])
    if all(pl is plan for pl in plans):  # no draw re-chose its pair (a fixed pair or a PSS rule): T2's noise in one call
        g = sample_laplace_whitened(z2, plan.calibration2, draws=draws, rng=rng).reshape(-1, plan.p, lam.shape[0])
    else:
        base = iclp_qr_shrinkage(lam, plan.eta, plan.psi)
        rows = np.asarray(z2, dtype=np.float64).reshape(plan.p, lam.shape[0])
        g = np.stack([sample_laplace_whitened((rows * _reshrink(lam, base, pl)).ravel(), pl.calibration2, draws=1,
                                              rng=rng)[0].reshape(plan.p, lam.shape[0]) for pl in plans])
    return (inv @ (g * np.sqrt(lam))) @ phi.T, t1, plans


def _reshrink(lam: NDArrayFloat, base: NDArrayFloat, plan: FosrPlan) -> NDArrayFloat:
    """Factors taking ICLP-QR shrinkage ``base`` to ``plan``'s pair (0 where ``base`` underflowed: less signal)."""
    new = iclp_qr_shrinkage(lam, plan.eta, plan.psi)
    out: NDArrayFloat = np.divide(new, base, out=np.zeros_like(new), where=base > 0)
    return out


def fosr_t2_noise_band(
    plan: FosrPlan, t1_released: ArrayLike, *, level: float = 0.95, n_sim: int = 4000,
    rng: np.random.Generator | None = None,
) -> NDArrayFloat:
    """Pointwise half-width (``p x K``) of the ``T2`` noise in ``beta~``, given the released ``T1~``.

    ``beta~ - T1~^+ T2hat = T1~^+ xi`` with ``xi`` the ``T2`` noise (Laplace ``b_2 sqrt(lambda_l)`` on
    coefficient ``(m, l)``); its ``level`` quantile of ``|.|`` at each grid point is simulated from the noise
    alone and the released (private) ``T1~``, so it is post-processing and may be published. It does not
    include the ``T1`` noise (the design moments are taken as released).

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> pl = plan_fosr_release(midpoint_grid(10), {"name": "matern", "nu": 1.5, "rho": 0.1}, n=50, n_covariates=1,
    ...                        intercept=True, bound=1.0, tau_y=1.0, epsilon=1.0, secure=False)
    >>> fosr_t2_noise_band(pl, np.eye(2), rng=np.random.default_rng(0)).shape
    (2, 10)
    """
    if not 0 < level < 1:
        raise DomainError(f"level ({level!r}) must be in (0, 1)")
    lam, phi = plan.basis.eigenvalues, plan.basis.eigenfunctions
    inv = safe_inverse(_validate.finite_matrix("t1_released", t1_released), plan.floor)
    gen = rng if rng is not None else np.random.default_rng()
    xi = gen.laplace(0.0, plan.calibration2.scale, size=(n_sim, plan.p, lam.shape[0])) * np.sqrt(lam)
    curves = (inv @ xi) @ phi.T  # n_sim x p x K
    return np.quantile(np.abs(curves), level, axis=0)


def release_fosr(
    curves: ArrayLike,
    covariates: ArrayLike,
    t: ArrayLike | Grid,
    *,
    epsilon: float,
    tau_y: float | str,
    bound: float,
    kernel: Mapping[str, object],
    intercept: bool = True,
    gamma: float | None = None,
    eta: float | None = None,
    psi: float | None = None,
    floor: float | None = None,
    draws: int = 1,
    secure: bool = True,
    rng: np.random.Generator | None = None,
    tau_share: float = DEFAULT_TAU_SHARE,
    tau_range: tuple[float, float] | None = None,
    zero_pairs: Sequence[tuple[int, int]] = (),
) -> FosrRelease:
    """Release differentially private FoSR coefficient curves (Python facade, MATH.md §7).

    Args:
        curves: ``n x K`` response curves on the grid (one row per privacy unit).
        covariates: ``n x q`` scalar covariates (without the intercept column).
        t: grid nodes or a :class:`Grid`.
        epsilon: total privacy parameter of one draw (the ``tau`` split, then ``gamma`` of the rest for ``T1``).
        tau_y: clip radius of the response curves. ``"auto"``: bought with ``tau_share`` of ``epsilon`` by one
            OpenDP DP quantile (MATH.md §1.7) of the norms of the response curves as given (exactly the records the
            clip applies to; centre them by a public reference first, if any) over the geometric grid on
            ``tau_range`` (default ``[0.01, 1] * sqrt(|T|)``), at the level of ``tuning.tau.summary_level@1`` from
            ``T2``'s noise (:func:`fdpcore.noise.quantiles.plan_with_tau`; the a-priori upper end of ``tau_range``,
            free, when ``n * epsilon`` is too small). The plan's ``budget_splits`` are then ``tau``, ``T1`` and
            ``T2``; ``plan.tau_y`` is the drawn value. Needs ``draws=1``.
        bound: clip radius of the covariates (``B_z`` with an intercept, else ``B_x``).
        kernel: noise kernel mapping.
        intercept: add the constant column.
        gamma: see :func:`plan_fosr_release`.
        eta: see ``gamma``.
        psi: see ``gamma``.
        floor: see ``gamma``.
        draws: as in :func:`fdpcore.summaries.mean.release_mean`.
        secure: see ``draws``.
        rng: see ``draws``.
        tau_share: share of ``epsilon`` that buys ``tau_y="auto"`` (raised for small ``n``:
            :func:`fdpcore.noise.quantiles.choice_epsilon`).
        tau_range: the range of the candidate grid of ``tau_y="auto"``.
        zero_pairs: design entries zero for every record by the public encoding (:func:`one_hot_zero_pairs` of the
            one-hot blocks' column indices, the intercept 0; only where every unit takes one level): ``T1~`` is set
            to 0 there after the noise (:func:`plan_fosr_release`).

    Privacy assumptions: grid, kernel, radii (or the public range and share of ``tau_y="auto"``), ``gamma``,
    ``(eta, psi)``, the floor and ``n`` are public; one row per privacy unit; replace-one adjacency.

    Examples:
        >>> rng = np.random.default_rng(0)
        >>> z = rng.choice([-1.0, 1.0], size=(200, 1))
        >>> y = 0.3 + 0.2 * z * np.linspace(0, 1, 25) + rng.normal(size=(200, 25)) * 0.05
        >>> r = release_fosr(y, z, np.linspace(0, 1, 25), epsilon=1.0, tau_y=1.0, bound=1.0,
        ...                  kernel={"name": "matern", "nu": 1.5, "rho": 0.2}, secure=False, rng=rng)
        >>> r.coefficients.shape, r.plan.budget_splits[0]["epsilon"] + r.plan.budget_splits[1]["epsilon"]
        ((1, 2, 25), 1.0)
        >>> a = release_fosr(y, z, np.linspace(0, 1, 25), epsilon=1.0, tau_y="auto", bound=1.0,
        ...                  kernel={"name": "matern", "nu": 1.5, "rho": 0.2}, secure=False, rng=rng)
        >>> [s["name"] for s in a.plan.budget_splits], a.plan.tau_y == a.plan.public_choices[0].value
        (['tau', 'T1 (design moments)', 'T2 (cross-moment curves)'], True)
    """
    grid = t if isinstance(t, Grid) else grid_from_nodes(t)
    y = _validate.finite_matrix("curves", curves, grid.size)
    z = _validate.finite_matrix("covariates", covariates)
    if z.shape[0] != y.shape[0]:
        raise DomainError(f"covariates has {z.shape[0]} rows but curves has {y.shape[0]}")
    n, q = y.shape[0], z.shape[1]

    def plan_at(radius: float, choices: tuple[PublicChoice, ...]) -> FosrPlan:  # public inputs only
        return plan_fosr_release(grid, kernel, n=n, n_covariates=q, intercept=intercept, bound=bound, tau_y=radius,
                                 epsilon=epsilon, gamma=gamma, eta=eta, psi=psi, floor=floor, secure=secure,
                                 public_choices=choices, zero_pairs=zero_pairs)

    def unit_noise(choices: tuple[PublicChoice, ...]) -> tuple[float, float | None]:
        unit = plan_at(1.0, choices)
        return math.sqrt(unit.expected_sq_l2_error_t2), unit.x_bound

    # y holds exactly the response curves the clip applies to
    plan = plan_with_tau(tau_y, y, grid, plan_at, summary="fosr", epsilon=epsilon, tau_share=tau_share,
                         tau_range=tau_range, unit_noise=unit_noise, draws=draws, name="tau_y")
    zc, _ = clip_covariates(z, plan.bound)
    yc, _ = clip_l2(y, grid.weights, plan.tau_y)
    z1, z2 = summarise_fosr(zc, yc, plan)
    coef, t1, plans = draw_fosr_release(plan, z1, z2, draws=draws, rng=rng)
    return FosrRelease(coef, t1, plans[0], plans)
