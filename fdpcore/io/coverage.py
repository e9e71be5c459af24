"""How many privacy units of a long table have no reading the alignment can use (operator's terminal only).

A unit whose every row has a time outside the public ``time_domain``, or a non-finite time or value, is
ignored row by row by :func:`fdpcore.data.preprocess.align_long` and so becomes a zero record, although it
has rows in the file (e.g. two-digit years against a domain in four-digit years). The count is data: ``fdp plan``
and ``fdp init`` print it for the curator; it is never published, never charged and never stored.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fdpcore.io.tables import LongTable

__all__ = ["units_without_usable_rows"]


def units_without_usable_rows(table: LongTable, time_domain: tuple[float, float]) -> int:
    """The units of ``table`` none of whose rows has a finite value at a finite time inside ``time_domain``.

    Units are told apart as the alignment tells them apart (``pd.factorize``'s equality, mixed types kept distinct).

    >>> t = LongTable(np.array([1, 1, 2, 2, 3]), np.array([0.5, 0.7, 87.0, 88.0, 0.2]),
    ...               np.array([1.0, 2.0, 1.0, 1.0, np.nan]), None, 5)
    >>> units_without_usable_rows(t, (0.0, 1.0))  # unit 2 is outside the domain, unit 3 has no finite value
    2
    """
    a, b = float(time_domain[0]), float(time_domain[1])
    times = np.asarray(table.times, dtype=np.float64)
    values = np.asarray(table.values, dtype=np.float64)
    usable = np.isfinite(times) & np.isfinite(values) & (times >= a) & (times <= b)
    units = table.units.codes if isinstance(table.units, pd.Categorical) else np.asarray(table.units)
    n_units = len(pd.unique(pd.Series(units)))
    n_usable = len(pd.unique(pd.Series(units[usable])))
    return int(n_units - n_usable)
