"""``fdp init``: write a commented release config for a data file nobody has tuned for.

Only the file's column names and types and the number of privacy units are read. Everything that
sets the noise (time domain, value offset and scale, clipping radius, grid, kernel, epsilon) is public
and chosen a priori: it comes from the command line or from documented, data-independent defaults,
never from the data values, and the config marks each such field ``PUBLIC``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from fdp.flows.config import format_validation_error
from fdp.flows.registry import SUMMARIES
from fdp.tasks.planning import count_units_of_file
from pydantic import ValidationError

from fdpcore.errors import ConfigError

__all__ = ["INIT_SUMMARIES", "init_config"]

#: Summaries ``fdp init`` writes: curves in long format, and points (kde, erm).
INIT_SUMMARIES = ("mean", "covariance", "fpca", "fosr", "kde", "erm")


def _q(value: str) -> str:
    """A YAML scalar for a string (quoted when needed)."""
    return yaml.safe_dump(value, default_style=None).strip().removesuffix("\n...").strip()


def _dataset_id(path: Path) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", path.stem).strip("-._") or "dataset"
    return stem if stem[0].isalnum() else f"d{stem}"


def init_config(  # noqa: PLR0913 - one argument per command-line option
    data: str | Path, *, unit: str, time: str, value: str | None = None, summary: str = "mean",
    time_domain: tuple[float, float], value_offset: float = 0.0, value_scale: float = 1.0, tau: float | None = None,
    epsilon: float = 1.0, budget: float | None = None, grid_size: int = 50, dataset_id: str | None = None,
    privacy_unit: str | None = None, covariates: list[str] | None = None, covariate_bound: float | None = None,
    config_dir: str | Path = ".", loss: str = "logistic", label_bound: float | None = None,
) -> tuple[str, dict[str, Any]]:
    """The YAML text of a commented config for ``data`` and facts about the file (``n``, format).

    The config is validated (the same :func:`fdp.flows.config.load_config` ``fdp release`` uses) before
    it is returned. ``config_dir`` is where the config will be written (the data path is made relative to it).

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
    if summary in ("kde", "erm"):
        return _point_config(p, fmt, unit=unit, coordinate=time, label=value, summary=summary, domain=time_domain,
                             epsilon=epsilon, budget=budget, grid_size=grid_size, dataset_id=dataset_id,
                             privacy_unit=privacy_unit, config_dir=config_dir, loss=loss, label_bound=label_bound)
    if value is None:
        raise ConfigError(f"--summary {summary} needs --value COLUMN (the observed values)")
    if summary == "fosr" and (not covariates or covariate_bound is None):
        raise ConfigError("--summary fosr needs --covariate NAME (repeatable) and --covariate-bound B (public)")
    n = count_units_of_file(p, fmt, unit, [time, value, *(covariates or [])])
    rel = _relative(p, config_dir)
    budget = budget if budget is not None else 10 * epsilon
    ds_id = dataset_id or _dataset_id(p)
    unit_text = privacy_unit or f"{unit} (all rows with one value of {unit})"
    lines = [
        *_head(p, n, summary, ds_id, rel, fmt),
        f"  unit_column: {_q(unit)}          # one privacy unit per distinct value; its rows form one record",
        f"  time_column: {_q(time)}",
        f"  value_column: {_q(value)}",
        f"  privacy_unit: {_q(unit_text)}   # published: what one record protects, in words",
        f"  time_domain: [{time_domain[0]!r}, {time_domain[1]!r}]   # PUBLIC: first and last time of the measurement design (source units)",
        f"  value_offset: {value_offset!r}   # PUBLIC: reference level subtracted from every value (source units)",
        f"  value_scale: {value_scale!r}    # PUBLIC: typical size of (value - offset), e.g. from published statistics",
        "grid:",
        "  rule: midpoint",
        f"  size: {grid_size}           # PUBLIC: number of grid points of the released curve(s)",
        "  domain: [0.0, 1.0]",
    ]
    if summary != "fpca":
        lines.append("kernel: {name: matern, nu: 1.5, rho: 0.1}   # PUBLIC: smoothness of the privacy noise")
    if summary == "mean":
        lines.append("estimator: iclp_qr")
    if summary == "covariance":
        lines += ["mechanism: iclp_qr",
                  "centering:",
                  "  kind: public           # centre on value_offset (public); {kind: sample_mean} costs about 3x the noise"]
    if summary == "fpca":
        lines += ["n_components: 1          # PUBLIC: number of principal components released",
                  "basis: {n_basis: 5}      # PUBLIC: smooth basis the components are drawn in"]
    if summary == "fosr":
        lines.append("covariates:             # scalar columns, constant within a unit (numeric here; see docs/summaries/fosr.md for "
                     "categorical encodings)")
        lines += [f"  - name: {_q(c)}" for c in covariates or []]
        lines += ["intercept: true",
                  f"covariate_bound: {covariate_bound!r}   # PUBLIC: Euclidean bound of a unit's covariate vector"]
    if tau is None:  # the budget can buy it: a DP quantile of the record norms (every curve summary)
        clipping = ["clipping:",
                    "  tau: auto   # BOUGHT: a share of epsilon (tau_share, default 0.1) buys the L2 radius of a rescaled",
                    "              # record as a DP quantile of the record norms over the public tau_range (default",
                    "              # [0.01, 1] x sqrt(grid domain length): never above the a-priori bound of values",
                    "              # rescaled into [-1, 1]; for small n x epsilon up to half of epsilon, and below",
                    "              # that the upper end, at no cost: `fdp plan` shows which); or write a PUBLIC",
                    "              # number chosen a priori (it saves the share when your a-priori bound is tight)"]
    else:
        clipping = ["clipping:",
                    f"  tau: {1.0 if tau is None else tau!r}   # PUBLIC: L2 radius of a rescaled record "
                    "((value - offset)/scale); larger records are shrunk to it"]
    lines += clipping
    return _finish(lines, summary, epsilon, budget, {"n": n, "format": fmt, "dataset_id": ds_id})


def _head(p: Path, n: int, summary: str, ds_id: str, rel: Path, fmt: str) -> list[str]:
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
    p: Path, fmt: str, *, unit: str, coordinate: str, label: str | None, summary: str, domain: tuple[float, float],
    epsilon: float, budget: float | None, grid_size: int, dataset_id: str | None, privacy_unit: str | None,
    config_dir: str | Path, loss: str, label_bound: float | None,
) -> tuple[str, dict[str, Any]]:
    """The commented config of a KDE or ERM release on a point table (one coordinate; MATH.md §8, §9)."""
    if summary == "erm" and label is None:
        raise ConfigError("--summary erm needs --value COLUMN: the label (-1/+1 for logistic and hinge, a response for ridge)")
    if summary == "erm" and loss == "ridge" and label_bound is None:
        raise ConfigError("--summary erm --loss ridge needs --label-bound B: a PUBLIC bound on |response| (responses "
                          "are clipped to [-B, B])")
    n = count_units_of_file(p, fmt, unit, [coordinate, *([label] if summary == "erm" and label else [])])
    budget = budget if budget is not None else 10 * epsilon
    ds_id = dataset_id or _dataset_id(p)
    unit_text = privacy_unit or f"{unit} (all rows with one value of {unit})"
    lines = [
        *_head(p, n, summary, ds_id, _relative(p, config_dir), fmt),
        f"  unit_column: {_q(unit)}          # one privacy unit per distinct value; its points are averaged",
        f"  coordinate_columns: [{_q(coordinate)}]",
        f"  domain: [[{domain[0]!r}, {domain[1]!r}]]   # PUBLIC: range of the coordinate, mapped onto [0, 1]",
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
                  "bandwidth: n_rule    # h = n^(-1/5) from the public number of units (privacy-safe, MATH.md §5.1)",
                  "eta: 1.25"]
    else:
        lines += [f"loss: {loss}",
                  "mechanism: iclp",
                  "kernel: {name: matern, nu: 1.5, rho: 0.2}   # PUBLIC: smoothness of the function and of the noise",
                  "eta: 1.5             # > 1 + 1/beta = 1.25 for Matern-3/2: grid-uniform ICLP bound (MATH.md §9)",
                  "psi: 0.01            # PUBLIC regularisation: the noise falls as 1/(psi n), the bias grows with psi; "
                  "see fdp plan",
                  *([f"label_bound: {label_bound!r}   # PUBLIC: responses are clipped to [-B, B]"] if loss == "ridge" else [])]
    return _finish(lines, summary, epsilon, budget, {"n": n, "format": fmt, "dataset_id": ds_id})


def _validate(text: str, summary: str) -> None:
    """Validate the text with the model ``fdp release`` will use for it."""
    try:
        SUMMARIES[summary].config_model.model_validate(yaml.safe_load(text))
    except ValidationError as exc:
        raise ConfigError(f"the config fdp init would write is invalid; check the options\n"
                          f"{format_validation_error(exc)}") from None
