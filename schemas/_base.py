"""Shared pydantic base classes and field types of the fdp schemas."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["SCHEMA_VERSION", "Frozen", "Internal", "PositiveFloat"]

SCHEMA_VERSION = 1

PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class Frozen(BaseModel):
    """Base of every kept record: unknown keys rejected, immutable, NaN/inf rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Internal(BaseModel):
    """Base of in-memory envelopes between tasks (arrays allowed; never serialised)."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)
