"""Shared pydantic base classes and field types of the fdp schemas."""

from __future__ import annotations

import types
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["SCHEMA_VERSION", "Frozen", "Internal", "PositiveFloat"]

SCHEMA_VERSION = 1

PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class Frozen(BaseModel):
    """Base of every kept record: unknown keys rejected, immutable, NaN/inf rejected.

    Booleans and text are refused where a number is expected (pydantic would read ``true`` or
    ``"1"`` as 1.0): privacy-relevant inputs are never coerced silently (STYLE.md).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_boolean_numbers(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, field in cls.model_fields.items():
                value = data.get(field.alias or name)
                if isinstance(value, (bool, str)) and _expects_float(field.annotation):
                    kind = "a boolean" if isinstance(value, bool) else "text"
                    raise ValueError(f"{name} ({value!r}) must be a number, not {kind}")
        return data


def _expects_float(annotation: Any) -> bool:
    if annotation is float:
        return True
    if get_origin(annotation) in (Union, types.UnionType):
        return any(_expects_float(a) for a in get_args(annotation))
    return False


class Internal(BaseModel):
    """Base of in-memory envelopes between tasks (arrays allowed; never serialised)."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)
