"""PNG plots of released curves for Prefect artifacts and release folders.

Only private outputs and public parameters are ever plotted (released curves, noise bands
computed from the mechanism alone); the plots are rendered to bytes, never shown.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from functools import cache
from typing import Any

__all__ = ["curves_png", "surface_png"]


@cache
def _pyplot() -> Any:
    """``matplotlib.pyplot`` on the headless Agg backend, imported on the first plot (it takes ~0.5 s)."""
    import matplotlib

    matplotlib.use("Agg")  # headless
    import matplotlib.pyplot as plt

    return plt


def curves_png(
    t: Any,
    curves: Mapping[str, Any],
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    band: tuple[Any, Any] | None = None,
    band_label: str = "95% noise band",
    zero_line: bool = False,
) -> bytes:
    """One line per released curve (and an optional band) as PNG bytes, without volatile metadata."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 3.6), dpi=100)
    if band is not None:
        ax.fill_between(t, band[0], band[1], color="tab:blue", alpha=0.18, linewidth=0, label=band_label)
    for label, values in curves.items():
        ax.plot(t, values, marker="o", markersize=2.5, linewidth=1.2, label=label)
    if zero_line:
        ax.axhline(0.0, color="0.7", linewidth=0.8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    sink = io.BytesIO()
    fig.savefig(sink, format="png", metadata={"Software": None})
    plt.close(fig)
    return sink.getvalue()


def surface_png(x: Any, y: Any, values: Any, *, xlabel: str, ylabel: str, title: str, colorbar: str) -> bytes:
    """A released surface on a tensor grid (``values`` is ``len(x) x len(y)``, row-major) as PNG bytes."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.6, 4.4), dpi=100)
    mesh = ax.pcolormesh(y, x, values, shading="nearest", cmap="viridis")
    fig.colorbar(mesh, ax=ax, label=colorbar)
    ax.set_xlabel(ylabel)
    ax.set_ylabel(xlabel)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    sink = io.BytesIO()
    fig.savefig(sink, format="png", metadata={"Software": None})
    plt.close(fig)
    return sink.getvalue()
