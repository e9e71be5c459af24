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

__all__ = ["MAX_COLUMNS", "NOISE_BAND_LABEL", "T2_BAND_LABEL", "coefficients_png", "curves_png", "error_vs_epsilon_png",
           "labels_of", "legend_of", "privacy_subtitle", "profiles_png", "surface_png", "tau_pricing_text", "title_of",
           "value_label"]

#: The label of every pointwise noise band: it is the noise's spread around the release, never a confidence interval
#: for the truth (clipping and smoothing bias are outside it).
NOISE_BAND_LABEL = "noise-only 95% band (not a confidence interval)"
#: A curve on more grid points than this is drawn without a marker per point (trial L: at K = 1,460 they made a smear).
MAX_MARKED_POINTS = 200
#: FoSR's band: the noise of the cross moments T2 alone (T1's noise and the inverse's amplification are outside it).
T2_BAND_LABEL = "T2 noise band (not a confidence interval)"
#: The PNG text key that holds a plot's legend labels (so a reader, or a test, can read them without the image).
LEGEND_KEY = "Description"
#: The PNG text key that holds a plot's title (and subtitle), unwrapped.
TITLE_KEY = "Title"
#: The PNG text key that holds a plot's axis and colour-bar labels (``x: … | y: … | colour bar: …``).
LABELS_KEY = "Comment"
#: The most panels a row of a multi-panel plot holds (more panels wrap onto further rows).
MAX_COLUMNS = 3


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
    styles: Mapping[str, Mapping[str, Any]] | None = None,
    subtitle: str | None = None,
) -> bytes:
    """One line per released curve (and an optional band) as PNG bytes, without volatile metadata.

    The legend sits under the axes, so it never covers a curve (trial Y: a two-entry legend placed "best" still sat on
    the released curve). ``styles`` overrides the line style of a named curve (e.g. a thin dashed line for a secondary curve).
    ``subtitle`` (a second, smaller title line) states public numbers, e.g. the release's epsilon and tau
    (:func:`privacy_subtitle`).
    """
    plt = _pyplot()
    entries = len(curves) + (band is not None)
    fig, ax = plt.subplots(figsize=(6.0, 3.6 + 0.2 * entries + 0.3 + (0.4 if subtitle else 0.0)), dpi=100)
    if band is not None:
        ax.fill_between(t, band[0], band[1], color="tab:blue", alpha=0.18, linewidth=0, label=band_label)
    for label, values in curves.items():
        style = {"marker": "o" if len(t) <= MAX_MARKED_POINTS else None, "markersize": 2.5, "linewidth": 1.2,
                 **(styles or {}).get(label, {})}
        ax.plot(t, values, label=label, **style)
    if zero_line:
        ax.axhline(0.0, color="0.7", linewidth=0.8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title if subtitle is None else f"{title}\n{subtitle}", fontsize=10 if subtitle is None else 9)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
    return _finish(plt, fig, [ax.title], legend_ax=ax)


def privacy_subtitle(epsilon: float, delta: float, clip: str | None, caveat: str) -> str:
    """A release plot's subtitle: its privacy cost, the clipping radius it used and what its band leaves out.

    Public numbers only (the manifest's ``privacy.epsilon``/``delta`` and a public or DP-released radius).

    >>> privacy_subtitle(1.0, 0.0, "τ = 0.112 (rescaled units)", "clipping and smoothing bias not in the band")
    'ε = 1, τ = 0.112 (rescaled units); clipping and smoothing bias not in the band'
    >>> privacy_subtitle(0.5, 1e-6, None, "kernel smoothing bias not in the band")
    'ε = 0.5, δ = 1e-06; kernel smoothing bias not in the band'
    """
    parts = [f"ε = {epsilon:g}", *((f"δ = {delta:g}",) if delta > 0 else ()), *((clip,) if clip else ())]
    return f"{', '.join(parts)}; {caveat}"


def value_label(column: str) -> str:
    """A y label for released values: the config's value column with the unit hint it has no field for.

    >>> value_label("emp")
    'emp (source units)'
    """
    return f"{column} (source units)"


def _legend_text(ax: Any) -> str:
    """The legend's labels of ``ax``, joined by `` | `` (stored in the PNG's text under :data:`LEGEND_KEY`)."""
    return "legend: " + " | ".join(ax.get_legend_handles_labels()[1])


def _info(png: bytes, key: str) -> str:
    """The PNG text chunk ``key`` of ``png`` (``''`` when absent)."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        return str(image.info.get(key, ""))


def legend_of(png: bytes) -> str:
    """The legend text a plot of this module stored in its PNG (``''`` when it stored none)."""
    return _info(png, LEGEND_KEY)


def title_of(png: bytes) -> str:
    """The title (and subtitle) a plot of this module stored in its PNG, unwrapped (``''`` when it stored none)."""
    return _info(png, TITLE_KEY)


def labels_of(png: bytes) -> str:
    """The axis and colour-bar labels a plot of this module stored in its PNG (``''`` when it stored none)."""
    return _info(png, LABELS_KEY)


def surface_png(x: Any, y: Any, values: Any, *, xlabel: str, ylabel: str, title: str, colorbar: str,
                subtitle: str | None = None) -> bytes:
    """A released surface on a tensor grid (``values`` is ``len(x) x len(y)``, row-major) as PNG bytes.

    ``subtitle`` (a second, smaller title line) states a public number next to the colour scale, e.g. the
    expected size of the noise in the surface's units.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.6, 4.8 if subtitle else 4.4), dpi=100)
    mesh = ax.pcolormesh(y, x, values, shading="nearest", cmap="viridis")
    bar = fig.colorbar(mesh, ax=ax, label=colorbar)
    ax.set_xlabel(ylabel)
    ax.set_ylabel(xlabel)
    ax.set_title(title if subtitle is None else f"{title}\n{subtitle}", fontsize=10 if subtitle is None else 9)
    return _finish(plt, fig, [ax.title], labels=f"x: {ylabel} | y: {xlabel} | colour bar: {bar.ax.get_ylabel()}")


def error_vs_epsilon_png(report: Mapping[str, Any]) -> bytes:
    """``fdp plan``'s expected L2 error (and widest 95 % band) against epsilon, log-log, as PNG bytes.

    Only numbers computed from public inputs and ``n`` are plotted (the plan has seen no data value). With
    ``tau: auto`` the subtitle says the errors are priced at ``tau = 1`` (:func:`tau_pricing_text`) and that a bought
    tau lowers the noise. The legend sits under the axes, so it never covers a point.
    """
    plt = _pyplot()
    fpca = report["summary"] == "fpca"  # no noise curve: the expected captured-energy shortfall per record
    key = "expected_energy_shortfall" if fpca else "expected_l2_error"
    rows = [r for r in report["rows"] if r.get(key) is not None]
    subtitle = tau_pricing_text(report)
    fig, ax = plt.subplots(figsize=(6.0, 4.6 + (0.4 if subtitle else 0.0)), dpi=100)
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
        # under the axes, off the data (trial H: a legend in the corner covered the points at small epsilon)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False)
    else:
        ax.text(0.5, 0.5, "no closed-form error for this summary\n(see `fdp plan` text)", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_xlabel("epsilon of the release")
    squared = fpca or report["summary"] == "covariance"
    units = "source units squared" if squared else "source units"
    column = report.get("value_column") if report["summary"] in ("mean", "covariance", "fosr", "fpca") else None
    ax.set_ylabel(f"{column}{' squared' if squared else ''} ({units})" if column else units)
    title = f"fdp plan: {report['summary']} of {report['dataset_id']} (n = {report['n']}); nothing charged"
    ax.set_title(title if subtitle is None else f"{title}\n{subtitle}", fontsize=9)
    return _finish(plt, fig, [ax.title], legend_ax=ax)


def tau_pricing_text(report: Mapping[str, Any]) -> str | None:
    """The plan plot's subtitle for ``tau: auto``: at which tau the errors are priced; ``None`` for a fixed tau.

    The upper end of ``tau_range`` comes from the rows' ``bought`` candidates (public); the errors scale linearly with
    the tau released (with its square for a covariance and FPCA), so a bought tau below 1 lowers them.

    >>> tau_pricing_text({"summary": "mean", "tau": "auto", "rows": [{"bought": [{"name": "tau", "candidates": [0.01, 1.0]}]}]})
    'errors priced at tau = 1, the upper end of tau_range; the tau bought with part of epsilon is at most that and lowers the noise in proportion'
    """
    if report.get("tau") != "auto":
        return None
    ends = [b["candidates"][-1] for r in report.get("rows") or () for b in r.get("bought") or () if b.get("name") == "tau"]
    square = report["summary"] in ("covariance", "fpca")
    scale = "with its square" if square else "in proportion"
    where = ("the upper end of tau_range" if not ends or max(ends) == 1.0 else
             f"tau_range's upper end is {max(ends):g}, where they are {max(ends) ** (2 if square else 1):g}x these")
    if report.get("tuning_follows_tau"):  # tuning.signal_rms: the smoothing is re-chosen at the tau released
        return (f"errors priced at tau = 1, {where}; the tau bought with part of epsilon is at most that and the "
                "smoothing is re-chosen there (tuning.signal_rms): the release states its error")
    return (f"errors priced at tau = 1, {where}; the tau bought with part of epsilon is at most that and lowers the "
            f"noise {scale}")


def coefficients_png(t: Any, curves: Mapping[str, Any], bands: Mapping[str, tuple[Any, Any]], *, xlabel: str,
                     ylabel: str, title: str, band_label: str = T2_BAND_LABEL, subtitle: str | None = None,
                     panel_notes: Mapping[str, str] | None = None) -> bytes:
    """One panel per released coefficient curve with its noise band (private values only), as PNG bytes.

    FoSR's band is the noise of ``T2`` alone (:data:`T2_BAND_LABEL`), not a confidence band for the coefficient.
    The panels fill rows of at most :data:`MAX_COLUMNS`; ``subtitle`` is a second title line (public numbers);
    ``panel_notes`` a second line under a panel's name (e.g. the coefficient's whole stated noise).
    """
    plt = _pyplot()
    fig, panels = _panel_grid(plt, len(curves), width=3.4, height=3.0)
    for ax, (name, values) in zip(panels, curves.items(), strict=True):
        lo, hi = bands[name]
        ax.fill_between(t, lo, hi, color="tab:blue", alpha=0.18, linewidth=0, label=band_label)
        ax.plot(t, values, linewidth=1.4, color="tab:blue", label="private estimate")
        if name != "intercept":
            ax.axhline(0.0, color="0.6", linewidth=0.8)
        note = (panel_notes or {}).get(name)
        ax.set_title(f"beta_{name}" + (f"\n{note}" if note else ""), fontsize=9)
    return _panels_png(plt, fig, panels, xlabel=xlabel, ylabel=ylabel,
                       title=title if subtitle is None else f"{title}\n{subtitle}")


def profiles_png(t: Any, base: Any, directions: Mapping[str, Any], *, xlabel: str, ylabel: str, title: str,
                 base_label: str) -> bytes:
    """One panel per direction: a public base curve and base +/- the (private) direction, as PNG bytes.

    The panels fill rows of at most :data:`MAX_COLUMNS`.
    """
    plt = _pyplot()
    fig, panels = _panel_grid(plt, len(directions), width=3.6, height=3.1)
    for ax, (name, d) in zip(panels, directions.items(), strict=True):
        ax.plot(t, base, color="0.3", linewidth=1.4, label=base_label)
        ax.plot(t, base + d, color="tab:red", linewidth=1.2, linestyle="--", label="+ component")
        ax.plot(t, base - d, color="tab:blue", linewidth=1.2, linestyle=":", label="- component")
        ax.set_title(name, fontsize=9)
    return _panels_png(plt, fig, panels, xlabel=xlabel, ylabel=ylabel, title=title)


def _panel_grid(plt: Any, k: int, *, width: float, height: float) -> tuple[Any, list[Any]]:
    """A figure of ``k`` panels of ``width x height`` inches in rows of at most :data:`MAX_COLUMNS` (spares removed)."""
    cols = min(k, MAX_COLUMNS)
    rows = -(-k // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows + 0.6), dpi=100, squeeze=False)
    flat = list(axes.ravel())
    for spare in flat[k:]:
        fig.delaxes(spare)
    return fig, flat[:k]


def _panels_png(plt: Any, fig: Any, panels: list[Any], *, xlabel: str, ylabel: str, title: str) -> bytes:
    """Finish a grid of panels and return it as PNG bytes.

    The y label goes on the first column, the x label under the lowest panel of each column, the legend on the
    first panel and the title over all.
    """
    cols = min(len(panels), MAX_COLUMNS)
    for i, ax in enumerate(panels):
        if i % cols == 0:
            ax.set_ylabel(ylabel)
        if i + cols >= len(panels):  # nothing below it
            ax.set_xlabel(xlabel)
    panels[0].legend(fontsize=7, loc="best", framealpha=0.6)  # where it covers least of the curves
    suptitle = fig.suptitle(title, fontsize=9)
    return _finish(plt, fig, [suptitle], legend_ax=panels[0], labels=f"x: {xlabel} | y: {ylabel}")


def _finish(plt: Any, fig: Any, titles: list[Any], *, legend_ax: Any = None, labels: str | None = None) -> bytes:
    """Wrap titles and labels until every one lies inside the figure, then render the PNG bytes (no volatile metadata).

    The PNG's text carries the unwrapped title(s) (:data:`TITLE_KEY`), the legend (:data:`LEGEND_KEY`) and the
    axis labels (:data:`LABELS_KEY`), so a reader or a test can read them without the image.
    """
    if labels is None:
        ax = fig.axes[0]
        labels = f"x: {ax.get_xlabel()} | y: {ax.get_ylabel()}"
    metadata = {"Software": None, TITLE_KEY: " | ".join(" ".join(t.get_text().split("\n")) for t in titles),
                LABELS_KEY: labels}
    if legend_ax is not None:
        metadata[LEGEND_KEY] = _legend_text(legend_ax)
    wrappable = [*titles, *(label for ax in fig.axes for label in (ax.xaxis.label, ax.yaxis.label))]
    texts = {id(a): a.get_text() for a in wrappable}
    widths = {id(a): max(len(line) for line in a.get_text().split("\n")) for a in wrappable}
    owners = {id(ax.yaxis.label): ax for ax in fig.axes}  # a y label longer than its panel is tall is wrapped too
    fig.tight_layout()
    renderer = fig.canvas.get_renderer()
    for _ in range(12):  # each round narrows every text still outside by 15 %
        outside = [a for a in wrappable if a.get_text() and widths[id(a)] > 16
                   and (_overflows(fig, a, renderer) or _taller_than(owners.get(id(a)), a, renderer))]
        if not outside:
            break
        for artist in outside:
            widths[id(artist)] = int(widths[id(artist)] * 0.85)
            artist.set_text("\n".join(textwrap.fill(line, widths[id(artist)]) for line in texts[id(artist)].split("\n")))
        fig.tight_layout()
    sink = io.BytesIO()
    fig.savefig(sink, format="png", metadata=metadata)
    plt.close(fig)
    return bytes(sink.getvalue())


def _taller_than(ax: Any, label: Any, renderer: Any) -> bool:
    """Whether a y label reaches above or below its panel (trial Z: a FoSR label ran up into the title; 1 px tolerance)."""
    if ax is None:
        return False
    box, extent = ax.get_window_extent(renderer), label.get_window_extent(renderer)
    return bool(extent.y0 < box.y0 - 1 or extent.y1 > box.y1 + 1)


def _overflows(fig: Any, artist: Any, renderer: Any) -> bool:
    """Whether a text reaches outside the figure (1 px tolerance)."""
    box, extent = fig.bbox, artist.get_window_extent(renderer)
    return bool(extent.x0 < box.x0 - 1 or extent.y0 < box.y0 - 1 or extent.x1 > box.x1 + 1 or extent.y1 > box.y1 + 1)
