"""Records outside the public value scale: counted for the curator's terminal only.

The public rescaling ``x = (value - value_offset) / value_scale`` and the clip radius claim that a record's norm
is at most the public ``clipping.tau``, or, with ``tau: auto``, the upper end of its search range (the a-priori
bound ``sqrt(|T|)`` of a curve within ``value_offset +- value_scale``). A ``value_scale`` in the wrong units
(thousands for dollars) breaks that claim for every record: all of them are shrunk hard by the clip, the DP quantile
of ``tau: auto`` finds no record inside its range and lands anywhere in it, and the release is flat near the offset
while the stated error (noise only) is small. ``fdp plan`` and ``fdp init`` count such records from the data read as the release reads it and
print a warning (new-user trial H, finding 1). For the point summaries (KDE, ERM) :func:`point_scale_warning` does the
same for points outside the public domain, ridge responses beyond their public bound and classifier labels of one
class (new-user trial M).

PRIVACY: the counts are computed from the data before any noise. They are printed on the operator's terminal (and in
``fdp plan --json``) and nowhere else: never in a manifest, the release folder, the ledger, a Prefect artifact, log
or flow parameter. ``fdp release`` and the flows never call this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from fdp.tasks.planning import public_reference, release_grid, tau_search_range
from fdp.tasks.preflight import CURVE_SUMMARIES, Inputs, UnitCount

from fdpcore.data.preprocess import weighted_norms

__all__ = ["OUT_OF_SCALE_WARN_SHARE", "OutOfScale", "count_out_of_scale", "narrow_values_warning", "out_of_scale_warning",
           "point_scale_warning"]

#: The share of records above the largest tau the release can use from which ``fdp plan`` and ``fdp init`` warn
#: (as the zero records: 5 %; trial L: 8.9 % of records at up to 7.3 x the radius went unmentioned at a quarter).
OUT_OF_SCALE_WARN_SHARE = 0.05
#: A record counts as out of scale above this multiple of the radius: shrunk by more than 1 %. A tight bound (z-scored
#: records, RMS exactly 1, at tau = 1) is not warned of for norms a rounding error above it (session 28: 1,200 of
#: 8,000 such records were "above" by 1e-15).
OUT_OF_SCALE_MARGIN = 1.01
#: The aligned values' span (largest minus smallest, over every record and grid point), as a share of value_scale, below
#: which the values are warned of as one constant far from the offset (trial P: GDP per capita in thousands under a
#: dollars config, offset 7000 and scale 50000, spanned 0.23 % of the scale, all about 0.14 below the offset). 5 %
#: since trial Y: road deaths per million miles under a per-100-million config (offset 2.2, scale 2.5) spanned 1.6 %,
#: all about 0.87 below the offset. With the distance at least ten times the span, 5 % means a band at most a
#: twentieth of the scale wide at least half the scale away: inside the scale, nothing else warns of it.
NARROW_SPAN = 0.05



@dataclass(frozen=True)
class OutOfScale(UnitCount):
    """Aligned records whose norm exceeds the largest clip radius the release can use (data: terminal only).

    Attributes:
        count: aligned records with a norm above ``OUT_OF_SCALE_MARGIN * tau_max`` (shrunk by more than 1 %).
        n: the aligned records.
        tau_max: the public clipping.tau, or the upper end of ``tau: auto``'s range (the a-priori bound ``sqrt(|T|)``
            by default): every record above it is shrunk, whatever the release does.
        median_ratio: the median record norm over ``tau_max``.
        max_ratio: the largest record norm over ``tau_max``.
        below: with ``tau: auto``, the records with a norm below the lower end of its range (0 otherwise): a DP
            quantile cannot resolve them, and the noise of any tau it buys is at least that lower end's.
        tau_min: the lower end of ``tau: auto``'s range (``None`` for a public tau).
    """

    tau_max: float
    median_ratio: float
    max_ratio: float
    below: int = 0
    tau_min: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """``fdp plan --json``'s ``out_of_scale`` field."""
        return {"count": self.count, "n": self.n, "share": self.share, "tau_max": self.tau_max,
                "median_ratio": self.median_ratio, "max_ratio": self.max_ratio, "below": self.below,
                "tau_min": self.tau_min}


def _tau_bounds(config: Any) -> tuple[float | None, float] | None:
    """``(tau_min, tau_max)``: ``tau: auto``'s range, or ``(None, tau)`` for a public ``clipping.tau``."""
    tau = getattr(getattr(config, "clipping", None), "tau", None)
    if tau is None:
        return None
    if tau == "auto":
        lo, hi = tau_search_range(config, stated_mean=False)  # records below a stated mean's norm are no scale issue
        return float(lo), float(hi)
    return None, float(tau)


def count_out_of_scale(config: Any, inputs: Inputs) -> OutOfScale | None:
    """Records above the largest clip radius, from the alignment :func:`fdp.tasks.preflight.read_inputs` read.

    The records are those the clip sees: rescaled, centred on the public reference curve where there is one.
    ``None`` for a point summary (KDE, ERM), a streaming engine (no alignment in ``inputs``), ``value_offset: auto``
    (the records' centre is bought by the release) and a file with no aligned record.
    """
    bounds = _tau_bounds(config)
    if (config.summary not in CURVE_SUMMARIES or inputs.aligned is None or bounds is None
            or config.dataset.value_offset == "auto"):
        return None
    tau_min, tau_max = bounds
    x = _clipped_records(config, inputs)
    if x.shape[0] == 0:
        return None
    norms = weighted_norms(x, release_grid(config).weights)  # no overflow of the squares (1e200 is a record too)
    ratio = norms / tau_max
    below = 0 if tau_min is None else int(np.sum(norms < tau_min * (1.0 - 1e-9)))
    return OutOfScale(count=int(np.sum(ratio > OUT_OF_SCALE_MARGIN)), n=int(x.shape[0]), tau_max=tau_max,
                      median_ratio=float(np.median(ratio)), max_ratio=float(np.max(ratio)), below=below, tau_min=tau_min)


def _clipped_records(config: Any, inputs: Inputs) -> np.ndarray:
    """The aligned records as the clip sees them: rescaled, zero records left out, centred on the public reference."""
    aligned = inputs.aligned
    assert aligned is not None  # callers check: a curve summary on the in-memory engine
    rows = aligned.aligned if aligned.aligned is not None else np.ones(aligned.n_samples, dtype=bool)
    x = np.asarray(aligned.data_matrix)[np.asarray(rows, dtype=bool)]
    reference = public_reference(config)
    if reference is not None and x.size:
        with np.errstate(over="ignore", invalid="ignore"):  # a record near the float range: its norm is then inf
            x = x - reference[None, :]
    return x


def out_of_scale_warning(config: Any, scale: OutOfScale | None) -> str | None:
    """What ``fdp plan`` and ``fdp init`` warn: 5 % or more of the records above ``tau_max``, or half below the range.

    ``None`` when neither holds.
    """
    if scale is None or scale.n == 0:
        return None
    texts = [t for t in (_above_text(config, scale), _below_text(config, scale)) if t]
    return " ".join(texts) if texts else None


def _levers(config: Any) -> str:
    return (f"Levers: value_offset, value_scale (and a public tau) chosen a priori from the known range of "
            f"{config.dataset.value_column} in its units (docs/configuration.md, \"Choosing value_offset, value_scale "
            "and τ\")")


def _above_text(config: Any, scale: OutOfScale) -> str | None:
    if scale.share < OUT_OF_SCALE_WARN_SHARE:
        return None
    ds = config.dataset
    auto = config.clipping.tau == "auto"
    radius = (f"the upper end of tau: auto's range ({scale.tau_max:g}, the norm of a curve that stays within "
              "value_offset +- value_scale)" if auto else f"clipping.tau = {scale.tau_max:g}")
    share = f"{100 * scale.share:.3g} %"
    units = (f" The median record is {scale.median_ratio:.3g} x that radius: is value_scale ({ds.value_scale:g}) in the "
             f"units of {ds.value_column}?" if scale.median_ratio > 2.0 else "")
    quantile = (" Where most records lie above the whole range, tau: auto's DP quantile has no record inside it to "
                "find and lands anywhere in it." if auto and scale.share >= 0.5 else "")
    return (f"{scale.count} of {scale.n} aligned records ({share}) have a norm more than 1 % above {radius}, so every "
            f"release shrinks them, whatever tau it uses (the largest is {scale.max_ratio:.3g} x that radius).{units}{quantile} "
            "Clipping shrinks each of them towards the offset (or the reference curve): a bias that the stated error "
            f"(noise only) does not include. {_levers(config)}")


def _below_text(config: Any, scale: OutOfScale) -> str | None:
    if scale.tau_min is None or scale.below < 0.5 * scale.n:
        return None
    ds = config.dataset
    median = scale.median_ratio * scale.tau_max
    return (f"{scale.below} of {scale.n} aligned records ({100 * scale.below / scale.n:.3g} %) have a norm below the "
            f"lower end of tau: auto's range ({scale.tau_min:g}); the median record's norm is {median:.3g}, "
            f"{scale.tau_min / median:.3g} x below it. tau: auto's DP quantile cannot resolve them: it lands anywhere in "
            f"the range, and the noise of any tau it buys is at least {scale.tau_min / median:.3g} x that of a tau at "
            f"the records' size ({scale.tau_max / median:.3g} x where n * epsilon is too small to buy tau and it is the "
            f"range's upper end, {scale.tau_max:g}: `fdp plan` marks those rows), so the release can be mostly noise "
            f"while the plan's `relative` (over value_scale) looks small: is value_scale ({ds.value_scale:g}) in the "
            f"units of {ds.value_column}, or far too generous? "
            f"{_levers(config)}; or a lower clipping.tau_range")


def narrow_values_warning(config: Any, inputs: Inputs) -> str | None:
    """Values that are one constant far from the offset: in the wrong units the other way (terminal only).

    The out-of-scale warning misses values far *smaller* than the config's units (k$ against $) when the offset
    dominates them: every record is then about ``-value_offset / value_scale``, inside the scale. Warned when the aligned
    values (rescaled, centred on the reference curve where there is one, zero records left out) span less than
    :data:`NARROW_SPAN` of ``value_scale`` and their median distance from the centre is at least ten times that span.
    ``None`` otherwise, for points, a streaming engine and ``value_offset: auto``.
    """
    if config.summary not in CURVE_SUMMARIES or inputs.aligned is None or config.dataset.value_offset == "auto":
        return None
    x = _clipped_records(config, inputs)
    reference = public_reference(config)
    if x.size == 0 or not np.all(np.isfinite(x)):
        return None
    span = float(np.max(x) - np.min(x))
    level = float(np.median(np.abs(x)))
    if span >= NARROW_SPAN or level < 10.0 * span:
        return None
    ds = config.dataset
    side = "above" if float(np.median(x)) > 0 else "below"
    centre = "the reference curve" if reference is not None else f"value_offset ({ds.value_offset:g})"
    return (f"the {x.shape[0]} aligned records' values span only {span * ds.value_scale:.3g} {ds.value_column} units "
            f"({100 * span:.2g} % of value_scale = {ds.value_scale:g}) and all lie about {level * ds.value_scale:.3g} "
            f"{side} {centre}: every record is nearly one constant curve, far from the centre — are the values in the "
            f"units of value_offset and value_scale (e.g. thousands against units)? The release would state that "
            f"constant with an error measured against value_scale. {_levers(config)}")


def point_scale_warning(config: Any, inputs: Inputs) -> str | None:
    """KDE and ERM: what ``fdp plan`` and ``fdp init`` warn about the points as the release reads them (terminal only).

    Each from 5 % of the rows (:data:`OUT_OF_SCALE_WARN_SHARE`), as the curves' out-of-scale warning: points outside
    ``dataset.domain`` moved onto its edge (``outside_domain: clamp``); ridge responses beyond
    ``label_offset +- label_bound``, clipped to it; a classifier whose labels, after ``labels: sign``, are almost all
    one class, or came from three or more values that the sign merged (new-user trial M: a domain in the wrong units
    piled every point on the edge, a ridge without ``label_offset`` clipped every height, labels coded 1/2 all became
    +1; trial S: early / on time / late coded -1/0/+1 became two classes — each published without a word).
    ``None`` when none holds, or for a curve summary.
    """
    table = inputs.points
    if table is None or table.n_rows == 0:
        return None
    one_class = _one_class_text(config, table)
    texts = [t for t in (_clamped_text(config, table), _response_text(config, table), one_class,
                         None if one_class else _merged_classes_text(config, table)) if t]
    return " ".join(texts) if texts else None


def _clamped_text(config: Any, table: Any) -> str | None:
    share = table.n_clamped / table.n_rows
    if share < OUT_OF_SCALE_WARN_SHARE:
        return None
    ds = config.dataset
    box = " x ".join(f"[{a:g}, {b:g}]" for a, b in ds.domain)
    return (f"{table.n_clamped} of {table.n_rows} points ({100 * share:.3g} %) lie outside dataset.domain {box} and are "
            f"moved onto its edge (outside_domain: clamp), so the release piles them there. Is the domain in the units "
            f"of {', '.join(ds.coordinate_columns)}? It must be chosen a priori from the known range of the coordinates; "
            "outside_domain: error refuses such a file, naming the first row")


def _response_text(config: Any, table: Any) -> str | None:
    if config.summary != "erm" or config.loss != "ridge" or table.labels is None:
        return None
    beyond = int(np.sum(np.abs(np.asarray(table.labels) - config.label_offset) > config.label_bound * (1.0 + 1e-12)))
    share = beyond / table.n_rows
    if share < OUT_OF_SCALE_WARN_SHARE:
        return None
    col = config.dataset.label_column
    return (f"{beyond} of {table.n_rows} responses ({100 * share:.3g} %) lie beyond label_offset +- label_bound "
            f"({config.label_offset:g} +- {config.label_bound:g}) and are clipped to it, so the released function is "
            f"biased towards that range. Is label_offset the responses' public centre in the units of {col} (fdp init "
            "--value-offset), and label_bound a bound on their deviation from it? Both are chosen a priori "
            "(docs/summaries/erm.md, \"Responses far from zero\")")


def _one_class_text(config: Any, table: Any) -> str | None:
    if config.summary != "erm" or config.loss == "ridge" or table.labels is None:
        return None
    positive = int(np.sum(np.asarray(table.labels) > 0))
    minority = min(positive, table.n_rows - positive)
    if minority / table.n_rows >= OUT_OF_SCALE_WARN_SHARE:
        return None
    major = "+1" if positive > table.n_rows - positive else "-1"
    mapped = (f" ({table.n_relabelled} labels other than -1/+1 were mapped by labels: sign, every positive value to +1 "
              "and 0 or a negative value to -1: labels coded 1/2 all become +1)" if table.n_relabelled else "")
    return (f"{table.n_rows - minority} of {table.n_rows} labels ({100 * (1 - minority / table.n_rows):.3g} %) are "
            f"{major}{mapped}, so the classifier can hardly learn anything but {major}. Code the classes as -1/+1 (or 0/1) "
            f"in {config.dataset.label_column}; labels: error refuses any other label, naming the row")


def _merged_classes_text(config: Any, table: Any) -> str | None:
    if config.summary != "erm" or config.loss == "ridge" or table.n_label_values <= 2:
        return None
    col = config.dataset.label_column
    return (f"{col} holds {table.n_label_values} distinct values, and labels: sign merged them into two classes (every "
            f"positive value to +1, 0 and every negative value to -1; {table.n_relabelled} of {table.n_rows} labels "
            "mapped), so the classifier separates merged classes. A binary classifier needs a two-valued label: code "
            "the question as -1/+1 (or 0/1) a priori, leaving out what is neither; labels: error refuses any label "
            "other than -1/+1, naming the row")
