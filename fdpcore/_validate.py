"""Entry validation helpers: messages read "<name> (<value>) must <condition>"."""

from __future__ import annotations

import math

import numpy as np

from fdpcore._typing import ArrayLike, NDArrayFloat
from fdpcore.errors import DomainError, PrivacyParameterError


def positive_finite(name: str, value: float, *, privacy: bool = True) -> float:
    """Return ``value`` as float if it is finite and > 0, else raise naming ``name``."""
    err = PrivacyParameterError if privacy else DomainError
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise err(f"{name} ({value!r}) must be a number") from None
    if not math.isfinite(v) or v <= 0:
        raise err(f"{name} ({value!r}) must be finite and > 0")
    return v


def finite(name: str, value: float) -> float:
    """Return ``value`` as float if it is finite, else raise :class:`DomainError` naming ``name``."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise DomainError(f"{name} ({value!r}) must be a number") from None
    if not math.isfinite(v):
        raise DomainError(f"{name} ({value!r}) must be finite")
    return v


def delta_value(delta: float) -> float:
    """Validate delta in [0, 1)."""
    try:
        d = float(delta)
    except (TypeError, ValueError):
        raise PrivacyParameterError(f"delta ({delta!r}) must be a number") from None
    if not (math.isfinite(d) and 0.0 <= d < 1.0):
        raise PrivacyParameterError(f"delta ({delta!r}) must be in [0, 1)")
    return d


def positive_int(name: str, value: int, *, minimum: int = 1) -> int:
    """Validate an integer >= minimum without coercing floats."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise DomainError(f"{name} ({value!r}) must be an integer >= {minimum}")
    if int(value) < minimum:
        raise DomainError(f"{name} ({value!r}) must be an integer >= {minimum}")
    return int(value)


def finite_matrix(name: str, x: ArrayLike, ncols: int | None = None) -> NDArrayFloat:
    """Return a finite 2-D float array, raising DomainError naming ``name``."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise DomainError(f"{name} (shape {arr.shape}) must be a 2-D array (n_samples x n_points)")
    if ncols is not None and arr.shape[1] != ncols:
        raise DomainError(f"{name} (shape {arr.shape}) must have {ncols} columns (one per grid point)")
    if not np.all(np.isfinite(arr)):
        raise DomainError(f"{name} must contain only finite values")
    return arr
