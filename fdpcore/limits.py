"""Identifier rules and input size limits, checked before anything is read, charged or noised.

One pattern for every identifier a user chooses — release ids, dataset ids, release series names:
a letter or digit, then letters, digits, ``.``, ``_`` or ``-``, at most :data:`ID_MAX_LENGTH`
characters. Such an id is one path segment (no ``/``, no ``..`` component, no newline or other
control character), so it can name a folder, a Prefect run and a ledger row, and it prints as one
line in every table.

The size limits were measured on the development host (docs/cli.md, "Identifiers and limits"; 2 cores, 24 GB): a mean
release at K grid points holds a few K x K float64 arrays and one dense eigendecomposition
(O(K^3)); measured with ``benchmarks/grid_limit.py``: K = 2000 10 s / 331 MB, K = 3000 40 s /
561 MB, K = 4000 504 s / 883 MB with other jobs sharing the cores. :data:`MAX_GRID_POINTS` = 4000
keeps the K x K work within about 1 GB and minutes (the former schema maximum, 20000, needs 3.2 GB
per K x K array and about 125 times as long). Prefect's API refuses a flow-run parameter body over 512 KB, so a
config's JSON form must stay below :data:`MAX_CONFIG_JSON_BYTES`.
"""

from __future__ import annotations

import re

from fdpcore.errors import ConfigError

__all__ = [
    "ID_MAX_LENGTH",
    "ID_PATTERN",
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_JSON_BYTES",
    "MAX_GRID_POINTS",
    "MAX_LIST_LENGTH",
    "MAX_TEXT_LENGTH",
    "MIN_EPSILON",
    "check_id",
    "shown",
]

#: Smallest epsilon of a release (trial U, L1: 1e-300 underflowed epsilon^2 to 0 and ended in "a bug in fdp"). A release
#: at 1e-9 is already pure noise at any n a machine holds; the bound keeps every formula's arithmetic in range.
MIN_EPSILON = 1e-9

#: Longest release id, dataset id or series name (characters).
ID_MAX_LENGTH = 128
#: Release ids, dataset ids and series names (one path segment; no control characters).
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
#: Largest number of grid points of a grid (per axis for a tensor grid).
MAX_GRID_POINTS = 4000
#: Longest text value in a config (characters): paths, column names, descriptions.
MAX_TEXT_LENGTH = 4096
#: Longest list in a config (entries); grid points are also bounded by :data:`MAX_GRID_POINTS`.
MAX_LIST_LENGTH = MAX_GRID_POINTS
#: Largest config file read (bytes).
MAX_CONFIG_BYTES = 256 * 1024
#: Largest config in its JSON form (bytes), below Prefect's 512 KB limit on flow-run parameters.
MAX_CONFIG_JSON_BYTES = 384 * 1024

_ID = re.compile(ID_PATTERN)


def shown(value: object, limit: int = 60) -> str:
    """``repr`` of a user-given value, cut to ``limit`` characters (a 4,000-character id is not echoed whole).

    >>> shown("a" * 100, limit=10)
    "'aaaaaaaa… (100 characters)"
    """
    text = repr(value)
    if len(text) <= limit:
        return text
    size = f" ({len(value)} characters)" if isinstance(value, str) else ""
    return f"{text[:limit - 1]}…{size}"


def check_id(name: str, value: object) -> str:
    """Return ``value`` if it is a valid identifier, else raise :class:`ConfigError` naming ``name``.

    >>> check_id("release id", "elec-2026-11")
    'elec-2026-11'
    >>> check_id("release id", "../x")
    Traceback (most recent call last):
    ...
    fdpcore.errors.ConfigError: release id ('../x') must be 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit
    """
    if not isinstance(value, str) or _ID.fullmatch(value) is None:
        raise ConfigError(f"{name} ({shown(value)}) must be 1-{ID_MAX_LENGTH} letters, digits, '.', '_' or '-', "
                          "starting with a letter or digit")
    return value
