"""PNG plots of released curves for Prefect artifacts and release folders.

Only private outputs and public parameters are ever plotted (released curves, noise bands
computed from the mechanism alone); the plots are rendered to bytes, never shown.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Mapping
from functools import cache
from typing import Any

__all__ = ["NOISE_BAND_LABEL", "T2_BAND_LABEL", "coefficients_png", "curves_png", "error_vs_epsilon_png", "legend_of",
           "profiles_png", "surface_png"]

#: The label of every pointwise noise band: it is the noise's spread around the release, never a confidence interval
#: for the truth (clipping and smoothing bias are outside it).
NOISE_BAND_LABEL = "noise-only 95% band (not a confidence interval)"
#: FoSR's band: the noise of the cross moments T2 alone (T1's noise and the inverse's amplification are outside it).
T2_BAND_LABEL = "T2 noise band (not a confidence interval)"
#: The PNG text key that holds a plot's legend labels (so a reader, or a test, can read them without the image).
LEGEND_KEY = "Description"


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
    band_label: str = NOISE_BAND_LABEL,
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
    fig.savefig(sink, format="png", metadata={"Software": None, LEGEND_KEY: _legend_text(ax)})
    plt.close(fig)
    return sink.getvalue()


def _legend_text(ax: Any) -> str:
    """The legend's labels of ``ax``, joined by `` | `` (stored in the PNG's text under :data:`LEGEND_KEY`)."""
    return "legend: " + " | ".join(ax.get_legend_handles_labels()[1])


def legend_of(png: bytes) -> str:
    """The legend text a plot of this module stored in its PNG (``''`` when it stored none)."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        return str(image.info.get(LEGEND_KEY, ""))


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


def error_vs_epsilon_png(report: Mapping[str, Any]) -> bytes:
    """``fdp plan``'s expected L2 error (and widest 95 % band) against epsilon, log-log, as PNG bytes.

    Only numbers computed from public inputs and ``n`` are plotted (the plan has seen no data value).
    """
    plt = _pyplot()
    fpca = report["summary"] == "fpca"  # no noise curve: the expected captured-energy shortfall per record
    key = "expected_energy_shortfall" if fpca else "expected_l2_error"
    rows = [r for r in report["rows"] if r.get(key) is not None]
    fig, ax = plt.subplots(figsize=(6.0, 3.8), dpi=100)
    if rows:
        eps = [r["epsilon"] for r in rows]
        ax.plot(eps, [r[key] for r in rows], marker="o", label="expected captured-energy shortfall per record"
                if fpca else "expected L2 error of the noise (noise only: bias not included)")
        bands = [(r["epsilon"], r["band_half_width_max"]) for r in rows if r.get("band_half_width_max") is not None]
        if bands:
            ax.plot(*zip(*bands, strict=True), marker="s", linestyle="--",
                    label=f"widest {NOISE_BAND_LABEL} (pointwise)")
        ax.axvline(report["config_epsilon"], color="0.6", linewidth=0.8, label="epsilon of the config")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.minorticks_off()  # log minor labels overlap; label the planned epsilons and a few error levels instead
        ax.set_xticks(eps, [f"{e:g}" for e in eps])
        values = [r[key] for r in rows] + [b for _, b in bands]
        ticks = sorted({float(f"{v:.2g}") for v in (min(values), max(values), (min(values) * max(values)) ** 0.5)})
        ax.set_yticks(ticks, [f"{v:g}" for v in ticks])
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no closed-form error for this summary\n(see `fdp plan` text)", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_xlabel("epsilon of the release")
    ax.set_ylabel("source units squared" if fpca else "source units")
    ax.set_title(f"fdp plan: {report['summary']} of {report['dataset_id']} (n = {report['n']}); nothing charged",
                 fontsize=9)
    fig.tight_layout()
    sink = io.BytesIO()
    fig.savefig(sink, format="png", metadata={"Software": None, LEGEND_KEY: _legend_text(ax)})
    plt.close(fig)
    return sink.getvalue()


def coefficients_png(t: Any, curves: Mapping[str, Any], bands: Mapping[str, tuple[Any, Any]], *, xlabel: str,
                     ylabel: str, title: str, band_label: str = T2_BAND_LABEL) -> bytes:
    """One panel per released coefficient curve with its noise band (private values only), as PNG bytes.

    FoSR's band is the noise of ``T2`` alone (:data:`T2_BAND_LABEL`), not a confidence band for the coefficient.
    """
    plt = _pyplot()
    k = len(curves)
    fig, axes = plt.subplots(1, k, figsize=(3.4 * k, 3.4), dpi=100, squeeze=False)
    for ax, (name, values) in zip(axes[0], curves.items(), strict=True):
        lo, hi = bands[name]
        ax.fill_between(t, lo, hi, color="tab:blue", alpha=0.18, linewidth=0, label=band_label)
        ax.plot(t, values, linewidth=1.4, color="tab:blue", label="private estimate")
        if name != "intercept":
            ax.axhline(0.0, color="0.6", linewidth=0.8)
        ax.set_title(f"beta_{name}", fontsize=9)
        ax.set_xlabel(xlabel)
    return _panels_png(plt, fig, axes, ylabel=ylabel, title=title)


def profiles_png(t: Any, base: Any, directions: Mapping[str, Any], *, xlabel: str, ylabel: str, title: str,
                 base_label: str) -> bytes:
    """One panel per direction: a public base curve and base +/- the (private) direction, as PNG bytes."""
    plt = _pyplot()
    k = len(directions)
    fig, axes = plt.subplots(1, k, figsize=(3.6 * k, 3.5), dpi=100, squeeze=False)
    for ax, (name, d) in zip(axes[0], directions.items(), strict=True):
        ax.plot(t, base, color="0.3", linewidth=1.4, label=base_label)
        ax.plot(t, base + d, color="tab:red", linewidth=1.2, linestyle="--", label="+ component")
        ax.plot(t, base - d, color="tab:blue", linewidth=1.2, linestyle=":", label="- component")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel(xlabel)
    return _panels_png(plt, fig, axes, ylabel=ylabel, title=title)


def _panels_png(plt: Any, fig: Any, axes: Any, *, ylabel: str, title: str) -> bytes:
    """Finish a row of panels (y label and legend on the first, a title over all) and return it as PNG bytes."""
    axes[0][0].set_ylabel(ylabel)
    axes[0][0].legend(fontsize=7)
    width = fig.get_size_inches()[0]
    fig.suptitle(textwrap.fill(title, width=max(30, int(15 * width))), fontsize=9)  # ~15 characters per inch at 9 pt
    fig.tight_layout()
    sink = io.BytesIO()
    fig.savefig(sink, format="png", metadata={"Software": None, LEGEND_KEY: _legend_text(axes[0][0])})
    plt.close(fig)
    return bytes(sink.getvalue())
