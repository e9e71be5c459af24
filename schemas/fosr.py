"""Release config, public manifest and internal envelopes of function-on-scalar regression (MATH.md §7)."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from fdp.schemas._base import Frozen, Internal, PositiveFloat
from fdp.schemas.config import (
    AutoClippingSpec,
    BudgetSpec,
    DatasetSpec,
    GridSpec,
    PrivacySpec,
    ReleaseSeriesSpec,
    check_reference_covers_grid,
    check_tau_auto_engine,
    kernel_mapping,
)
from fdp.schemas.covariance import RegularisationSpec
from fdp.schemas.engine import EngineSpec, check_engine_fields
from fdp.schemas.fpca import ReferenceCurveSpec
from fdp.schemas.records import (
    IDEALIZED_NUMERICS_DESCRIPTION,
    AuditCommitment,
    BudgetSplit,
    OutputFile,
    PrivacyRecord,
    Provenance,
)
from pydantic import Field, field_validator, model_validator

__all__ = ["CovariateSpec", "FosrData", "FosrManifest", "FosrPlanEnvelope", "FosrReleaseConfig", "SplitSpec"]


class CovariateSpec(Frozen):
    """A scalar covariate column of the dataset, constant within each privacy unit.

    Numeric (``encoding`` omitted), a public numeric ``encoding`` of a categorical column
    (``{M: 1, F: -1}``), or ``encoding: one_hot`` with the public ``levels`` and a ``reference`` level:
    ``len(levels) - 1`` indicator columns, one per non-reference level, each 1 for that level and 0
    otherwise (MATH.md §7; a one-hot block has Euclidean norm at most 1, see docs/proofs/sensitivity.fosr.*).
    """

    name: str = Field(min_length=1, description="column name in the dataset")
    encoding: dict[str, float] | Literal["one_hot"] | None = Field(
        None, description="public encoding of a categorical column: a mapping category -> number, e.g. {M: 1, F: -1}, "
                          "or 'one_hot' (with levels and reference); omit for a numeric column")
    levels: list[str] | None = Field(
        None, description="one_hot only: every category the column may take, listed a priori (public; a value not "
                          "listed is an error naming the row, never a new column)")
    reference: str | None = Field(
        None, description="one_hot only: the level encoded as all zeros (absorbed by the intercept); one of levels")
    shares: dict[str, float] | None = Field(
        None, description="PUBLIC, a priori (never from the data): the expected share of units in each category, "
                          "e.g. {M: 0.5, F: 0.5} or a census figure; used only by `fdp plan` to price the coefficient "
                          "curves before anything is spent (default: every category equally often). Categorical "
                          "covariates only; the shares must cover every category and sum to 1. Never enters the "
                          "release")

    @field_validator("encoding", mode="before")
    @classmethod
    def _keys_text(cls, v: Any) -> Any:
        return {str(k): val for k, val in v.items()} if isinstance(v, dict) else v

    @field_validator("levels", mode="before")
    @classmethod
    def _levels_text(cls, v: Any) -> Any:
        return [str(x) for x in v] if isinstance(v, list) else v

    @field_validator("reference", mode="before")
    @classmethod
    def _reference_text(cls, v: Any) -> Any:
        return str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v

    @field_validator("shares", mode="before")
    @classmethod
    def _shares_text(cls, v: Any) -> Any:
        return {str(k): val for k, val in v.items()} if isinstance(v, dict) else v

    @model_validator(mode="after")
    def _informative(self) -> CovariateSpec:
        if self.encoding == "one_hot":
            if self.levels is None or self.reference is None:
                raise ValueError(f"covariates: one_hot encoding of {self.name!r} needs levels and reference")
            if len(self.levels) < 2 or len(set(self.levels)) != len(self.levels):
                raise ValueError(f"covariates: levels of {self.name!r} must list at least two distinct categories")
            if self.reference not in self.levels:
                raise ValueError(f"covariates: reference of {self.name!r} must be one of its levels {self.levels}")
            self._check_shares()
            return self
        if self.levels is not None or self.reference is not None:
            raise ValueError(f"covariates: levels and reference of {self.name!r} are used only with encoding one_hot")
        self._check_shares()
        if isinstance(self.encoding, dict):
            if len(self.encoding) < 2:
                raise ValueError(f"covariates: encoding of {self.name!r} must list at least two categories")
            if len(set(self.encoding.values())) < 2:
                raise ValueError(f"covariates: encoding of {self.name!r} maps every category to the same value; "
                                 "the design would be singular whatever the data")
        return self

    def _check_shares(self) -> None:
        if self.shares is None:
            return
        categories = self.levels if self.encoding == "one_hot" else list(self.encoding or {})
        if not categories:
            raise ValueError(f"covariates: shares of {self.name!r} need a categorical covariate (encoding or one_hot); "
                             "a numeric covariate's distribution is not public")
        if sorted(self.shares) != sorted(categories):
            raise ValueError(f"covariates: shares of {self.name!r} must list exactly its categories {categories}")
        values = list(self.shares.values())
        if any(not 0.0 <= v <= 1.0 for v in values) or abs(sum(values) - 1.0) > 1e-6:
            raise ValueError(f"covariates: shares of {self.name!r} must be between 0 and 1 and sum to 1 "
                             f"(they sum to {sum(values):g})")

    def design_columns(self) -> list[tuple[str, dict[str, float] | None]]:
        """``(label, encoding)`` of each encoded design column: one, or ``len(levels) - 1`` indicators for one_hot."""
        if self.encoding == "one_hot":
            return [(f"{self.name}={level}", {lv: float(lv == level) for lv in self.levels or []})
                    for level in self.levels or [] if level != self.reference]
        return [(self.name, self.encoding)]


class SplitSpec(Frozen):
    """The budget split between T1 (design moments) and T2 (cross-moment curves), fixed a priori."""

    gamma: float | None = Field(None, gt=0, lt=1, description="share of epsilon for T1; omit for the balanced rule")
    floor: PositiveFloat | None = Field(
        None, description="rho_min of the safe inverse (a public lower bound on the design's smallest eigenvalue); "
                          "omit for c Delta1/(gamma eps)")


class FosrReleaseConfig(Frozen):
    """A function-on-scalar regression release, as written in YAML."""

    schema_version: Literal[1] = Field(1, description="config schema version")
    dataset: DatasetSpec = Field(description="where the data is, its columns, the privacy unit and the public time/value rescaling")
    grid: GridSpec = Field(description="the public release grid (MATH.md §1.1)")
    summary: Literal["fosr"] = Field(description="the functional summary to release")
    mechanism: Literal["laplace_t1_iclp_qr_t2"] = Field(
        "laplace_t1_iclp_qr_t2", description="Laplace on vech(T1), ICLP-QR on T2, safe inverse (MATH.md §7)")
    kernel: dict[str, Any] = Field(description="1-D noise kernel of the coefficient curves")
    covariates: list[CovariateSpec] = Field(min_length=1, description="scalar covariates (constant within a unit)")
    covariates_within_unit: Literal["average", "error"] = Field(
        "average", description="a covariate that varies within a unit: use the unit's mean (default; record-wise, "
                               "counted in the ledger's internal entry only), or 'error': stop before any charge")
    intercept: bool = Field(True, description="add the constant covariate 1 (its T1 entry is released without noise)")
    covariate_bound: PositiveFloat = Field(
        description="Euclidean clip radius of the encoded covariates (B_z with an intercept, B_x without)")
    centering: ReferenceCurveSpec | None = Field(
        None, description="public reference curve subtracted from every response before clipping; added back to "
                          "the intercept curve (post-processing)")
    clipping: AutoClippingSpec = Field(
        description="tau: L2 clip radius tau_Y of the (centred, rescaled) responses; tau 'auto' buys it as a DP quantile "
        "of those responses' norms (docs/summaries/fosr.md)")
    split: SplitSpec = Field(default_factory=lambda: SplitSpec(),
                             description="budget split between T1 and T2 and the safe-inverse floor (MATH.md §7)")
    tuning: RegularisationSpec = Field(default_factory=lambda: RegularisationSpec(),
                                       description="(eta, psi) of the ICLP-QR noise on T2: a PSS rule or fixed values")
    privacy: PrivacySpec = Field(description="the privacy cost of this release (epsilon, delta)")
    budget: BudgetSpec = Field(description="proposed total budget of the dataset (used only when the ledger does not know it yet)")
    release: ReleaseSeriesSpec | None = Field(None, description="release series of scheduled runs (fdp serve)")
    engine: EngineSpec = Field(default_factory=lambda: EngineSpec(), description="how the data is read (default: memory)")

    _kernel_ok = field_validator("kernel")(classmethod(lambda cls, v: kernel_mapping(v)))

    def design_columns(self) -> list[tuple[str, str, dict[str, float] | None]]:
        """``(label, column, encoding)`` of every encoded covariate column, in design order (intercept excluded)."""
        return [(label, c.name, enc) for c in self.covariates for label, enc in c.design_columns()]

    def coefficient_names(self) -> list[str]:
        """Names of the released coefficient curves: ``intercept`` (with one), then the design columns' labels."""
        return (["intercept"] if self.intercept else []) + [label for label, _, _ in self.design_columns()]

    @property
    def n_design_columns(self) -> int:
        """Number of encoded covariate columns (intercept excluded): the ``p`` of MATH.md §7 without the 1."""
        return len(self.design_columns())

    @model_validator(mode="after")
    def _consistent(self) -> FosrReleaseConfig:
        names = [c.name for c in self.covariates]
        if len(set(names)) != len(names):
            raise ValueError(f"covariates: names {names} must be distinct (a repeated column makes the design singular)")
        ds = self.dataset
        taken = {ds.unit_column, ds.time_column, ds.value_column, ds.curve_column}
        clash = sorted(set(names) & taken)
        if clash:
            raise ValueError(f"covariates {clash} must not be the unit, time, value or curve column")
        if self.privacy.delta != 0.0:
            raise ValueError(f"privacy.delta ({self.privacy.delta}) must be 0 for the pure-DP regression release")
        if self.privacy.calibration != "analytic":
            raise ValueError(f"privacy.calibration ({self.privacy.calibration!r}) applies to Gaussian mechanisms only")
        if self.clipping.sup_clip is not None:
            raise ValueError("clipping.sup_clip is a parameter of the Bernstein mean only")
        if self.centering is not None and not self.intercept:
            raise ValueError("centering needs intercept: true (the reference curve is added back to the intercept curve)")
        if self.centering is not None:
            check_reference_covers_grid(self.centering, self.dataset, self.grid)
        check_engine_fields(self.engine, self.dataset.format, None)
        check_tau_auto_engine(self.clipping, self.engine)
        return self


class FosrManifest(Frozen):
    """The public manifest of a FoSR release (ReleaseManifest's shape; one sensitivity per budget part)."""

    schema_version: Literal[1] = 1
    release_id: str
    dataset_id: str
    summary: Literal["fosr"] = "fosr"
    mechanism: str
    n: int = Field(ge=1)
    privacy: PrivacyRecord = Field(description="the privacy cost of this release (epsilon, delta)")
    budget_splits: list[BudgetSplit]
    sensitivity: dict[str, dict[str, Any]] = Field(description="one record per budget part (T1, T2)")
    parameters: dict[str, Any]
    noise: dict[str, Any]
    design_moments: list[list[float]] = Field(description="the released private T1~ (p x p, symmetric)")
    formulas: list[str]
    idealized_numerics: bool = Field(True, description=IDEALIZED_NUMERICS_DESCRIPTION)
    outputs: list[OutputFile]
    provenance: Provenance
    audit_commitment: AuditCommitment | None = Field(None, description="set by the ledger at publication")


class FosrPlanEnvelope(Internal):
    """The data-independent plan (an fdpcore FosrPlan) and the public reference on the grid."""

    plan: Any
    reference: Any = None


class FosrData(Internal):
    """Clipped covariates and curves and the pre-noise summaries (internal: never published, logged or persisted)."""

    t1: np.ndarray
    t2: np.ndarray
