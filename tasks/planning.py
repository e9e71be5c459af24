"""Plans and their accuracy from public inputs only, shared by the release tasks and ``fdp plan``.

Nothing here imports Prefect or reads data values: a plan needs the config and ``n`` (public under
the replace-one adjacency). The Prefect tasks (``plan_release``, ``plan_covariance``, ``plan_fosr``,
``plan_fpca``, ``plan_kde``, ``plan_erm``) are thin wrappers of the ``*_plan`` functions below, and the
manifests' ``noise.expected_l2_error`` and ``band_half_width_max`` come from :func:`expected_l2_error`
and :func:`noise_band`, so ``fdp plan`` states exactly the numbers the release will publish
(MATH.md §3.5 expected error, §4 mean, §6 covariance, §7 FoSR, §8 KDE, §9 ERM, §10 FPCA).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from fdpcore.basis.grids import Grid, make_grid
from fdpcore.basis.kernels import decay_rate, kernel_spec
from fdpcore.errors import FdpError, PrivacyParameterError
from fdpcore.io.eigencache import enable_disk_cache
from fdpcore.io.tables import count_units
from fdpcore.ledger import Ledger
from fdpcore.noise.iclp import whitened_pointwise_band
from fdpcore.noise.quantiles import PublicChoice, default_tau_range, epsilon_after_choices, summary_tau_choice
from fdpcore.privacy.tuning import A_PRIORI_SIGNAL_FRACTION, DEFAULT_SIGNAL_FRACTION
from fdpcore.summaries.covariance import plan_covariance_release
from fdpcore.summaries.erm import plan_erm_release
from fdpcore.summaries.fosr import (
    fosr_t2_coefficient_noise,
    given_t1,
    one_hot_zero_pairs,
    plan_fosr_release,
    safe_inverse_shrinkage,
    t2_amplification,
)
from fdpcore.summaries.fpca import fpca_basis, gaussian_length_scale, plan_fpca_release, reference_on_grid
from fdpcore.summaries.kde import BandwidthChoice, plan_kde_release
from fdpcore.summaries.mean import auto_public_choices, candidate_plans, iclp_qr_shrinkage, plan_mean_release

__all__ = [
    "Accuracy", "BAND_LEVEL", "accuracy", "alignment_requirement", "alignment_rule", "auto_options", "build_plan",
    "count_config_units", "count_units_of_file", "covariance_centering_check", "covariance_plan", "curve_error_text",
    "end_gap", "erm_eta_warning", "erm_plan", "expected_l2_error", "fosr_balanced_t1", "fosr_coefficients_balanced", "fosr_plan", "fpca_plan", "grid_ends", "kde_plan", "least_epsilon",
    "mean_plan", "mean_public_choices", "noise_band", "point_axes", "point_error_text", "point_value_units",
    "public_choices", "public_reference", "release_grid", "resolution", "tau_public_choices", "tau_search_range", "unaligned_contribution",
]

#: Level of the published pointwise noise band.
BAND_LEVEL = 0.95


def release_grid(config: Any) -> Grid:
    """The public grid of a curve release config."""
    g = config.grid
    return make_grid(g.rule, size=g.size, points=g.points, domain_range=g.domain)



def public_reference(config: Any) -> Any:
    """The public reference curve a config centres its records on before clipping, rescaled on the release grid.

    The ``centering`` block of a mean, FoSR or FPCA config, or a covariance's ``centering.reference`` (kind
    ``public``); ``None`` without one (``preprocess.public_reference@1``). Public inputs only.
    """
    block = getattr(config, "centering", None)
    if config.summary == "covariance":
        block = getattr(block, "reference", None)
    if block is None:
        return None
    ds = config.dataset
    return reference_on_grid(block.time, block.value, release_grid(config), time_domain=ds.time_domain,
                             value_offset=ds.value_offset, value_scale=ds.value_scale)

def end_gap(config: Any) -> tuple[float, float]:
    """``dataset.max_end_gap`` of a curve config as ``(source time units, grid-domain units)`` (``preprocess.align_linear@2``).

    The default is one grid step, ``(b - a) / grid size`` of the public time domain ``[a, b]``: public inputs only.
    """
    ds = config.dataset
    a, b = ds.time_domain
    grid = release_grid(config)
    src = float(ds.max_end_gap) if ds.max_end_gap is not None else (b - a) / grid.size
    lo, hi = grid.domain_range
    return src, src * (hi - lo) / (b - a)


def alignment_rule(config: Any) -> str:
    """The manifest's ``alignment`` text of a curve config (formula ``preprocess.align_linear@2``)."""
    gap = end_gap(config)[0]
    return (f"preprocess.align_linear@2: linear interpolation within each curve's observed range, held at its first "
            f"(last) value over at most {gap:g} (source time units, dataset.max_end_gap) before the first (after the "
            f"last) grid point; a unit without an alignable curve contributes {unaligned_contribution(config)}")


def unaligned_contribution(config: Any, constant: str = "the zero curve (the public reference)") -> str:
    """What a unit without an alignable curve contributes: the centre its records are taken about.

    The public reference curve (``centering`` of a mean, FoSR or FPCA release, ``centering.reference`` of a
    covariance), a covariance's private-mean centre, else ``constant``: the zero curve, i.e. the constant
    ``value_offset``.
    """
    c = getattr(config, "centering", None)
    if config.summary == "covariance" and c is not None:
        if c.kind == "private_mean":
            return f"the released private mean (centering.release_id {c.release_id})"
        c = c.reference
    if c is not None and getattr(c, "source", None) is not None:
        return f"the public reference curve (centering: {c.source})"
    return constant


def grid_ends(config: Any) -> tuple[float, float, float]:
    """``(first, last, gap)``: the first and last grid points in source time units and the end gap (public)."""
    a, b = config.dataset.time_domain
    grid = release_grid(config)
    lo, hi = grid.domain_range
    first, last = (a + (float(g) - lo) * (b - a) / (hi - lo) for g in (grid.grid_points[0], grid.grid_points[-1]))
    return first, last, end_gap(config)[0]


def alignment_requirement(config: Any) -> str:
    """What a unit's readings must reach to be aligned, in source time units (public; ``fdp plan`` states it)."""
    ds = config.dataset
    a, b = ds.time_domain
    first, last, gap = grid_ends(config)
    return (f"a unit's curve is aligned when its readings reach from at most {first + gap:g} to at least {last - gap:g} "
            f"({ds.time_column}, source units: the first and last grid points {first:g} and {last:g} with "
            f"dataset.max_end_gap {gap:g}; rows outside time_domain [{a:g}, {b:g}] are ignored); a unit whose curves "
            f"do not is released as {unaligned_contribution(config)}: check this against your measurement design")


def point_axes(config: Any) -> tuple[Grid, ...]:
    """One public grid on [0, 1] per coordinate of a KDE/ERM config (a tensor grid in 2-D)."""
    return (release_grid(config),) * len(config.dataset.coordinate_columns)


def _mean_kwargs(config: Any) -> dict[str, Any]:
    t = config.tuning
    return dict(
        estimator=config.estimator, eta=t.eta, psi=t.psi, tuning=t.rule, delta=config.privacy.delta,
        n_basis=t.n_basis, calibration=config.privacy.calibration, lattice_k=t.lattice_k,
        sup_clip=config.clipping.sup_clip, select_epsilon=t.select_epsilon, non_private=t.non_private,
        signal_fraction=t.signal_fraction,  # None: the default of the tau it gets (default_signal_fraction)
        signal_rms=t.signal_rms,  # or a fraction of the tau it gets from the mean's stated size (signal_stated@1)
    )


def tau_search_range(config: Any, *, stated_mean: bool = True) -> tuple[float, float]:
    """The public search range of ``tau: auto``: the config's ``tau_range`` or ``[0.01, 1] x sqrt(|T|)``.

    A mean's stated ``tuning.signal_rms`` raises the default's lower end to that mean's norm
    (:func:`fdpcore.noise.quantiles.default_tau_range`); ``stated_mean=False``: the range without it (the scale check's
    "far below the range" count, which is about ``value_scale``).
    """
    if config.clipping.tau_range is not None:
        return tuple(config.clipping.tau_range)  # type: ignore[return-value]
    a, b = config.grid.domain
    return default_tau_range(b - a, stated_signal_rms(config) if stated_mean else None)


def stated_signal_rms(config: Any) -> float | None:
    """A mean config's ``tuning.signal_rms`` (``tuning.risk.signal_stated@1``); ``None`` when unset or not a mean."""
    return getattr(config.tuning, "signal_rms", None) if config.summary == "mean" else None


def mean_public_choices(config: Any, n: int) -> tuple[PublicChoice, ...]:
    """The public choices (``value_offset: auto``, ``tau: auto``) of a mean config, not yet drawn (no data)."""
    ds, c = config.dataset, config.clipping
    if c.tau != "auto" and ds.value_offset != "auto":
        return ()
    enable_disk_cache()
    return auto_public_choices(
        release_grid(config), config.kernel, n=n, epsilon=config.privacy.epsilon, tau_auto=c.tau == "auto",
        centre_range=ds.value_offset_range if ds.value_offset == "auto" else None, tau_share=c.tau_share,
        centre_share=ds.value_offset_share, tau_range=tau_search_range(config), **_mean_kwargs(config),
    )


def tuning_follows_tau(config: Any) -> bool:
    """Whether a config's default smoothing is re-chosen at the tau ``tau: auto`` releases (``tuning.signal_rms``).

    With a stated ``signal_rms`` the prior's fraction is ``min(1, signal_rms * sqrt(|T|) / tau)``
    (``tuning.risk.signal_stated@1``), so a bought tau changes ``(eta, psi)``: the errors ``fdp plan`` prices at
    ``tau = 1`` do not scale linearly with the tau released (trial X, F1).
    """
    return stated_signal_rms(config) is not None and config.clipping.tau == "auto"


TAU_FOLLOWS_TEXT = ("with tuning.signal_rms the smoothing is re-chosen at the tau released (signal_fraction = "
                    "signal_rms x sqrt(|T|) / tau, tuning.risk.signal_stated@1), so the error at a smaller tau is not "
                    "that figure scaled down: the release states its own")


def mean_plan(config: Any, n: int, tau: float | None = None, choices: tuple[PublicChoice, ...] | None = None) -> Any:
    """The :class:`fdpcore.summaries.mean.MeanPlan` of a mean config (pending with ``dp_select``/``pcv``).

    With ``tau: auto`` and no drawn ``tau`` the plan is priced at ``tau = 1`` (its cost and budget splits do
    not depend on ``tau``; its noise scales linearly with it); ``choices`` default to the config's
    undrawn public choices.
    """
    enable_disk_cache()  # kernel eigenbases are data-independent: reused across releases from the fdp cache dir
    radius = tau if tau is not None else config.clipping.tau
    if radius == "auto":
        radius = 1.0
    return plan_mean_release(
        release_grid(config), config.kernel, n=n, tau=radius, epsilon=config.privacy.epsilon, secure=True,
        public_choices=mean_public_choices(config, n) if choices is None else choices, **_mean_kwargs(config),
    )


def _radius(config: Any, tau: float | None) -> float:
    """The clip radius a plan is priced at: the drawn ``tau``, the config's, or 1 for an undrawn ``tau: auto``."""
    radius = tau if tau is not None else config.clipping.tau
    return 1.0 if radius == "auto" else float(radius)


def _choices(config: Any, n: int | None, choices: tuple[PublicChoice, ...] | None) -> tuple[PublicChoice, ...]:
    if choices is not None:
        return choices
    if config.clipping.tau != "auto":
        return ()
    if n is None:
        raise FdpError("tau: auto needs n to plan its split (fdp.tasks.planning.tau_public_choices)")
    return tau_public_choices(config, n)


def covariance_plan(config: Any, n: int, tau: float | None = None,
                    choices: tuple[PublicChoice, ...] | None = None) -> Any:
    """The :class:`fdpcore.summaries.covariance.CovariancePlan` of a covariance config.

    With ``tau: auto`` and no drawn ``tau`` it is priced at ``tau = 1`` (cost and splits do not depend on ``tau``;
    the noise scales with ``tau^2``); ``choices`` default to the config's undrawn public choices.
    """
    t = config.tuning
    return plan_covariance_release(
        release_grid(config), config.kernel, n=n, tau=_radius(config, tau), epsilon=config.privacy.epsilon,
        centering="sample_mean" if config.centering.kind == "sample_mean" else "public",
        eta=t.eta, psi=t.psi, tuning=t.rule, secure=True, public_choices=_choices(config, n, choices),
    )


def fosr_plan(config: Any, n: int, tau: float | None = None, choices: tuple[PublicChoice, ...] | None = None) -> Any:
    """The :class:`fdpcore.summaries.fosr.FosrPlan` of a FoSR config (``p`` counts the encoded design columns).

    ``tau`` and ``choices``: as :func:`covariance_plan` (``T2``'s noise scales linearly with ``tau_Y``).
    """
    t = config.tuning
    return plan_fosr_release(
        release_grid(config), config.kernel, n=n, n_covariates=config.n_design_columns, intercept=config.intercept,
        bound=config.covariate_bound, tau_y=_radius(config, tau), epsilon=config.privacy.epsilon,
        gamma=config.split.gamma, eta=t.eta, psi=t.psi, tuning=t.rule, floor=config.split.floor, secure=True,
        public_choices=_choices(config, n, choices), zero_pairs=fosr_zero_pairs(config),
    )


def fosr_zero_pairs(config: Any) -> tuple[tuple[int, int], ...]:
    """The entries of ``T1`` that a FoSR config's public encoding makes zero (``postprocess.fosr.structural_zeros@1``).

    Pairs of indicators of one one-hot covariate, in design order (the intercept's column 0 first), and only with
    ``covariates_within_unit: error``: then every unit takes one level, so two indicators are never both non-zero;
    with ``average`` a unit whose rows span two levels gets a share of each, and their product is not zero.
    """
    if config.covariates_within_unit != "error":
        return ()
    blocks, first = [], 1 if config.intercept else 0
    for c in config.covariates:  # design order: each covariate's columns in turn
        width = len(c.design_columns())
        if c.encoding == "one_hot":
            blocks.append(list(range(first, first + width)))
        first += width
    return one_hot_zero_pairs(blocks)


def fosr_balanced_t1(config: Any) -> Any:
    """``T1`` of a FoSR design whose covariates take their public levels at their public shares, independently, or ``None``.

    A public assumption, never the data: each category at its a-priori share (``covariates[].shares``, default equal),
    so a one-hot covariate's indicator means are those shares (a block's own products ``z_a z_b = 0``), an encoded
    covariate (e.g. ``{F: -1, M: 1}``) has the share-weighted mean and mean square of its codes, and different
    covariates are independent. ``None`` when a covariate is numeric (its distribution
    is not public). ``fdp plan`` prices the coefficient curves at it (:func:`fdpcore.summaries.fosr.given_t1`,
    ``t2_amplification``, ``safe_inverse_pass_through``).
    """
    cols: list[tuple[int, Any, Any]] = []  # (block, per-level values of this design column, the levels' shares)
    for k, c in enumerate(config.covariates):
        for _, enc in c.design_columns():
            if not isinstance(enc, dict):
                return None
            w = np.array([1.0 / len(enc) if c.shares is None else float(c.shares[key]) for key in enc])
            cols.append((k, np.array([float(v) for v in enc.values()]), w))
    q = len(cols)
    m = np.empty((q, q))
    for a, (ka, va, wa) in enumerate(cols):
        for b, (kb, vb, wb) in enumerate(cols):
            m[a, b] = float(np.sum(wa * va * vb)) if ka == kb else float(np.sum(wa * va)) * float(np.sum(wb * vb))
    if not config.intercept:
        return m
    means = np.array([float(np.sum(w * v)) for _, v, w in cols])
    return np.block([[np.ones((1, 1)), means[None, :]], [means[:, None], m]])


def fosr_coefficients_balanced(config: Any, plan: Any) -> dict[str, Any] | None:
    """FoSR's coefficient curves priced at a balanced design of the public levels (``fosr_balanced_t1``), or ``None``.

    Public inputs only: ``T2``'s pair the release would choose for that ``T1`` (``tuning.fosr.t2_given_t1@1``), the
    expected L2 noise of the coefficient curves ``sqrt(A E||T2 noise||^2)`` (T2's noise through the inverse; T1's own
    noise and every bias excluded) in source units, each coefficient's part of it (``coefficient_t2_noise``: the T2
    part of ``accuracy.fosr.coefficient_noise@1`` at that ``T1``), and what the safe inverse's floor keeps of each
    coefficient.
    """
    t1 = fosr_balanced_t1(config)
    if t1 is None:
        return None
    drawn = given_t1(plan, t1)
    amp = t2_amplification(t1, plan.floor)
    noise_sq = amp * drawn.expected_sq_l2_error_t2
    shrink = safe_inverse_shrinkage(t1, plan.floor)
    lost = float(np.sum((np.eye(len(t1)) - shrink) ** 2))  # ||I - S||_F^2: the floor's bias of unit-size coefficients
    s = plan.signal_fraction * plan.tau_y
    bias_sq = s * s * lost + (drawn.prior_sq_l2_risk - drawn.expected_sq_l2_error_t2)  # floor, then smoothing
    scale = config.dataset.value_scale
    kept = [round(float(v), 4) for v in np.clip(np.diag(shrink), 0.0, 1.0)]
    each = np.sqrt(fosr_t2_coefficient_noise(drawn, t1)) * scale  # T2's part, per coefficient
    return {"expected_l2_error": math.sqrt(noise_sq) * scale, "expected_l2_error_with_bias":
            math.sqrt(noise_sq + bias_sq) * scale, "t2_amplification": amp, "pass_through": kept,
            "coefficient_t2_noise": [float(v) for v in each],
            "shares": "public" if any(c.shares is not None for c in config.covariates) else "equal"}


def fpca_plan(config: Any, n: int | None = None, tau: float | None = None,
              choices: tuple[PublicChoice, ...] | None = None) -> Any:
    """The :class:`fdpcore.summaries.fpca.FpcaPlan` of an FPCA config.

    ``n`` does not enter the mechanism; only the split and level of ``tau: auto`` need it. ``tau`` and
    ``choices``: as :func:`covariance_plan`.
    """
    grid = release_grid(config)
    spec = config.basis
    ell = spec.length_scale or gaussian_length_scale(grid, spec.n_basis, spec.explained)
    basis = fpca_basis(grid, {"name": spec.kernel, "length_scale": ell}, spec.n_basis)
    c = None if config.base_measure.prior_strength == "paper" else float(config.base_measure.prior_strength)
    return plan_fpca_release(basis, n_components=config.n_components, epsilon=config.privacy.epsilon,
                             tau=_radius(config, tau), prior_strength=c, burn_in=config.sampler.burn_in,
                             method=config.sampler.method, sampler=config.sampler.kind,
                             public_choices=_choices(config, n, choices))


def tau_public_choices(config: Any, n: int) -> tuple[PublicChoice, ...]:
    """``tau: auto`` of a covariance, FoSR or FPCA config, not yet drawn: its split, candidates and level (no data).

    :func:`fdpcore.noise.quantiles.summary_tau_choice` (the rule the facades use too) with ``clipping.tau_share``, the
    config's search range and the release's own expected noise at ``tau = 1`` (its plan with the same split).
    """
    clip = config.clipping
    if clip.tau != "auto":
        return ()
    enable_disk_cache()
    summary = config.summary

    def unit_noise(provisional: tuple[PublicChoice, ...]) -> tuple[float, float | None]:
        if summary == "covariance":
            return math.sqrt(covariance_plan(config, n, 1.0, provisional).expected_sq_l2_error), None
        unit = fosr_plan(config, n, 1.0, provisional)
        return math.sqrt(unit.expected_sq_l2_error_t2), unit.x_bound

    return (summary_tau_choice(summary, n, config.privacy.epsilon, tau_share=clip.tau_share,
                               tau_range=tau_search_range(config), unit_noise=unit_noise),)


def public_choices(config: Any, n: int) -> tuple[PublicChoice, ...]:
    """The undrawn public choices of any curve release config (the mean's, or ``tau: auto`` of the others).

    They must leave a positive part of ``privacy.epsilon`` for the summary itself; when ``n`` is too small for
    that at the config's epsilon, the refusal states the least epsilon that suffices (:func:`least_epsilon`).
    """
    with _refuse_too_small_epsilon(config, n):
        choices = _public_choices(config, n)
        epsilon_after_choices(config.privacy.epsilon, choices)
    return choices


def _public_choices(config: Any, n: int) -> tuple[PublicChoice, ...]:
    if config.summary == "mean":
        return mean_public_choices(config, n)
    return tau_public_choices(config, n)


def kde_plan(config: Any, n: int, choices: tuple[PublicChoice, ...] | None = None) -> Any:
    """The :class:`fdpcore.summaries.kde.PointPlan` of a KDE config.

    With ``bandwidth: auto`` and no drawn choice the plan holds the undrawn choice (its split, from public inputs)
    and is priced at the ``normal_reference`` bandwidth: its cost and budget splits do not depend on the bandwidth.
    ``choices`` is the drawn choice (:func:`fdpcore.summaries.kde.choose_kde_bandwidth`) after the charge.
    """
    p = config.privacy
    return plan_kde_release(point_axes(config), n=n, epsilon=p.epsilon, mechanism=config.mechanism,
                            kernel=config.kernel, bandwidth=config.bandwidth,
                            eta=config.eta, delta=p.delta, calibration=p.calibration, secure=True,
                            public_choices=choices if config.bandwidth == "auto" else None,
                            bandwidth_share=config.bandwidth_share)


def erm_plan(config: Any, n: int) -> Any:
    """The :class:`fdpcore.summaries.kde.PointPlan` of an ERM config."""
    p = config.privacy
    return plan_erm_release(point_axes(config), config.kernel, n=n, epsilon=p.epsilon, loss=config.loss, psi=config.psi,
                            eta=config.eta, mechanism=config.mechanism, label_bound=config.label_bound,
                            tolerance=config.tolerance, delta=p.delta, calibration=p.calibration, secure=True)


def erm_eta_warning(config: Any) -> str | None:
    """A warning when an ICLP ERM's ``eta`` is at most ``1 + 1/beta`` (MATH.md §9; public config only).

    The ICLP sensitivity is the RKHS bound times ``sqrt(tr C^(eta-1))`` (formula ``sensitivity.erm.iclp_one_c@1``): exact on
    the grid, so the release is private for any ``eta >= 1``, but the trace grows without bound with the grid's size
    unless ``eta > 1 + 1/beta`` (for a tensor kernel too: its trace is the product of the axes'). A Matern kernel's
    ``beta`` is ``2 nu + 1``; the exponential's 2; a Gaussian kernel decays faster than any power (no warning).

    >>> class C: summary, mechanism, eta, kernel = "erm", "iclp", 1.1, {"name": "matern", "nu": 1.5, "rho": 0.2}
    >>> erm_eta_warning(C()).split(":")[0]
    'eta 1.1 is at most 1 + 1/beta = 1.25 (matern kernel'
    """
    if config.summary != "erm" or config.mechanism != "iclp":
        return None
    spec = kernel_spec(config.kernel)
    if spec.name == "gaussian":
        return None
    beta = decay_rate(spec)
    least = 1.0 + 1.0 / beta
    if config.eta > least:
        return None
    return (f"eta {config.eta:g} is at most 1 + 1/beta = {least:g} ({spec.name} kernel: beta {beta:g}): the "
            "ICLP noise is exact on this grid, so the release is private, but it is proportional to "
            "sqrt(tr C^(eta - 1)), which grows without bound as the grid is refined; with eta above "
            f"{least:g} it stays bounded (MATH.md §9). `fdp plan` prices the noise at this eta and grid")


def build_plan(config: Any, n: int) -> Any:
    """The fdpcore plan of any release config (dispatch on ``config.summary``).

    A config that buys ``tau`` or ``value_offset`` with too small an ``n * epsilon`` is refused with the least
    epsilon that suffices (:func:`least_epsilon`) and what else the user can change.
    """
    with _refuse_too_small_epsilon(config, n):
        return _build_plan(config, n)


def _build_plan(config: Any, n: int) -> Any:
    summary = config.summary
    if summary == "fpca":
        return fpca_plan(config, n)
    return {"mean": mean_plan, "covariance": covariance_plan, "fosr": fosr_plan, "kde": kde_plan,
            "erm": erm_plan}[summary](config, n)


def _at_epsilon(config: Any, epsilon: float) -> Any:
    """``config`` with ``privacy.epsilon`` replaced (not validated again: only its plan is built)."""
    return config.model_copy(update={"privacy": config.privacy.model_copy(update={"epsilon": epsilon})})


def auto_options(config: Any) -> list[str]:
    """The config fields set to ``auto`` that buy a public parameter with part of epsilon."""
    found = []
    if getattr(config.dataset, "value_offset", None) == "auto":
        found.append("value_offset")
    if getattr(getattr(config, "clipping", None), "tau", None) == "auto":
        found.append("tau")
    return found


def _valid_plan(config: Any, n: int) -> Any | None:
    """The plan of ``config``, or ``None`` when it is not valid (e.g. too little epsilon for its public choices)."""
    try:
        return _build_plan(config, n)
    except FdpError:
        return None


#: Significant digits of the least epsilon :func:`least_epsilon` states (a value a user would type).
_EPSILON_DIGITS = 3
#: How far above the config's epsilon :func:`least_epsilon` looks (a factor).
_EPSILON_SEARCH_FACTOR = 1e6


def _epsilon_grid(epsilon: float) -> Callable[[int], float]:
    """The ``i``-th epsilon with :data:`_EPSILON_DIGITS` significant digits, from the decade of ``epsilon`` up.

    Such an epsilon's default splits (shares of 1/2, 1/10, 1/20) are exact at the 4 digits the splits keep, so a
    remainder on this grid is never an artefact of their rounding.
    """
    per_decade = 9 * 10 ** (_EPSILON_DIGITS - 1)
    first = 10 ** (_EPSILON_DIGITS - 1)
    base = math.floor(math.log10(epsilon)) - (_EPSILON_DIGITS - 1)

    def value(i: int) -> float:
        decade, step = divmod(i, per_decade)
        return float(Decimal(first + step).scaleb(base + decade))

    return value


def least_epsilon(config: Any, n: int) -> float | None:
    """The least epsilon (3 significant digits) above the config's at which its whole plan is valid, or ``None``.

    Valid: every public choice the config buys (``value_offset: auto``, ``tau: auto``) gets its split and the
    summary itself a positive remainder — decided by building the plan (:func:`build_plan`'s own functions),
    not by a separate formula. Larger epsilons are found by doubling steps, then the boundary by bisection on
    the grid of :func:`_epsilon_grid`; ``None`` when no epsilon up to a million times the config's is valid.
    Public inputs and ``n`` only.
    """
    epsilon = float(config.privacy.epsilon)
    value = _epsilon_grid(epsilon)
    lo = 0
    while value(lo) <= epsilon:
        lo += 1
    lo -= 1  # value(lo) <= epsilon, which is not valid (the caller's refusal)
    step, hi = 1, lo + 1
    while _valid_plan(_at_epsilon(config, value(hi)), n) is None:
        if value(hi) > epsilon * _EPSILON_SEARCH_FACTOR:
            return None
        lo, step = hi, 2 * step
        hi = lo + step
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _valid_plan(_at_epsilon(config, value(mid)), n) is None:
            lo = mid
        else:
            hi = mid
    return value(hi)


def _least_epsilon_with(config: Any, n: int, option: str) -> float | None:
    """:func:`least_epsilon` with ``option`` (``value_offset`` or ``tau``) given a fixed value (``None``: none suffices).

    The config's own epsilon when that then suffices. The fixed value is a placeholder: whether a plan is valid
    does not depend on a public centre or radius.
    """
    if option == "value_offset":
        fixed = config.model_copy(update={"dataset": config.dataset.model_copy(update={"value_offset": 0.0})})
    else:
        fixed = config.model_copy(update={"clipping": config.clipping.model_copy(update={"tau": 1.0})})
    if _valid_plan(fixed, n) is not None:
        return float(config.privacy.epsilon)
    return least_epsilon(fixed, n)


_FIX_ADVICE = {"value_offset": "give dataset.value_offset a fixed public value",
               "tau": "give clipping.tau a fixed public value"}


@contextmanager
def _refuse_too_small_epsilon(config: Any, n: int) -> Iterator[None]:
    """Restate a plan's refusal of too small an epsilon for its bought public choices: the true least epsilon and the options.

    Any other refusal (or a config that buys nothing) passes through unchanged.
    """
    try:
        yield
    except PrivacyParameterError as exc:
        options = auto_options(config)
        least = least_epsilon(config, n) if options else None
        if least is None:
            raise
        raise PrivacyParameterError(_too_small_message(config, n, options, least)) from exc


def _too_small_message(config: Any, n: int, options: list[str], least: float) -> str:
    epsilon = float(config.privacy.epsilon)
    bought = " and ".join(f"{o}: auto" for o in options)
    each = "each buy" if len(options) > 1 else "buys"
    splits = _build_plan(_at_epsilon(config, least), n).budget_splits
    parts = ", ".join(f"{s['name']} {s['epsilon']:g}" for s in splits[:-1]) + f" and {splits[-1]['name']} {splits[-1]['epsilon']:g}"
    changes = [f"raise privacy.epsilon to at least {least:g}"]
    for option in options:
        other = _least_epsilon_with(config, n, option)
        if other is not None:
            changes.append(f"{_FIX_ADVICE[option]} (then epsilon {other:g} suffices)")
    return (
        f"privacy.epsilon ({epsilon:g}) is too small for this release with n = {n} privacy units: {bought} {each} a "
        f"DP quantile with part of epsilon, and the {config.summary} itself needs a positive part of what is left. "
        f"The least epsilon that covers them all is {least:g} (at {least:g} the parts are {parts}; `fdp plan "
        f"--epsilon {least:g}` shows the accuracy). Either " + ", or ".join(changes)
        + "; see docs/configuration.md, 'Choosing value_offset, value_scale and tau'"
    )


def _kde_auto_range(config: Any, plan: Any) -> tuple[float, float] | None:
    """KDE ``bandwidth: auto`` not yet drawn: ``expected_l2_error`` (source units) at the widest and narrowest candidates.

    Priced with the epsilon the split leaves, as the release will be; ``None`` when nothing is bought (a fixed
    bandwidth, or the free normal_reference fallback). Public inputs only.
    """
    choice = next((c for c in plan.public_choices if isinstance(c, BandwidthChoice)), None)
    if choice is None or choice.a_priori or choice.value is not None:
        return None
    errors = []
    for h in (choice.candidates[-1], choice.candidates[0]):
        at = plan_kde_release(point_axes(config), n=plan.n, epsilon=plan.epsilon_mechanism, mechanism=config.mechanism,
                              kernel=config.kernel, bandwidth=h, eta=config.eta, delta=config.privacy.delta,
                              calibration=config.privacy.calibration, secure=True)
        err = expected_l2_error(config, at)
        errors.append(0.0 if err is None else err[0])
    return errors[0], errors[1]


def _point_value_scale(config: Any) -> tuple[float, float]:
    """(value scale, domain area) of a KDE/ERM release: density per source unit, or label units."""
    area = math.prod(b - a for a, b in config.dataset.domain)
    return (1.0 / area if config.summary == "kde" else 1.0), area


def expected_l2_error(config: Any, plan: Any) -> tuple[float, float] | None:
    """``(source units, rescaled units)`` of ``sqrt(E||noise||^2)`` as the manifest publishes it (MATH.md §3.5).

    Mean: on the grid domain, times ``value_scale``. Covariance: on ``T x T`` before the PSD projection, times
    ``value_scale^2``. FoSR: of ``T2`` summed over the ``p`` curves (``beta~`` scales it by at most
    ``1/floor``). KDE/ERM: over the source domain. FPCA: ``None`` (an exponential mechanism has no additive noise).
    """
    summary = config.summary
    if summary == "mean":
        if plan.pending:
            return None
        scaled = float(np.sqrt(plan.expected_sq_l2_error))
        return scaled * config.dataset.value_scale, scaled
    if summary == "covariance":
        scaled = float(np.sqrt(plan.expected_sq_l2_error))
        return scaled * config.dataset.value_scale**2, scaled
    if summary == "fosr":
        scaled = float(np.sqrt(plan.expected_sq_l2_error_t2))
        return scaled * config.dataset.value_scale, scaled
    if summary in ("kde", "erm"):
        scaled = float(np.sqrt(plan.expected_sq_l2_error))
        scale, area = _point_value_scale(config)
        return scaled * scale * math.sqrt(area), scaled
    return None


#: What ``with bias`` adds to the noise, per summary: the prior's typical target (``tuning.risk.iclp_qr.prior@1``; the
#: mean's prior is ``@2``'s).
_TYPICAL_TARGET = {
    "mean": ("a typical mean", "norm signal_fraction x tau", "tau"),
    "covariance": ("a typical surface", "size signal_fraction x tau^2", "tau"),
    "fosr": ("typical cross-moment curves T2", "norm signal_fraction x tau_y each", "tau_y"),
}


def expected_l2_error_with_bias(config: Any, plan: Any) -> float | None:
    """``sqrt(E||noise||^2 + bias^2)`` in source units: the noise plus the smoothing bias of a *typical* target.

    The plans' ``prior_sq_l2_risk`` (mean with ICLP-QR/GP, covariance, FoSR's ``T2``; formula
    ``tuning.risk.iclp_qr.prior@1``): the bias of a mean of norm ``signal_fraction * tau`` (a surface of size
    ``signal_fraction * tau^2``, ``T2`` curves of norm ``signal_fraction * tau_y``) spread as the ``risk_prior``
    prior, at the plan's ``(eta, psi)``. A function of public inputs only (with ``tau: auto``, of the released tau):
    ``fdp plan``'s ``with bias`` column and the manifest's ``noise.expected_l2_error_with_bias``. ``None`` where the
    plan states none (other estimators and summaries).
    """
    prior = _erm_prior(config, plan)
    if prior is not None:  # ERM: tuning.erm.psi.risk_prior@1's prior error, over the source domain like the noise's
        return float(prior["rms_error_with_bias"]) * math.sqrt(
            math.prod(float(b) - float(a) for a, b in config.dataset.domain))
    risk = getattr(plan, "prior_sq_l2_risk", None) if config.summary in _TYPICAL_TARGET else None
    if risk is None:
        return None
    return math.sqrt(float(risk)) * config.dataset.value_scale ** (2 if config.summary == "covariance" else 1)


def _erm_prior(config: Any, plan: Any) -> dict[str, Any] | None:
    """An ERM plan's ``psi_prior`` (``None`` for other summaries)."""
    return (getattr(plan, "parameters", None) or {}).get("psi_prior") if config.summary == "erm" else None


def with_bias_note(config: Any, plan: Any) -> str | None:
    """What the manifest's ``expected_l2_error_with_bias`` is, in words and public numbers (``None`` without one).

    It is the error of a typical release under the tuning's prior, never of this data, and leaves out the
    clipping bias (records shrunk to tau), which depends on the data.
    """
    if expected_l2_error_with_bias(config, plan) is None:
        return None
    prior = _erm_prior(config, plan)
    if prior is not None:
        return _erm_with_bias_note(config, prior, plan.parameters.get("psi_rule"))
    what, size, radius = _TYPICAL_TARGET[config.summary]
    fraction, tau = float(plan.signal_fraction), float(getattr(plan, radius))
    size_value = tau**2 if config.summary == "covariance" else tau  # the surface's size is signal_fraction x tau^2
    formula = getattr(plan, "tuning_formula", None)
    formula = formula if str(formula).startswith("tuning.risk.iclp_qr.prior@") else "tuning.risk.iclp_qr.prior@1"
    return (f"sqrt(E||noise||^2 + bias^2), the bias being the smoothing bias of {what} of {size} = {fraction:g} x "
            f"{size_value:.6g} (rescaled units) under the risk_prior prior ({formula}) at the released "
            "(eta, psi): a typical release's error, not this data's; the clipping bias (records shrunk to tau) is not "
            "included")


def _erm_with_bias_note(config: Any, prior: dict[str, Any], psi_rule: str | None) -> str:
    """What an ERM release's ``with bias`` (from its ``psi_prior``) is: plan row and manifest alike."""
    if config.loss == "ridge":
        size = (f"a regression function of L2 size {prior['signal_l2']:g} ({prior['signal_fraction']:g} x label_bound) "
                f"with residual sd {prior['residual_sd']:g}")
    else:
        size = (f"a decision function of L2 size {prior['signal_l2']:g} (the margin) under the curvature 1/4 the rule "
                "assumes for logistic and hinge alike")
    rule = ("the prior that psi: auto minimises (tuning.erm.psi.risk_prior@1), so it falls as epsilon grows"
            if psi_rule == "risk_prior" else
            "the prior of psi: auto (tuning.erm.psi.risk_prior@1) at this fixed psi, where more epsilon lowers only "
            "the noise")
    return (f"sqrt(E L2 error^2 + smoothing bias^2 + sampling variance) for {size}, over the source domain: {rule}; "
            "the real bias depends on the unknown function")


def noise_band(config: Any, plan: Any) -> Any:
    """Half-width of the pointwise 95 % band of the noise on the grid, in source units (mean, KDE, ERM).

    Simulated from the noise distribution alone (:func:`fdpcore.noise.iclp.whitened_pointwise_band`); no
    data enters. ``None`` for summaries without a pointwise additive band.
    """
    if config.summary == "mean" and not plan.pending:
        return whitened_pointwise_band(plan.recolour, plan.calibration.scale, plan.noise,
                                       level=BAND_LEVEL) * config.dataset.value_scale
    if config.summary in ("kde", "erm"):
        return whitened_pointwise_band(plan.space.recolour, plan.calibration.scale, plan.noise,
                                       level=BAND_LEVEL) * _point_value_scale(config)[0]
    return None


@dataclass(frozen=True)
class Accuracy:
    """What a release at one epsilon would cost and how accurate it would be; public inputs and ``n`` only.

    Attributes:
        summary, epsilon, delta, n: the release.
        sensitivity, sensitivity_formula: the bound that sets the noise (FoSR: that of ``T2``).
        noise_scale: whitened Laplace scale ``b`` or Gaussian ``sigma`` (FoSR: of ``T2``; FPCA: ``None``).
        expected_l2_error, expected_l2_error_scaled: ``sqrt(E||noise||^2)`` in source and rescaled units.
        relative_error: mean, covariance, FoSR: the root mean square of the noise over the grid domain (over pairs of
            times for a covariance) over ``value_scale`` (``value_scale^2``): the rescaled error over ``sqrt(|T|)``
            (``|T|``). KDE/ERM: the rescaled error on the unit box, i.e. the root mean square of the noise over the
            source domain over the uniform density ``1/|domain|`` (KDE) or over 1 label unit (ERM). FPCA: see
            ``expected_energy_shortfall``. ``relative_note`` says which, in words.
        band_half_width_max: widest pointwise 95 % noise band (the release's units), or ``None``.
        expected_l2_error_with_bias: mean with ICLP-QR/GP, covariance, FoSR (of ``T2``): ``sqrt(E||noise||^2 +
            bias^2)`` (source units), the smoothing bias of a typical target (a mean of norm ``signal_fraction * tau``,
            a surface of size ``signal_fraction * tau^2``, cross-moment curves of norm ``signal_fraction * tau_y``)
            under the ``risk_prior`` prior (the plans' ``prior_sq_l2_risk``); the noise alone can *rise* with epsilon
            when the tuning smooths less.
        tuning: the parameters the rule in the config chooses.
        note: what the numbers mean for this summary: units and norm of ``expected_l2_error`` (:func:`curve_error_text`,
            :func:`point_error_text`: the release note and ``fdp release`` say the same).
        budget_splits: the named parts of epsilon the release would charge (as the manifest records them).
        bought: public parameters bought with part of epsilon (``tau: auto``, ``value_offset: auto``), not yet drawn.
        expected_l2_error_range: ``dp_select``/``pcv``: the smallest and largest ``expected_l2_error`` (source units)
            over the candidates; the release's is one of them (``None`` for a fixed tuning). KDE ``bandwidth: auto``:
            the noise at the widest and at the narrowest candidate bandwidth, with the epsilon its split leaves (the
            row's own error is at the ``normal_reference`` bandwidth; the release's is between the two).
        resolution: mean (ICLP-QR, GP): the shortest feature the release keeps, in source time units
            (:func:`resolution`): shorter peaks, dips or cycles are mostly smoothed away (``None`` elsewhere).
        expected_energy_shortfall: FPCA: the noise part of the expected captured-energy shortfall per record
            (source units squared, :func:`fdpcore.summaries.fpca.fpca_energy_shortfall`); ``relative_error`` is
            then this over ``tau^2``.
        relative_note: what ``relative_error`` divides by, in words (``None`` for FPCA).
    """

    summary: str
    epsilon: float
    delta: float
    n: int
    sensitivity: float | None
    sensitivity_formula: str | None
    noise_scale: float | None
    expected_l2_error: float | None
    expected_l2_error_scaled: float | None
    relative_error: float | None
    band_half_width_max: float | None
    expected_l2_error_with_bias: float | None
    tuning: dict[str, Any]
    note: str
    budget_splits: list[dict[str, Any]] | None = None
    bought: list[dict[str, Any]] | None = None
    expected_l2_error_range: tuple[float, float] | None = None
    expected_energy_shortfall: float | None = None
    relative_note: str | None = None
    resolution: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON form."""
        return asdict(self)


def _tuning(config: Any, plan: Any) -> dict[str, Any]:
    s = config.summary
    if s == "mean":
        out = {"rule": plan.tuning, "formula": plan.tuning_formula, "eta": plan.eta, "psi": plan.psi,
               **_signal(plan)}
        if stated_signal_rms(config) is not None and "signal_fraction" in out:  # the fraction at this row's tau
            out["signal_rms"] = stated_signal_rms(config)
        if plan.n_basis is not None:
            out["n_basis"] = plan.n_basis
        if plan.lattice_k is not None:
            out["lattice_k"] = plan.lattice_k
        if plan.selection is not None:
            sel = plan.selection
            out.update(selection_parameter=sel.parameter, candidates=list(sel.candidates),
                       selection_epsilon=sel.epsilon)
        return out
    if s == "covariance":
        return {"rule": plan.tuning, "formula": plan.tuning_formula, "eta": plan.eta, "psi": plan.psi, **_signal(plan)}
    if s == "fosr":
        return {"rule": plan.tuning, "formula": plan.tuning_formula, "eta": plan.eta, "psi": plan.psi,
                "gamma": plan.gamma, "gamma_rule": plan.gamma_rule, "safe_inverse_floor": plan.floor}
    if s == "fpca":
        return {"n_basis": plan.basis.n_basis, "prior_strength": plan.prior_strength, "sampler": plan.sampler,
                "epsilon_per_component": plan.epsilon_step, "burn_in": plan.burn_in, "exact_draw": plan.exact}
    return {k: v for k, v in plan.parameters.items() if isinstance(v, (int, float, str, bool)) or v is None}


def _signal(plan: Any) -> dict[str, float]:
    """A ``risk_prior`` mean's or surface's public signal scale (``tuning.risk.signal_default@1`` when unset)."""
    return {"signal_fraction": plan.signal_fraction} if plan.tuning == "risk_prior" else {}


def a_priori_signal_text(summary: str, epsilons: list[float], rows: list[dict[str, Any]]) -> str | None:
    """``fdp plan``'s line on the smoothing where a mean's or surface's tau is the a-priori bound (``tuning.risk.signal_default@1``).

    ``epsilons``: the rows' epsilons at which tau is that bound. ``None`` unless such a row assumes a mean below half
    of tau (the default 0.1 there, or a stated smaller scale) and the config did not state the mean's size
    (``signal_rms``: the user already said what the mean is).
    """
    small = sorted({r["tuning"]["signal_fraction"] for r in rows if r["epsilon"] in epsilons and "error" not in r
                    and "signal_rms" not in r["tuning"]
                    and r["tuning"].get("signal_fraction", DEFAULT_SIGNAL_FRACTION) < DEFAULT_SIGNAL_FRACTION})
    if not small:
        return None
    fractions = " / ".join(f"{f:g}" for f in small)
    surface = summary == "covariance"
    what = (f"a surface of size {fractions} x tau^2 (an RMS deviation from the centre of about sqrt({fractions}) x "
            "value_scale)" if surface else
            f"a mean of norm {fractions} x tau, i.e. a mean curve whose root mean square distance from value_offset is "
            f"{fractions} x value_scale")
    advice = ("" if surface else
              "; if you know a priori how far the mean curve lies from value_offset (growth curves spanning the whole "
              "range around one constant level: about half of value_scale), state it as tuning.signal_rms (that "
              "root-mean-square distance in units of value_scale), or better centre on a public reference curve "
              "(centering) — a larger value than the mean's costs accuracy (trial W: 1.0 -> 3.0 x the oracle)")
    return (f"tuning at epsilon {', '.join(f'{e:g}' for e in epsilons)}: with tau at that bound the smoothing assumes "
            f"{what} (signal_fraction; by default {A_PRIORI_SIGNAL_FRACTION:g} there, {DEFAULT_SIGNAL_FRACTION:g} x the "
            f"{'tau^2' if surface else 'tau'} bought elsewhere: tuning.risk.signal_default@1), because the bound holds "
            f"every value within value_offset +- value_scale, not a typical record{advice}")


def curve_error_text(summary: str, grid_domain: Any, time_domain: Any) -> str:
    """Units and norm of a curve release's ``expected_l2_error`` (mean; covariance; FoSR's ``T2``), from public inputs.

    The norm is the L2 norm over the grid domain ``T`` onto which ``time_domain`` is mapped (a covariance: over
    ``T x T``), so on ``T = [0, 1]`` it is the root mean square of the noise over time (pairs of times). ``fdp plan``,
    the release note and ``fdp release`` all say this.

    >>> curve_error_text("mean", (0.0, 1.0), (0.5, 48.5))
    'the L2 norm over the grid domain T = [0, 1] onto which time_domain [0.5, 48.5] is mapped, i.e. the root mean square of the noise over time; units: source units'
    """
    a, b = (float(x) for x in grid_domain)
    s, e = (float(x) for x in time_domain)
    length = b - a
    over = f"the grid domain T = [{a:g}, {b:g}] onto which time_domain [{s:g}, {e:g}] is mapped"
    if summary == "covariance":
        factor = "" if length == 1.0 else f"{length:g} x "
        return (f"the L2 norm over T x T, {over}, i.e. {factor}the root mean square of the noise over pairs of times; "
                "units: source units squared")
    factor = "" if length == 1.0 else f"sqrt({length:g}) x "
    if summary == "fosr":
        return (f"the L2 norm over {over}, summed in squares over the p curves, i.e. {factor}the root-sum-square over "
                "the curves of their root mean square over time; units: source units x covariate units")
    return f"the L2 norm over {over}, i.e. {factor}the root mean square of the noise over time; units: source units"


def point_error_text(domain: Any, value_units: str) -> str:
    """Units and norm of a KDE/ERM release's ``expected_l2_error``: the L2 norm over the source domain.

    >>> point_error_text([[1, 366]], "density per source unit of the domain")
    'the L2 norm over the source domain [1, 366], i.e. sqrt(365) x the root mean square of the noise over it; units: density per source unit of the domain'
    """
    box = " x ".join(f"[{float(a):g}, {float(b):g}]" for a, b in domain)
    measure = math.prod(float(b) - float(a) for a, b in domain)
    return (f"the L2 norm over the source domain {box}, i.e. sqrt({measure:.6g}) x the root mean square of the noise "
            f"over it; units: {value_units}")


def point_value_units(config: Any) -> str:
    """What a KDE/ERM release's values measure (the manifest's ``parameters.value_units``)."""
    if config.summary == "kde":
        return "density per source unit of the domain"
    if config.loss == "ridge":
        return f"units of {config.dataset.label_column}"  # trial M: the plot's y axis named no column
    return "decision value (sign = label)"


def _error_text(config: Any) -> str:
    """What ``fdp plan``'s ``E L2 error`` of ``config`` measures: units and norm (FPCA: its shortfall)."""
    s = config.summary
    if s in ("kde", "erm"):
        what = "the released density" if s == "kde" else "the released function"
        return f"the noise part of the error of {what}: {point_error_text(config.dataset.domain, point_value_units(config))}"
    if s == "fpca":
        return _FPCA_NOTE
    what = {"mean": "the released curve", "covariance": "the surface before the PSD projection",
            "fosr": "the noisy cross-moment curves T2 (the coefficient curves scale it by at most 1/safe_inverse_floor)"}[s]
    text = f"the noise part of the error of {what}: {curve_error_text(s, config.grid.domain, config.dataset.time_domain)}"
    if s == "mean" and getattr(config, "centering", None) is not None:
        text += (f"; centred on the public reference curve ({config.centering.source}; preprocess.public_reference@1): "
                 "released = reference + value_scale x the private mean of (X - reference)/value_scale, so clipping "
                 "and the tuning's shrinkage act on the deviations from the reference, not from value_offset; the "
                 "noise is the same")
    return text


def _relative_text(config: Any) -> str | None:
    """What ``fdp plan``'s ``relative`` column of ``config`` divides by (:func:`accuracy`'s ``relative_error``)."""
    s = config.summary
    if s == "kde":
        measure = math.prod(b - a for a, b in config.dataset.domain)
        per = "per unit area" if len(config.dataset.domain) == 2 else "per source unit"
        return f"the root mean square of the noise over the domain, over the uniform density on it (1/{measure:.6g} {per})"
    if s == "erm" and config.loss == "ridge":
        return (f"the root mean square of the noise over the domain, over label_bound = {config.label_bound:g} (the "
                "public bound on |response - label_offset|)")
    if s == "erm":
        return "the root mean square of the noise over the domain, over a decision value of 1 (labels are -1/+1)"
    if s == "covariance":
        return "the root mean square of the noise over pairs of times, over value_scale^2"
    if s == "fosr":
        return "the root-sum-square over the p curves of their root mean square over time, over value_scale"
    if s == "mean":
        return "the root mean square of the noise over time, over value_scale"
    return None


_FPCA_NOTE = (
    "exponential mechanism, no additive noise: 'E shortfall' is the noise part of the captured-energy "
    "shortfall per record of the k components against the best k-dimensional subspace of the basis (source "
    "units squared; the Laplace approximation k (m - k) tau^2 / (n epsilon_step), formula "
    "accuracy.fpca.energy_shortfall@1), 'of tau^2' the same over the bound on a record's energy: where the "
    "records' leading components carry less energy than this, the release mostly shows the base measure; the "
    "base measure (prior_strength c > 0) adds a bias towards smooth components that depends on the data and "
    "does not fall with epsilon")


def accuracy(config: Any, plan: Any, n: int, *, band: bool = True) -> Accuracy:
    """The numbers of one plan (:class:`Accuracy`), computed by the functions the manifests use."""
    s = config.summary
    if s == "mean" and plan.pending:  # dp_select / pcv: the noise is that of one candidate, picked after the charge
        finished = candidate_plans(plan)
        errors = [expected_l2_error(config, c) for c in finished]
        worst = max(range(len(finished)), key=lambda i: errors[i][0])  # type: ignore[index]
        row = accuracy(config, finished[worst], n, band=band)
        low = min(e[0] for e in errors if e is not None)
        return dataclasses.replace(row, tuning=_tuning(config, plan), budget_splits=row.budget_splits,
                                   expected_l2_error_range=(low, row.expected_l2_error or low), note=(
            f"{row.note}; {plan.tuning}: {plan.selection.parameter} is chosen from the data after the charge among "
            f"{len(finished)} candidates; sensitivity, noise scale, error and band are those of the noisiest "
            "candidate (a bound on the release's; `--json` gives expected_l2_error_range over the candidates)"))
    err = expected_l2_error(config, plan)
    if s == "fosr":
        sens, formula, scale = plan.delta2, "sensitivity.fosr.t2.exact@1", plan.calibration2.scale
    elif s == "fpca":
        sens, formula, scale = plan.sensitivity, "sensitivity.fpca.projection_energy@1", None
    else:
        sens, formula, scale = plan.sensitivity, plan.sensitivity_formula, plan.calibration.scale
    relative, shortfall = None, None
    if s == "fpca":
        scaled = plan.expected_energy_shortfall(n)
        shortfall, relative = scaled * config.dataset.value_scale**2, scaled / plan.tau**2
    elif err is not None:
        if s in ("kde", "erm"):
            relative = err[1]  # unit box: the domain has measure 1
            if s == "erm" and config.loss == "ridge":
                relative /= float(config.label_bound)
        else:
            length = float(np.diff(release_grid(config).domain_range)[0])
            relative = err[1] / (length if s == "covariance" else math.sqrt(length))
    h = noise_band(config, plan) if band else None
    note = _error_text(config)
    with_bias = expected_l2_error_with_bias(config, plan)  # mean (ICLP-QR/GP), covariance, FoSR, ERM; None elsewhere
    row = Accuracy(
        summary=s, epsilon=float(plan.epsilon), delta=float(getattr(plan, "delta", 0.0)), n=int(n),
        sensitivity=None if sens is None else float(sens), sensitivity_formula=formula,
        noise_scale=None if scale is None else float(scale),
        expected_l2_error=None if err is None else err[0], expected_l2_error_scaled=None if err is None else err[1],
        relative_error=relative, band_half_width_max=None if h is None else float(np.max(h)),
        expected_l2_error_with_bias=with_bias,
        tuning=_tuning(config, plan), note=note, relative_note=_relative_text(config),
        budget_splits=[dict(x) for x in plan.budget_splits] if hasattr(plan, "budget_splits") else None,
        bought=[{"name": c.name, "epsilon": c.epsilon, "quantile_level": c.alpha, "candidates": [c.candidates[0],
                 c.candidates[-1]], "formula": c.formula_id, "a_priori": c.a_priori,
                 "a_priori_reason": getattr(c, "a_priori_reason", None) if c.a_priori else None}
                for c in getattr(plan, "public_choices", ())] or None,
        expected_energy_shortfall=shortfall, resolution=resolution(config, plan),
    )
    span = _kde_auto_range(config, plan) if s == "kde" else None
    if span is None:
        return row
    return dataclasses.replace(row, expected_l2_error_range=span, note=(
        f"{row.note}; bandwidth: auto — the bandwidth is bought after the charge (DP quartiles of the units' mean "
        f"points): the error above is at the normal_reference bandwidth {plan.parameters['bandwidth']:.4g} with the "
        f"epsilon its split leaves; the release's bandwidth is one of the public candidates "
        f"[{plan.public_choices[0].candidates[0]:.4g}, {plan.public_choices[0].candidates[-1]:.4g}], and its noise lies "
        "between that of the widest and of the narrowest candidate (expected_l2_error_range)"))


def resolution(config: Any, plan: Any) -> float | None:
    """The shortest feature a mean release keeps, in source time units: ``|time_domain| / L`` (public inputs only).

    The ICLP-QR and GP means shrink kernel component ``l`` (eigenvalue ``lambda_l``, decreasing) by
    ``s_l = lambda_l^eta / (lambda_l^eta + psi)`` (MATH.md §4.2); ``L`` counts the components kept at least half
    (``s_l >= 1/2``). Component ``l`` of a Matérn or Gaussian kernel has about ``l - 1`` sign changes on the domain, so
    its half-period, the width of one peak or dip, is about ``|T| / l``: a feature narrower than ``|T| / L`` (a short
    peak, a fast cycle) is mostly smoothed away, whatever the data. It follows the kernel's length scale and epsilon
    (through ``psi``). FPCA: ``|time_domain| / m``, the half-period of the last of the ``m`` basis functions the
    components are combinations of (trial N: a 5-function basis held a daily load shape 22 degrees off its principal
    components while the shortfall, measured against the basis, looked small). ``None`` for other summaries and
    estimators.
    """
    if config.summary == "fpca":  # the components are combinations of the m basis functions (MATH.md §10.3)
        a, b = config.dataset.time_domain
        return float(b - a) / int(config.basis.n_basis)
    if config.summary != "mean" or getattr(plan, "estimator", None) not in ("iclp_qr", "gp"):
        return None
    eta, psi = getattr(plan, "eta", None), getattr(plan, "psi", None)
    if eta is None or psi is None:
        return None
    kept = int(np.count_nonzero(iclp_qr_shrinkage(plan.basis.eigenvalues, eta, psi) >= 0.5))
    a, b = config.dataset.time_domain
    return float(b - a) / max(kept, 1)


def count_units_of_file(path: Path, fmt: str, unit_column: str, columns: list[str], csv_delimiter: str = ",") -> int:
    """``n`` of a data file, after checking that ``columns`` exist (names and types only; ``fdp init``)."""
    return count_units(path, fmt, unit_column, csv_delimiter, columns=columns)


def count_config_units(config: Any, config_dir: str) -> int:
    """``n`` of a release of this config: the number of privacy units in its data file, whose named columns must exist."""
    ds = config.dataset
    path = Path(ds.path) if Path(ds.path).is_absolute() else Path(config_dir) / ds.path
    if config.summary in ("kde", "erm"):
        named = [*ds.coordinate_columns, getattr(ds, "label_column", None)]
    else:
        named = [ds.time_column, ds.value_column, ds.curve_column, *(name for _, name, _ in
                                                                      getattr(config, "design_columns", list)())]
    columns = [c for c in named if c]
    if path.is_dir() and getattr(getattr(config, "engine", None), "name", "memory") != "memory":
        from fdpcore.io.streaming import dataset_files  # a streaming engine reads a directory of Parquet parts

        # each unit lies in one part (the release refuses overlapping parts), so n is the sum of the parts' counts
        return sum(count_units(f, "parquet", ds.unit_column, columns=columns) for f in dataset_files(path))
    return count_units(path, ds.format, ds.unit_column, ds.csv_delimiter, columns=columns)


def covariance_centering_check(config: Any, n: int, ledger_url: str | None) -> str | None:
    """A warning when a covariance centred on a private mean would be dominated by that mean's noise.

    Centring by ``mu~ = mu_hat + e`` adds ``e (x) e`` to the centred second moment (MATH.md §6 (a)):
    ``(1/n) sum (X_i - mu~)(X_i - mu~)^T = Sigma_hat + e e^T``, whose L2 norm on ``T x T`` is ``||e||^2``,
    in expectation the square of the mean release's published ``expected_l2_error``. When that exceeds the
    covariance's own expected noise, the centre, not the covariance mechanism, sets the error.
    ``ledger_url`` is opened read-only (``None``: no ledger to read).
    """
    c = config.centering
    if c.kind != "private_mean":
        return None
    advice = ("centre on a public reference curve instead (centering: {kind: public, reference: ...} or the public "
              "dataset.value_offset alone), or on the sample mean ({kind: sample_mean}: no extra budget, about 3x the "
              "covariance noise), or publish the mean with a larger epsilon")
    manifest = None
    if ledger_url is not None:
        try:
            record = Ledger(ledger_url, read_only=True).get(str(c.release_id))
        except FdpError:
            record = None
        if record is not None and record.public is not None:
            manifest = record.public.get("manifest")
    if manifest is None:
        return (f"centering.release_id ({c.release_id!r}) is not a published release in this ledger, so its noise "
                "cannot be compared with the covariance's")
    mean_err = float(manifest["noise"]["expected_l2_error"])
    cov_err = expected_l2_error(config, covariance_plan(config, n))
    if cov_err is None or mean_err**2 < cov_err[0]:
        return None
    return (f"the private mean {c.release_id!r} has expected L2 error {mean_err:.4g}, which adds about "
            f"{mean_err**2:.4g} (its square, source units squared) to the covariance surface — more than the "
            f"covariance's own noise ({cov_err[0]:.4g}). The centre's noise would dominate: {advice}")
