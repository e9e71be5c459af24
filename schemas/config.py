"""The release configuration a release engineer writes in YAML (validated; errors name the field)."""

from __future__ import annotations

import math
from typing import Any, Literal

from fdp.schemas._base import Frozen, PositiveFloat
from fdp.schemas.engine import EngineSpec, check_engine_fields
from pydantic import Field, field_validator, model_validator

from fdpcore.basis.grids import make_grid
from fdpcore.basis.kernels import kernel_spec
from fdpcore.errors import DomainError
from fdpcore.limits import ID_MAX_LENGTH, ID_PATTERN, MAX_GRID_POINTS, MIN_EPSILON
from fdpcore.noise.quantiles import CENTRE_CANDIDATES, DEFAULT_CENTRE_SHARE, DEFAULT_TAU_SHARE
from fdpcore.privacy.tuning import DEFAULT_RULES, PSS_RULES_BY_ESTIMATOR
from fdpcore.summaries.fpca import reference_on_grid

__all__ = [
    "check_tau_auto_engine", "series_name",
    "check_reference_covers_grid",
    "AutoClippingSpec", "BudgetSpec", "ClippingSpec", "DatasetSpec", "GridSpec", "MeanClippingSpec", "MeanDatasetSpec", "PrivacySpec",
    "ReferenceCurveSpec", "ReleaseConfig", "ReleaseSeriesSpec", "TuningSpec",
]

#: A release series name: it names a Prefect deployment (``scheduled-release/<name>``), a folder and the
#: release ids ``<name>-<YYYY-MM>``, so it is one path segment of letters, digits, ``.``, ``_`` and ``-``.
SERIES_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"



def kernel_mapping(v: dict[str, Any]) -> dict[str, Any]:
    """Validate a 1-D noise-kernel mapping (the same one the mean release uses)."""
    try:
        return kernel_spec(v).as_dict()
    except DomainError as exc:
        raise ValueError(str(exc)) from None

class DatasetSpec(Frozen):
    """Where the data is and how its columns map to (privacy unit, time, value)."""

    id: str = Field(min_length=1, max_length=ID_MAX_LENGTH, pattern=ID_PATTERN,
                    description="stable dataset id used by the ledger (fdpcore.limits.ID_PATTERN)")
    path: str = Field(min_length=1, description="file path; relative paths are resolved against the config file")
    format: Literal["parquet", "csv"] = Field(description="file format")
    unit_column: str = Field(min_length=1, description="column identifying the privacy unit (one record per unit)")
    time_column: str = Field(min_length=1, description="column of observation times (source units)")
    value_column: str = Field(min_length=1, description="column of observed values (source units)")
    curve_column: str | None = Field(None, description="optional column distinguishing several curves of one unit; they are averaged")
    privacy_unit: str = Field(min_length=1, description="what one record protects, in words (published)")
    time_domain: tuple[float, float] = Field(description="public time domain [a, b] in source units, mapped affinely onto the grid domain")
    max_end_gap: float | None = Field(
        None, ge=0, description="public: how far (source time units) a curve's first and last readings may lie inside "
        "the first and last grid point; the curve is held at its first/last value over that gap (formula "
        "preprocess.align_linear@2). Default: one grid step, (b - a) / grid size. A unit with no curve reaching that "
        "close to both ends enters as the zero curve (the public reference); 0 requires readings at both ends")
    value_offset: float = Field(0.0, description="public reference subtracted from every value (source units)")
    value_scale: PositiveFloat = Field(1.0, description="public scale dividing every value after the offset (source units)")
    csv_delimiter: str = Field(",", min_length=1, max_length=1, description="CSV delimiter")

    @field_validator("time_domain")
    @classmethod
    def _domain_increasing(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not v[0] < v[1]:
            raise ValueError(f"time_domain ({list(v)}) must satisfy a < b")
        if not math.isfinite(v[1] - v[0]):
            raise ValueError(f"time_domain ({list(v)}) must have a finite width b - a (it overflows)")
        return v


class MeanDatasetSpec(DatasetSpec):
    """The mean release's dataset: as :class:`DatasetSpec`, and ``value_offset`` may be bought (``auto``)."""

    value_offset: float | Literal["auto"] = Field(  # type: ignore[assignment]
        0.0, description="public reference subtracted from every value (source units), or 'auto': a DP median of the "
        "records' domain averages over value_offset_range, bought with value_offset_share of privacy.epsilon",
    )
    value_offset_range: tuple[float, float] | None = Field(
        None, description="value_offset 'auto' only: public range [lo, hi] (source units) of a record's typical level; "
        f"{CENTRE_CANDIDATES} evenly spaced candidates",
    )
    value_offset_share: float = Field(
        DEFAULT_CENTRE_SHARE, gt=0, le=0.5, description="value_offset 'auto' only: share of privacy.epsilon (default "
        "0.05; raised automatically up to 0.5 when n is too small for a reliable DP median, else refused)",
    )

    @model_validator(mode="after")
    def _offset_auto(self) -> MeanDatasetSpec:
        auto = self.value_offset == "auto"
        if auto and self.value_offset_range is None:
            raise ValueError("dataset.value_offset_range is required with dataset.value_offset 'auto'")
        if not auto and (self.value_offset_range is not None or self.value_offset_share != DEFAULT_CENTRE_SHARE):
            raise ValueError("dataset.value_offset_range/value_offset_share are only used with dataset.value_offset 'auto'")
        r = self.value_offset_range
        if r is not None and not (math.isfinite(r[0]) and math.isfinite(r[1]) and r[0] < r[1]):
            raise ValueError(f"dataset.value_offset_range ({list(r)}) must be finite with lo < hi")
        return self


class ReferenceCurveSpec(Frozen):
    """A public reference curve subtracted from every record before clipping (public centring, MATH.md §10.2).

    The same block centres the mean (``centering``, formula ``preprocess.public_reference@1``: added back
    after the noise), FoSR (added back to the intercept curve), FPCA and a public covariance centre.
    """

    time: list[float] = Field(min_length=2, description=(
        "times of the reference curve in the source time units of dataset.time_column (the units of "
        "dataset.time_domain), strictly increasing; linearly interpolated onto the grid"))
    value: list[float] = Field(min_length=2, description=(
        "reference values in the source value units of dataset.value_column (before value_offset and value_scale "
        "are applied), one per time; must be public, never computed from this data"))
    source: str = Field(min_length=1, description="where the public reference comes from, in words (published in the manifest)")

    @model_validator(mode="after")
    def _shape(self) -> ReferenceCurveSpec:
        if len(self.time) != len(self.value):
            raise ValueError(f"centering: time ({len(self.time)} values) and value ({len(self.value)} values) must have the same length")
        if any(b <= a for a, b in zip(self.time, self.time[1:], strict=False)):
            raise ValueError("centering.time must be strictly increasing")
        if not self.source.strip():
            raise ValueError("centering.source must say where the public reference comes from (it is published)")
        return self


def check_reference_covers_grid(centering: ReferenceCurveSpec, dataset: DatasetSpec, grid: GridSpec, *,
                                field: str = "centering") -> None:
    """Refuse a reference curve whose times do not reach every grid node of ``dataset.time_domain``.

    The check :func:`fdpcore.summaries.fpca.reference_on_grid` makes when the release plans, made when the config is
    read, so that the message names the field before any data is read.
    """
    g = make_grid(grid.rule, size=grid.size, points=grid.points, domain_range=grid.domain)
    try:
        reference_on_grid(centering.time, centering.value, g, time_domain=dataset.time_domain)
    except DomainError:
        (a, b), (c, d) = dataset.time_domain, g.domain_range
        first, last = (a + (float(x) - c) * (b - a) / (d - c) for x in (g.grid_points[0], g.grid_points[-1]))
        raise ValueError(f"{field}.time ([{centering.time[0]:g}, {centering.time[-1]:g}]) must reach from at most "
                         f"{first:g} to at least {last:g}, the first and last grid points of dataset.time_domain "
                         f"[{a:g}, {b:g}] (source units): give the public reference over the whole time domain") from None


class GridSpec(Frozen):
    """The public release grid."""

    rule: Literal["midpoint", "trapezoid"] = Field("midpoint", description="quadrature rule (MATH.md §1.1)")
    size: int | None = Field(None, ge=2, le=MAX_GRID_POINTS,
                             description=f"number of points (midpoint rule; at most {MAX_GRID_POINTS}, fdpcore.limits)")
    points: list[float] | None = Field(None, min_length=2, max_length=MAX_GRID_POINTS,
                                       description=f"explicit nodes (trapezoid rule; at most {MAX_GRID_POINTS})")
    domain: tuple[float, float] = Field((0.0, 1.0), description="grid domain")

    @model_validator(mode="after")
    def _one_form(self) -> GridSpec:
        if self.rule == "midpoint" and (self.size is None or self.points is not None):
            raise ValueError("grid: the midpoint rule needs 'size' and no 'points'")
        if self.rule == "trapezoid" and self.points is None:
            raise ValueError("grid: the trapezoid rule needs 'points'")
        if self.points is not None and any(b <= a for a, b in zip(self.points, self.points[1:], strict=False)):
            raise ValueError("grid.points must be strictly increasing")
        if not self.domain[0] < self.domain[1]:
            raise ValueError("grid.domain must satisfy a < b")
        return self


class ClippingSpec(Frozen):
    """Record-wise clipping of the publicly rescaled curves: L2 radius, and the sup-norm clip for Bernstein."""

    tau: PositiveFloat = Field(description=(
        "L2 clipping radius tau (MATH.md §1.7) in rescaled units: the norm over the grid domain of "
        "(value - value_offset) / value_scale; a public bound fixed a priori, never read off the data"))
    sup_clip: PositiveFloat | None = Field(
        None, description="sup-norm clip B, |X(t)| <= B (bernstein only; its sensitivity is 2BL/n, MATH.md §4.5)"
    )


class AutoClippingSpec(ClippingSpec):
    """As :class:`ClippingSpec`, and ``tau`` may be bought (``auto``): the fields every ``tau: auto`` shares."""

    tau: PositiveFloat | Literal["auto"] = Field(  # type: ignore[assignment]
        description="L2 clipping radius tau (MATH.md §1.7) on the rescaled curves, or 'auto': a DP quantile of the "
        "records' norms bought with tau_share of privacy.epsilon (fdpcore.noise.quantiles)",
    )
    tau_share: float = Field(
        DEFAULT_TAU_SHARE, gt=0, le=0.5, description="tau 'auto' only: share of privacy.epsilon (default 0.1; raised "
        "automatically where n * epsilon is small: for a mean up to 0.25 so the quantile level can reach 0.8 "
        "(tuning.tau.quantile_level@3), and up to 0.5 when n is too small for a reliable DP quantile, else refused)",
    )
    tau_range: tuple[PositiveFloat, PositiveFloat] | None = Field(
        None, description="tau 'auto' only: public search range [lo, hi] of tau on the rescaled curves (20 geometric "
        "candidates per decade; default [0.01, 1] x sqrt(grid domain length): at most the a-priori bound of values "
        "rescaled into [-1, 1])",
    )

    @model_validator(mode="after")
    def _range(self) -> AutoClippingSpec:
        if self.tau_range is not None and not self.tau_range[0] < self.tau_range[1]:
            raise ValueError(f"clipping.tau_range ({list(self.tau_range)}) must satisfy lo < hi")
        if self.tau != "auto" and (self.tau_share != DEFAULT_TAU_SHARE or self.tau_range is not None):
            raise ValueError("clipping.tau_share/tau_range are only used with clipping.tau 'auto'")
        return self


class MeanClippingSpec(AutoClippingSpec):
    """The mean release's clipping: as :class:`ClippingSpec`, and ``tau`` may be bought (``auto``)."""


def check_tau_auto_engine(clipping: ClippingSpec, engine: EngineSpec) -> None:
    """Refuse ``clipping.tau: auto`` with a streaming engine: its DP quantile reads every record's norm in memory."""
    if getattr(clipping, "tau", None) == "auto" and engine.name != "memory":
        raise ValueError(f"clipping.tau ('auto') needs engine 'memory', not {engine.name!r} (its DP quantile reads "
                         "every record's norm)")


#: The default tuning rule of each mean estimator, as the schema describes it (``fdpcore.privacy.tuning.DEFAULT_RULES``).
_DEFAULT_RULES_TEXT = ", ".join(f"{estimator}: {rule}" for estimator, rule in DEFAULT_RULES.items())


class TuningSpec(Frozen):
    """How the estimator's parameters are set: fixed, a tuning rule, DP selection, or (non-private) PCV.

    ``rule``: a rule of the estimator (``fdpcore.privacy.tuning.PSS_RULES_BY_ESTIMATOR``: its PSS rules, and
    ``risk_prior`` for ICLP-QR and GP; default ``fdpcore.privacy.tuning.DEFAULT_RULES``: ``risk_prior`` for
    ICLP-QR and GP, the tightened PSS rule for the others), ``dp_select`` (exponential mechanism, MATH.md §5.3, costs ``select_epsilon`` out of
    ``privacy.epsilon``) or ``pcv`` (MATH.md §5.2, **not** differentially private: only with
    ``non_private: true``). Fixed parameters (``eta``+``psi``, ``n_basis``, ``lattice_k``) replace the rule.
    """

    rule: str | None = Field(None, description="a rule of the estimator ('risk_prior' for iclp_qr and gp, or one of its PSS "
                             f"rules), 'dp_select' or 'pcv'; default per estimator: {_DEFAULT_RULES_TEXT}")
    eta: PositiveFloat | None = Field(None, description="power of the kernel (fixed; iclp_qr, iclp_ar, gp)")
    psi: PositiveFloat | None = Field(None, description="regularisation weight (fixed; iclp_qr, iclp_ar, gp)")
    n_basis: int | None = Field(None, ge=1, description="FRL: number M of eigen-coefficients (fixed)")
    lattice_k: int | None = Field(None, ge=1, description="Bernstein: lattice resolution k (fixed)")
    select_epsilon: PositiveFloat | None = Field(None, description="dp_select: epsilon_1 of the selection, part of privacy.epsilon")
    non_private: bool = Field(False, description="must be true for rule 'pcv': the release is then NOT differentially private")
    signal_fraction: PositiveFloat | None = Field(
        None, description="rule 'risk_prior' (the default of iclp_qr and gp): public signal scale of the mean as a "
        "fraction of tau (default 0.5; 0.1 where tau: auto falls back to its a-priori bound, "
        "tuning.risk.signal_default@1)",
    )
    signal_rms: PositiveFloat | None = Field(
        None, description="rule 'risk_prior', summary mean (instead of signal_fraction): PUBLIC, known a priori — "
        "the mean curve's root-mean-square distance over time_domain from value_offset (from the centering reference "
        "curve where one is set), in units of value_scale; the prior's signal scale is then min(1, signal_rms x "
        "sqrt(|T|) / tau) of whatever tau the release uses (tuning.risk.signal_stated@1)",
    )

    @model_validator(mode="after")
    def _together(self) -> TuningSpec:
        if (self.eta is None) != (self.psi is None):
            raise ValueError("tuning: eta and psi must be given together (or neither, to use the tuning rule)")
        if self.rule == "pcv" and not self.non_private:
            raise ValueError(
                "tuning.rule ('pcv') is not differentially private (MATH.md §5.2); set tuning.non_private: true "
                "to publish a non-private release, or use 'dp_select'"
            )
        if self.non_private and self.rule != "pcv":
            raise ValueError(f"tuning.non_private (true) is only allowed with tuning.rule 'pcv', not {self.rule!r}")
        if self.rule == "dp_select" and self.select_epsilon is None:
            raise ValueError("tuning.select_epsilon is required with tuning.rule 'dp_select'")
        if self.rule != "dp_select" and self.select_epsilon is not None:
            raise ValueError("tuning.select_epsilon is only used with tuning.rule 'dp_select'")
        return self


class PrivacySpec(Frozen):
    """The privacy cost of this release."""

    epsilon: PositiveFloat = Field(description=f"epsilon of this release (at least {MIN_EPSILON:g}: smaller is pure noise)")
    delta: float = Field(0.0, ge=0, lt=1, description="delta of this release (0 for pure DP)")
    calibration: Literal["analytic", "classical"] = Field(
        "analytic", description="gp only: analytic Gaussian (any epsilon) or classical sqrt(2 log(2/delta)) (epsilon <= 1)"
    )

    @field_validator("epsilon")
    @classmethod
    def _not_vanishing(cls, v: float) -> float:
        if v < MIN_EPSILON:  # trial U, L1: 1e-300 underflowed epsilon^2 and ended in "a bug in fdp"
            raise ValueError(f"must be at least {MIN_EPSILON:g}: a smaller epsilon releases pure noise (and underflows "
                             "fdp's arithmetic)")
        return v


class BudgetSpec(Frozen):
    """Proposed budget policy for the dataset; the ledger's value is authoritative once set.

    It is used only when the dataset is not yet in the ledger (``fdp budget set`` is the
    privacy officer's act that changes it afterwards).
    """

    epsilon: PositiveFloat = Field(description="total epsilon of the dataset")
    delta: float = Field(0.0, ge=0, lt=1, description="total delta of the dataset")
    accounting: Literal["basic", "zcdp"] = Field(
        "basic", description="basic: epsilon and delta add; zcdp: rho adds and converts at delta (MATH.md §12.1)"
    )
    period: Literal["month"] | None = Field(None, description="allowance period (a calendar month, UTC)")
    epsilon_per_period: PositiveFloat | None = Field(None, description="epsilon allowance of each period")
    delta_per_period: float | None = Field(None, ge=0, lt=1, description="delta allowance of each period")
    max_late_periods: int | None = Field(
        None, ge=0, le=1200, description="how many periods before the current one a late run may be charged to "
        "(default 1); never before the month the policy was set")

    @model_validator(mode="after")
    def _allowance(self) -> BudgetSpec:
        if (self.period is None) != (self.epsilon_per_period is None):
            raise ValueError("budget: period and epsilon_per_period must be given together")
        if self.epsilon_per_period is not None and self.epsilon_per_period > self.epsilon:
            raise ValueError(
                f"budget.epsilon_per_period ({self.epsilon_per_period}) must not exceed budget.epsilon ({self.epsilon})"
            )
        if self.accounting == "zcdp" and self.delta == 0:
            raise ValueError("budget.delta (0) must be > 0 for zcdp accounting")
        return self

    def policy(self) -> dict[str, Any]:
        """Keyword arguments of :meth:`fdpcore.ledger.Ledger.set_budget` for this proposal."""
        return {"accounting": self.accounting, "period": self.period, "epsilon_per_period": self.epsilon_per_period,
                "delta_per_period": self.delta_per_period, "max_late_periods": self.max_late_periods}


class ReleaseSeriesSpec(Frozen):
    """The release series a config publishes on a schedule (``fdp serve``; docs/operations.md)."""

    name: str | None = Field(
        None, min_length=1, max_length=80, pattern=SERIES_NAME_PATTERN,
        description="series name: deployment scheduled-release/<name>, release ids <name>-<YYYY-MM>, files under "
                    "<out-root>/<name>/<YYYY-MM>/ (default: <dataset id>-<summary>)")


class ReleaseConfig(Frozen):
    """A release, as written in YAML by a release engineer."""

    schema_version: Literal[1] = Field(1, description="config schema version")
    dataset: MeanDatasetSpec = Field(description="where the data is, its columns, the privacy unit and the public time/value rescaling")
    grid: GridSpec = Field(description="the public release grid (MATH.md §1.1)")
    summary: Literal["mean"] = Field("mean", description="the functional summary to release")
    estimator: Literal["iclp_qr", "iclp_ar", "frl", "gp", "bernstein"] = Field(
        "iclp_qr", description="estimator/mechanism (MATH.md §4): iclp_qr, iclp_ar, frl, gp (Gaussian, delta > 0), bernstein"
    )
    kernel: dict[str, Any] = Field(description="noise kernel mapping, e.g. {name: matern, nu: 1.5, rho: 0.1}")
    centering: ReferenceCurveSpec | None = Field(
        None, description="public reference curve r(t) subtracted from every record before clipping and added back "
        "after the noise (preprocess.public_reference@1): the release is r + value_scale x DP mean of "
        "(X_i - r)/value_scale, and a unit that cannot be aligned contributes r; omit to centre on value_offset")
    clipping: MeanClippingSpec = Field(description="public clipping radius tau of each (rescaled) record (MATH.md §1.7)")
    tuning: TuningSpec = Field(default_factory=lambda: TuningSpec(),
                               description="how eta/psi (or n_basis, lattice_k) are set: a tuning rule (default per "
                               f"estimator: {_DEFAULT_RULES_TEXT}), fixed values or dp_select")
    privacy: PrivacySpec = Field(description="the privacy cost of this release (epsilon, delta)")
    budget: BudgetSpec = Field(description="proposed total budget of the dataset (used only when the ledger does not know it yet)")
    release: ReleaseSeriesSpec | None = Field(None, description="release series of scheduled runs (fdp serve)")
    engine: EngineSpec = Field(default_factory=lambda: EngineSpec(), description="how the data is read (default: memory)")

    _kernel_ok = field_validator("kernel")(classmethod(lambda cls, v: kernel_mapping(v)))

    @model_validator(mode="after")
    def _mechanism_fields(self) -> ReleaseConfig:
        est, t, p = self.estimator, self.tuning, self.privacy
        if est == "gp":
            if p.delta == 0.0:
                raise ValueError("privacy.delta (0.0) must be > 0 for estimator 'gp' (Gaussian noise)")
            if p.calibration == "classical" and p.epsilon > 1.0:
                raise ValueError(
                    f"privacy.epsilon ({p.epsilon}) must be <= 1 with privacy.calibration 'classical'; use 'analytic'"
                )
        else:
            if p.delta != 0.0:
                raise ValueError(f"privacy.delta ({p.delta}) must be 0 for the pure-DP estimator {est!r}")
            if p.calibration != "analytic":
                raise ValueError(f"privacy.calibration ({p.calibration!r}) applies to estimator 'gp' only")
        uses_eta = est in ("iclp_qr", "iclp_ar", "gp")
        if t.eta is not None and not uses_eta:
            raise ValueError(f"tuning.eta/psi are not parameters of estimator {est!r}")
        if t.n_basis is not None and est != "frl":
            raise ValueError(f"tuning.n_basis is a parameter of estimator 'frl' only, not {est!r}")
        if t.lattice_k is not None and est != "bernstein":
            raise ValueError(f"tuning.lattice_k is a parameter of estimator 'bernstein' only, not {est!r}")
        if (self.clipping.sup_clip is None) == (est == "bernstein"):
            raise ValueError(
                "clipping.sup_clip is required for estimator 'bernstein' (sensitivity 2BL/n) and allowed only there"
            )
        if est == "iclp_ar" and t.eta is not None and t.eta < 1.0:
            raise ValueError(f"tuning.eta ({t.eta}) must be >= 1 for estimator 'iclp_ar' (MATH.md §4.2)")
        fixed = {"iclp_qr": t.eta, "iclp_ar": t.eta, "gp": t.eta, "frl": t.n_basis, "bernstein": t.lattice_k}[est]
        if t.rule is not None:
            allowed = [*sorted(PSS_RULES_BY_ESTIMATOR[est]), "dp_select", *(["pcv"] if est != "bernstein" else [])]
            if est == "bernstein":
                allowed.remove("dp_select")
            if t.rule not in allowed:
                raise ValueError(f"tuning.rule ({t.rule!r}) must be one of {allowed} for estimator {est!r}")
            if fixed is not None:
                raise ValueError(f"tuning.rule ({t.rule!r}) must be omitted when the parameters are fixed")
        if t.select_epsilon is not None and not t.select_epsilon < p.epsilon:
            raise ValueError(f"tuning.select_epsilon ({t.select_epsilon}) must be < privacy.epsilon ({p.epsilon})")
        check_engine_fields(self.engine, self.dataset.format, t.rule)
        auto = [name for name, on in (("clipping.tau", self.clipping.tau == "auto"),
                                      ("dataset.value_offset", self.dataset.value_offset == "auto")) if on]
        if auto and self.engine.name != "memory":
            raise ValueError(f"{auto[0]} ('auto') needs engine 'memory' (its DP quantile reads every record's norm)")
        if self.clipping.tau == "auto" and est == "bernstein":
            raise ValueError("clipping.tau ('auto') is not available for estimator 'bernstein' (its noise is set by sup_clip)")
        if self.centering is not None:
            if self.dataset.value_offset == "auto":
                raise ValueError("dataset.value_offset ('auto') cannot be used with centering: the reference curve "
                                 "replaces the constant centre (value_offset cancels out of (X - r)/value_scale), so the "
                                 "budget would buy nothing; remove value_offset (or set a number) or remove centering")
            check_reference_covers_grid(self.centering, self.dataset, self.grid)
        if t.signal_fraction is not None and (fixed is not None or (t.rule or "risk_prior") != "risk_prior"
                                              or est not in ("iclp_qr", "gp")):
            raise ValueError("tuning.signal_fraction is only used by tuning.rule 'risk_prior' (iclp_qr, gp)")
        if t.signal_rms is not None and (fixed is not None or (t.rule or "risk_prior") != "risk_prior"
                                         or est not in ("iclp_qr", "gp")):
            raise ValueError("tuning.signal_rms is only used by tuning.rule 'risk_prior' (iclp_qr, gp)")
        if t.signal_rms is not None and self.dataset.value_offset == "auto":
            raise ValueError("tuning.signal_rms is the mean's distance from value_offset, which value_offset: auto "
                             "only chooses after the charge: state a public value_offset, or leave signal_rms unset")
        if t.signal_rms is not None and t.signal_fraction is not None:
            raise ValueError("tuning: state signal_rms (the mean's size, known a priori) or signal_fraction (a "
                             "fraction of tau), not both")
        return self

def series_name(config: Any) -> str:
    """The release series of a config: ``release.name``, else ``<dataset id>-<summary>``.

    >>> from types import SimpleNamespace as NS
    >>> series_name(NS(release=None, dataset=NS(id="elec"), summary="mean"))
    'elec-mean'
    >>> series_name(NS(release=NS(name="elec-monthly"), dataset=NS(id="elec"), summary="mean"))
    'elec-monthly'
    """
    release = getattr(config, "release", None)
    if release is not None and release.name is not None:
        return str(release.name)
    return f"{config.dataset.id}-{config.summary}"
