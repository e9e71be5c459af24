"""Covariance-surface release: tensor ICLP-QR with upper-triangle noise (MATH.md §6).

The surface lives on ``T x T`` with weights ``w_k w_l``; the noise kernel is ``C (x) C`` with
eigenvalues ``lambda_j lambda_l`` and eigenfunctions ``phi_j (x) phi_l`` (MATH.md §1.6 with
``Phi_1 = Phi_2 = Phi``), so a surface is its symmetric ``J x J`` coefficient matrix ``M`` and its
grid values are ``Phi M Phi^T``. Only the upper triangle ``U = {(j, l): j <= l}`` is noised and then
mirrored. In *whitened* coordinates ``z_jl = Khat_jl / sqrt(lambda_j lambda_l) = A_jl Kbar_jl`` the
noise is i.i.d. ``Lap(Delta/epsilon)`` and ``Delta`` is the l1 sensitivity of ``z`` — the form
OpenDP's vector Laplace certifies (:mod:`fdpcore.noise.iclp`).

Centring (MATH.md §6 (a), (b)):

* ``"public"``: records are ``Y_i = clip_{tau_c}(X_i - c)`` with a data-independent centre ``c``
  (zero, a public reference curve, or a previously released private mean — then the two releases
  compose sequentially); ``Kbar = (1/n) sum_i theta(Y_i) theta(Y_i)^T``.
* ``"sample_mean"``: records are clipped to ``tau`` and centred by their own mean; the bound is
  about three times larger.

A release is split so that the budget can be charged between the steps: :func:`plan_covariance_release`
(public inputs only), :func:`summarise_covariance` (pre-noise, never published) and
:func:`draw_covariance_release` (noise), then post-processing (:func:`covariance_surface`,
:func:`psd_projection`, :func:`leading_eigenfunctions`). :func:`release_covariance` chains them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from fdpcore import _validate
from fdpcore._typing import ArrayLike, NDArrayFloat, NDArrayInt
from fdpcore.basis.eigen import Eigenbasis, weighted_eigenbasis
from fdpcore.basis.grids import Grid, grid_from_nodes
from fdpcore.basis.kernels import KernelSpec, decay_rate, kernel_spec
from fdpcore.data.preprocess import clip_l2
from fdpcore.errors import DomainError, PrivacyParameterError
from fdpcore.noise.iclp import LaplaceCalibration, calibrate_iclp, iclp_expected_sq_error, sample_laplace_whitened
from fdpcore.noise.quantiles import (
    DEFAULT_TAU_SHARE,
    PaysChoicesFirst,
    PublicChoice,
    choice_formulas,
    epsilon_after_choices,
    plan_with_tau,
    prior_signal_fraction,
)
from fdpcore.privacy.tuning import (
    DEFAULT_SIGNAL_FRACTION,
    PSS_RULES,
    RISK_RULES,
    prior_sq_bias,
    pss_iclp_qr,
    risk_prior_search,
)
from fdpcore.summaries.mean import iclp_qr_shrinkage, iclp_qr_weights

#: ``risk(basis) -> (shrunk eigenvalues, expected squared noise at unit radius as f(eta, psi), signal fraction)``.
RiskModel = Callable[[Eigenbasis], tuple[NDArrayFloat, Callable[[float, float], float], float]]

__all__ = [
    "CENTERINGS",
    "CovariancePlan",
    "CovarianceRelease",
    "covariance_public_sensitivity",
    "covariance_sample_mean_sensitivity",
    "covariance_surface",
    "covariance_weights",
    "draw_covariance_release",
    "empirical_covariance_coefficients",
    "iclp_qr_covariance_coefficients",
    "leading_eigenfunctions",
    "plan_covariance_release",
    "psd_projection",
    "qr_regularisation",
    "release_covariance",
    "summarise_covariance",
]

#: Centring modes and the formula id of the sensitivity that sets their noise.
CENTERINGS: dict[str, str] = {
    "public": "sensitivity.cov.public_center@1",
    "sample_mean": "sensitivity.cov.sample_mean_center@1",
}


def _upper(eigenvalues: ArrayLike) -> tuple[NDArrayFloat, tuple[NDArrayInt, NDArrayInt]]:
    """Products ``lambda_j lambda_l`` on the upper triangle ``j <= l`` (row-major) and its indices."""
    lam = np.asarray(eigenvalues, dtype=np.float64)
    if lam.ndim != 1 or lam.shape[0] == 0 or not np.all(np.isfinite(lam)) or np.any(lam <= 0):
        raise DomainError("eigenvalues must be a non-empty 1-D array of finite positive numbers (the kept set J)")
    iu = np.triu_indices(lam.shape[0])
    return lam[iu[0]] * lam[iu[1]], iu


def covariance_weights(eigenvalues: ArrayLike, eta: float, psi: float) -> NDArrayFloat:
    """The symmetric ``J x J`` weights ``A_jl = (lambda_j lambda_l)^(eta-1/2) / ((lambda_j lambda_l)^eta + psi)`` (MATH.md §6).

    They are the ICLP-QR weights (:func:`fdpcore.summaries.mean.iclp_qr_weights`) of the product
    eigenvalues of ``C (x) C``; ``A_jl |Kbar_jl|`` is the ``1,C(x)C`` weight of coefficient ``(j, l)``.

    >>> covariance_weights([1.0, 0.25], 1.0, 1.0).round(4).tolist()
    [[0.5, 0.4], [0.4, 0.2353]]
    """
    prod, iu = _upper(eigenvalues)
    j = iu[0].max() + 1
    a = np.zeros((j, j))
    a[iu] = iclp_qr_weights(prod, eta, psi)
    return a + np.triu(a, 1).T


def _spectral_terms(eigenvalues: ArrayLike, eta: float, psi: float) -> tuple[float, float]:
    """``lambda_max(A + Diag A)`` and ``||A_U||_F`` (the two terms of both covariance bounds)."""
    a = covariance_weights(eigenvalues, eta, psi)
    lam_max = float(np.linalg.eigvalsh(a + np.diag(np.diag(a)))[-1])
    frob = float(np.sqrt(np.sum(np.triu(a) ** 2)))
    return lam_max, frob


def covariance_public_sensitivity(eigenvalues: ArrayLike, *, eta: float, psi: float, tau_c: float, n: int) -> float:
    """Upper bound on the ``1,C(x)C`` sensitivity with a public centre (formula ``sensitivity.cov.public_center@1``).

    .. math:: \\Delta^{\\rm pub}_{\\rm cov}=\\frac{\\tau_c^2}{n}\\min\\Big\\{\\lambda_{\\max}(A+\\mathrm{Diag}A),
              \\ \\sqrt2\\,\\lVert A_{\\mathcal U}\\rVert_F\\Big\\}

    [UPPER] (MATH.md §6 (a)): within a factor 2 of the supremum, which is at least
    ``tau_c^2 lambda_max(A + Diag A) / (2n)`` (``y' = 0``, ``y = tau_c`` times the Perron vector).

    Privacy assumptions: the centre, grid, kernel, ``eta``, ``psi``, ``tau_c`` and ``n`` are public;
    every centred record is clipped to ``||Y_i||_W <= tau_c``; adjacency is replace-one.

    >>> round(covariance_public_sensitivity([0.8, 0.2], eta=1.0, psi=0.01, tau_c=1.0, n=10), 6)
    0.678986
    """
    tau_c = _validate.positive_finite("tau_c", tau_c)
    n = _validate.positive_int("n", n)
    lam_max, frob = _spectral_terms(eigenvalues, eta, psi)
    return float(tau_c**2 / n * min(lam_max, np.sqrt(2.0) * frob))


def covariance_sample_mean_sensitivity(eigenvalues: ArrayLike, *, eta: float, psi: float, tau: float, n: int) -> float:
    """Upper bound on the ``1,C(x)C`` sensitivity with sample-mean centring (formula ``sensitivity.cov.sample_mean_center@1``).

    .. math:: \\Delta^{\\bar X}_{\\rm cov}=\\frac{(n-1)\\tau^2}{n^2}\\min\\Big\\{3\\,\\lambda_{\\max}(A+\\mathrm{Diag}A),
              \\ (4+\\sqrt2)\\,\\lVert A_{\\mathcal U}\\rVert_F\\Big\\}

    [UPPER] (MATH.md §6 (b)), for ``Kbar = (1/n) sum_i (X_i - Xbar)(X_i - Xbar)^T`` with
    ``||X_i||_W <= tau``, from the exact identity
    ``dKbar = (n-1)/n^2 (x x^T - x' x'^T) - (s d^T + d s^T)/n^2``.

    Privacy assumptions: as :func:`covariance_public_sensitivity`, with records clipped to ``tau``.

    >>> round(covariance_sample_mean_sensitivity([0.8, 0.2], eta=1.0, psi=0.01, tau=1.0, n=10), 6)
    2.339505
    """
    tau = _validate.positive_finite("tau", tau)
    n = _validate.positive_int("n", n, minimum=2)
    lam_max, frob = _spectral_terms(eigenvalues, eta, psi)
    return float((n - 1) * tau**2 / n**2 * min(3.0 * lam_max, (4.0 + np.sqrt(2.0)) * frob))


def empirical_covariance_coefficients(coefficients: ArrayLike, *, centering: str) -> NDArrayFloat:
    """``Kbar`` in coefficients: ``(1/n) sum_i y_i y_i^T``, ``y_i`` the records' eigen-coefficients (MATH.md §6).

    ``centering="public"``: the records are already centred by a public curve (no further centring);
    ``"sample_mean"``: ``y_i = theta(X_i) - mean_i theta(X_i)``. Pre-noise: never publish it.

    >>> empirical_covariance_coefficients([[1.0, 0.0], [-1.0, 0.0]], centering="sample_mean").tolist()
    [[1.0, 0.0], [0.0, 0.0]]
    """
    if centering not in CENTERINGS:
        raise DomainError(f"centering ({centering!r}) must be one of {sorted(CENTERINGS)}")
    y = _validate.finite_matrix("coefficients", coefficients)
    if centering == "sample_mean":
        y = y - y.mean(axis=0)
    out: NDArrayFloat = (y.T @ y) / y.shape[0]
    return out


def iclp_qr_covariance_coefficients(
    covariance_coefficients: ArrayLike, eigenvalues: ArrayLike, *, eta: float, psi: float
) -> NDArrayFloat:
    """Tensor ICLP-QR covariance estimator (formula ``estimator.cov.iclp_qr@1``, MATH.md §6).

    Minimises ``(1/n) sum_i ||y_i (x) y_i - G||^2 + psi ||G||^2_{C^eta (x) C^eta}``:

    .. math:: \\hat{\\mathcal K}_{jl}=s_{jl}\\,\\bar{\\mathcal K}_{jl},\\qquad
              s_{jl}=\\frac{(\\lambda_j\\lambda_l)^\\eta}{(\\lambda_j\\lambda_l)^\\eta+\\psi}

    (the corrected index of [ICLP-v2] App. C.1). Returns the symmetric ``J x J`` matrix.

    >>> iclp_qr_covariance_coefficients([[1.0, 1.0], [1.0, 1.0]], [1.0, 0.5], eta=1.0, psi=0.5).round(4).tolist()
    [[0.6667, 0.5], [0.5, 0.3333]]
    """
    k = _validate.finite_matrix("covariance_coefficients", covariance_coefficients)
    prod, iu = _upper(eigenvalues)
    if k.shape != (iu[0].max() + 1,) * 2:
        raise DomainError(f"covariance_coefficients (shape {k.shape}) must be J x J with J = {iu[0].max() + 1}")
    s = np.zeros(k.shape)
    s[iu] = iclp_qr_shrinkage(prod, eta, psi)
    s = s + np.triu(s, 1).T
    return s * (k + k.T) / 2.0


@dataclass(frozen=True, eq=False)
class CovariancePlan(PaysChoicesFirst):
    """Everything that sets the noise of a covariance release; all of it is public.

    Attributes:
        basis: kernel eigenbasis on the grid (``J`` kept pairs; the surface has ``J (J+1)/2`` noised coefficients).
        n: number of records (public under replace-one adjacency).
        centering: ``"public"`` or ``"sample_mean"``.
        tau: clipping radius (``tau_c`` of the centred records, or ``tau`` of the raw records).
        epsilon: privacy parameter of one draw (the public choices included).
        eta: regularisation of the tensor ICLP-QR estimator.
        psi: see ``eta``.
        tuning: ``"fixed"``, ``"risk_prior"`` or the PSS rule that chose ``(eta, psi)``.
        tuning_formula: formula id of the rule (``None`` when fixed).
        beta: decay rate of the 1-D kernel.
        sensitivity: the bound that sets the noise; sensitivity_formula: its formula id.
        calibration: whitened Laplace calibration (OpenDP-certified when secure), at :attr:`epsilon_mechanism`.
        public_choices: ``tau: auto`` (:mod:`fdpcore.noise.quantiles`), a named split of ``epsilon`` paid
            before the surface; ``tau`` is then the value it released.
        signal_fraction: the ``risk_prior`` prior's signal, a fraction of ``tau^2`` (:attr:`prior_sq_l2_risk`).
    """

    basis: Eigenbasis
    n: int
    centering: str
    tau: float
    epsilon: float
    eta: float
    psi: float
    tuning: str
    tuning_formula: str | None
    beta: float
    sensitivity: float
    sensitivity_formula: str
    calibration: LaplaceCalibration
    public_choices: tuple[PublicChoice, ...] = ()
    signal_fraction: float = DEFAULT_SIGNAL_FRACTION

    split_name: ClassVar[str] = "covariance"

    @property
    def prior_sq_l2_risk(self) -> float:
        """``E||noise||^2`` plus the expected squared smoothing bias of a typical surface (``tuning.risk.iclp_qr.prior@1``).

        The bias is :func:`fdpcore.privacy.tuning.prior_sq_bias` (``paths`` weights) on the shrunk eigenvalues
        ``lambda_j^2`` at this plan's ``(eta, psi)`` for a surface of size ``signal_fraction * tau^2`` spread as the
        ``risk_prior`` prior (``K = s C / tr C``): the criterion the default rule minimises, so it falls as epsilon
        grows while the noise alone may not (less smoothing). Public inputs only; the real bias depends on the data.
        """
        lam = self.basis.eigenvalues
        bias = float(prior_sq_bias(lam * lam, self.eta, self.psi, signal=self.signal_fraction * self.tau**2,
                                   prior="paths"))
        return self.expected_sq_l2_error + bias

    @property
    def dimension(self) -> int:
        """Number of noised coefficients ``J (J + 1) / 2``."""
        j = self.basis.n_basis
        return j * (j + 1) // 2

    @property
    def expected_sq_l2_error(self) -> float:
        """``E||noise||^2`` on ``T x T`` (formula ``noise.iclp.expected_sq_l2@1`` on the mirrored triangle).

        Each off-diagonal draw appears twice in the symmetric surface, so the eigenvalue list is
        ``lambda_j lambda_l`` with multiplicity 2 for ``j < l``: the total is ``2 b^2 (sum_j lambda_j)^2``.
        """
        prod, iu = _upper(self.basis.eigenvalues)
        return iclp_expected_sq_error(np.where(iu[0] < iu[1], 2.0, 1.0) * prod, self.calibration.scale)

    @property
    def formulas(self) -> list[str]:
        """Every formula id this plan relies on."""
        ids = {"grid.midpoint@1" if self.basis.grid.rule == "midpoint" else "grid.trapezoid@1",
               "eigen.weighted_kl@1", "eigen.tensor_kron@1", "preprocess.clip_l2@1", "estimator.cov.iclp_qr@1",
               self.sensitivity_formula, "calibration.iclp.laplace_whitened@1", "noise.iclp.expected_sq_l2@1"}
        if self.tuning_formula is not None:
            ids.add(self.tuning_formula)
        return sorted(ids | choice_formulas(self.public_choices))


def qr_regularisation(
    grid: Grid, kernel: Mapping[str, object] | KernelSpec, *, n: int, epsilon: float, eta: float | None,
    psi: float | None, tuning: str | None, risk: RiskModel | None = None,
) -> tuple[Eigenbasis, float, float, float, str, str | None]:
    """The kernel's eigenbasis and decay rate, and ``(eta, psi)``: fixed together, a PSS rule, or ``risk_prior``.

    Shared by the covariance and regression plans. Returns ``(basis, beta, eta, psi, rule, rule_formula)``;
    ``rule`` is ``"fixed"`` (formula ``None``), a PSS rule (MATH.md §5.1) or ``risk_prior``
    (:func:`fdpcore.privacy.tuning.risk_prior_search`, the default when ``risk`` is given: ``risk(basis)`` returns
    the shrunk operator's eigenvalues and the expected squared noise at unit clip radius as a function of
    ``(eta, psi)``, both public). Without ``risk`` the default is ``exact_balanced``.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> qr_regularisation(midpoint_grid(8), {"name": "matern", "nu": 1.5, "rho": 0.2}, n=100, epsilon=1.0,
    ...                   eta=None, psi=None, tuning=None)[2:]
    (1.25, 0.01, 'exact_balanced', 'tuning.pss.iclp_qr.exact_balanced@1')
    """
    spec = kernel_spec(kernel)
    basis = weighted_eigenbasis(spec, grid)
    beta = decay_rate(spec, basis.eigenvalues)
    if (eta is None) != (psi is None):
        raise DomainError("eta and psi must be given together, or both left to the tuning rule")
    if eta is not None and psi is not None:
        if tuning not in (None, "fixed"):
            raise DomainError(f"tuning ({tuning!r}) must be left unset when eta and psi are fixed")
        return (basis, beta, _validate.positive_finite("eta", eta), _validate.positive_finite("psi", psi), "fixed",
                None)
    rule = tuning or ("risk_prior" if risk is not None else "exact_balanced")
    if rule in RISK_RULES:
        if risk is None:
            raise DomainError(f"tuning ({rule!r}) needs the release's noise model")
        mu, noise_sq, fraction = risk(basis)
        choice = risk_prior_search(mu, noise_sq, signal_fraction=fraction)
        return basis, beta, float(choice.eta or 0.0), float(choice.psi or 0.0), rule, choice.formula_id
    if rule not in PSS_RULES:
        raise DomainError(f"tuning ({rule!r}) must be one of {sorted({*PSS_RULES, *RISK_RULES})}")
    choice = pss_iclp_qr(rule, beta=beta, n=n, epsilon=epsilon)
    return basis, beta, float(choice.eta or 0.0), float(choice.psi or 0.0), rule, choice.formula_id


def plan_covariance_release(
    grid: Grid,
    kernel: Mapping[str, object] | KernelSpec,
    *,
    n: int,
    tau: float,
    epsilon: float,
    centering: str = "public",
    eta: float | None = None,
    psi: float | None = None,
    tuning: str | None = None,
    secure: bool = True,
    signal_fraction: float | None = None,
    public_choices: tuple[PublicChoice, ...] = (),
) -> CovariancePlan:
    """Fix the noise of a covariance release from public inputs only (MATH.md §6).

    ``eta`` and ``psi`` are fixed together, or chosen by a rule: the default ``risk_prior``
    (:func:`fdpcore.privacy.tuning.risk_prior_search` on the product eigenvalues ``lambda_j lambda_l`` with the
    release's expected noise; prior signal ``signal_fraction * tau^2``, the bound of ``||K||_HS``; unset,
    ``signal_fraction`` is :func:`fdpcore.privacy.tuning.default_signal_fraction`: 0.1 where ``tau: auto`` fell back
    to its a-priori bound, else 0.5), whose
    error falls as epsilon grows, or a PSS rule of ICLP-QR (:data:`fdpcore.privacy.tuning.PSS_RULES`) with the 1-D
    kernel's decay rate. ``public_choices`` (``tau: auto``) are parts of ``epsilon`` paid before the surface,
    whose noise and rule use the rest (:attr:`CovariancePlan.epsilon_mechanism`); ``tau`` is then the value they
    released.

    Privacy assumptions: grid, kernel, ``n``, ``tau``, the centring mode (and the centre itself,
    for ``"public"``) and the parameters are fixed without looking at the data (or ``tau`` is the released
    output of a public choice charged with the release).

    Raises:
        DomainError: unknown centring or rule, ``eta`` without ``psi``.
        PrivacyParameterError: non-positive ``epsilon``, ``tau``, ``eta`` or ``psi``.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> p = plan_covariance_release(midpoint_grid(24), {"name": "matern", "nu": 1.5, "rho": 0.1}, n=508,
    ...                             tau=1.0, epsilon=1.0, tuning="exact_balanced", secure=False)
    >>> (p.eta, round(p.psi, 6), p.sensitivity_formula)
    (1.25, 0.001969, 'sensitivity.cov.public_center@1')
    >>> plan_covariance_release(midpoint_grid(24), {"name": "matern", "nu": 1.5, "rho": 0.1}, n=508,
    ...                         tau=1.0, epsilon=1.0, secure=False).tuning
    'risk_prior'

    """
    if centering not in CENTERINGS:
        raise DomainError(f"centering ({centering!r}) must be one of {sorted(CENTERINGS)}")
    n = _validate.positive_int("n", n, minimum=2 if centering == "sample_mean" else 1)
    tau = _validate.positive_finite("tau", tau)
    total = _validate.positive_finite("epsilon", epsilon)
    epsilon = epsilon_after_choices(total, tuple(public_choices))  # the surface's own part
    fraction = prior_signal_fraction(signal_fraction, public_choices)  # tuning.risk.signal_default@1 when unset

    def risk(basis: Eigenbasis) -> tuple[NDArrayFloat, Callable[[float, float], float], float]:
        lam = basis.eigenvalues
        bound = covariance_public_sensitivity if centering == "public" else None

        def noise_sq(e: float, p: float) -> float:  # 2 Delta^2 tr(C)^2 / eps^2 at tau = 1 (MATH.md §6, §3.5)
            d = (bound(lam, eta=e, psi=p, tau_c=1.0, n=n) if bound is not None
                 else covariance_sample_mean_sensitivity(lam, eta=e, psi=p, tau=1.0, n=n))
            return 2.0 * d * d * float(lam.sum()) ** 2 / epsilon**2

        return lam * lam, noise_sq, fraction  # prior: K = s C / tr C, diagonal in the eigenbasis

    basis, beta, eta, psi, rule, rule_formula = qr_regularisation(grid, kernel, n=n, epsilon=epsilon, eta=eta, psi=psi,
                                                                   tuning=tuning, risk=risk)
    lam = basis.eigenvalues
    if centering == "public":
        sens = covariance_public_sensitivity(lam, eta=eta, psi=psi, tau_c=tau, n=n)
    else:
        sens = covariance_sample_mean_sensitivity(lam, eta=eta, psi=psi, tau=tau, n=n)
    d = basis.n_basis * (basis.n_basis + 1) // 2
    cal = calibrate_iclp(sens, epsilon, n_basis=d, secure=secure)
    return CovariancePlan(basis, n, centering, tau, total, eta, psi, rule, rule_formula, beta, sens,
                          CENTERINGS[centering], cal, tuple(public_choices), fraction)


def summarise_covariance(clipped_records: ArrayLike, plan: CovariancePlan) -> NDArrayFloat:
    """Pre-noise whitened coordinates ``z_jl = Khat_jl / sqrt(lambda_j lambda_l)`` on ``j <= l`` (never publish them).

    ``clipped_records`` are the centred records clipped to ``tau_c`` (public centring) or the raw
    records clipped to ``tau`` (sample-mean centring); one row per privacy unit.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> p = plan_covariance_release(midpoint_grid(10), {"name": "matern", "nu": 1.5, "rho": 0.2}, n=2, tau=1.0,
    ...                             epsilon=1.0, eta=1.0, psi=0.1, secure=False)
    >>> summarise_covariance(np.zeros((2, 10)), p).shape == (p.dimension,)
    True
    """
    x = _validate.finite_matrix("records", clipped_records, plan.basis.grid.size)
    if x.shape[0] != plan.n:
        raise DomainError(f"records has {x.shape[0]} rows but the plan is for n = {plan.n} records")
    lam = plan.basis.eigenvalues
    kbar = empirical_covariance_coefficients(plan.basis.coefficients(x), centering=plan.centering)
    khat = iclp_qr_covariance_coefficients(kbar, lam, eta=plan.eta, psi=plan.psi)
    prod, iu = _upper(lam)
    out: NDArrayFloat = khat[iu] / np.sqrt(prod)
    return out


def draw_covariance_release(
    plan: CovariancePlan, z: ArrayLike, *, draws: int = 1, rng: np.random.Generator | None = None
) -> NDArrayFloat:
    """Add the calibrated Laplace noise to the upper triangle and mirror it: ``draws x J x J`` coefficient matrices.

    Coefficient ``(j, l)``, ``j <= l``, receives ``Lap(Delta sqrt(lambda_j lambda_l)/epsilon)``
    (MATH.md §6); secure plans draw with OpenDP (``rng`` ignored). Each draw is a separate release.
    """
    prod, iu = _upper(plan.basis.eigenvalues)
    zz = np.asarray(z, dtype=np.float64)
    if zz.shape != prod.shape:
        raise DomainError(f"z (shape {zz.shape}) must have {prod.shape[0]} entries (the upper triangle)")
    noisy = sample_laplace_whitened(zz, plan.calibration, draws=draws, rng=rng) * np.sqrt(prod)
    j = plan.basis.n_basis
    out = np.zeros((noisy.shape[0], j, j))
    out[:, iu[0], iu[1]] = noisy
    out[:, iu[1], iu[0]] = noisy
    return out


def psd_projection(coefficients: ArrayLike) -> NDArrayFloat:
    """Nearest positive semidefinite operator in the ``W`` metric (formula ``postprocess.cov.psd_projection@1``).

    .. math:: \\tilde{\\mathcal K}_+ = V\\max(D, 0)V^\\top,\\qquad \\tilde{\\mathcal K}=VDV^\\top

    On the kept span, ``W^{1/2} Phi M Phi^T W^{1/2} = U_J M U_J^T`` with orthonormal ``U_J``, so
    clipping the negative eigenvalues of the symmetric coefficient matrix ``M`` is exactly
    MATH.md §6's projection (post-processing: no privacy cost). Works on a stack ``(..., J, J)``.

    >>> psd_projection([[1.0, 0.0], [0.0, -2.0]]).tolist()
    [[1.0, 0.0], [0.0, 0.0]]
    """
    m = np.asarray(coefficients, dtype=np.float64)
    d, v = np.linalg.eigh((m + np.swapaxes(m, -1, -2)) / 2.0)
    out: NDArrayFloat = (v * np.maximum(d, 0.0)[..., None, :]) @ np.swapaxes(v, -1, -2)
    return out


def covariance_surface(coefficients: ArrayLike, basis: Eigenbasis) -> NDArrayFloat:
    """Grid values ``Phi M Phi^T`` of a symmetric coefficient matrix (or a stack of them): ``(..., K, K)``.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> b = weighted_eigenbasis({"name": "matern", "nu": 1.5, "rho": 0.2}, midpoint_grid(6))
    >>> covariance_surface(np.eye(b.n_basis), b).shape
    (6, 6)
    """
    m = np.asarray(coefficients, dtype=np.float64)
    phi = basis.eigenfunctions
    out: NDArrayFloat = phi @ m @ phi.T
    return out


def leading_eigenfunctions(coefficients: ArrayLike, basis: Eigenbasis, k: int) -> tuple[NDArrayFloat, NDArrayFloat]:
    """The ``k`` largest eigenvalues and W-orthonormal eigenfunctions (``K x k``) of a released surface.

    Post-processing of the private coefficient matrix ``M = V D V^T``: eigenfunctions ``Phi V`` (signs
    fixed so that each function's largest-magnitude value is positive), eigenvalues ``D``.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> b = weighted_eigenbasis({"name": "matern", "nu": 1.5, "rho": 0.2}, midpoint_grid(6))
    >>> vals, funs = leading_eigenfunctions(np.diag(np.arange(b.n_basis, 0, -1.0)), b, 2)
    >>> vals.tolist(), funs.shape
    ([6.0, 5.0], (6, 2))
    """
    m = np.asarray(coefficients, dtype=np.float64)
    k = _validate.positive_int("n_components", k)
    if m.ndim != 2 or k > m.shape[0]:
        raise DomainError(f"n_components ({k}) must be <= the number of kept eigenpairs ({m.shape[0]})")
    d, v = np.linalg.eigh((m + m.T) / 2.0)
    order = np.argsort(d)[::-1][:k]
    funs = basis.eigenfunctions @ v[:, order]
    idx = np.argmax(np.abs(funs), axis=0)
    signs = np.sign(funs[idx, np.arange(k)])
    signs[signs == 0] = 1.0
    return d[order], funs * signs


@dataclass(frozen=True, eq=False)
class CovarianceRelease:
    """A private covariance release: ``coefficients`` (``draws x J x J``) and the public plan."""

    coefficients: NDArrayFloat
    plan: CovariancePlan
    psd: bool

    @property
    def surfaces(self) -> NDArrayFloat:
        """``draws x K x K`` grid values (PSD-projected when ``psd``)."""
        m = psd_projection(self.coefficients) if self.psd else self.coefficients
        return covariance_surface(m, self.plan.basis)

    @property
    def sensitivity(self) -> float:
        """The sensitivity that set the noise."""
        return self.plan.sensitivity

    @property
    def epsilon(self) -> float:
        """Epsilon of one draw."""
        return self.plan.epsilon


def release_covariance(
    curves: ArrayLike,
    t: ArrayLike | Grid,
    *,
    epsilon: float,
    tau: float | str,
    kernel: Mapping[str, object],
    centering: str = "public",
    center: ArrayLike | None = None,
    eta: float | None = None,
    psi: float | None = None,
    tuning: str | None = None,
    psd: bool = True,
    draws: int = 1,
    secure: bool = True,
    rng: np.random.Generator | None = None,
    signal_fraction: float | None = None,
    tau_share: float = DEFAULT_TAU_SHARE,
    tau_range: tuple[float, float] | None = None,
) -> CovarianceRelease:
    """Release a differentially private covariance surface (Python facade, MATH.md §6).

    Args:
        curves: ``n x K`` curve values on the grid (one row per privacy unit).
        t: grid nodes (trapezoid weights) or a :class:`Grid`.
        epsilon: privacy parameter of one draw (the ``tau`` split included).
        tau: ``tau_c`` (public centring: clip of ``X_i - center``) or ``tau`` (sample-mean centring). ``"auto"``:
            bought with ``tau_share`` of ``epsilon`` by one OpenDP DP quantile (MATH.md §1.7) of the norms of exactly
            the records the clip applies to — the centred curves ``X_i - center`` (public centring) or the **raw**
            curves (sample-mean centring: the records are clipped before their own mean is removed) — over the
            geometric grid on ``tau_range`` (default ``[0.01, 1] * sqrt(|T|)``), at the level of
            ``tuning.tau.summary_level@1`` (:func:`fdpcore.noise.quantiles.plan_with_tau`; the a-priori upper end of
            ``tau_range``, free, when ``n * epsilon`` is too small). The plan's ``budget_splits`` are then ``tau`` and
            ``covariance``; ``plan.tau`` is the drawn value. Needs ``draws=1``.
        kernel: noise kernel mapping, e.g. ``{"name": "matern", "nu": 1.5, "rho": 0.1}``.
        centering: ``"public"`` (``center``, default the zero curve) or ``"sample_mean"``.
        center: the public centre on the grid (must not be computed from ``curves``).
        eta: fixed regularisation ``(eta, psi)``; ``None`` for both lets ``tuning`` choose.
        psi: see ``eta``.
        tuning: a PSS rule of MATH.md §5.1 or ``"risk_prior"``; default ``risk_prior``, as ``fdp release``.
        psd: project each released surface onto PSD operators (post-processing).
        draws: independent draws, each a separate ``epsilon``-DP release.
        secure: OpenDP samplers; ``False`` uses NumPy (simulations only).
        rng: generator for ``secure=False``.
        signal_fraction: prior signal scale of the default ``risk_prior`` rule as a fraction of ``tau^2``; default
            :func:`fdpcore.privacy.tuning.default_signal_fraction` (0.5, or 0.1 where ``tau: "auto"`` falls back to
            its a-priori bound).
        tau_share: share of ``epsilon`` that buys ``tau="auto"`` (raised for small ``n``:
            :func:`fdpcore.noise.quantiles.choice_epsilon`).
        tau_range: the range of the candidate grid of ``tau="auto"``.

    Privacy assumptions: grid, kernel, ``tau`` (or its public range and share), ``center``, parameters and ``n``
    are public; one row per privacy unit; replace-one adjacency.

    >>> rng = np.random.default_rng(2)
    >>> x = rng.normal(size=(300, 20)) * 0.2
    >>> r = release_covariance(x, np.linspace(0, 1, 20), epsilon=1.0, tau=1.0,
    ...                        kernel={"name": "matern", "nu": 1.5, "rho": 0.1}, secure=False, rng=rng)
    >>> r.surfaces.shape, r.plan.sensitivity_formula
    ((1, 20, 20), 'sensitivity.cov.public_center@1')
    >>> a = release_covariance(x, np.linspace(0, 1, 20), epsilon=1.0, tau="auto",
    ...                        kernel={"name": "matern", "nu": 1.5, "rho": 0.1}, secure=False, rng=rng)
    >>> [s["name"] for s in a.plan.budget_splits], a.plan.tau == a.plan.public_choices[0].value
    (['tau', 'covariance'], True)
    """
    grid = t if isinstance(t, Grid) else grid_from_nodes(t)
    x = _validate.finite_matrix("curves", curves, grid.size)
    if centering == "public":
        if center is not None:
            c = np.asarray(center, dtype=np.float64)
            if c.shape != (grid.size,) or not np.all(np.isfinite(c)):
                raise DomainError(f"center (shape {c.shape}) must be a finite curve on the grid ({grid.size} values)")
            x = x - c
    elif center is not None:
        raise PrivacyParameterError("center is only used with centering 'public'")
    elif centering not in CENTERINGS:
        raise DomainError(f"centering ({centering!r}) must be one of {sorted(CENTERINGS)}")
    n = x.shape[0]

    def plan_at(radius: float, choices: tuple[PublicChoice, ...]) -> CovariancePlan:  # public inputs only
        return plan_covariance_release(grid, kernel, n=n, tau=radius, epsilon=epsilon, centering=centering, eta=eta,
                                       psi=psi, tuning=tuning, secure=secure, signal_fraction=signal_fraction,
                                       public_choices=choices)

    # x holds exactly the records the clip applies to: centred (public) or raw (sample_mean)
    plan = plan_with_tau(tau, x, grid, plan_at, summary="covariance", epsilon=epsilon, tau_share=tau_share,
                         tau_range=tau_range, draws=draws,
                         unit_noise=lambda ch: (math.sqrt(plan_at(1.0, ch).expected_sq_l2_error), None))
    clipped, _ = clip_l2(x, grid.weights, plan.tau)
    z = summarise_covariance(clipped, plan)
    return CovarianceRelease(draw_covariance_release(plan, z, draws=draws, rng=rng), plan, bool(psd))
