"""Release config, public manifest and internal envelopes of the covariance-surface release (MATH.md §6)."""

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

from fdpcore.privacy.tuning import PSS_RULES, RISK_RULES

__all__ = [
    "CONTRIBUTION_RULE",
    "CovarianceCenteringSpec",
    "CovarianceManifest",
    "CovarianceOutputSpec",
    "CovariancePlanEnvelope",
    "CovarianceReleaseConfig",
    "CovarianceSensitivityRecord",
    "CovarianceSummary",
    "CovarianceTuningSpec",
    "RegularisationSpec",
]

#: The per-unit bounding rule of every curve release (fdpcore.data.preprocess.align_long), published in the manifest.
CONTRIBUTION_RULE = (
    "average: all curves of one privacy unit (dataset.curve_column) are aligned and averaged into one record "
    "before centring and clipping, so each unit contributes exactly one record and the sensitivity is that of "
    "one record (no group-privacy factor)"
)



class RegularisationSpec(Frozen):
    """``(eta, psi)`` fixed together, or chosen by a PSS rule of ICLP-QR (MATH.md §5.1)."""

    rule: str | None = Field(None, description="risk_prior (the default: error falls as epsilon grows) or a PSS rule "
                             "(exact_balanced, exact_free, paper_balanced, paper_free); omit when eta and psi are fixed")
    eta: PositiveFloat | None = Field(None, description="power of the kernel (fixed)")
    psi: PositiveFloat | None = Field(None, description="regularisation weight (fixed)")

    @model_validator(mode="after")
    def _together(self) -> RegularisationSpec:
        if (self.eta is None) != (self.psi is None):
            raise ValueError("tuning: eta and psi must be given together (or neither, to use the tuning rule)")
        if self.rule is not None and self.eta is not None:
            raise ValueError(f"tuning.rule ({self.rule!r}) must be omitted when eta and psi are fixed")
        if self.rule is not None and self.rule not in {*PSS_RULES, *RISK_RULES}:
            raise ValueError(f"tuning.rule ({self.rule!r}) must be one of {sorted({*PSS_RULES, *RISK_RULES})}")
        return self


CovarianceTuningSpec = RegularisationSpec


class CovarianceCenteringSpec(Frozen):
    """How curves are centred before their outer products (MATH.md §6 (a), (b)).

    ``public``: subtract a data-independent curve — the dataset's ``value_offset`` alone (``reference``
    omitted) or a public ``reference`` curve. ``private_mean``: subtract a previously *published* private
    mean release of the same dataset, found in the ledger by ``release_id`` (the two releases compose:
    their epsilons add). ``sample_mean``: centre by the records' own mean (about three times more noise).
    """

    kind: Literal["public", "private_mean", "sample_mean"] = Field(description="centring mode")
    reference: ReferenceCurveSpec | None = Field(None, description="public reference curve (kind public)")
    release_id: str | None = Field(None, min_length=1, description="published mean release in the ledger (kind private_mean)")

    @model_validator(mode="after")
    def _fields(self) -> CovarianceCenteringSpec:
        if self.reference is not None and self.kind != "public":
            raise ValueError(f"centering.reference is only used with centering.kind 'public', not {self.kind!r}")
        if (self.release_id is not None) != (self.kind == "private_mean"):
            raise ValueError("centering.release_id is required with centering.kind 'private_mean' and allowed only there")
        return self


class CovarianceOutputSpec(Frozen):
    """Post-processing of the private coefficient matrix (no privacy cost)."""

    psd: bool = Field(True, description="project the released surface onto positive semidefinite operators")
    n_components: int = Field(3, ge=1, description="number of leading eigenfunctions released with the surface")


class CovarianceReleaseConfig(Frozen):
    """A covariance-surface release, as written in YAML."""

    schema_version: Literal[1] = Field(1, description="config schema version")
    dataset: DatasetSpec = Field(description="where the data is, its columns, the privacy unit and the public time/value rescaling")
    grid: GridSpec = Field(description="the public release grid (MATH.md §1.1)")
    summary: Literal["covariance"] = Field(description="the functional summary to release")
    mechanism: Literal["iclp_qr"] = Field("iclp_qr", description="tensor ICLP-QR with upper-triangle Laplace noise")
    kernel: dict[str, Any] = Field(description="1-D noise kernel c; the surface's noise kernel is c (x) c")
    centering: CovarianceCenteringSpec = Field(description="how curves are centred before their outer products (MATH.md §6)")
    clipping: AutoClippingSpec = Field(
        description="tau: clip of the centred curves (tau_c) or, for sample_mean, of the raw curves; tau 'auto' buys it "
        "as a DP quantile of exactly those curves' norms (docs/summaries/covariance.md)")
    tuning: RegularisationSpec = Field(default_factory=lambda: RegularisationSpec(),
                                       description="(eta, psi) of the tensor ICLP-QR: a PSS rule or fixed values")
    output: CovarianceOutputSpec = Field(default_factory=lambda: CovarianceOutputSpec(),
                                         description="post-processing of the released surface (no privacy cost)")
    privacy: PrivacySpec = Field(description="the privacy cost of this release (epsilon, delta)")
    budget: BudgetSpec = Field(description="proposed total budget of the dataset (used only when the ledger does not know it yet)")
    release: ReleaseSeriesSpec | None = Field(None, description="release series of scheduled runs (fdp serve)")
    engine: EngineSpec = Field(default_factory=lambda: EngineSpec(), description="how the data is read (default: memory)")

    _kernel_ok = field_validator("kernel")(classmethod(lambda cls, v: kernel_mapping(v)))

    @model_validator(mode="after")
    def _consistent(self) -> CovarianceReleaseConfig:
        if self.privacy.delta != 0.0:
            raise ValueError(f"privacy.delta ({self.privacy.delta}) must be 0 for the pure-DP covariance release")
        if self.privacy.calibration != "analytic":
            raise ValueError(f"privacy.calibration ({self.privacy.calibration!r}) applies to Gaussian mechanisms only")
        if self.clipping.sup_clip is not None:
            raise ValueError("clipping.sup_clip is a parameter of the Bernstein mean only")
        if self.centering.reference is not None:
            check_reference_covers_grid(self.centering.reference, self.dataset, self.grid, field="centering.reference")
        check_engine_fields(self.engine, self.dataset.format, None)
        check_tau_auto_engine(self.clipping, self.engine)
        return self


class CovarianceSensitivityRecord(Frozen):
    """The bound that set the noise, and what is known about its tightness."""

    norm: str
    value: float = Field(gt=0)
    bound: str = Field(description="formula id")
    status: Literal["UPPER"] = "UPPER"
    attained_lower_bound: float = Field(gt=0, description="a neighbouring pair reaches at least this (public formula)")
    paper_bound: None = Field(None, description="[ICLP-v2] App. C.1 gives no explicit bound")


class CovarianceManifest(Frozen):
    """The public manifest of a covariance release (ReleaseManifest's shape; adds ``composition`` and ``outputs_description``)."""

    schema_version: Literal[1] = 1
    release_id: str
    dataset_id: str
    summary: Literal["covariance"] = "covariance"
    mechanism: str
    n: int = Field(ge=1)
    privacy: PrivacyRecord = Field(description="the privacy cost of this release (epsilon, delta)")
    budget_splits: list[BudgetSplit]
    sensitivity: CovarianceSensitivityRecord
    parameters: dict[str, Any]
    noise: dict[str, Any]
    composition: dict[str, Any] | None = Field(None, description="link to the private mean release used as centre")
    formulas: list[str]
    idealized_numerics: bool = Field(True, description=IDEALIZED_NUMERICS_DESCRIPTION)
    outputs: list[OutputFile]
    provenance: Provenance
    audit_commitment: AuditCommitment | None = Field(None, description="set by the ledger at publication")


class CovariancePlanEnvelope(Internal):
    """The data-independent plan (an fdpcore CovariancePlan), the centre on the grid and the composition link."""

    plan: Any
    center: Any = None
    link: dict[str, Any] | None = None


class CovarianceSummary(Internal):
    """Pre-noise whitened coordinates (internal: never published, logged or persisted)."""

    coefficients: np.ndarray
