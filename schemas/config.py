"""The release configuration a release engineer writes in YAML (validated; errors name the field)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from fdp.schemas._base import Frozen, PositiveFloat
from fdpcore.errors import DomainError
from fdpcore.kernels import kernel_spec
from fdpcore.tuning import PSS_RULES

__all__ = [
    "BudgetSpec", "ClippingSpec", "DatasetSpec", "GridSpec", "PrivacySpec", "ReleaseConfig", "TuningSpec",
]


class DatasetSpec(Frozen):
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


class GridSpec(Frozen):
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


class ClippingSpec(Frozen):
    """Record-wise L2 clipping radius on the publicly rescaled curves."""

    tau: PositiveFloat = Field(description="L2 clipping radius tau (MATH.md §1.7)")


class TuningSpec(Frozen):
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


class PrivacySpec(Frozen):
    """The privacy cost of this release."""

    epsilon: PositiveFloat = Field(description="epsilon of this release")
    delta: float = Field(0.0, ge=0, lt=1, description="delta of this release (0 for pure DP)")


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
                "delta_per_period": self.delta_per_period}


class ReleaseConfig(Frozen):
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
