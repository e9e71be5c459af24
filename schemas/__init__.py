"""Pydantic v2 models: the contract between release stages and the records that are kept.

Public records (:class:`ReleaseManifest` and its parts) hold no value computed
from the data before noise, except ``n``. Internal envelopes (:class:`CurveBatch`,
:class:`MeanSummary`, :class:`NoisePlan`) carry arrays between Prefect tasks in
memory only; they are never serialised, persisted or logged.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fdpcore.errors import DomainError
from fdpcore.kernels import kernel_spec
from fdpcore.tuning import PSS_RULES

__all__ = [
    "SCHEMA_VERSION",
    "BudgetSplit",
    "BudgetSpec",
    "ClippingSpec",
    "CurveBatch",
    "DatasetSpec",
    "GridSpec",
    "MeanSummary",
    "NoisePlan",
    "NoiseRecord",
    "OutputFile",
    "PrivacyRecord",
    "PrivacySpec",
    "Provenance",
    "ReleaseConfig",
    "ReleaseManifest",
    "SensitivityRecord",
    "TuningSpec",
]

SCHEMA_VERSION = 1

PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# --------------------------------------------------------------------------- config


class DatasetSpec(_Frozen):
    """Where the data is and how its columns map to (privacy unit, time, value)."""

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", description="stable dataset id used by the ledger")
    path: str = Field(min_length=1, description="file path; relative paths are resolved against the config file")
    format: Literal["parquet", "csv"] = Field(description="file format")
    unit_column: str = Field(min_length=1, description="column identifying the privacy unit (one record per unit)")
    time_column: str = Field(min_length=1, description="column of observation times (source units)")
    value_column: str = Field(min_length=1, description="column of observed values (source units)")
    curve_column: str | None = Field(None, description="optional column distinguishing several curves of one unit; they are averaged")
    privacy_unit: str = Field(min_length=1, description="what one record protects, in words (published)")
    time_domain: tuple[float, float] = Field(description="public time domain [a, b] in source units, mapped affinely onto the grid domain")
    value_offset: float = Field(0.0, description="public reference subtracted from every value (source units)")
    value_scale: PositiveFloat = Field(1.0, description="public scale dividing every value after the offset (source units)")
    csv_delimiter: str = Field(",", min_length=1, max_length=1, description="CSV delimiter")

    @field_validator("time_domain")
    @classmethod
    def _domain_increasing(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not v[0] < v[1]:
            raise ValueError(f"time_domain ({list(v)}) must satisfy a < b")
        return v


class GridSpec(_Frozen):
    """The public release grid."""

    rule: Literal["midpoint", "trapezoid"] = Field("midpoint", description="quadrature rule (MATH.md §1.1)")
    size: int | None = Field(None, ge=2, description="number of points (midpoint rule)")
    points: list[float] | None = Field(None, min_length=2, description="explicit nodes (trapezoid rule)")
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


class ClippingSpec(_Frozen):
    """Record-wise L2 clipping radius on the publicly rescaled curves."""

    tau: PositiveFloat = Field(description="L2 clipping radius tau (MATH.md §1.7)")


class TuningSpec(_Frozen):
    """(eta, psi): both fixed, or both chosen by a PSS rule."""

    rule: str = Field("exact_balanced", description=f"PSS rule, one of {sorted(PSS_RULES)}")
    eta: PositiveFloat | None = Field(None, description="power of the kernel (fixed)")
    psi: PositiveFloat | None = Field(None, description="regularisation weight (fixed)")

    @model_validator(mode="after")
    def _together(self) -> TuningSpec:
        if (self.eta is None) != (self.psi is None):
            raise ValueError("tuning: eta and psi must be given together (or neither, to use the PSS rule)")
        if self.rule not in PSS_RULES:
            raise ValueError(f"tuning.rule ({self.rule!r}) must be one of {sorted(PSS_RULES)}")
        return self


class PrivacySpec(_Frozen):
    """The privacy cost of this release."""

    epsilon: PositiveFloat = Field(description="epsilon of this release")
    delta: float = Field(0.0, ge=0, lt=1, description="delta of this release (0 for pure DP)")


class BudgetSpec(_Frozen):
    """Proposed total budget for the dataset; the ledger's value is authoritative once set."""

    epsilon: PositiveFloat = Field(description="total epsilon of the dataset")
    delta: float = Field(0.0, ge=0, lt=1, description="total delta of the dataset")


class ReleaseConfig(_Frozen):
    """A release, as written in YAML by a release engineer."""

    schema_version: Literal[1] = Field(1, description="config schema version")
    dataset: DatasetSpec
    grid: GridSpec
    summary: Literal["mean"] = Field("mean", description="the functional summary to release")
    estimator: Literal["iclp_qr"] = Field("iclp_qr", description="estimator/mechanism (MATH.md §4)")
    kernel: dict[str, Any] = Field(description="noise kernel mapping, e.g. {name: matern, nu: 1.5, rho: 0.1}")
    clipping: ClippingSpec
    tuning: TuningSpec = Field(default_factory=lambda: TuningSpec())
    privacy: PrivacySpec
    budget: BudgetSpec

    @field_validator("kernel")
    @classmethod
    def _kernel_ok(cls, v: dict[str, Any]) -> dict[str, Any]:
        try:
            return kernel_spec(v).as_dict()
        except DomainError as exc:
            raise ValueError(str(exc)) from None

    @model_validator(mode="after")
    def _pure(self) -> ReleaseConfig:
        if self.privacy.delta != 0.0:
            raise ValueError(f"privacy.delta ({self.privacy.delta}) must be 0 for the pure-DP estimator {self.estimator!r}")
        return self


# --------------------------------------------------------------------------- public records


class BudgetSplit(_Frozen):
    """One named part of a release's cost; the parts sum exactly to the cost."""

    name: str = Field(min_length=1)
    epsilon: float = Field(ge=0)
    delta: float = Field(0.0, ge=0, lt=1)


class SensitivityRecord(_Frozen):
    """The sensitivity that set the noise, and the paper's bound for comparison."""

    norm: str = Field(description="norm of the sensitivity, e.g. '1,C' (MATH.md §1.5)")
    value: float = Field(gt=0, description="the sensitivity used")
    bound: str = Field(description="formula id of the sensitivity used")
    paper_bound: float = Field(gt=0, description="the source paper's bound for the same setting")
    paper_formula: str = Field(description="formula id of the paper's bound")


class PrivacyRecord(_Frozen):
    """The guarantee of the release."""

    epsilon: float = Field(gt=0)
    delta: float = Field(ge=0, lt=1)
    adjacency: Literal["replace-one"] = "replace-one"
    privacy_unit: str
    guarantee: str


class NoiseRecord(_Frozen):
    """The noise law and accuracy of the release, computed from the mechanism alone."""

    distribution: str
    sampler: str
    whitened_scale: float = Field(gt=0)
    expected_l2_error: float = Field(ge=0, description="sqrt(E||noise||^2) in source units x sqrt(time)")
    expected_l2_error_scaled: float = Field(ge=0, description="sqrt(E||noise||_W^2) on the rescaled curves")
    band_level: float = Field(gt=0, lt=1)
    band_half_width_max: float = Field(ge=0, description="largest pointwise band half-width (source units)")


class OutputFile(_Frozen):
    """A published file and its SHA-256."""

    path: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class Provenance(_Frozen):
    """Where a release came from."""

    code_version: str
    git_sha: str | None = None
    created_at: datetime
    config_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    flow_run_id: str | None = None


class ReleaseManifest(_Frozen):
    """The public manifest written beside the released Parquet."""

    schema_version: Literal[1] = 1
    release_id: str
    dataset_id: str
    summary: str
    mechanism: str
    n: int = Field(ge=1)
    privacy: PrivacyRecord
    budget_splits: list[BudgetSplit]
    sensitivity: SensitivityRecord
    parameters: dict[str, Any]
    noise: NoiseRecord
    formulas: list[str]
    idealized_numerics: bool = True
    outputs: list[OutputFile]
    provenance: Provenance


# --------------------------------------------------------------------------- internal envelopes


class _Internal(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


class CurveBatch(_Internal):
    """Aligned, per-unit curves (internal: raw data, never persisted)."""

    data_matrix: np.ndarray
    n_samples: int
    counts: dict[str, int] = Field(default_factory=dict, description="data-dependent counts for the internal ledger only")


class NoisePlan(_Internal):
    """The data-independent plan of a release (an fdpcore MeanPlan)."""

    plan: Any


class MeanSummary(_Internal):
    """Pre-noise coefficients (internal: never published, logged or persisted)."""

    coefficients: np.ndarray
