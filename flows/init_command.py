"""``fdp init``: write a commented release config for a data file nobody has tuned for.

Only the file's column names and types and the number of privacy units are read. Everything that
sets the noise (time domain, value offset and scale, clipping radius, grid, kernel, epsilon) is public
and chosen a priori: it comes from the command line or from documented, data-independent defaults,
never from the data values, and the config marks each such field ``PUBLIC``.

FoSR covariates: a covariate column without ``--levels`` is checked to be numeric by the same reader
``fdp release`` uses (so a text column is refused here, not at release time). The check decides only
whether ``fdp init`` refuses; the text it writes depends on the options alone. The categories of a
categorical covariate are public: they come from ``--levels``, never from the data.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import yaml
from fdp.flows.config import format_validation_error
from fdp.flows.registry import SUMMARIES
from fdp.tasks.planning import count_units_of_file
from pydantic import ValidationError

from fdpcore.errors import ConfigError, DataError
from fdpcore.io.covariates import read_unit_covariates

__all__ = ["INIT_SUMMARIES", "init_config", "parse_levels"]

#: Summaries ``fdp init`` writes: curves in long format, and points (kde, erm).
INIT_SUMMARIES = ("mean", "covariance", "fpca", "fosr", "kde", "erm")


def _q(value: str) -> str:
    """A YAML scalar for a string (quoted when needed)."""
    return yaml.safe_dump(value, default_style=None).strip().removesuffix("\n...").strip()


def _flow(values: list[str]) -> str:
    """A YAML flow sequence of strings, each quoted when YAML would read it otherwise (``'yes'``, ``'1'``)."""
    return yaml.safe_dump(list(values), default_flow_style=True, width=1_000_000).strip()


def parse_levels(options: list[str] | None) -> dict[str, list[str]]:
    """``--levels NAME=L1,L2,...`` options as ``{NAME: [L1, L2, ...]}`` (the first level is the reference).

    >>> parse_levels(["season=winter,spring,summer,autumn"])
    {'season': ['winter', 'spring', 'summer', 'autumn']}

    Raises:
        ConfigError: an option without ``=``, an empty name or level, a repeated name or level, fewer than two levels.
    """
    out: dict[str, list[str]] = {}
    for option in options or []:
        name, sep, rest = option.partition("=")
        name = name.strip()
        levels = [lv.strip() for lv in rest.split(",")]
        if not sep or not name:
            raise ConfigError(f"--levels ({option!r}) must read COLUMN=LEVEL1,LEVEL2,... (e.g. season=winter,spring,"
                              "summer,autumn)")
        if name in out:
            raise ConfigError(f"--levels: column {name!r} is given twice; give all its levels in one option")
        repeated = sorted({lv for lv in levels if lv and levels.count(lv) > 1})
        if repeated:
            raise ConfigError(f"--levels {name}=...: level(s) {', '.join(map(repr, repeated))} listed more than once; "
                              "list every category the column may take once")
        if any(not lv for lv in levels) or len(levels) < 2:
            raise ConfigError(f"--levels {name}=... must list at least two distinct, non-empty levels separated by "
                              "commas (every category the column may take, chosen a priori)")
        out[name] = levels
    return out


def _dataset_id(path: Path) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", path.stem).strip("-._") or "dataset"
    return stem if stem[0].isalnum() else f"d{stem}"


def init_config(  # noqa: PLR0913 - one argument per command-line option
    data: str | Path, *, unit: str, time: str | list[str], value: str | None = None, summary: str = "mean",
    time_domain: tuple[float, float] | list[tuple[float, float]], value_offset: float = 0.0, value_scale: float = 1.0, tau: float | None = None,
    epsilon: float = 1.0, budget: float | None = None, grid_size: int = 50, dataset_id: str | None = None,
    privacy_unit: str | None = None, covariates: list[str] | None = None, covariate_bound: float | None = None,
    config_dir: str | Path = ".", loss: str = "logistic", label_bound: float | None = None,
    levels: dict[str, list[str]] | None = None, n_components: int | None = None, n_basis: int | None = None,
    max_end_gap: float | None = None, csv_delimiter: str = ",",
) -> tuple[str, dict[str, Any]]:
    """The YAML text of a commented config for ``data`` and facts about the file (``n``, format).

    The config is validated (the same :func:`fdp.flows.config.load_config` ``fdp release`` uses) before
    it is returned. ``config_dir`` is where the config will be written (the data path is made relative to it).
    ``levels`` (fosr): the public categories of categorical covariates, the first of each the reference level;
    without ``covariate_bound`` and when every covariate has levels, the bound is ``sqrt(number of covariates)``
    (each one-hot block has norm at most 1, so nothing is shrunk). ``n_components``/``n_basis`` (fpca): the
    number of released components (default 1) and of basis functions (default 5), ``n_components < n_basis``.
    ``time``/``time_domain``: one column and its range; ``kde``/``erm`` take a list of one or two (a point's
    coordinates and their public ranges, in the same order). ``max_end_gap`` (curves): ``dataset.max_end_gap``, how
    far (source time units) a curve's first and last readings may lie inside the first and last grid point (default:
    one grid step); a study with drop-outs sets it from its design (docs/configuration.md, "Studies with drop-outs").
    ``csv_delimiter``: the CSV file's column delimiter, one character (``\\t`` or ``tab`` for a tab), written into
    ``dataset.csv_delimiter`` when it is not the default ``,``; a ``.parquet`` file takes none.

    Raises:
        ConfigError: an unknown summary or format, missing options of the summary, or an invalid result.
        DataError: the file or one of its columns cannot be read.
    """
    p = Path(data)
    if summary not in INIT_SUMMARIES:
        raise ConfigError(f"--summary ({summary!r}) must be one of {list(INIT_SUMMARIES)} for fdp init")
    fmt = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}.get(p.suffix.lower())
    if fmt is None:
        raise ConfigError(f"DATA ({p.name!r}) must be a .parquet or .csv file")
    _check_summary_options(summary, levels=levels, n_components=n_components, n_basis=n_basis)
    csv_delimiter = _delimiter(csv_delimiter, fmt)
    if max_end_gap is not None and summary in ("kde", "erm"):
        raise ConfigError(f"--max-end-gap applies to curves (mean, covariance, fpca, fosr), not to --summary {summary}")
    times = [time] if isinstance(time, str) else list(time)
    domains = [time_domain] if not time_domain or not isinstance(time_domain[0], (list, tuple)) else list(time_domain)
    most = 2 if summary in ("kde", "erm") else 1
    if not 1 <= len(times) <= most or len(domains) != len(times):
        raise ConfigError(
            f"--time given {len(times)} time(s) and --time-domain {len(domains)} time(s): "
            + ("a kde or erm release takes one --time per coordinate of a point (at most 2) and one --time-domain A B "
               "per --time, in the same order" if most == 2 else
               f"a {summary} release takes exactly one --time column and one --time-domain A B"))
    if summary in ("kde", "erm"):
        return _point_config(p, fmt, unit=unit, coordinate=times, label=value, summary=summary, domain=domains,
                             epsilon=epsilon, budget=budget, grid_size=grid_size, dataset_id=dataset_id,
                             privacy_unit=privacy_unit, config_dir=config_dir, loss=loss, label_bound=label_bound,
                             label_offset=value_offset, csv_delimiter=csv_delimiter)
    time, time_domain = times[0], tuple(domains[0])  # type: ignore[assignment]
    if value is None:
        raise ConfigError(f"--summary {summary} needs --value COLUMN (the observed values)")
    if summary == "fosr":
        _check_covariate_options(covariates, levels or {})
    n = _with_delimiter_hint(p, csv_delimiter, lambda: count_units_of_file(
        p, fmt, unit, [time, value, *(covariates or [])], csv_delimiter))
    if summary == "fosr":
        _check_numeric_covariates(p, fmt, unit, [c for c in covariates or [] if c not in (levels or {})], csv_delimiter)
        covariate_bound = _covariate_bound(covariates or [], levels or {}, covariate_bound)
    rel = _relative(p, config_dir)
    budget = budget if budget is not None else 10 * epsilon
    ds_id = dataset_id or _dataset_id(p)
    unit_text = privacy_unit or f"{unit} (all rows with one value of {unit})"
    lines = [
        *_head(p, n, summary, ds_id, rel, fmt, csv_delimiter),
        f"  unit_column: {_q(unit)}          # one privacy unit per distinct id (one spelling each: 308 and 308.0 are refused); its rows form one record",
        f"  time_column: {_q(time)}",
        f"  value_column: {_q(value)}",
        f"  privacy_unit: {_q(unit_text)}   # published: what one record protects, in words",
        f"  time_domain: [{time_domain[0]!r}, {time_domain[1]!r}]   # PUBLIC: time range the grid covers (source units); "
        "readings every h at t1..tN: [t1 - h/2, tN + h/2] with grid size N puts a grid point on each reading",
        *_end_gap_lines(max_end_gap),
        f"  value_offset: {value_offset!r}   # PUBLIC: typical level of the values, subtracted from every value (source units)",
        f"  value_scale: {value_scale!r}    # PUBLIC: bound on how far a value can plausibly lie from value_offset "
        "(source units): (value - offset)/scale lies in [-1, 1]",
        "grid:",
        "  rule: midpoint",
        f"  size: {grid_size}           # PUBLIC: number of grid points of the released curve(s)",
        "  domain: [0.0, 1.0]",
    ]
    if summary != "fpca":
        rho = max(0.1, float(f"{2.0 / grid_size:.2g}"))  # at least two grid steps: noise rougher than the grid is zig-zag
        lines.append(f"kernel: {{name: matern, nu: 1.5, rho: {rho!r}}}   # PUBLIC: smoothness of the privacy noise and of "
                     "the fit (its length scale on [0, 1]: 0.1, or two grid steps on a coarse grid; longer for smoother "
                     "curves)")
    if summary == "mean":
        lines += ["estimator: iclp_qr",
                  "# centering:   # optional PUBLIC reference curve r(t), e.g. published growth medians or a climatology:",
                  "#              # records are centred on it before clipping and it is added back after the noise, so",
                  "#              # clipping and smoothing shrink deviations from r, not from the constant value_offset",
                  "#              # (a straight line through two public figures will do for a trend: without it the",
                  "#              # smoothing pulls a trending mean towards value_offset most at the ends of time_domain)",
                  f"#   time: [{time_domain[0]!r}, {time_domain[1]!r}]     # source time units, strictly increasing, covering time_domain",
                  f"#   value: [{value_offset!r}, {value_offset!r}]   # source value units at those times; never computed from this data",
                  "#   source: \"where the reference comes from\"   # published in the manifest (docs/summaries/mean.md)",
                  "# tuning: {signal_rms: R}   # PUBLIC, known a priori (never from this data): the mean curve's RMS",
                  "#              # distance from value_offset (or r) in units of value_scale, for the default smoothing;",
                  "#              # unset, it assumes 0.5 x a bought tau, or 0.1 x value_scale where tau is the a-priori bound",
                  "#              # (n x epsilon too small to buy it); state R only from a published figure you trust (a",
                  "#              # reference curve's distance from value_offset), else leave it unset (docs/summaries/mean.md)"]
    if summary == "covariance":
        lines += ["mechanism: iclp_qr",
                  "centering:",
                  "  kind: public           # centre on value_offset (public): the release is the second moment about it,",
                  "                         # = covariance + (mean - offset)(mean - offset)' (docs/summaries/covariance.md);",
                  "                         # {kind: sample_mean} centres on the sample mean at about 3x the noise"]
    if summary == "fpca":
        k, m = n_components or 1, n_basis or 5
        lines += [f"n_components: {k}          # PUBLIC: number of principal components released",
                  f"basis: {{n_basis: {m}}}      # PUBLIC: smooth basis the components are drawn in (n_components < n_basis)",
                  "# no centering block: records are centred on the constant value_offset only, so the components are those",
                  "# of the second moment about value_offset; add centering: {time, value, source} (a PUBLIC reference",
                  "# curve, docs/summaries/fpca.md) to centre on a typical curve instead"]
    if summary == "fosr":
        lines += _covariate_lines(covariates or [], levels or {}, covariate_bound)
        lines += ["# centering:   # recommended: a PUBLIC reference curve r(t) close to the typical curve (a growth standard,",
                  "#              # a published curve): responses are centred on it and it is added back to the intercept.",
                  "#              # T1's noise moves the coefficients in proportion to their size, the intercept's most, so a",
                  "#              # small intercept makes every coefficient more accurate (docs/summaries/fosr.md)",
                  f"#   time: [{time_domain[0]!r}, {time_domain[1]!r}]     # source time units, strictly increasing, covering time_domain",
                  f"#   value: [{value_offset!r}, {value_offset!r}]   # source value units at those times; never computed from this data",
                  "#   source: \"where the reference comes from\"   # published in the manifest"]
    if tau is None:  # the budget can buy it: a DP quantile of the record norms (every curve summary)
        clipping = ["clipping:",
                    "  tau: auto   # BOUGHT: a share of epsilon (tau_share, default 0.1) buys the L2 radius of a rescaled",
                    "              # record as a DP quantile of the record norms over the public tau_range (default",
                    "              # [0.01, 1] x sqrt(grid domain length): never above the a-priori bound of values",
                    "              # rescaled into [-1, 1]; for small n x epsilon more (a mean: up to a quarter so",
                    "              # its level can reach 0.8; up to half for a reliable quantile), and below",
                    "              # that the upper end, at no cost: `fdp plan` shows which); or write a PUBLIC",
                    "              # number chosen a priori (it saves the share when your a-priori bound is tight)"]
    else:
        clipping = ["clipping:",
                    f"  tau: {1.0 if tau is None else tau!r}   # PUBLIC: L2 radius of a rescaled record "
                    "((value - offset)/scale); larger records are shrunk to it"]
    lines += clipping
    return _finish(lines, summary, epsilon, budget, {"n": n, "format": fmt, "dataset_id": ds_id})


def _end_gap_lines(gap: float | None) -> list[str]:
    """``dataset.max_end_gap`` and what it does (nothing without ``--max-end-gap``: the default is one grid step)."""
    if gap is None:
        return []
    return [f"  max_end_gap: {gap!r}   # PUBLIC, source time units, chosen from the study design (never from the data):",
            "  # a curve whose first (last) reading lies within this of the first (last) grid point is held at that",
            "  # reading over the gap: a drop-out whose last reading is at most this before the last grid point carries",
            "  # its last value to the end (the gap applies at the start too);",
            "  # a unit missing an end by more is released as the zero record (value_offset, or the reference curve)"]


def _check_summary_options(summary: str, *, levels: dict[str, list[str]] | None, n_components: int | None,
                           n_basis: int | None) -> None:
    """Refuse an option of one summary given to another, and an FPCA basis too small for its components."""
    if levels and summary != "fosr":
        raise ConfigError(f"--levels applies to --summary fosr only (here: {summary})")
    if (n_components is not None or n_basis is not None) and summary != "fpca":
        raise ConfigError(f"--n-components and --n-basis apply to --summary fpca only (here: {summary})")
    k, m = n_components or 1, n_basis or 5
    if n_components is not None and n_components < 1:
        raise ConfigError(f"--n-components ({n_components}) must be >= 1")
    if not 2 <= m <= 200:
        raise ConfigError(f"--n-basis ({m}) must be between 2 and 200")
    if k >= m:
        raise ConfigError(f"--n-components ({k}) must be < the number of basis functions ({m}"
                          f"{'' if n_basis is not None else ', the default'}); add --n-basis {k + 1} or more")


def _check_covariate_options(covariates: list[str] | None, levels: dict[str, list[str]]) -> None:
    """Refuse a FoSR config without covariates, or ``--levels`` of a column that is not a ``--covariate``."""
    if not covariates:
        raise ConfigError("--summary fosr needs --covariate NAME (repeatable), and --levels NAME=L1,L2,... for each "
                          "categorical one")
    unknown = [name for name in levels if name not in covariates]
    if unknown:
        raise ConfigError(f"--levels names {unknown}, which is not a --covariate; add --covariate {unknown[0]}")


def _covariate_bound(covariates: list[str], levels: dict[str, list[str]], covariate_bound: float | None) -> float:
    """The covariate bound of a FoSR config: the option, or ``sqrt(#covariates)`` when every covariate is one-hot."""
    if covariate_bound is not None:
        return covariate_bound
    numeric = [c for c in covariates if c not in levels]
    if numeric:
        raise ConfigError(f"--summary fosr needs --covariate-bound B (PUBLIC): numeric covariate(s) {numeric} have no "
                          "a-priori bound (it is the Euclidean bound of a unit's covariate vector; a one-hot covariate "
                          "adds at most 1 to its square: docs/summaries/fosr.md); if one of them is a category coded by "
                          "numbers (e.g. diet 1-4), give its public levels instead, --levels COL=L1,L2,... (first = "
                          "reference), or it is fitted as one linear numeric effect")
    return math.sqrt(len(covariates))


def _check_numeric_covariates(p: Path, fmt: str, unit: str, names: list[str], csv_delimiter: str = ",") -> None:
    """Refuse a covariate without ``--levels`` that ``fdp release`` would refuse as non-numeric (names it, no value)."""
    for name in names:
        try:
            read_unit_covariates(p, fmt, unit_column=unit, covariates=[(name, None)], csv_delimiter=csv_delimiter)
        except DataError as exc:
            if "missing or non-finite value" in str(exc):
                continue  # a numeric column with a gap: written as numeric; fdp release names the row
            if "must be numeric" not in str(exc):
                raise
            raise ConfigError(
                f"--covariate {name}: column {name!r} is not numeric, so it needs its categories, which are PUBLIC "
                f"and never read from the data: add --levels {name}=LEVEL1,LEVEL2,... listing every category it may "
                "take, chosen a priori (the first is the reference level, absorbed by the intercept; e.g. "
                "--levels season=winter,spring,summer,autumn)") from None


def _covariate_lines(covariates: list[str], levels: dict[str, list[str]], bound: float) -> list[str]:
    """The ``covariates``, ``intercept`` and ``covariate_bound`` lines of a FoSR config."""
    lines = ["covariates:             # scalar columns, constant within a unit (numeric unless one_hot; see "
             "docs/summaries/fosr.md)"]
    for c in covariates:
        lines.append(f"  - name: {_q(c)}")
        if c in levels:
            lines += ["    encoding: one_hot",
                      f"    levels: {_flow(levels[c])}   # PUBLIC: every category, listed a "
                      "priori (from --levels); another value is an error naming the row",
                      f"    reference: {_q(levels[c][0])}   # the first level: all indicators 0, absorbed by the intercept",
                      f"    # shares: {{{', '.join(f'{_q(lv)}: ...' for lv in levels[c])}}}   # optional PUBLIC expected "
                      "share of each level (a census figure, never the data): `fdp plan` prices the coefficients at "
                      "them; equal shares hide a rare level's noise"]
            if len(levels[c]) == 2:  # a 0/1 indicator with the intercept: T1's smallest eigenvalue is ~ group share / 2
                a, b = levels[c]
                lines += [f"    # two levels: encoding: {{{_q(a)}: -1, {_q(b)}: 1}} instead of one_hot is better conditioned "
                          "(T1 ~ I when the groups are of similar size, so the inverse amplifies the noise less);",
                          "    # its coefficient is then half the difference between the groups (docs/summaries/fosr.md)"]
    if any(c in levels for c in covariates):
        lines.append("covariates_within_unit: error   # a unit's covariate must not change between its rows (else exit 2 "
                     "before any charge): one level per unit, so two indicators of one one-hot covariate are never "
                     "both 1 and their design moment is set to 0 exactly (postprocess.fosr.structural_zeros@1); "
                     "'average' takes a unit's mean instead")
    lines.append("intercept: true")
    if all(c in levels for c in covariates) and bound == math.sqrt(len(covariates)):
        lines.append(f"covariate_bound: {bound!r}   # PUBLIC: sqrt({len(covariates)}): each one-hot block adds at most 1 to "
                     "a unit's squared covariate norm, so nothing is shrunk")
    else:
        lines.append(f"covariate_bound: {bound!r}   # PUBLIC: Euclidean bound of a unit's covariate vector")
    return lines


def _delimiter(option: str, fmt: str) -> str:
    """``--csv-delimiter`` as the one character ``dataset.csv_delimiter`` holds (``\\t`` or ``tab``: a tab).

    >>> _delimiter(";", "csv"), _delimiter("tab", "csv") == chr(9), _delimiter(",", "parquet")
    (';', True, ',')
    """
    char = "\t" if option in ("\\t", "tab") else option
    if len(char) != 1 or char in "\n\r\"":
        raise ConfigError(f"--csv-delimiter ({option!r}) must be one character, e.g. ';' or '|' (\\t or tab for a tab)")
    if fmt != "csv" and char != ",":
        raise ConfigError(f"--csv-delimiter ({option!r}) applies to a .csv file, not to a {fmt} file")
    return char


def _with_delimiter_hint(p: Path, delimiter: str, read: Any) -> Any:
    """``read()``, whose refusal of a CSV read with the wrong delimiter names ``--csv-delimiter`` (and the likely one).

    The likely delimiter is looked for in the header line only (column names, never a data value).
    """
    try:
        return read()
    except DataError as exc:
        if "csv_delimiter" not in str(exc):
            raise
        try:
            with p.open(encoding="utf-8-sig") as f:
                header = f.readline()
        except (OSError, UnicodeDecodeError):
            header = ""
        found = next((d for d in ";\t|," if d != delimiter and d in header), None)
        example = {None: "';'", "\t": "'\\t'"}.get(found, repr(found))
        raise DataError(f"{exc}; fdp init reads the file with --csv-delimiter {delimiter!r}: give the file's, e.g. "
                        f"--csv-delimiter {example} (written into dataset.csv_delimiter)") from None


def _head(p: Path, n: int, summary: str, ds_id: str, rel: Path, fmt: str, csv_delimiter: str = ",") -> list[str]:
    """The opening lines of every config ``fdp init`` writes: what PUBLIC means, the summary, the data file."""
    return [
        f"# fdp release config written by `fdp init` for {p.name} ({n} privacy units).",
        "# PUBLIC = a choice that sets the noise: it must be fixed a priori (domain knowledge, published statistics,",
        "# other data), never read off this data. fdp init took every PUBLIC value from its options or a documented",
        "# default, never from the data. Check them, then run `fdp plan` to see the accuracy before spending.",
        "schema_version: 1",
        f"summary: {summary}",
        "dataset:",
        f"  id: {_q(ds_id)}                      # ledger name of the dataset (its budget is kept under it)",
        f"  path: {_q(str(rel))}",
        f"  format: {fmt}",
        *([f"  csv_delimiter: {_q(csv_delimiter)}   # the CSV file's column delimiter (fdp init --csv-delimiter)"]
          if csv_delimiter != "," else []),
    ]


def _finish(lines: list[str], summary: str, epsilon: float, budget: float, facts: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Close a config with its privacy and budget blocks, validate it, return ``(text, facts)``."""
    lines = [
        *lines,
        "privacy:",
        f"  epsilon: {epsilon!r}   # the cost of this release; see `fdp plan` for the accuracy it buys",
        "  delta: 0.0",
        "budget:                # proposal for the dataset's total; the ledger's value wins once set (fdp budget set)",
        f"  epsilon: {budget!r}",
        "  delta: 0.0",
    ]
    text = "\n".join(lines) + "\n"
    _validate(text, summary)
    return text, facts


def _relative(p: Path, config_dir: str | Path) -> Path:
    try:
        return Path(p.resolve()).relative_to(Path(config_dir).resolve())
    except ValueError:
        return p.resolve()


def _point_config(  # noqa: PLR0913 - one argument per command-line option
    p: Path, fmt: str, *, unit: str, coordinate: list[str], label: str | None, summary: str,
    domain: list[tuple[float, float]],
    epsilon: float, budget: float | None, grid_size: int, dataset_id: str | None, privacy_unit: str | None,
    config_dir: str | Path, loss: str, label_bound: float | None, label_offset: float = 0.0, csv_delimiter: str = ",",
) -> tuple[str, dict[str, Any]]:
    """The commented config of a KDE or ERM release on a point table (one or two coordinates; MATH.md §8, §9)."""
    if summary == "erm" and label is None:
        raise ConfigError("--summary erm needs --value COLUMN: the label (-1/+1 for logistic and hinge, a response for ridge)")
    if summary == "erm" and loss == "ridge" and label_bound is None:
        raise ConfigError("--summary erm --loss ridge needs --label-bound B: a PUBLIC bound on |response - "
                          "--value-offset| (responses minus the offset are clipped to [-B, B])")
    if label_offset != 0.0 and not (summary == "erm" and loss == "ridge"):
        raise ConfigError(f"--value-offset ({label_offset:g}) applies to curves and to --summary erm --loss ridge (the "
                          f"responses' public centre), not to --summary {summary}" + (f" --loss {loss}" if summary == "erm" else ""))
    n = _with_delimiter_hint(p, csv_delimiter, lambda: count_units_of_file(
        p, fmt, unit, [*coordinate, *([label] if summary == "erm" and label else [])], csv_delimiter))
    budget = budget if budget is not None else 10 * epsilon
    ds_id = dataset_id or _dataset_id(p)
    unit_text = privacy_unit or f"{unit} (all rows with one value of {unit})"
    lines = [
        *_head(p, n, summary, ds_id, _relative(p, config_dir), fmt, csv_delimiter),
        f"  unit_column: {_q(unit)}          # one privacy unit per distinct id (one spelling each: 308 and 308.0 are refused); its points are averaged",
        f"  coordinate_columns: [{', '.join(_q(c) for c in coordinate)}]",
        f"  domain: [{', '.join(f'[{float(a)!r}, {float(b)!r}]' for a, b in domain)}]   # PUBLIC: range of each "
        "coordinate, mapped onto [0, 1]",
        "  outside_domain: clamp   # a point outside the domain is moved to its edge (record-wise); 'error' stops first",
    ]
    if summary == "erm":
        lines += [f"  label_column: {_q(label or '')}",
                  *(["  labels: sign   # a label other than -1/+1 becomes its sign (record-wise; 0/1 coding works)"]
                    if loss != "ridge" else [])]
    lines += [
        f"  privacy_unit: {_q(unit_text)}   # published: what one record protects, in words",
        "grid:",
        "  rule: midpoint",
        f"  size: {grid_size}           # PUBLIC: number of grid points of the released function",
    ]
    if summary == "kde":
        lines += ["mechanism: iclp_qr",
                  "kernel: gaussian     # noise kernel on the unit-scaled domain",
                  *(["bandwidth: auto   # BOUGHT: a share of epsilon (bandwidth_share, default 0.1) buys the points' "
                     "scale (DP quartiles of the units' mean points) and h minimises the normal-reference error at it "
                     "plus the noise (tuning.kde.bandwidth_auto@1; `fdp plan` shows the split); with too few units for "
                     "the quartiles at that epsilon it is normal_reference and nothing is charged for it. Or "
                     "normal_reference ((1.06/6) n^(-1/5): right when the points fill the public range), or a PUBLIC "
                     "number (the scale of the features to resolve, as a fraction of the range)"]
                   if len(coordinate) == 1 else
                   ["bandwidth: normal_reference   # (1/6) n^(-1/6) of each unit-scaled range, from the public n: right "
                    "when the points fill the public range; a PUBLIC number (the scale of the features to resolve, as a "
                    "fraction of the range) if you know better; or auto (BOUGHT with a share of epsilon, "
                    "tuning.kde.bandwidth_auto@1: better when the points sit in a small part of the box, but pricing "
                    "its 2-D candidates takes minutes on the first plan and release of a grid)"]),
                  "eta: 1.25"]
    else:
        lines += [f"loss: {loss}",
                  "mechanism: iclp",
                  "kernel: {name: matern, nu: 1.5, rho: 0.2}   # PUBLIC: smoothness of the function and of the noise",
                  "eta: 1.5             # > 1 + 1/beta = 1.25 for Matern-3/2 keeps the ICLP noise bounded as the grid is refined "
                  "(MATH.md §9; `fdp plan` warns at or below it)",
                  "psi: auto            # PUBLIC rule tuning.erm.psi.risk_prior@1 (no data, no budget): the psi that "
                  "minimises the expected noise (falls as psi grows) + smoothing bias (grows with psi) for "
                  + ("a function of size 0.5 x label_bound" if loss == "ridge" else "a decision function of size 1")
                  + "; `fdp plan` shows the psi it picks per epsilon; or a number fixed a priori",
                  *([f"label_offset: {float(label_offset)!r}   # PUBLIC centre of the responses, chosen a priori: "
                     "subtracted before clipping, added back to the released function",
                     f"label_bound: {label_bound!r}   # PUBLIC: responses minus label_offset are clipped to [-B, B]"]
                    if loss == "ridge" else [])]
    return _finish(lines, summary, epsilon, budget, {"n": n, "format": fmt, "dataset_id": ds_id})


def _validate(text: str, summary: str) -> None:
    """Validate the text with the model ``fdp release`` will use for it."""
    try:
        SUMMARIES[summary].config_model.model_validate(yaml.safe_load(text))
    except ValidationError as exc:
        raise ConfigError(f"the config fdp init would write is invalid; check the options\n"
                          f"{format_validation_error(exc)}") from None
