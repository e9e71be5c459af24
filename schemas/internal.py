"""Internal envelopes: arrays carried between Prefect tasks in memory only.

They are never serialised, persisted or logged.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from fdp.schemas._base import Internal
from pydantic import Field

__all__ = ["CurveBatch", "MeanSummary", "NoisePlan"]


class CurveBatch(Internal):
    """Aligned, per-unit curves (internal: raw data, never persisted)."""

    data_matrix: np.ndarray
    n_samples: int
    counts: dict[str, int] = Field(default_factory=dict, description="data-dependent counts for the internal ledger only")
    unit_ids: Any = Field(None, description="privacy-unit ids, one per row (dp_select's keyed-hash split); never published")
    aligned: Any = Field(None, description="one boolean per row: the unit had an alignable curve (a public centre "
                                           "leaves the others at 0, preprocess.public_reference@1); never published")


class NoisePlan(Internal):
    """The data-independent plan of a release (an fdpcore MeanPlan)."""

    plan: Any


class MeanSummary(Internal):
    """Pre-noise coefficients (internal: never published, logged or persisted)."""

    coefficients: np.ndarray
