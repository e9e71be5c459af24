"""Tasks of the KDE release (MATH.md §8) and the point-release steps shared with ERM (:mod:`fdp.tasks.erm`).

Ledger steps are the generic ones of :mod:`fdp.tasks.ledger`; files are written by
:func:`fdp.tasks._publish.write_release`.
"""

from __future__ import annotations

import base64
import hashlib
import math
from pathlib import Path
from typing import Any

import numpy as np
from fdp.schemas import ChargeRequest
from fdp.schemas.kde import KdeReleaseConfig, PointBatch, PointManifest, PointPlanEnvelope, PointSummary
from fdp.tasks import _publish
from fdp.tasks._plots import NOISE_BAND_LABEL, curves_png, privacy_subtitle, surface_png
from fdp.tasks._settings import data_task, noise_task
from fdp.tasks.ledger import close_release, mark_noised, period_and_budget, provenance
from fdp.tasks.planning import (
    expected_l2_error,
    expected_l2_error_with_bias,
    kde_plan,
    noise_band,
    point_axes,
    point_error_text,
    point_value_units,
    with_bias_note,
)

from fdpcore.errors import InternalError
from fdpcore.io.points import read_point_table
from fdpcore.summaries.kde import BandwidthChoice, PointPlan, choose_kde_bandwidth, draw_point_release, summarise_kde

__all__ = ["choose_bandwidth", "load_points", "plan_kde", "point_axes", "public_point_release", "publish_kde",
           "publish_point_release"]

#: The 1-D density plot's band: the Parquet's band (the raw value's), clipped at 0 and renormalised as `density` was.
DENSITY_BAND_LABEL = f"{NOISE_BAND_LABEL}, clipped and renormalised like `density`"

NOISE_TEXT = {
    "laplace": ("Laplace on whitened KL coefficients (ICLP): coefficient j ~ Lap(whitened_scale * sqrt(lambda_j)), "
                "all kept j of the noise kernel"),
    "gaussian": ("Gaussian process whitened_scale * GP(0, C): whitened KL coefficients i.i.d. N(0, whitened_scale^2), "
                 "i.e. coefficient j ~ N(0, whitened_scale^2 lambda_j)"),
}


@data_task(name="load-points")
def load_points(config: Any, config_dir: str) -> PointBatch:
    """Read the point table and map it onto the unit box (outside points: error or clamp, as configured)."""
    ds = config.dataset
    path = Path(ds.path) if Path(ds.path).is_absolute() else Path(config_dir) / ds.path
    table = read_point_table(path, ds.format, unit_column=ds.unit_column, coordinate_columns=ds.coordinate_columns,
                             domain=ds.domain, label_column=getattr(ds, "label_column", None),
                             outside=ds.outside_domain, binary_labels=getattr(config, "loss", "ridge") != "ridge",
                             csv_delimiter=ds.csv_delimiter, labels=getattr(ds, "labels", "sign"))
    counts = {"n_rows": table.n_rows, "n_points_clamped": table.n_clamped, "n_labels_to_sign": table.n_relabelled}
    labels = table.labels
    if labels is not None and getattr(config, "label_offset", 0.0) != 0.0:  # ridge: the public centre (record-wise)
        labels = labels - float(config.label_offset)
    return PointBatch(unit_codes=table.unit_codes, points=table.points, labels=labels, n_samples=table.n_units,
                      counts=counts)


@data_task(name="plan-kde")
def plan_kde(config: KdeReleaseConfig, n: int) -> PointPlanEnvelope:
    """Fix bandwidth, kernel, kappa, sensitivity and calibration from public inputs only (OpenDP-certified)."""
    return PointPlanEnvelope(plan=kde_plan(config, n))  # the same plan `fdp plan` reports (fdp.tasks.planning)


@noise_task(name="choose-bandwidth")
def choose_bandwidth(ledger_url: str, release_id: str, config: KdeReleaseConfig, batch: PointBatch,
                     plan: PointPlanEnvelope, request: ChargeRequest) -> PointPlanEnvelope:
    """``bandwidth: auto`` after the charge: mark it final, draw the DP quartiles, finish the plan at the bandwidth.

    The quartiles are noise draws (OpenDP), so the charge is made final first and never refunded after. The
    finished plan must cost exactly what was charged (same splits), else nothing more is drawn.
    """
    p: PointPlan = plan.plan
    choice = next((c for c in p.public_choices if isinstance(c, BandwidthChoice)), None)
    if choice is None:
        raise InternalError("bandwidth 'auto' without its planned choice")
    mark_noised(ledger_url, release_id)  # the quartiles depend on the data: never refunded after this
    pr = config.privacy
    drawn = choose_kde_bandwidth(choice, batch.points, batch.unit_codes, p.space.axes, epsilon=pr.epsilon,
                                 mechanism=config.mechanism, kernel=config.kernel, eta=config.eta, delta=pr.delta,
                                 calibration=pr.calibration, secure=True)
    finished = kde_plan(config, batch.n_samples, (drawn,))
    charged = [(s.name, s.epsilon, s.delta) for s in request.budget_splits]
    planned = [(str(s["name"]), float(s["epsilon"]), float(s["delta"])) for s in finished.budget_splits]
    if charged != planned or request.epsilon != finished.epsilon:
        raise InternalError(f"the finished plan costs {planned} but the ledger charged {charged}")
    return PointPlanEnvelope(plan=finished)


@data_task(name="summarise-kde")
def summarise_points_kde(batch: PointBatch, plan: PointPlanEnvelope) -> PointSummary:
    """Pre-noise whitened coordinates of the KDE (kept in memory only)."""
    return PointSummary(coefficients=summarise_kde(batch.points, batch.unit_codes, plan.plan))


def point_charge_request(config: Any, config_sha256: str, plan: PointPlanEnvelope, counts: dict[str, int]) -> ChargeRequest:
    """What the ledger is asked to charge: the whole cost, one named part."""
    p: PointPlan = plan.plan
    return ChargeRequest(
        dataset_id=config.dataset.id, summary=config.summary, mechanism=p.mechanism, epsilon=p.epsilon, delta=p.delta,
        rho=p.rho, sensitivity_formula=p.sensitivity_formula, budget_splits=p.budget_splits,  # type: ignore[arg-type]
        config_sha256=config_sha256, internal={"counts": counts},
    )


@noise_task(name="draw-point-noise")
def draw_point_noise(ledger_url: str, release_id: str, plan: PointPlanEnvelope, summary: PointSummary,
                     noised: bool = False) -> Any:
    """Mark the charge as final (unless a bought bandwidth already did), then draw OpenDP noise once."""
    if not noised:
        mark_noised(ledger_url, release_id)
    return draw_point_release(plan.plan, summary.coefficients, draws=1)[0]


def _guarantee(p: PointPlan, unit: str) -> str:
    if p.rho is not None:
        text = (f"({p.epsilon:g}, {p.delta:g})-differential privacy for each {_publish.unit_noun(unit)} (replace-one adjacency, n public), "
                f"by Gaussian-process noise calibrated with the {p.parameters['calibration']} Gaussian mechanism; "
                f"equivalently rho = {p.rho:.6g} zero-concentrated DP")
    else:
        text = (f"pure {p.epsilon:g}-differential privacy for each {_publish.unit_noun(unit)} (replace-one adjacency, n public), "
                f"by the {p.mechanism} mechanism with Laplace noise")
    return text + bandwidth_text(p.public_choices)


def bandwidth_text(choices: Any) -> str:
    """The guarantee's clause for a bought bandwidth (``bandwidth: auto``; empty without)."""
    return "".join(
        f"; the bandwidth h = {c.value:.6g} is the public normal_reference rule (n * epsilon too small to buy it)"
        if c.a_priori else
        f"; of which epsilon {c.epsilon:g} buys the bandwidth h = {c.value:.6g}: OpenDP's DP quantiles at levels 1/4 "
        f"and 3/4 of each coordinate of the units' mean points (epsilon {c.quantile_epsilon:g} each, sequential "
        f"composition; {c.formula_id}), published with the release, and the rest releases the density"
        for c in choices if isinstance(c, BandwidthChoice))


def _source_columns(config: Any, plan: PointPlan) -> dict[str, Any]:
    """Node coordinates on the unit box and in source units (row-major in 2-D)."""
    nodes = plan.space.nodes
    cols: dict[str, Any] = {}
    for axis, (name, (a, b)) in enumerate(zip(config.dataset.coordinate_columns, config.dataset.domain, strict=True)):
        cols[f"t{axis + 1}" if nodes.shape[1] == 2 else "t"] = nodes[:, axis]
        cols[name] = a + (b - a) * nodes[:, axis]
    return cols


def public_point_release(
    release_id: str, config: Any, plan: PointPlan, values: Any, prov: dict[str, Any],
    value_columns: dict[str, Any], value_scale: float, extra_parameters: dict[str, Any], solver: dict[str, Any] | None,
) -> dict[str, Any]:
    """Manifest and Parquet bytes of a KDE or ERM release (private outputs and public parameters only).

    ``value_columns`` are the released columns (post-processing of ``values``); ``value_scale``
    converts the unit-box noise to the published units.
    """
    ds = config.dataset
    band_source = noise_band(config, plan)
    columns = {**_source_columns(config, plan), **value_columns,
               "band_lower": value_columns["value"] - band_source, "band_upper": value_columns["value"] + band_source}
    parquet = _publish._parquet_bytes(columns, {"fdp.release_id": release_id, "fdp.dataset_id": ds.id})
    l2_source, l2_scaled = expected_l2_error(config, plan)  # type: ignore[misc]
    png = _plot(release_id, config, columns, l2_source)
    axes = plan.space.axes
    parameters: dict[str, Any] = {
        "grid": {"rule": axes[0].rule, "size": axes[0].size, "domain": list(axes[0].domain_range),
                 "points": axes[0].grid_points.tolist(), "tensor": len(axes) == 2},
        "domain": [list(d) for d in ds.domain], "coordinate_columns": list(ds.coordinate_columns),
        "outside_domain": ds.outside_domain, "n_basis": plan.space.n_basis, "kernel_trace_normalized": False,
        **{k: v for k, v in plan.parameters.items() if k != "kernel"}, "kernel": plan.space.kernel, **extra_parameters,
    }
    if plan.public_choices:  # bought with budget: private outputs, published with their splits
        parameters["public_choices"] = [c.as_manifest() for c in plan.public_choices]
    manifest = PointManifest(
        release_id=release_id, dataset_id=ds.id, summary=config.summary, mechanism=plan.mechanism, n=plan.n,
        privacy={"epsilon": plan.epsilon, "delta": plan.delta, "privacy_unit": ds.privacy_unit,  # type: ignore[arg-type]
                 "guarantee": _guarantee(plan, ds.privacy_unit)},
        budget_splits=plan.budget_splits,  # type: ignore[arg-type]
        sensitivity={"norm": plan.norm, "value": plan.sensitivity, "bound": plan.sensitivity_formula,  # type: ignore[arg-type]
                     "paper_bound": plan.paper_sensitivity, "paper_formula": plan.paper_formula},
        parameters=parameters,
        noise={"distribution": NOISE_TEXT[plan.noise], "sampler": _publish.SAMPLER_TEXT[plan.noise],  # type: ignore[arg-type]
               "whitened_scale": plan.calibration.scale, "expected_l2_error": l2_source,
               "expected_l2_error_scaled": l2_scaled, "band_level": _publish.BAND_LEVEL,
               "band_half_width_max": float(band_source.max()),
               "expected_l2_error_with_bias": expected_l2_error_with_bias(config, plan),  # ERM: fdp plan's `with bias`
               "expected_l2_error_with_bias_note": with_bias_note(config, plan)},
        solver=solver,
        formulas=sorted(plan.formulas),
        outputs=[{"path": name, "sha256": hashlib.sha256(data).hexdigest()}  # type: ignore[misc]
                 for name, data in ((_publish.RELEASE_FILE, parquet), (_publish.PLOT_FILE, png))],
        provenance=prov,  # type: ignore[arg-type]
    )
    return {"manifest": manifest.model_dump(mode="json"),
            "files": {_publish.RELEASE_FILE: base64.b64encode(parquet).decode(), _publish.PLOT_FILE: base64.b64encode(png).decode()}}


def _plot(release_id: str, config: Any, columns: dict[str, Any], l2_source: float) -> bytes:
    """The released values on the grid: a curve in 1-D, a surface in 2-D.

    A KDE plots its ``density`` column (the raw ``value`` clipped at 0 and renormalised, the column a reader uses);
    in 1-D with the raw value's noise band taken through the same post-processing (clipped at 0, divided by the
    same normaliser), so band and curve share one scale (trial L: a raw band under a renormalised curve misread). ERM
    plots its ``value``. A 2-D surface states the noise's expected size (public, from the plan) in its subtitle.
    """
    names = list(config.dataset.coordinate_columns)
    value = np.asarray(columns["value"])
    density = "density" in columns
    if density:
        per = f"per unit of {names[0]}" if len(names) == 1 else f"per unit of {names[0]} x {names[1]}"
        label, units = f"density ({per})", per
        title = f"{release_id}: private density (`density` column: raw value clipped at 0, renormalised)"
        shown = np.asarray(columns["density"])
    else:
        units = point_value_units(config)
        label = f"value ({units})"
        title = f"{release_id}: released {config.summary} (private values only)"
        shown = value
    bias = "the kernel's smoothing bias" if density else "the estimator's own bias (regularisation)"
    privacy = privacy_subtitle(config.privacy.epsilon, config.privacy.delta, None, f"{bias} is not in the band")
    if len(names) == 1:
        band = (np.asarray(columns["band_lower"]), np.asarray(columns["band_upper"]))
        if not density:
            return curves_png(columns[names[0]], {"private value": value}, xlabel=names[0], ylabel=label, title=title,
                              band=band, subtitle=privacy)
        positive = float(np.maximum(value, 0.0).sum())
        scale = float(shown.sum()) / positive if positive > 0 else 1.0  # the normaliser `density` was divided by
        band = (np.maximum(band[0], 0.0) * scale, np.maximum(band[1], 0.0) * scale)  # the raw value's, as `density`
        return curves_png(columns[names[0]], {"private density (`density`)": shown}, xlabel=names[0], ylabel=label,
                          title=title, band=band, band_label=DENSITY_BAND_LABEL, subtitle=privacy)
    x, y = np.unique(columns[names[0]]), np.unique(columns[names[1]])
    area = math.prod(b - a for a, b in config.dataset.domain)
    subtitle = privacy_subtitle(config.privacy.epsilon, config.privacy.delta, None,
                                f"noise only{' (raw value)' if density else ''}, {bias} not included: expected L2 error "
                                f"{l2_source:.3g} over the domain = root mean square {l2_source / math.sqrt(area):.3g} "
                                f"({units})")
    return surface_png(x, y, shown.reshape(x.size, y.size), xlabel=names[0], ylabel=names[1], title=title,
                       colorbar=label, subtitle=subtitle)


def publish_point_release(ledger_url: str, release_id: str, config: Any, public: dict[str, Any], out_dir: str,
                          what: str) -> dict[str, Any]:
    """Close the ledger entry first, then write the files, then the release note and budget-split artifacts."""
    public = close_release(ledger_url, release_id, public)  # first: a crash after this is recovered by a re-run from the ledger
    manifest = _publish.write_release(public, Path(out_dir))
    period, budget = period_and_budget(ledger_url, release_id)
    _publish.create_artifacts(manifest, point_release_note(manifest, budget, what, period, public["files"][_publish.PLOT_FILE]),
                              config)
    return manifest


def point_release_note(manifest: dict[str, Any], budget: dict[str, Any], what: str, period: str, png_b64: str) -> str:
    """Markdown for a non-expert (private values and public parameters only)."""
    p, nz = manifest["privacy"], manifest["noise"]
    solver = manifest.get("solver")
    return "\n".join([
        f"# Private {what} `{manifest['release_id']}`",
        "",
        f"**What is protected.** Each unit is one *{_publish.unit_noun(p['privacy_unit'])}*. {p['guarantee']}. "
        f"A unit with several rows counts once: its rows are averaged. n = {manifest['n']} units (public).",
        "",
        f"**What is released.** The {what} on a fixed grid, computed from the table and perturbed once with random "
        f"noise ({manifest['mechanism']} mechanism).",
        "",
        f"**Accuracy (noise only).** Expected L2 size of the noise: {nz['expected_l2_error']:.4g} "
        f"({point_error_text(manifest['parameters']['domain'], manifest['parameters']['value_units'])}). "
        "At each grid point the "
        f"noise lies within ±{nz['band_half_width_max']:.4g} with probability {nz['band_level']:.0%} or more (band columns "
        "in the Parquet file). These figures come from the mechanism alone, not from the data.",
        *(["", f"**Solver.** {solver['assumption']}"] if solver else []),
        "",
        _publish.budget_text(manifest, budget, period),
        "",
        f"![released {what}](data:image/png;base64,{png_b64})",
        "",
        "| file | sha256 |",
        "| --- | --- |",
        *(f"| {o['path']} | `{o['sha256']}` |" for o in manifest["outputs"]),
    ])


@data_task(name="publish-kde")
def publish_kde(ledger_url: str, release_id: str, config: KdeReleaseConfig, config_sha256: str, plan: PointPlanEnvelope,
                values: Any, out_dir: str) -> dict[str, Any]:
    """Publish the private density: raw values and the non-negative, unit-mass post-processing (source units)."""
    p: PointPlan = plan.plan
    area = math.prod(b - a for a, b in config.dataset.domain)
    raw = np.asarray(values) / area  # density per source unit (per source area in 2-D)
    clipped = np.maximum(raw, 0.0)
    mass = float(clipped @ p.space.weights) * area
    density = clipped / mass if mass > 0 else clipped
    public = public_point_release(
        release_id, config, p, values, provenance(config_sha256, public=True),
        {"value": raw, "density": density}, 1.0 / area,
        {"post_processing": "density = max(value, 0) renormalised to unit mass on the grid (post-processing of the "
                            "private value; no privacy cost)", "value_units": point_value_units(config)},
        None,
    )
    what = "density surface" if len(config.dataset.coordinate_columns) == 2 else "density curve"
    return publish_point_release(ledger_url, release_id, config, public, out_dir, what)
