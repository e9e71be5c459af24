"""Units that enter a curve release as the zero record: counted for the curator's terminal only.

A unit whose readings do not reach both ends of the grid within ``dataset.max_end_gap`` (or that has no usable
reading at all) contributes the zero record: the constant ``value_offset``, or the public reference curve
(``preprocess.align_linear@2``). On a sparse, irregular design most units can be such records, and the release
then estimates a mix of the aligned curves and zeros. ``fdp plan`` and ``fdp init`` count them from the data read
as the release reads it and print a warning.

PRIVACY: the count is computed from the data before any noise. It is printed on the operator's terminal (and in
``fdp plan --json``) and nowhere else: never in a manifest, the release folder, the ledger, a Prefect artifact, log
or flow parameter. ``fdp release`` and the flows never call this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fdp.tasks.planning import grid_ends, unaligned_contribution
from fdp.tasks.preflight import CURVE_SUMMARIES, Inputs, UnitCount

from fdpcore.io.coverage import units_without_usable_rows

__all__ = ["ZERO_RECORD_WARN_SHARE", "ZeroRecords", "count_zero_records", "zero_records_warning"]

#: The share of zero records from which ``fdp plan`` and ``fdp init`` warn.
ZERO_RECORD_WARN_SHARE = 0.05



@dataclass(frozen=True)
class ZeroRecords(UnitCount):
    """Units released as the zero record (data: for the curator's terminal only).

    Attributes:
        count: units without an alignable curve (the alignment's ``n_unalignable``).
        n: the privacy units of the file.
        without_rows: among ``count``, units none of whose rows has a finite value at a time inside ``time_domain``.
    """

    without_rows: int

    def as_dict(self) -> dict[str, Any]:
        """``fdp plan --json``'s ``zero_records`` field."""
        return {"count": self.count, "n": self.n, "share": self.share, "without_rows_in_domain": self.without_rows}


def count_zero_records(config: Any, inputs: Inputs) -> ZeroRecords | None:
    """The zero records of a curve config, from the table and alignment :func:`fdp.tasks.preflight.read_inputs` read.

    ``None`` for a point summary (KDE, ERM) and for a streaming engine (its parts are read only by the release's own
    pass, so ``inputs`` holds no alignment).
    """
    if config.summary not in CURVE_SUMMARIES or inputs.table is None or inputs.aligned is None:
        return None
    return ZeroRecords(count=int(inputs.aligned.n_unalignable), n=int(inputs.aligned.n_samples),
                       without_rows=units_without_usable_rows(inputs.table, tuple(config.dataset.time_domain)))


def _zero_record(config: Any) -> str:
    """What a unit without an alignable curve contributes, in words (public config only)."""
    offset = config.dataset.value_offset
    level = "the DP value_offset it buys" if offset == "auto" else f"value_offset {offset:g}"
    return unaligned_contribution(config, f"the constant {level}")


def _effect(config: Any, share: str, zero: str) -> str:
    """What the zero records do to this summary."""
    if config.summary == "mean":
        return (f"the release estimates the mean of the aligned curves and these zero records, pulled towards {zero} "
                f"by that share ({share})")
    if config.summary == "fosr":
        return (f"the coefficient curves are fitted to these zero records as if they were observed, pulled towards "
                f"{zero} by about that share ({share})")
    return (f"the second moment loses these units' variation (each contributes nothing about {zero}), so it is shrunk "
            f"by about that share ({share})" + (" and its components describe the aligned units diluted by zeros"
                                                 if config.summary == "fpca" else ""))


def zero_records_warning(config: Any, zero: ZeroRecords | None) -> str | None:
    """The warning ``fdp plan`` and ``fdp init`` print when at least 5 % of the units are zero records, else ``None``."""
    if zero is None or zero.n == 0 or zero.share < ZERO_RECORD_WARN_SHARE:
        return None
    share = f"{100 * zero.share:.3g} %"
    record = _zero_record(config)
    missing = (f"; {zero.without_rows} of them have no finite reading inside time_domain "
               f"[{config.dataset.time_domain[0]:g}, {config.dataset.time_domain[1]:g}] at all (check the units of "
               f"{config.dataset.time_column} against time_domain, e.g. two-digit years)") if zero.without_rows else ""
    first, last, gap = grid_ends(config)
    start, end = first + gap, last - gap
    effect = _effect(config, share, record)
    return (f"{zero.count} of {zero.n} units ({share}) enter the release as the zero record ({record}): their readings "
            f"do not reach from at most {start:g} to at least {end:g} ({config.dataset.time_column}; "
            f"dataset.max_end_gap {gap:g}), or they have fewer than two readings{missing}. {effect[0].upper()}{effect[1:]}; the stated error "
            "(noise only) does not include this. Levers: a longer dataset.max_end_gap chosen from the study design "
            "(fdp init --max-end-gap G), a shorter time_domain that most units cover, a public reference curve "
            "(centering) close to the expected curve; fdp has no sparse-FDA estimator (such as PACE), so a design "
            "with a few visits per unit is outside its scope (docs/configuration.md, \"Sparse and irregular designs\")")
