"""Privacy-safe selection of tuning parameters (MATH.md §5.1, PSS).

PSS picks ``(eta, psi)`` from ``n``, ``epsilon`` and the kernel's decay rate
``beta`` only — all public — so the choice costs no privacy budget. The constants
follow the constant-1 convention of MATH.md §2.4 (trace-normalised kernel, tau = 1).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fdpcore import _validate
from fdpcore._typing import ArrayLike, NDArrayFloat
from fdpcore.errors import DomainError

__all__ = [
    "DEFAULT_RULES",
    "DEFAULT_SIGNAL_FRACTION",
    "A_PRIORI_SIGNAL_FRACTION",
    "SIGNAL_DEFAULT_FORMULA",
    "SIGNAL_STATED_FORMULA",
    "default_signal_fraction",
    "stated_signal_fraction",
    "PSS_RULES",
    "RISK_ETAS",
    "MEAN_PRIOR_DECAY",
    "RISK_PRIORS",
    "RISK_PRIOR_FORMULAS",
    "RISK_RULES",
    "PSS_RULES_BY_ESTIMATOR",
    "PssChoice",
    "pss_bernstein",
    "pss_frl",
    "pss_iclp_ar",
    "pss_iclp_qr",
    "pss_mean",
    "prior_sq_bias",
    "prior_weights",
    "risk_prior_iclp_qr",
    "smooth_prior_power",
    "risk_prior_search",
]

#: Free-privacy margin varsigma added to the boundary eta (MATH.md §5.1).
FREE_MARGIN = 0.25

#: PSS rules for ICLP-QR: name -> (formula id, description).
PSS_RULES: dict[str, str] = {
    "exact_balanced": "eta = 1 + 1/beta, psi = 1/(n eps^2): privacy error of the order of 1/n with the exact sensitivity",
    "exact_free": "eta = 1 + 1/beta + 0.25, psi = 1/n: privacy error o(1/n) with the exact sensitivity",
    "paper_balanced": "eta = 1 + 2/beta, psi = 1/(n eps^2): [ICLP-v2] Cor. 1 balanced choice",
    "paper_free": "eta = 1 + 2/beta + 0.25, psi = 1/n: [ICLP-v2] Cor. 1 free-privacy choice",
}


#: PSS rules for FRL (MATH.md §5.1): name -> description.
FRL_RULES: dict[str, str] = {
    "exact": "M = floor((n eps^2)^(1/2)), clipped to [1, |J|]: privacy term M^2/(n eps)^2 of the exact sensitivity",
    "paper": "M = floor((n eps^2)^(1/3)), clipped to [1, |J|]: the eps-aware form of [ICLP-v2] Cor. 1 (paper sensitivity)",
}

#: PSS rules for ICLP-AR (MATH.md §4.2 corrected rates, §5.1).
AR_RULES: dict[str, str] = {
    "derived_l1": "eta = 2 + 4/beta, psi = (n eps^2)^(-eta beta / (2 (beta + 2))): MATH.md §5.1 default (l1 form)",
    "tightened_l2": "eta = 2 + 2/beta, psi = (n eps^2)^(-eta beta / (2 (beta + 1))): the same balance with the l2 sensitivity",
}

#: PSS rule for the Bernstein lattice (derived here; MATH.md gives no rate for it).
BERNSTEIN_RULES: dict[str, str] = {
    "derived_c2": "k = round((n eps)^(4/7)): balances the C^2 bias k^-2 with the privacy term k^(3/2)/(n eps)^2",
}

#: Risk-based rule for ICLP-QR and GP (uses the kernel's eigenvalues, tau, n and epsilon; no data).
RISK_RULES: dict[str, str] = {
    "risk_prior": ("(eta, psi) minimising the prior risk s^2 sum_j (psi/(lambda_j^eta+psi))^2 lambda_j / tr C "
                   "+ E||noise||^2 with the signal scale s = signal_fraction * tau (default 0.5)"),
}

#: Default public signal scale of ``risk_prior`` as a fraction of ``tau``: the mean of records of norm at
#: most ``tau`` has norm at most ``tau``; half of it is the prior's centre (log-scale midpoint of the
#: plausible range ``[tau/4, tau]`` for centred data), and the rule is flat within a factor 2 of it.
DEFAULT_SIGNAL_FRACTION = 0.5

#: A mean's default signal scale when ``tau`` is the a-priori bound of ``tau: auto`` (``n * epsilon`` too small to buy
#: it: ``tuning.tau.a_priori_fallback@2``): a tenth of the bound (``tuning.risk.signal_default@1``). The bound holds
#: every value within ``value_offset +- value_scale``, not a typical record, so the mean is usually far inside it:
#: on nine real panels nobody tuned for, the records' median norm was 0.09-0.48 of it and the mean's norm smaller.
A_PRIORI_SIGNAL_FRACTION = 0.1

#: The formula id of :func:`default_signal_fraction` (recorded in a manifest whose config left the scale unset).
SIGNAL_DEFAULT_FORMULA = "tuning.risk.signal_default@1"


def default_signal_fraction(a_priori_tau: bool) -> float:
    """A mean's default prior signal scale of ``risk_prior``, as a fraction of ``tau`` (``tuning.risk.signal_default@1``).

    ``DEFAULT_SIGNAL_FRACTION`` (0.5) of a ``tau`` that is public or bought as a DP quantile of the records' norms;
    ``A_PRIORI_SIGNAL_FRACTION`` (0.1) where ``tau: auto`` bought nothing (``a_priori_tau``: ``n * epsilon`` below the
    quantile's floor) and ``tau`` is the a-priori upper end of its range, which holds every value within
    ``value_offset +- value_scale``, not a typical record (docs/proofs/tuning.risk.signal_default@1.md). Public inputs.

    >>> default_signal_fraction(False), default_signal_fraction(True)
    (0.5, 0.1)
    """
    return A_PRIORI_SIGNAL_FRACTION if a_priori_tau else DEFAULT_SIGNAL_FRACTION


#: The formula id of :func:`stated_signal_fraction` (recorded in a manifest whose config stated ``signal_rms``).
SIGNAL_STATED_FORMULA = "tuning.risk.signal_stated@1"


def stated_signal_fraction(signal_rms: float, *, tau: float, domain_length: float) -> float:
    """The prior signal scale, as a fraction of ``tau``, of a mean whose size is known a priori (``tuning.risk.signal_stated@1``).

    ``signal_rms`` is a PUBLIC statement about the mean curve: its root-mean-square distance from ``value_offset`` (or
    from the public reference curve) over ``time_domain``, in units of ``value_scale``. On the grid domain ``T`` of
    length ``domain_length`` that is a mean of L2 norm ``m = signal_rms * sqrt(|T|)`` in the release's rescaled units;
    the fraction is ``min(1, m / tau)`` (a mean of clipped records has norm at most ``tau``). ``tau`` is public: a
    number in the config, the a-priori bound, or the DP quantile ``tau: auto`` released, so this is post-processing
    (docs/proofs/tuning.risk.signal_stated@1.md). Unlike a fraction of ``tau``, the statement keeps its meaning
    whatever ``tau`` the release ends up with.

    >>> stated_signal_fraction(0.5, tau=1.0, domain_length=1.0), stated_signal_fraction(0.5, tau=0.25, domain_length=1.0)
    (0.5, 1.0)
    >>> round(stated_signal_fraction(0.1, tau=2.0, domain_length=4.0), 6)
    0.1
    """
    rms = _validate.positive_finite("signal_rms", signal_rms, privacy=False)
    t = _validate.positive_finite("tau", tau, privacy=False)
    length = _validate.positive_finite("domain_length", domain_length, privacy=False)
    return min(1.0, rms * math.sqrt(length) / t)

#: Priors of ``risk_prior`` for the mean's coefficients, ``E mu_j^2 = s^2 w_j`` with ``sum_j w_j = 1``:
#: ``paths`` ``w ~ lambda`` (as rough as the kernel's sample paths), ``rkhs`` ``w ~ lambda^2`` (``mu = C^(1/2) g``,
#: in the kernel's RKHS as the papers assume, MATH.md §4.3), ``mixture`` half of each (``prior@1``'s), and
#: ``smooth`` ``w ~ lambda^a`` with ``a = smooth_prior_power(beta)`` (the mean's default since session 29,
#: ``tuning.risk.iclp_qr.prior@2``: a prior smoothness of the mean that does not follow the kernel's).
RISK_PRIORS = ("paths", "rkhs", "mixture", "smooth")

#: The ``smooth`` prior's energy decay in 1-D: ``E mu_j^2 ~ j^-MEAN_PRIOR_DECAY`` (``tuning.risk.iclp_qr.prior@2``).
#: A mean is an average of n curves, smoother than each: as smooth as the RKHS of a Matérn-3/2 kernel (``lambda^2``,
#: ``j^-8``), whatever kernel the release's noise uses; the power is kept between the kernel's paths and its RKHS.
MEAN_PRIOR_DECAY = 8.0

#: The ``eta`` values ``risk_prior`` searches (all feasible for trace-class kernels, MATH.md §4.3).
RISK_ETAS = (1.0, 1.25, 1.5, 2.0, 2.5, 3.0)

#: The ``psi`` values ``risk_prior`` searches: 10^(k/8) for k = -128 .. 16.
RISK_PSIS = tuple(10.0 ** (k / 8.0) for k in range(-128, 17))

#: PSS rules per estimator; GP-ADP uses the ICLP-QR rules (MATH.md §5.1).
PSS_RULES_BY_ESTIMATOR: dict[str, dict[str, str]] = {
    "iclp_qr": {**PSS_RULES, **RISK_RULES},
    "gp": {**PSS_RULES, **RISK_RULES},
    "iclp_ar": AR_RULES,
    "frl": FRL_RULES,
    "bernstein": BERNSTEIN_RULES,
}

#: Default rule per estimator: ``risk_prior`` for ICLP-QR and GP (its error falls as epsilon grows), else
#: the tightened PSS rule.
DEFAULT_RULES: dict[str, str] = {
    "iclp_qr": "risk_prior", "gp": "risk_prior", "iclp_ar": "tightened_l2", "frl": "exact",
    "bernstein": "derived_c2",
}


@dataclass(frozen=True)
class PssChoice:
    """A PSS choice: the parameters and the formula id that produced them.

    ``eta``/``psi`` are set for ICLP-QR, GP and ICLP-AR; ``n_basis`` (M) for FRL;
    ``lattice_k`` for Bernstein; the others are ``None``.
    """

    eta: float | None
    psi: float | None
    rule: str
    formula_id: str
    beta: float
    n_basis: int | None = None
    lattice_k: int | None = None


def pss_iclp_qr(rule: str, *, beta: float, n: int, epsilon: float) -> PssChoice:
    """PSS values of ``(eta, psi)`` for ICLP-QR (formula ``tuning.pss.iclp_qr.<rule>@1``, MATH.md §5.1).

    .. math:: \\text{exact\\_balanced: }\\eta = 1 + 1/\\beta,\\ \\psi = (n\\epsilon^2)^{-1}

    Privacy assumptions: ``beta`` comes from the kernel and grid only; ``n`` is public.

    >>> c = pss_iclp_qr("exact_balanced", beta=4.0, n=100, epsilon=1.0)
    >>> (c.eta, c.psi)
    (1.25, 0.01)
    """
    beta = _validate.positive_finite("beta", beta, privacy=False)
    n = _validate.positive_int("n", n)
    epsilon = _validate.positive_finite("epsilon", epsilon)
    if rule in RISK_RULES:
        raise DomainError(f"tuning.rule ({rule!r}) needs the kernel's eigenvalues: use risk_prior_iclp_qr")
    if rule not in PSS_RULES:
        raise DomainError(f"tuning.rule ({rule!r}) must be one of {sorted(PSS_RULES)}")
    base = 1.0 + (1.0 if rule.startswith("exact") else 2.0) / beta
    if rule.endswith("balanced"):
        eta, psi = base, 1.0 / (n * epsilon**2)
    else:
        eta, psi = base + FREE_MARGIN, 1.0 / n
    return PssChoice(eta, psi, rule, f"tuning.pss.iclp_qr.{rule}@1", beta)


def pss_frl(rule: str, *, n: int, epsilon: float, n_kept: int) -> PssChoice:
    """PSS value of ``M`` for FRL (formula ``tuning.pss.frl.<rule>@1``, MATH.md §5.1).

    .. math:: \\text{exact: } M = \\lfloor (n\\epsilon^2)^{1/2} \\rfloor,\\qquad
              \\text{paper: } M = \\lfloor (n\\epsilon^2)^{1/3} \\rfloor,\\qquad M \\in [1, |\\mathcal J|]

    >>> pss_frl("exact", n=508, epsilon=1.0, n_kept=48).n_basis, pss_frl("paper", n=508, epsilon=1.0, n_kept=48).n_basis
    (22, 7)
    """
    n = _validate.positive_int("n", n)
    epsilon = _validate.positive_finite("epsilon", epsilon)
    n_kept = _validate.positive_int("n_kept", n_kept)
    if rule not in FRL_RULES:
        raise DomainError(f"tuning.rule ({rule!r}) must be one of {sorted(FRL_RULES)} for frl")
    power = 0.5 if rule == "exact" else 1.0 / 3.0
    # a tiny relative slack so that exact cubes/squares are not floored one below
    m = int(math.floor((n * epsilon**2) ** power * (1 + 1e-12)))
    return PssChoice(None, None, rule, f"tuning.pss.frl.{rule}@1", float("nan"), n_basis=min(max(m, 1), n_kept))


def pss_iclp_ar(rule: str, *, beta: float, n: int, epsilon: float) -> PssChoice:
    """PSS values of ``(eta, psi)`` for ICLP-AR (formula ``tuning.pss.iclp_ar.<rule>@1``, MATH.md §4.2, §5.1).

    .. math:: \\text{derived\\_l1: }\\eta = 2 + 4/\\beta,\\ \\psi = (n\\epsilon^2)^{-\\eta\\beta/(2(\\beta+2))};\\quad
              \\text{tightened\\_l2: }\\eta = 2 + 2/\\beta,\\ \\psi = (n\\epsilon^2)^{-\\eta\\beta/(2(\\beta+1))}

    >>> c = pss_iclp_ar("tightened_l2", beta=4.0, n=100, epsilon=1.0)
    >>> (c.eta, round(c.psi, 12))
    (2.5, 0.01)
    """
    beta = _validate.positive_finite("beta", beta, privacy=False)
    n = _validate.positive_int("n", n)
    epsilon = _validate.positive_finite("epsilon", epsilon)
    if rule not in AR_RULES:
        raise DomainError(f"tuning.rule ({rule!r}) must be one of {sorted(AR_RULES)} for iclp_ar")
    c = 4.0 if rule == "derived_l1" else 2.0
    eta = 2.0 + c / beta
    psi = (n * epsilon**2) ** (-eta * beta / (2.0 * (beta + c / 2.0)))
    return PssChoice(eta, psi, rule, f"tuning.pss.iclp_ar.{rule}@1", beta)


def pss_bernstein(rule: str, *, n: int, epsilon: float) -> PssChoice:
    """PSS lattice resolution ``k`` for the Bernstein mean (formula ``tuning.pss.bernstein.derived_c2@1``).

    .. math:: k = \\operatorname{round}\\big((n\\epsilon)^{4/7}\\big)

    Derived (not in the papers): for a ``C^2`` mean the squared bias is ``O(k^-2)`` (MATH.md §4.5,
    approximation error) and the privacy error ``(2 Delta_1^2/eps^2) sum int b^2 ~ k^(3/2)/(n eps)^2``
    because ``Delta_1 = 2BL/n`` and ``sum_nu int b_nu^2 ~ sqrt(pi/(4k))``; equating them gives the rule.

    >>> pss_bernstein("derived_c2", n=508, epsilon=1.0).lattice_k
    35
    """
    n = _validate.positive_int("n", n)
    epsilon = _validate.positive_finite("epsilon", epsilon)
    if rule not in BERNSTEIN_RULES:
        raise DomainError(f"tuning.rule ({rule!r}) must be one of {sorted(BERNSTEIN_RULES)} for bernstein")
    k = max(1, round((n * epsilon) ** (4.0 / 7.0)))
    return PssChoice(None, None, rule, f"tuning.pss.bernstein.{rule}@1", float("nan"), lattice_k=k)


def pss_mean(estimator: str, rule: str, *, beta: float, n: int, epsilon: float, n_kept: int) -> PssChoice:
    """Dispatch to the PSS rule of ``estimator`` (GP-ADP uses the ICLP-QR rules, MATH.md §5.1).

    >>> pss_mean("gp", "exact_balanced", beta=4.0, n=100, epsilon=1.0, n_kept=30).formula_id
    'tuning.pss.iclp_qr.exact_balanced@1'
    """
    if estimator in ("iclp_qr", "gp"):
        return pss_iclp_qr(rule, beta=beta, n=n, epsilon=epsilon)
    if estimator == "iclp_ar":
        return pss_iclp_ar(rule, beta=beta, n=n, epsilon=epsilon)
    if estimator == "frl":
        return pss_frl(rule, n=n, epsilon=epsilon, n_kept=n_kept)
    if estimator == "bernstein":
        return pss_bernstein(rule, n=n, epsilon=epsilon)
    raise DomainError(f"estimator ({estimator!r}) must be one of {sorted(PSS_RULES_BY_ESTIMATOR)}")


def smooth_prior_power(beta: float) -> float:
    r"""The power ``a`` of the ``smooth`` prior's weights ``lambda^a`` for a kernel of decay rate ``beta`` (prior@2).

    .. math:: a=\min\big(2,\ \max(1,\ D/\beta)\big),\qquad D = 8

    so that ``lambda_j^a ~ j^-D`` in 1-D (``lambda_j ~ j^-beta``, :func:`fdpcore.basis.kernels.decay_rate`): Matérn-1/2,
    Brownian and Matérn-3/2 give 2 (their RKHS), Matérn-5/2 4/3, a Gaussian kernel 1 (its paths are smoother still).

    >>> smooth_prior_power(4.0), round(smooth_prior_power(6.0), 4), smooth_prior_power(2.0), smooth_prior_power(40.0)
    (2.0, 1.3333, 2.0, 1.0)
    """
    beta = _validate.positive_finite("beta", beta, privacy=False)
    return float(min(2.0, max(1.0, MEAN_PRIOR_DECAY / beta)))


def prior_weights(eigenvalues: ArrayLike, prior: str, power: float | None = None) -> NDArrayFloat:
    """The weights ``w_j`` (summing to 1) of a ``risk_prior`` prior (:data:`RISK_PRIORS`); ``smooth`` needs ``power``.

    >>> prior_weights([0.5, 0.25], "smooth", power=2.0).tolist() == prior_weights([0.5, 0.25], "rkhs").tolist()
    True
    """
    lam = np.asarray(eigenvalues, dtype=np.float64)
    if prior not in RISK_PRIORS:
        raise DomainError(f"prior ({prior!r}) must be one of {sorted(RISK_PRIORS)}")
    if prior == "smooth":
        if power is None:
            raise DomainError("prior 'smooth' needs its power (smooth_prior_power of the kernel's decay rate)")
        a = _validate.positive_finite("power", power, privacy=False)
        return np.asarray(lam**a / float(np.sum(lam**a)), dtype=np.float64)
    paths, rkhs = lam / float(lam.sum()), lam**2 / float(np.sum(lam**2))
    return np.asarray({"paths": paths, "rkhs": rkhs, "mixture": 0.5 * paths + 0.5 * rkhs}[prior], dtype=np.float64)


def prior_sq_bias(eigenvalues: ArrayLike, eta: float, psi: ArrayLike, *, signal: float, prior: str = "mixture",
                  power: float | None = None) -> Any:
    r"""Expected squared shrinkage bias of ICLP-QR under a ``risk_prior`` prior (``tuning.risk.iclp_qr.prior@1``, ``@2``).

    .. math:: s^2\sum_j\Big(\frac{\psi}{\lambda_j^\eta+\psi}\Big)^2 w_j,\qquad
              w=\tfrac12\frac{\lambda}{\mathrm{tr}\,C}+\tfrac12\frac{\lambda^2}{\sum\lambda^2}\ (\text{mixture}),\quad
              w=\frac{\lambda^a}{\sum\lambda^a}\ (\text{smooth}, a=\texttt{power})

    for a mean with ``E mu_j^2 = s^2 w_j`` (``E||mu||^2 = s^2``). A public function of the kernel, ``eta``, ``psi``
    and the prior signal norm ``s``: the smoothing term that :func:`risk_prior_iclp_qr` balances against the
    noise, and what ``fdp plan`` adds to the noise to state the error of a typical release. ``psi`` may be an
    array (one value per entry).

    >>> lam = [0.5, 0.3, 0.15, 0.05]
    >>> float(prior_sq_bias(lam, 1.0, 1e-12, signal=1.0)) < 1e-20 < float(prior_sq_bias(lam, 1.0, 1.0, signal=1.0)) < 1
    True
    """
    lam = np.asarray(eigenvalues, dtype=np.float64)
    weights = prior_weights(lam, prior, power)
    p = np.asarray(psi, dtype=np.float64)[..., None]
    return signal * signal * np.sum((p / (lam**eta + p)) ** 2 * weights, axis=-1)


def risk_prior_iclp_qr(
    eigenvalues: ArrayLike,
    *,
    n: int,
    noise_factor: float,
    sensitivity_norm: str = "l2",
    signal_fraction: float = DEFAULT_SIGNAL_FRACTION,
    etas: tuple[float, ...] = RISK_ETAS,
    psis: tuple[float, ...] = RISK_PSIS,
    prior: str = "mixture",
    power: float | None = None,
) -> PssChoice:
    """``(eta, psi)`` minimising a prior risk of ICLP-QR / GP (``tuning.risk.iclp_qr.prior@1``; ``@2`` with ``smooth``).

    .. math::
        R(\\eta,\\psi) = s^2\\sum_j\\Big(\\frac{\\psi}{\\lambda_j^\\eta+\\psi}\\Big)^2\\frac{\\lambda_j}{\\mathrm{tr}\\,C}
        + \\kappa\\,\\Big(\\frac{2}{n}\\Big)^2 N(a)^2\\,\\mathrm{tr}\\,C,\\qquad
        a_j = \\frac{\\lambda_j^{\\eta-1/2}}{\\lambda_j^\\eta+\\psi}

    computed at ``tau = 1`` (both terms scale with ``tau^2``, so the choice does not depend on ``tau``).
    The first term is the expected squared shrinkage bias of ICLP-QR (MATH.md §4.3) when the mean's
    coefficients have the prior ``E mu_j^2 = s^2 w_j`` (``E||mu||^2 = s^2``, ``s = signal_fraction * tau``,
    ``w`` from :data:`RISK_PRIORS`; shown above for ``paths``, ``mixture`` averages it with
    ``lambda_j^2 / sum lambda^2``, ``smooth`` is ``lambda^power`` normalised — the mean's default, formula ``@2``,
    with ``power = smooth_prior_power(beta)``); the second is the expected squared noise of the release with
    ``N = ||.||_2`` (Laplace ICLP: exact l2 sensitivity, ``kappa = 2/epsilon^2``) or ``N = max`` (GP:
    Cameron-Martin sensitivity, ``kappa = (sigma/Delta)^2``). More budget shrinks the second term, so the
    minimiser moves to smaller ``psi`` and the risk falls as epsilon grows. Public inputs only: the
    eigenvalues (kernel and grid), ``n``, ``epsilon`` through ``noise_factor``, and the fixed prior scale.

    Privacy assumptions: ``noise_factor`` is computed from epsilon/delta only; nothing here reads data.

    >>> lam = [0.5, 0.3, 0.15, 0.05]
    >>> c1 = risk_prior_iclp_qr(lam, n=500, noise_factor=2.0)
    >>> c2 = risk_prior_iclp_qr(lam, n=500, noise_factor=2.0 / 100)
    >>> c2.psi < c1.psi, c1.formula_id
    (True, 'tuning.risk.iclp_qr.prior@1')
    """
    lam = np.asarray(eigenvalues, dtype=np.float64)
    if lam.ndim != 1 or lam.shape[0] == 0 or not np.all(lam > 0) or not np.all(np.isfinite(lam)):
        raise DomainError("eigenvalues must be a non-empty 1-D array of positive finite numbers")
    n = _validate.positive_int("n", n)
    kappa = _validate.positive_finite("noise_factor", noise_factor)
    s = _validate.positive_finite("signal_fraction", signal_fraction, privacy=False)
    if sensitivity_norm not in ("l2", "max"):
        raise DomainError(f"sensitivity_norm ({sensitivity_norm!r}) must be 'l2' or 'max'")
    tr = float(lam.sum())
    prior_weights(lam, prior, power)  # refuses an unknown prior, or smooth without its power
    psi = np.asarray(psis, dtype=np.float64)[:, None]
    best: tuple[float, float, float] | None = None
    for eta in etas:
        le = lam[None, :] ** eta
        bias = prior_sq_bias(lam, eta, psi[:, 0], signal=s, prior=prior, power=power)
        a = lam[None, :] ** (eta - 0.5) / (le + psi)
        size = np.sqrt(np.sum(a * a, axis=1)) if sensitivity_norm == "l2" else np.max(a, axis=1)
        risk = bias + kappa * (2.0 / n) ** 2 * size**2 * tr
        k = int(np.argmin(risk))
        if best is None or risk[k] < best[0]:
            best = (float(risk[k]), float(eta), float(psi[k, 0]))
    if best is None:
        raise DomainError("etas must not be empty")
    return PssChoice(best[1], best[2], "risk_prior", RISK_PRIOR_FORMULAS[prior], float("nan"))


#: The formula id of ``risk_prior`` per prior: ``smooth`` (the mean's default) is ``@2``.
RISK_PRIOR_FORMULAS = {"paths": "tuning.risk.iclp_qr.prior@1", "rkhs": "tuning.risk.iclp_qr.prior@1",
                       "mixture": "tuning.risk.iclp_qr.prior@1", "smooth": "tuning.risk.iclp_qr.prior@2"}


def risk_prior_search(
    bias_eigenvalues: ArrayLike,
    noise_sq: Callable[[float, float], float],
    *,
    signal_fraction: float = DEFAULT_SIGNAL_FRACTION,
    etas: tuple[float, ...] = RISK_ETAS,
    psis: tuple[float, ...] = RISK_PSIS[::2],
) -> PssChoice:
    """The ``risk_prior`` rule for any ICLP-QR shrinkage (formula ``tuning.risk.iclp_qr.prior@1``).

    .. math:: (\\hat\\eta,\\hat\\psi)=\\arg\\min\\ s^2\\sum_k\\Big(\\frac{\\psi}{\\mu_k^\\eta+\\psi}\\Big)^2
              \\frac{\\mu_k}{\\sum\\mu}+N(\\eta,\\psi)

    ``mu_k`` are the shrunk operator's eigenvalues (``lambda_j lambda_l`` over all ``(j, l)`` for a covariance
    surface, MATH.md §6; ``lambda_j`` for each FoSR cross-moment curve, §7) and ``N`` the release's expected
    squared L2 noise at unit clip radius (a public function of ``(eta, psi)``: sensitivity and calibration).
    The prior and the argument are those of :func:`risk_prior_iclp_qr` (``s = signal_fraction`` times the
    bound of the target at unit radius). Public inputs only.

    >>> c = risk_prior_search([0.6, 0.3, 0.1], lambda eta, psi: 1e-4 / psi)
    >>> c.rule, c.eta in RISK_ETAS
    ('risk_prior', True)
    """
    mu = np.asarray(bias_eigenvalues, dtype=np.float64)
    if mu.ndim != 1 or mu.shape[0] == 0 or not np.all(mu > 0) or not np.all(np.isfinite(mu)):
        raise DomainError("bias_eigenvalues must be a non-empty 1-D array of positive finite numbers")
    s = _validate.positive_finite("signal_fraction", signal_fraction, privacy=False)
    tr = float(mu.sum())
    psi = np.asarray(psis, dtype=np.float64)
    best: tuple[float, float, float] | None = None
    for eta in etas:
        le = mu[None, :] ** eta
        bias = s * s * np.sum((psi[:, None] / (le + psi[:, None])) ** 2 * mu[None, :], axis=1) / tr
        risk = bias + np.array([noise_sq(float(eta), float(v)) for v in psi])
        k = int(np.argmin(risk))
        if best is None or risk[k] < best[0]:
            best = (float(risk[k]), float(eta), float(psi[k]))
    if best is None:
        raise DomainError("etas must not be empty")
    return PssChoice(best[1], best[2], "risk_prior", "tuning.risk.iclp_qr.prior@1", float("nan"))
