"""Reading tables of points (Parquet or CSV): privacy unit, one or two coordinates, an optional label.

Errors are :class:`~fdpcore.errors.DataError` messages that name the file, the column and the
data row (rows numbered from 1 below the header) and never quote a value. Parsing reuses the
checks of :mod:`fdpcore.io.tables`.

**Points outside the public domain.** The domain box is public and fixed a priori. The
``outside`` rule says what happens to a coordinate outside it:

* ``"clamp"`` (default): the coordinate is moved to the nearest boundary of the box. This is a
  record-wise, data-independent map (MATH.md §1.7): applied to neighbouring datasets it gives
  neighbouring datasets (only the replaced unit's points can change), so the guarantee of the release
  on the clamped data is a guarantee on the raw data. The number of clamped points is returned for the
  internal ledger record only (never published). Among well-formed inputs, whether a release exists never
  depends on one unit (a missing or non-finite coordinate is malformed input: refused before the charge,
  outside the guarantee; docs/audit.md).
* ``"error"`` (strict, opt-in): the read fails, naming the column and the first such row; nothing
  is released or charged (the check runs before the charge). One unit then decides whether a release
  exists, which is why it is not the default.

Coordinates are then mapped affinely onto ``[0, 1]^d``.

**Labels of a classifier** (``binary_labels``: logistic and hinge ERM) must be ``-1`` or ``+1``. The
``labels`` rule says what happens to any other finite label:

* ``"sign"`` (default): the label becomes ``+1`` if it is positive, else ``-1`` (so a ``0/1`` coding
  works as ``-1/+1``). Like clamping, a record-wise data-independent map: the guarantee on the
  mapped data is a guarantee on the raw data, and the count of relabelled points goes to the internal
  ledger record only.
* ``"error"`` (strict, opt-in): the read fails, naming the column and the first such row; ``fdp release``
  runs it before the charge, on the curator's terminal only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from fdpcore._typing import AnyArray, NDArrayFloat
from fdpcore.errors import DataError
from fdpcore.io.tables import _numeric, compact_ids, read_unit_columns

__all__ = ["LABEL_RULES", "OUTSIDE_RULES", "PointTable", "read_point_table"]

#: Handling of coordinates outside the public domain.
OUTSIDE_RULES = ("error", "clamp")
#: What happens to a classifier label other than ±1 (see the module docstring).
LABEL_RULES = ("sign", "error")


@dataclass(frozen=True, eq=False)
class PointTable:
    """Points of a table, mapped onto the unit box.

    Attributes:
        unit_codes: integer code of each point's privacy unit (``m``).
        points: ``m x d`` coordinates in ``[0, 1]^d``.
        labels: the label/response column (``m``), or ``None``.
        n_rows: rows read.
        n_clamped: points with at least one coordinate clamped into the domain (internal only).
        n_relabelled: classifier labels other than ``±1`` mapped to their sign (internal only).
        n_label_values: distinct classifier label values before that mapping (0 without one; the terminal only).
    """

    unit_codes: AnyArray
    points: NDArrayFloat
    labels: NDArrayFloat | None
    n_rows: int
    n_clamped: int
    n_relabelled: int = 0
    n_label_values: int = 0

    @property
    def n_units(self) -> int:
        """Number of distinct privacy units ``n``."""
        return int(np.unique(self.unit_codes).shape[0])


def read_point_table(
    path: str | Path,
    fmt: str,
    *,
    unit_column: str,
    coordinate_columns: Sequence[str],
    domain: Sequence[tuple[float, float]],
    label_column: str | None = None,
    outside: str = "clamp",
    binary_labels: bool = False,
    csv_delimiter: str = ",",
    labels: str = "sign",
) -> PointTable:
    """Read a point table and map it onto ``[0, 1]^d`` (see the module docstring for ``outside``).

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> with open(os.path.join(d, "p.csv"), "w") as fh:
    ...     _ = fh.write("id,x,y\\na,2.0,1\\na,4.0,-1\\nb,6.0,1\\n")
    >>> t = read_point_table(os.path.join(d, "p.csv"), "csv", unit_column="id", coordinate_columns=["x"],
    ...                      domain=[(2.0, 6.0)], label_column="y")
    >>> t.points[:, 0].tolist(), t.labels.tolist(), t.n_units
    ([0.0, 0.5, 1.0], [1.0, -1.0, 1.0], 2)

    Raises:
        DataError: missing/unreadable file or column, a non-numeric or non-finite coordinate or
            label (the first offending row is named), a coordinate outside the domain with
            ``outside="error"``, a label other than ``±1`` with ``binary_labels`` and ``labels="error"``, a missing
            unit id, zero rows.
    """
    coords = list(coordinate_columns)
    if len(coords) not in (1, 2) or len(domain) != len(coords):
        raise DataError(f"dataset.coordinate_columns ({coords}) must name 1 or 2 columns, one per dataset.domain entry")
    if labels not in LABEL_RULES:
        raise DataError(f"dataset.labels ({labels!r}) must be one of {list(LABEL_RULES)}")
    if outside not in OUTSIDE_RULES:
        raise DataError(f"dataset.outside_domain ({outside!r}) must be one of {list(OUTSIDE_RULES)}")
    p = Path(path)
    if not p.is_file():
        raise DataError(f"dataset.path: file {str(p)!r} does not exist or is not a file; check the path "
                        "(relative paths are resolved against the config file)")
    table = read_unit_columns(p, fmt, unit_column, [*coords, label_column], csv_delimiter)
    units = compact_ids(table.column(unit_column), p.name, unit_column, "privacy-unit id")
    # one integer per point: a text id's categorical code (no Python string per row), else its rank among the ids
    codes = np.asarray(units.codes) if isinstance(units, pd.Categorical) else np.unique(units, return_inverse=True)[1]
    needs = "finite coordinates and label" if label_column else "finite coordinates"  # ERM / KDE (no label)
    columns = []
    n_clamped = np.zeros(table.num_rows, dtype=bool)
    for name, (a, b) in zip(coords, domain, strict=True):
        x = _finite(table.column(name), p.name, name, needs)
        out = (x < a) | (x > b)
        if out.any() and outside == "error":
            raise DataError(
                f"{p.name}: column {name!r} has a point outside the public domain [{a:g}, {b:g}] at row "
                f"{int(np.flatnonzero(out)[0]) + 1}; fix the data, widen dataset.domain (a public choice), or set "
                "dataset.outside_domain: clamp"
            )
        n_clamped |= out
        columns.append((np.clip(x, a, b) - a) / (b - a))
    y = _finite(table.column(label_column), p.name, label_column, needs) if label_column else None
    n_relabelled = n_values = 0
    if binary_labels and y is not None:
        n_values = int(np.unique(y).size)
        bad = np.flatnonzero(np.abs(y) != 1.0)
        if bad.size and labels == "error":
            raise DataError(f"{p.name}: column {label_column!r} has a label other than -1 or +1 at row {int(bad[0]) + 1}; "
                            "logistic and hinge losses need labels coded -1/+1 (or dataset.labels: sign)")
        n_relabelled = int(bad.size)
        y = np.where(y > 0.0, 1.0, -1.0)  # record-wise: the sign; identity on -1/+1
    return PointTable(codes.astype(np.int64), np.column_stack(columns), y, int(table.num_rows), int(n_clamped.sum()),
                      n_relabelled, n_values)


def _finite(col: object, fname: str, name: str, needs: str) -> NDArrayFloat:
    x = _numeric(col, fname, name)
    bad = np.flatnonzero(~np.isfinite(x))
    if bad.size:
        raise DataError(f"{fname}: column {name!r} has a missing or non-finite entry at row {int(bad[0]) + 1}; "
                        f"every point needs {needs}: drop the incomplete rows before the release (complete cases) "
                        "or fill them in by an imputation rule fixed a priori")
    return x
