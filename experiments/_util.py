"""Small helpers shared by the report sections: Markdown tables, figures, CSVs, verdicts, CLI."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

#: Resolution of the report's PNG figures.
DPI = 110


def md_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A Markdown table (cells are converted with ``str``)."""
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def fmt(x: float, digits: int = 4) -> str:
    """A number with ``digits`` significant digits (scientific notation when very small or large)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if x == 0:
        return "0"
    if abs(x) < 1e-3 or abs(x) >= 1e5:
        return f"{x:.{digits - 1}e}"
    if abs(x) >= 10:
        return f"{x:.{max(digits - len(str(int(abs(x)))), 0)}f}"
    return f"{x:.{digits}g}"


def save_figure(fig: plt.Figure, out_dir: Path, filename: str) -> str:
    """Write ``fig`` as PNG into ``out_dir`` and return its report link ``results/<filename>``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_dir / filename, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return f"results/{filename}"


def save_csv(frame: pd.DataFrame, out_dir: Path, filename: str) -> str:
    """Write ``frame`` as CSV into ``out_dir`` and return its report link ``results/<filename>``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out_dir / filename, index=False)
    return f"results/{filename}"


def verdict(confirmed: bool, partly: bool = False) -> str:
    """``confirmed`` / ``partly confirmed`` / ``refuted`` from computed conditions."""
    if confirmed:
        return "**confirmed**"
    return "**partly confirmed**" if partly else "**refuted**"


def standalone(name: str, run: Callable[..., str], default_reps: int, description: str) -> None:
    """The ``main()`` of a section: ``python -m experiments.<name> --reps R --seed S --out DIR``.

    Writes ``DIR/<name>.md`` (the section body) next to the figures and CSVs.
    """
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--reps", type=int, default=default_reps)
    ap.add_argument("--seed", type=int, default=20240610)
    ap.add_argument("--out", type=Path, default=Path("experiments/results"), help="folder for figures, CSVs and <name>.md")
    a = ap.parse_args()
    body = run(a.out, a.reps, a.seed)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / f"{name}.md").write_text(body + "\n")
    print(body)
