"""The release PNGs (fdp.tasks._plots): every text fits inside the figure, panels wrap into a grid, texts are stored."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from fdp.tasks import _plots
from fdp.tasks._plots import (
    MAX_COLUMNS,
    coefficients_png,
    curves_png,
    error_vs_epsilon_png,
    labels_of,
    legend_of,
    profiles_png,
    surface_png,
    title_of,
)
from fdp.tasks.kde import DENSITY_BAND_LABEL
from PIL import Image

LONG_ID = "meats-mean-e1-a-release-id-of-forty-chars"
T = np.linspace(1970.0, 1986.0, 17)


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """The matplotlib figures the plot functions render (kept open instead of closed)."""
    plt = _plots._pyplot()
    close = plt.close
    kept: list[Any] = []
    monkeypatch.setattr(plt, "close", kept.append)
    yield kept
    for fig in kept:
        close(fig)


def texts_outside(fig: Any) -> list[str]:
    """Every drawn text whose tight bounding box reaches outside the figure (1 px tolerance)."""
    from matplotlib.axis import Tick, XTick
    from matplotlib.text import Text

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    undrawn = set()  # labels of ticks the locator made outside the view limits (never drawn)
    for tick in fig.findobj(Tick):
        axis = tick.axes.xaxis if isinstance(tick, XTick) else tick.axes.yaxis
        lo, hi = sorted(axis.get_view_interval())
        pad = 1e-9 * (hi - lo)
        if not lo - pad <= tick.get_loc() <= hi + pad:
            undrawn |= {id(tick.label1), id(tick.label2)}
    box = fig.bbox
    out = []
    for text in fig.findobj(Text):
        if not text.get_visible() or not text.get_text() or id(text) in undrawn:
            continue
        e = text.get_tightbbox(renderer)
        if e.x0 < box.x0 - 1 or e.y0 < box.y0 - 1 or e.x1 > box.x1 + 1 or e.y1 > box.y1 + 1:
            out.append(text.get_text())
    return out


def _band(values: Any) -> tuple[Any, Any]:
    return values - 0.1, values + 0.1


PLOTS: dict[str, Callable[[], bytes]] = {
    "mean": lambda: curves_png(
        T, {"private mean (iclp_qr)": np.sin(T)}, xlabel="year", ylabel="unemp (source units)", band=_band(np.sin(T)),
        title=f"{LONG_ID}: released curve and its noise-only 95% band (not a confidence interval)",
        subtitle="ε = 0.25, δ = 1e-06, τ = 0.1122 (rescaled units, DP-bought); clipping and smoothing bias not in the band"),
    "kde": lambda: curves_png(
        T, {"private density (`density`)": np.abs(np.sin(T))}, xlabel="area_k_sqmi",
        ylabel="density (per unit of area_k_sqmi)", band=_band(np.abs(np.sin(T))), band_label=DENSITY_BAND_LABEL,
        title=f"{LONG_ID}: private density (the `density` column: the raw private value clipped at 0 and "
              "renormalised to unit mass)"),
    "covariance": lambda: surface_png(
        T, T, np.outer(np.sin(T), np.sin(T)) * 1e4, xlabel="year (s)", ylabel="year (t)",
        title=f"{LONG_ID}: private second moment about value_offset 1500 (not a covariance about the mean)",
        colorbar="second moment about value_offset 1500 (electricity_consumption squared)",
        subtitle="noise only (bias not included): expected L2 error 3.41e+04 electricity_consumption squared = "
                 "its root mean square over the surface"),
    "fosr": lambda: coefficients_png(
        T, {f"region_{i}": np.sin(T + i) for i in range(9)}, {f"region_{i}": _band(np.sin(T + i)) for i in range(9)},
        xlabel="year", ylabel="unemp (source units per covariate unit)",
        title=f"{LONG_ID}: private coefficient curves and the noise-only 95% band of their T2 part (not a "
              "confidence interval)",
        subtitle="ε = 5, τ_y = 1 (rescaled units, DP-bought); clipping and smoothing bias not in the band"),
    "fpca": lambda: profiles_png(
        T, np.full(T.size, 3.0), {f"component {r + 1}": np.sin(T * r) for r in range(4)}, xlabel="channel",
        ylabel="absorbance", base_label="public value_offset 3",
        title="How curves vary around the constant value_offset 3 (a public centre, not the data's mean curve): each "
              "private component (sign and size illustrative)"),
    "plan": lambda: error_vs_epsilon_png({
        "summary": "mean", "dataset_id": "a-dataset-with-a-rather-long-name", "n": 123456, "config_epsilon": 1.0,
        "rows": [{"epsilon": e, "expected_l2_error": 1 / e, "band_half_width_max": 2 / e} for e in (0.25, 1.0, 4.0)]}),
    "plan-tau-auto": lambda: error_vs_epsilon_png(_auto_plan_report()),
}


def _auto_plan_report(top: float = 1.0, summary: str = "mean") -> dict[str, Any]:
    """A ``fdp plan`` report of a ``tau: auto`` config (rows priced at tau = 1; ``top``: tau_range's upper end)."""
    bought = [{"name": "tau", "candidates": [0.01, top], "a_priori": False, "quantile_level": 0.5}]
    return {"summary": summary, "dataset_id": "empluk", "n": 140, "config_epsilon": 1.0, "tau": "auto",
            "rows": [{"epsilon": e, "expected_l2_error": 18 / e**0.6, "band_half_width_max": 40 / e**0.6, "bought": bought}
                     for e in (0.25, 0.5, 1.0, 2.0, 4.0)]}


@pytest.mark.parametrize("name", PLOTS)
def test_every_title_legend_and_label_lies_inside_the_figure(name: str, figures: list[Any]) -> None:
    """New-user trial G finding 5: a mean PNG's title was cut off at 600 px ("... (not a confidence int")."""
    png = PLOTS[name]()
    (fig,) = figures
    assert texts_outside(fig) == []
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("band_label", [DENSITY_BAND_LABEL, "noise band"])
def test_the_legend_goes_under_the_axes_and_fits(figures: list[Any], band_label: str) -> None:
    """Trial L: the KDE's one long band label inside the axes squeezed them (tight layout could not fit it); trial Y: a
    short two-entry legend placed "best" still sat on the released curve. Every legend is under the axes."""
    curves_png(T, {"m": T}, xlabel="t", ylabel="y", title="t", band=_band(T), band_label=band_label)
    (fig,) = figures
    legend = fig.axes[0].get_legend()
    assert legend.get_window_extent().y1 <= fig.axes[0].get_window_extent().y0  # under the axes: covers no curve
    assert texts_outside(fig) == []


def test_markers_only_where_the_points_can_be_told_apart(figures: list[Any]) -> None:
    """Trial L: a mean at K = 1,460 drew a marker on every point, a smear; a short grid keeps its markers."""
    many = np.linspace(0.0, 1.0, _plots.MAX_MARKED_POINTS + 1)
    curves_png(many, {"m": many}, xlabel="t", ylabel="y", title="t")
    curves_png(T, {"m": T}, xlabel="t", ylabel="y", title="t")
    assert [fig.axes[0].get_lines()[0].get_marker() for fig in figures] == ["None", "o"]


def test_a_long_title_is_wrapped_not_cut_and_stored_whole(figures: list[Any]) -> None:
    title = f"{LONG_ID}: released curve and its noise-only 95% band (not a confidence interval)"
    png = curves_png(T, {"m": T}, xlabel="t", ylabel="y", title=title)
    assert title_of(png) == title  # the whole title, unwrapped, in the PNG's text
    assert "\n" in figures[0].axes[0].get_title()  # wrapped on the figure
    assert texts_outside(figures[0]) == []


def test_nine_coefficient_curves_are_a_grid_of_at_most_three_columns(figures: list[Any]) -> None:
    """Trial G: FoSR with 9 regions was drawn as a 3060 x 340 strip; now rows of at most MAX_COLUMNS panels."""
    names = ["intercept", *(f"region_{i}" for i in range(1, 10))]
    png = coefficients_png(T, {n: np.sin(T) for n in names}, {n: _band(np.sin(T)) for n in names}, xlabel="year",
                           ylabel="unemp", title="coefficients")
    with Image.open(io.BytesIO(png)) as image:
        width, height = image.size
    assert MAX_COLUMNS == 3 and width <= 3 * 3.4 * 100 + 1 and height > width / 2  # 4 rows of 3, not a strip
    panels = figures[0].axes
    assert len(panels) == 10 and len({round(ax.get_position().x0, 3) for ax in panels}) == 3
    assert min(ax.get_window_extent().width for ax in panels) > 200  # each panel stays readable
    assert [ax.get_xlabel() for ax in panels].count("year") == 3  # one x label under each column
    assert [ax.get_ylabel() for ax in panels].count("unemp") == 4  # one y label per row


def test_two_components_stay_one_row() -> None:
    png = profiles_png(T, np.zeros(T.size), {"component 1": T, "component 2": -T}, xlabel="t", ylabel="y",
                       title="x", base_label="public reference curve")
    with Image.open(io.BytesIO(png)) as image:
        assert image.size[0] > 1.8 * image.size[1]  # one row of two panels
    assert legend_of(png) == "legend: public reference curve | + component | - component"


def test_a_surface_stores_its_title_subtitle_and_colour_bar_label() -> None:
    png = surface_png(T, T, np.ones((T.size, T.size)), xlabel="s", ylabel="t", title="what it is",
                      colorbar="second moment about value_offset 7 (unemp squared)", subtitle="noise: 1.5")
    assert title_of(png) == "what it is noise: 1.5"
    assert labels_of(png) == "x: t | y: s | colour bar: second moment about value_offset 7 (unemp squared)"


def test_the_plan_plot_of_tau_auto_says_where_its_errors_are_priced_and_keeps_the_legend_off_the_data(
        figures: list[Any]) -> None:
    """Trial H, F4: the plan PNG titled its curve 'expected L2 error of the noise' without saying it is at tau = 1,
    and its legend covered the points at epsilon 0.5-1."""
    png = error_vs_epsilon_png(_auto_plan_report())
    assert title_of(png).endswith("errors priced at tau = 1, the upper end of tau_range; the tau bought with part of "
                                  "epsilon is at most that and lowers the noise in proportion")
    fig = figures[0]
    ax = fig.axes[0]
    fig.canvas.draw()
    legend, plot = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert legend.y1 <= plot.y0  # under the axes: no point can be covered
    assert texts_outside(fig) == []
    # a narrower tau_range: the errors at its upper end are smaller than the plotted ones; a covariance's by the square
    assert "tau_range's upper end is 0.5, where they are 0.25x these" in title_of(
        error_vs_epsilon_png(_auto_plan_report(0.5, "covariance")))
    # a fixed tau: no such subtitle
    fixed = {**_auto_plan_report(), "tau": 1.0}
    assert "priced at" not in title_of(error_vs_epsilon_png(fixed))


def test_the_plan_plots_y_axis_names_the_value_column_and_its_units() -> None:
    """Trial L: the plan PNG's y axis read only "source units"; the release plots name the column."""
    assert "y: emp (source units)" in labels_of(error_vs_epsilon_png({**_auto_plan_report(), "value_column": "emp"}))
    assert "y: emp squared (source units squared)" in labels_of(
        error_vs_epsilon_png({**_auto_plan_report(0.5, "covariance"), "value_column": "emp"}))
    assert "y: source units" in labels_of(error_vs_epsilon_png(_auto_plan_report()))  # a report without the column


def test_a_panel_plots_long_y_label_is_wrapped_to_its_panels_height(figures: list[Any]) -> None:
    """Trial Z (L4): a FoSR plot of three coefficients with the y label 'wage: intercept in source units, others per
    covariate unit' ran above its panel into the title; the label is wrapped until it fits beside the panel."""
    label = "wage: intercept in source units, others per covariate unit"
    coefficients_png(T, {f"c{i}": np.sin(T + i) for i in range(3)}, {f"c{i}": _band(np.sin(T + i)) for i in range(3)},
                     xlabel="year", ylabel=label, title="t", subtitle="s")
    (fig,) = figures
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    box, extent = ax.get_window_extent(renderer), ax.yaxis.label.get_window_extent(renderer)
    assert box.y0 - 1 <= extent.y0 and extent.y1 <= box.y1 + 1
    assert " ".join(ax.get_ylabel().split()) == label  # wrapped, not cut
    assert texts_outside(fig) == []
