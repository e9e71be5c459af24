"""Pydantic v2 models: the contract between release stages and the records that are kept.

* :mod:`fdp.schemas.config` — the YAML release config (:class:`ReleaseConfig`).
* :mod:`fdp.schemas.records` — public records (:class:`ReleaseManifest` and its parts); they
  hold no value computed from the data before noise, except ``n``.
* :mod:`fdp.schemas.internal` — in-memory envelopes between tasks (never serialised).
"""

from fdp.schemas._base import SCHEMA_VERSION
from fdp.schemas.config import (
    BudgetSpec,
    ClippingSpec,
    DatasetSpec,
    GridSpec,
    PrivacySpec,
    ReleaseConfig,
    ReleaseSeriesSpec,
    TuningSpec,
)
from fdp.schemas.covariance import CovarianceManifest, CovarianceReleaseConfig
from fdp.schemas.erm import ErmReleaseConfig
from fdp.schemas.fosr import FosrManifest, FosrReleaseConfig
from fdp.schemas.fpca import FpcaManifest, FpcaReleaseConfig
from fdp.schemas.internal import CurveBatch, MeanSummary, NoisePlan
from fdp.schemas.kde import KdeReleaseConfig, PointManifest
from fdp.schemas.ledger import BudgetAmount, ChargeRequest, LedgerEntry, LedgerProvenance, PeriodBudget, PrivacyBudget
from fdp.schemas.records import (
    AuditCommitment,
    BudgetSplit,
    NoiseRecord,
    OutputFile,
    PrivacyRecord,
    Provenance,
    ReleaseManifest,
    SensitivityRecord,
)

__all__ = [
    "SCHEMA_VERSION",
    "AuditCommitment",
    "BudgetAmount",
    "BudgetSplit",
    "BudgetSpec",
    "ChargeRequest",
    "ClippingSpec",
    "CovarianceManifest",
    "CovarianceReleaseConfig",
    "CurveBatch",
    "DatasetSpec",
    "ErmReleaseConfig",
    "FosrManifest",
    "FosrReleaseConfig",
    "FpcaManifest",
    "FpcaReleaseConfig",
    "GridSpec",
    "KdeReleaseConfig",
    "LedgerEntry",
    "LedgerProvenance",
    "MeanSummary",
    "NoisePlan",
    "NoiseRecord",
    "OutputFile",
    "PeriodBudget",
    "PointManifest",
    "PrivacyBudget",
    "PrivacyRecord",
    "PrivacySpec",
    "Provenance",
    "ReleaseConfig",
    "ReleaseSeriesSpec",
    "ReleaseManifest",
    "SensitivityRecord",
    "TuningSpec",
]
