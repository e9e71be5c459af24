"""Release config, public manifest and internal envelopes of the private FPCA release (MATH.md §10).

The mechanism is the exponential mechanism with a matrix-Bingham base measure ([AKRS] §5's
form), sampled exactly for one component and by a Gibbs sampler otherwise; the manifest
says which, and how the burn-in was chosen.
"""

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
    ReferenceCurveSpec,
    ReleaseSeriesSpec,
    check_reference_covers_grid,
)
from fdp.schemas.records import (
    IDEALIZED_NUMERICS_DESCRIPTION,
    AuditCommitment,
    BudgetSplit,
    OutputFile,
    PrivacyRecord,
    Provenance,
)
from pydantic import Field, field_validator, model_validator

__all__ = [
    "BaseMeasureSpec",
    "FpcaBasisSpec",
    "FpcaGram",
    "FpcaManifest",
    "FpcaPlanEnvelope",
    "FpcaReleaseConfig",
    "FpcaSamplerRecord",
    "FpcaSensitivityRecord",
    "ReferenceCurveSpec",
    "SamplerSpec",
]


class FpcaBasisSpec(Frozen):
    """The public basis: leading eigenfunctions of a trace-normalised Gaussian kernel Sigma."""

    kernel: Literal["gaussian"] = Field("gaussian", description="kernel family of Sigma (MATH.md §13.6)")
    n_basis: int = Field(5, ge=2, le=200, description="number m of basis functions")
    length_scale: PositiveFloat | None = Field(
        None, description="length scale on the grid domain; omit to use the rule tuning.fpca.gaussian_basis@1")
    explained: float = Field(0.99, gt=0, lt=1, description="trace share the m eigenvalues must carry (the rule's target)")


class BaseMeasureSpec(Frozen):
    """Base measure of the exponential mechanism (MATH.md §10.3)."""

    form: Literal["bingham"] = Field("bingham", description="matrix Bingham base measure etr(-c V^T Sigma^-1 V)")
    prior_strength: float | Literal["paper"] = Field(
        "paper", description="c >= 0; 'paper' is [AKRS]'s c = epsilon/2")

    @field_validator("prior_strength")
    @classmethod
    def _nonneg(cls, v: float | str) -> float | str:
        if isinstance(v, float) and not (np.isfinite(v) and v >= 0):
            raise ValueError(f"prior_strength ({v}) must be finite and >= 0, or 'paper'")
        return v


class SamplerSpec(Frozen):
    """How the components are drawn (public; fixed before looking at the data).

    ``kind: deflation`` (default) draws the ``k`` components one by one, each exactly, on the complement
    of those already drawn (``epsilon/k`` each): pure epsilon-DP with no chain and no burn-in. The Gibbs
    chain of [AKRS] (``kind: gibbs``) has no certified bound on its distance from its target, so a
    private release with ``n_components > 1`` refuses it (MATH.md §10.5).
    """

    kind: Literal["deflation", "gibbs"] = Field("deflation", description="deflation: exact draws (default); gibbs: MCMC")
    method: Literal["acg", "hoff"] = Field("acg", description="Gibbs column update: exact ACG draw or Hoff's coordinate scan")
    burn_in: int | None = Field(None, ge=1, le=10_000_000, description="Gibbs sweeps (kind gibbs only; refused for k > 1)")
    burn_in_choice: str | None = Field(None, min_length=1, description="how the burn-in was chosen (kind gibbs only)")

    @model_validator(mode="after")
    def _burn_in_only_for_gibbs(self) -> SamplerSpec:
        if self.kind == "deflation" and (self.burn_in is not None or self.burn_in_choice is not None):
            raise ValueError(
                f"sampler.burn_in ({self.burn_in}): the default sampler (kind 'deflation') draws every component exactly "
                "and needs no burn-in; remove sampler.burn_in and sampler.burn_in_choice"
            )
        return self


class FpcaReleaseConfig(Frozen):
    """A private FPCA release, as written in YAML."""

    schema_version: Literal[1] = Field(1, description="config schema version")
    dataset: DatasetSpec = Field(description="where the data is, its columns, the privacy unit and the public time/value rescaling")
    grid: GridSpec = Field(description="the public release grid (MATH.md §1.1)")
    summary: Literal["fpca"] = Field(description="the functional summary to release")
    mechanism: Literal["exponential_bingham"] = Field("exponential_bingham", description="MATH.md §10.3")
    n_components: int = Field(ge=1, description="number k of released components")
    basis: FpcaBasisSpec = Field(default_factory=lambda: FpcaBasisSpec(),
                                 description="the public basis the components are drawn in (MATH.md §10.1)")
    centering: ReferenceCurveSpec | None = Field(None, description="public reference curve subtracted before clipping")
    clipping: AutoClippingSpec = Field(
        description="public clipping radius tau of each (rescaled, centred) record (MATH.md §1.7); tau 'auto' buys it as "
        "a DP median of those records' norms (docs/summaries/fpca.md)")
    base_measure: BaseMeasureSpec = Field(default_factory=lambda: BaseMeasureSpec(),
                                          description="base measure of the exponential mechanism (MATH.md §10.3)")
    sampler: SamplerSpec = Field(default_factory=lambda: SamplerSpec(),
                                 description="MCMC settings of the sampler (public, fixed a priori)")
    privacy: PrivacySpec = Field(description="the privacy cost of this release (epsilon, delta)")
    budget: BudgetSpec = Field(description="proposed total budget of the dataset (used only when the ledger does not know it yet)")
    release: ReleaseSeriesSpec | None = Field(None, description="release series of scheduled runs (fdp serve)")

    @model_validator(mode="after")
    def _consistent(self) -> FpcaReleaseConfig:
        if self.n_components >= self.basis.n_basis:
            raise ValueError(f"n_components ({self.n_components}) must be < basis.n_basis ({self.basis.n_basis})")
        if self.privacy.delta != 0.0:
            raise ValueError(f"privacy.delta ({self.privacy.delta}) must be 0 for the pure-DP exponential mechanism")
        if self.sampler.kind == "gibbs" and self.n_components > 1:
            raise ValueError(
                f"sampler.kind ('gibbs') with n_components ({self.n_components}) > 1: no bound on the Gibbs chain's "
                "distance from its target is certified, so the release would not be differentially private (not even "
                "with a delta); use sampler.kind 'deflation' (the default: exact draws, pure epsilon-DP)"
            )
        if self.centering is not None:
            check_reference_covers_grid(self.centering, self.dataset, self.grid)
        return self


class FpcaSensitivityRecord(Frozen):
    """The utility's sensitivity that scales the exponential mechanism."""

    norm: Literal["utility"] = Field("utility", description="sup over projections of |xi_D(P) - xi_D'(P)|")
    value: float = Field(gt=0, description="tau^2")
    bound: str = Field(description="formula id")


class FpcaSamplerRecord(Frozen):
    """How the released state was drawn, and what the guarantee assumes."""

    distribution: str
    method: str
    kind: Literal["deflation", "gibbs"] = Field("deflation", description="how the components were drawn: 'deflation' "
                                                "for exact draws (always with one component), 'gibbs' for the chain")
    exact: bool = Field(description="true when every released state is an exact draw (deflation, or k = 1)")
    burn_in: int | None = Field(None, description="Gibbs sweeps before the released state (None for exact draws)")
    burn_in_choice: str | None = None
    released_states: Literal[1] = 1
    expected_energy_shortfall: float | None = Field(
        None, ge=0, description="the noise part of the expected captured-energy shortfall per record of the released "
        "components against the best subspace of the basis, source units squared (formula "
        "accuracy.fpca.energy_shortfall@1, a Laplace approximation: an accuracy figure, not a privacy bound); the base "
        "measure adds a data-dependent bias to it; what `fdp plan` stated")
    initialization: str
    rng: str
    caveat: str


class FpcaManifest(Frozen):
    """The public manifest of an FPCA release (the shape of ReleaseManifest; ``sampler`` replaces ``noise``)."""

    schema_version: Literal[1] = 1
    release_id: str
    dataset_id: str
    summary: Literal["fpca"] = "fpca"
    mechanism: str
    n: int = Field(ge=1)
    privacy: PrivacyRecord = Field(description="the privacy cost of this release (epsilon, delta)")
    budget_splits: list[BudgetSplit]
    sensitivity: FpcaSensitivityRecord
    parameters: dict[str, Any]
    sampler: FpcaSamplerRecord
    formulas: list[str]
    idealized_numerics: bool = Field(True, description=IDEALIZED_NUMERICS_DESCRIPTION)
    outputs: list[OutputFile]
    provenance: Provenance
    audit_commitment: AuditCommitment | None = Field(None, description="set by the ledger at publication")


class FpcaPlanEnvelope(Internal):
    """The data-independent plan (an fdpcore FpcaPlan) and the public reference on the grid."""

    plan: Any
    reference: Any = None


class FpcaGram(Internal):
    """``X^T X`` of the clipped coefficients (internal: pre-noise, never published, logged or persisted)."""

    gram: np.ndarray
