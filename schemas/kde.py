"""Release config and public manifest of kernel density curves/surfaces (MATH.md §8), and the parts shared with ERM.

Input is a table of points (not curves): a privacy-unit column, one or two coordinate columns
in a public domain box, and (for ERM, :mod:`fdp.schemas.erm`) a label column. A unit with several
points contributes their average (``preprocess.points.unit_average@1``); the manifest says so.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
from fdp.schemas._base import Frozen, Internal, PositiveFloat
from fdp.schemas.config import BudgetSpec, GridSpec, PrivacySpec, ReleaseSeriesSpec
from fdp.schemas.records import (
    IDEALIZED_NUMERICS_DESCRIPTION,
    AuditCommitment,
    BudgetSplit,
    NoiseRecord,
    OutputFile,
    PrivacyRecord,
    Provenance,
    SensitivityRecord,
)
from pydantic import Field, field_validator, model_validator

from fdpcore.limits import ID_MAX_LENGTH, ID_PATTERN, MAX_GRID_POINTS
from fdpcore.summaries.kde import DEFAULT_BANDWIDTH_SHARE

__all__ = [
    "UNIT_RULE",
    "check_tensor_nodes",
    "KdeReleaseConfig",
    "PointBatch",
    "PointDatasetSpec",
    "PointManifest",
    "PointPlanEnvelope",
    "PointSummary",
    "UnitBoundingRecord",
]

#: The per-unit bounding rule of every point release (published in the manifest).
UNIT_RULE = (
    "each privacy unit contributes the average of its points' contributions (kernel bumps for KDE, loss terms for "
    "ERM), weight 1/m_u per point; n is the number of units. The sensitivity is that of one point per unit: it is "
    "the supremum of a convex function of the two contributions, attained at single points "
    "(preprocess.points.unit_average@1)"
)


class PointDatasetSpec(Frozen):
    """Where the point table is and how its columns map to (privacy unit, coordinates[, label])."""

    id: str = Field(min_length=1, max_length=ID_MAX_LENGTH, pattern=ID_PATTERN,
                    description="stable dataset id used by the ledger (fdpcore.limits.ID_PATTERN)")
    path: str = Field(min_length=1, description="file path; relative paths are resolved against the config file")
    format: Literal["parquet", "csv"] = Field(description="file format")
    unit_column: str = Field(min_length=1, description="column identifying the privacy unit (its points are averaged)")
    coordinate_columns: list[str] = Field(min_length=1, max_length=2, description="one or two coordinate columns")
    domain: list[tuple[float, float]] = Field(min_length=1, max_length=2,
                                              description="public box [a, b] per coordinate, mapped affinely onto [0, 1]")
    outside_domain: Literal["error", "clamp"] = Field(
        "clamp", description="a coordinate outside the domain: clamp it to the box (default; record-wise, counted in the "
                             "ledger's internal entry only), or 'error': stop before any charge, naming the row")
    privacy_unit: str = Field(min_length=1, description="what one unit protects, in words (published)")
    csv_delimiter: str = Field(",", min_length=1, max_length=1, description="CSV delimiter")

    @model_validator(mode="after")
    def _shape(self) -> PointDatasetSpec:
        if len(self.domain) != len(self.coordinate_columns):
            raise ValueError(f"dataset.domain ({len(self.domain)} boxes) must have one [a, b] per coordinate column "
                             f"({len(self.coordinate_columns)})")
        for a, b in self.domain:
            if not (np.isfinite(a) and np.isfinite(b) and a < b):
                raise ValueError(f"dataset.domain ([{a}, {b}]) must satisfy a < b, both finite")
        if len(set(self.coordinate_columns)) != len(self.coordinate_columns):
            raise ValueError("dataset.coordinate_columns must be distinct")
        return self


def check_tensor_nodes(grid: GridSpec, dataset: PointDatasetSpec) -> None:
    """Two coordinates: the tensor grid's K x K nodes count against :data:`fdpcore.limits.MAX_GRID_POINTS`.

    Its kernel work grows with the nodes as a 1-D grid's with its points (new-user trial M: a 100 x 100 density
    surface kept ``fdp plan`` busy for over 5 minutes, 4000 x 4000 ran out of memory).
    """
    if len(dataset.coordinate_columns) != 2:
        return
    k = grid.size if grid.size is not None else len(grid.points or ())
    if k * k > MAX_GRID_POINTS:
        raise ValueError(f"grid: two coordinates make a {k} x {k} tensor grid, {k * k} nodes; at most {MAX_GRID_POINTS} "
                         f"(fdpcore.limits, as a 1-D grid's points): grid.size at most {math.isqrt(MAX_GRID_POINTS)}")


def _unit_grid(grid: GridSpec) -> GridSpec:
    if tuple(grid.domain) != (0.0, 1.0):
        raise ValueError(f"grid.domain ({list(grid.domain)}) must be [0, 1]: points are mapped onto the unit box")
    return grid


class KdeReleaseConfig(Frozen):
    """A private density curve (one coordinate) or surface (two coordinates), as written in YAML."""

    schema_version: Literal[1] = Field(1, description="config schema version")
    summary: Literal["kde"] = Field(description="the summary to release")
    dataset: PointDatasetSpec = Field(description="where the data is, its columns, the privacy unit and the public time/value rescaling")
    grid: GridSpec = Field(description="grid on [0, 1] used for every coordinate (a tensor grid in 2-D)")
    mechanism: Literal["iclp_qr", "hall_gp"] = Field(
        "iclp_qr", description="iclp_qr: pure DP (MATH.md §8.1); hall_gp: Gaussian-process noise, (epsilon, delta) (§8.2)")
    kernel: Literal["gaussian", "exponential"] = Field(
        "gaussian", description="noise kernel family c_h (separable in 2-D); hall_gp needs gaussian")
    bandwidth: PositiveFloat | Literal["normal_reference", "n_rule", "auto"] = Field(
        "normal_reference", description="h on the unit-scaled domain (public), or a privacy-safe rule of n and d: "
        "normal_reference (the default) = (1.06 / 6) n^(-1/5) in 1-D, (1/6) n^(-1/6) in 2-D, the normal-reference "
        "rule for points that fill the public range within +-3 sd (tuning.kde.normal_reference@1); n_rule = "
        "n^(-1/(4+d)), the paper's (tuning.kde.bandwidth@1), about 6x wider; or auto: bought with bandwidth_share of "
        "privacy.epsilon (tuning.kde.bandwidth_auto@1) - DP quartiles of each coordinate of the units' mean points "
        "give the points' scale, and h minimises the normal-reference error at that scale plus the release's noise; "
        "normal_reference for free when n * epsilon is too small; the manifest records the split and the bandwidth")
    bandwidth_share: float = Field(
        DEFAULT_BANDWIDTH_SHARE, gt=0, le=0.5, description="bandwidth 'auto' only: share of privacy.epsilon (default "
        "0.1; raised automatically up to 0.5 when n is too small for reliable DP quartiles, else the bandwidth is "
        "normal_reference and nothing is bought)")
    eta: PositiveFloat | None = Field(None, description="power of the kernel (iclp_qr only; > 0.5, MATH.md §8.1 uses 1.01-1.5)")
    privacy: PrivacySpec = Field(description="the privacy cost of this release (epsilon, delta)")
    budget: BudgetSpec = Field(description="proposed total budget of the dataset (used only when the ledger does not know it yet)")
    release: ReleaseSeriesSpec | None = Field(None, description="release series of scheduled runs (fdp serve)")

    _grid_on_unit_box = field_validator("grid")(classmethod(lambda cls, v: _unit_grid(v)))

    @model_validator(mode="after")
    def _mechanism_fields(self) -> KdeReleaseConfig:
        check_tensor_nodes(self.grid, self.dataset)
        p = self.privacy
        if self.bandwidth != "auto" and self.bandwidth_share != DEFAULT_BANDWIDTH_SHARE:
            raise ValueError("bandwidth_share is only used with bandwidth 'auto'")
        if self.mechanism == "iclp_qr":
            if self.eta is None or not self.eta > 0.5:
                raise ValueError(f"eta ({self.eta}) must be given and > 0.5 for mechanism 'iclp_qr'")
            if p.delta != 0.0:
                raise ValueError(f"privacy.delta ({p.delta}) must be 0 for the pure-DP mechanism 'iclp_qr'")
            if p.calibration != "analytic":
                raise ValueError(f"privacy.calibration ({p.calibration!r}) applies to mechanism 'hall_gp' only")
        else:
            if self.eta is not None:
                raise ValueError("eta is a parameter of mechanism 'iclp_qr' only")
            if self.kernel != "gaussian":
                raise ValueError(f"kernel ({self.kernel!r}) must be 'gaussian' for mechanism 'hall_gp' (MATH.md §8.2)")
            if p.delta == 0.0:
                raise ValueError("privacy.delta (0.0) must be > 0 for mechanism 'hall_gp' (Gaussian noise)")
            if p.calibration == "classical" and p.epsilon > 1.0:
                raise ValueError(f"privacy.epsilon ({p.epsilon}) must be <= 1 with privacy.calibration 'classical'")
        return self


class UnitBoundingRecord(Frozen):
    """The privacy unit's contribution rule (published)."""

    rule: Literal["average"] = "average"
    description: str = UNIT_RULE
    formula: str = "preprocess.points.unit_average@1"


class PointManifest(Frozen):
    """Public manifest of a KDE or ERM release: the shape of ReleaseManifest plus the unit rule and the solver."""

    schema_version: Literal[1] = 1
    release_id: str
    dataset_id: str
    summary: Literal["kde", "erm"]
    mechanism: str
    n: int = Field(ge=1, description="number of privacy units")
    privacy: PrivacyRecord = Field(description="the privacy cost of this release (epsilon, delta)")
    unit_bounding: UnitBoundingRecord = Field(default_factory=lambda: UnitBoundingRecord())
    budget_splits: list[BudgetSplit]
    sensitivity: SensitivityRecord
    parameters: dict[str, Any]
    noise: NoiseRecord
    solver: dict[str, Any] | None = Field(None, description="ERM only: solver, certified tolerance and what the bound assumes")
    formulas: list[str]
    idealized_numerics: bool = Field(True, description=IDEALIZED_NUMERICS_DESCRIPTION)
    outputs: list[OutputFile]
    provenance: Provenance
    audit_commitment: AuditCommitment | None = Field(None, description="set by the ledger at publication")


class PointBatch(Internal):
    """Points of the table on the unit box, with their units (internal: never published or persisted)."""

    unit_codes: np.ndarray
    points: np.ndarray
    labels: np.ndarray | None = None
    n_samples: int
    counts: dict[str, int]


class PointPlanEnvelope(Internal):
    """The data-independent plan (an fdpcore PointPlan)."""

    plan: Any


class PointSummary(Internal):
    """Pre-noise whitened coordinates (internal: never published, logged or persisted)."""

    coefficients: np.ndarray
