"""Shared pydantic base classes and field types of the fdp schemas."""

from __future__ import annotations

import re
import types
from typing import Annotated, Any, Final, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

__all__ = ["SCHEMA_VERSION", "Frozen", "Internal", "PositiveFloat"]

SCHEMA_VERSION: Final = 1

PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class Frozen(BaseModel):
    """Base of every kept record: unknown keys rejected, immutable, NaN/inf rejected.

    Booleans and text are refused where a number is expected (pydantic would read ``true`` or
    ``"1"`` as 1.0): privacy-relevant inputs are never coerced silently (STYLE.md).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_coerced_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        if field is not None and isinstance(value, (bool, str)) and _refuses(value, field.annotation):
            kind = "a boolean" if isinstance(value, bool) else "text"
            hint = ""
            if isinstance(value, str) and re.fullmatch(r"[+-]?\d+[eE][+-]?\d+", value.strip()):
                hint = f" (YAML reads an exponent without a decimal point as text: write {_with_point(value.strip())})"
            raise ValueError(f"({value!r}) must be a number, not {kind}{hint}")
        return value


def _with_point(text: str) -> str:
    """``1e-3`` as YAML reads a number: ``1.0e-3`` (trial U, L1)."""
    mantissa, exponent = re.split("[eE]", text)
    return f"{mantissa}.0e{exponent}"


class Internal(BaseModel):
    """Base of in-memory envelopes between tasks (arrays allowed; never serialised)."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


def _refuses(value: bool | str, annotation: Any) -> bool:
    """Whether a float field (or a union with float) must refuse this boolean or text value."""
    members = get_args(annotation) if get_origin(annotation) in (Union, types.UnionType) else (annotation,)
    members = tuple(get_args(m)[0] if get_origin(m) is Annotated else m for m in members)  # PositiveFloat | ...
    if float not in members:
        return False
    if isinstance(value, bool):
        return bool not in members
    literals = [v for m in members if get_origin(m) is Literal for v in get_args(m)]
    return str not in members and value not in literals
