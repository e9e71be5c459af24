"""Tasks of the covariance-surface release (MATH.md §6): centre, plan, summarise, draw, publish.

Ingest and clipping reuse :func:`fdp.tasks.load_curves` and :func:`fdp.tasks.clip_curves` (one
averaged record per privacy unit), or, with a streaming engine (``engine.name`` ``local``/``dask``),
:func:`fdp.tasks.streaming.stream_curves` with the public centre and outer products; the ledger
steps are those of :mod:`fdp.tasks.ledger`.
"""

from __future__ import annotations

import base64
import hashlib
import io
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
from fdp.schemas import ChargeRequest, CurveBatch
from fdp.schemas.covariance import (
    CONTRIBUTION_RULE,
    CovarianceManifest,
    CovariancePlanEnvelope,
    CovarianceReleaseConfig,
    CovarianceSummary,
)
from fdp.schemas.engine import StreamBatch
from fdp.tasks import _publish
from fdp.tasks._plots import privacy_subtitle, surface_png
from fdp.tasks._settings import data_task, noise_task
from fdp.tasks.ledger import close_release, mark_noised, period_and_budget, provenance
from fdp.tasks.planning import (
    alignment_rule,
    covariance_plan,
    curve_error_text,
    expected_l2_error,
    expected_l2_error_with_bias,
    public_reference,
    release_grid,
    with_bias_note,
)
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from fdpcore.data.accumulate import summarise_covariance_sums
from fdpcore.data.preprocess import centre_on_reference, to_source_units
from fdpcore.errors import ConfigError
from fdpcore.ledger import Ledger
from fdpcore.noise.quantiles import PublicChoice
from fdpcore.privacy.accounting import compose_pure
from fdpcore.summaries.covariance import (
    covariance_surface,
    covariance_weights,
    draw_covariance_release,
    leading_eigenfunctions,
    psd_projection,
    summarise_covariance,
)

EIGEN_FILE = "eigenfunctions.parquet"


@data_task(name="covariance-center")
def covariance_center(config: CovarianceReleaseConfig, ledger_url: str) -> tuple[Any, dict[str, Any] | None]:
    """The public centre on the grid (rescaled units) and, for a private-mean centre, its ledger link.

    A private mean is read from the ledger's stored public outputs of a *published* mean release of
    the same dataset on the same grid; it is a DP output, so using it is post-processing, and its
    epsilon composes with this release's (MATH.md §6 (a), §12.1). A release charged as
    ``non_private`` (PCV tuning) is refused: nothing composes with a release that has no epsilon.
    """
    c, ds, grid = config.centering, config.dataset, release_grid(config)  # type: ignore[arg-type]
    if c.kind == "sample_mean":
        return None, None
    if c.kind == "public":
        if c.reference is None:
            return np.zeros(grid.size), None
        return public_reference(config), None
    record = Ledger(ledger_url).get(str(c.release_id))
    where = f"centering.release_id ({c.release_id!r})"
    if record is None or record.state != "published" or record.public is None:
        raise ConfigError(f"{where} must name a published release in this ledger; publish the private mean first")
    if record.summary != "mean" or record.dataset_id != ds.id:
        raise ConfigError(f"{where} must be a mean release of dataset {ds.id!r}, not a {record.summary} release of {record.dataset_id!r}")
    if record.non_private or (record.public.get("manifest", {}).get("parameters") or {}).get("non_private"):
        raise ConfigError(
            f"{where} is a NON-PRIVATE release (e.g. PCV tuning): a private release cannot use it as an input, "
            "since no epsilon holds for the pair; centre on a differentially private mean release instead"
        )
    table = pq.read_table(io.BytesIO(base64.b64decode(record.public["files"][_publish.RELEASE_FILE])))
    t = table.column("t").to_numpy()
    if t.shape != grid.grid_points.shape or not np.allclose(t, grid.grid_points, rtol=0, atol=1e-12):
        raise ConfigError(f"{where} was released on a different grid; use the same grid as that release")
    center = (table.column("value").to_numpy() - ds.value_offset) / ds.value_scale
    eps, delta = compose_pure([(record.epsilon, record.delta), (config.privacy.epsilon, config.privacy.delta)])
    link = {"centering_release_id": record.release_id, "centering_summary": "mean",
            "centering_mechanism": record.mechanism, "centering_epsilon": record.epsilon,
            "centering_delta": record.delta, "this_release_epsilon": config.privacy.epsilon,
            "combined_epsilon": float(eps), "combined_delta": float(delta),
            "rule": "accounting.pure.sequential@1: the covariance uses the released mean (post-processing of a DP "
                    "output) and the same records, so the two releases together are (sum of epsilons)-DP"}
    return center, link


@data_task(name="center-curves")
def center_curves(batch: CurveBatch, center: Any) -> CurveBatch:
    """Subtract the data-independent centre from every aligned record (record-wise, before clipping).

    A unit without an alignable curve stays the zero record, i.e. it counts as the centre itself
    (``preprocess.public_reference@1``), not as the constant ``value_offset``.
    """
    if center is None:
        return batch
    return batch.model_copy(update={"data_matrix": centre_on_reference(batch.data_matrix, center, aligned=batch.aligned)})


@data_task(name="plan-covariance")
def plan_covariance(
    config: CovarianceReleaseConfig, n: int, center: Any, link: dict[str, Any] | None, tau: float | None = None,
    choices: tuple[PublicChoice, ...] | None = None,
) -> CovariancePlanEnvelope:
    """Fix ``(eta, psi)``, the sensitivity and the OpenDP calibration from public inputs only.

    With ``tau: auto``: ``tau`` is the released value (or 1 for the plan that only prices the charge) and
    ``choices`` the public choice it was bought with (:func:`fdp.tasks.planning.covariance_plan`).
    """
    return CovariancePlanEnvelope(plan=covariance_plan(config, n, tau, choices), center=center, link=link)


@data_task(name="summarise-covariance-sums")
def summarise_covariance_stream(batch: StreamBatch, plan: CovariancePlanEnvelope) -> CovarianceSummary:
    """Pre-noise whitened coordinates from a streaming engine's exact sums (kept in memory only)."""
    return CovarianceSummary(coefficients=summarise_covariance_sums(batch.sums, plan.plan))


@data_task(name="summarise-covariance")
def summarise_covariance_curves(batch: CurveBatch, plan: CovariancePlanEnvelope) -> CovarianceSummary:
    """Pre-noise whitened upper-triangle coordinates (kept in memory only)."""
    return CovarianceSummary(coefficients=summarise_covariance(batch.data_matrix, plan.plan))


def covariance_charge_request(
    config: CovarianceReleaseConfig, config_sha256: str, plan: CovariancePlanEnvelope, counts: dict[str, int]
) -> ChargeRequest:
    """What the ledger is asked to charge: the whole epsilon, in named parts (``tau`` when bought, the surface)."""
    p = plan.plan
    internal: dict[str, Any] = {"counts": counts}
    if plan.link is not None:
        internal["centering_release_id"] = plan.link["centering_release_id"]
    return ChargeRequest(
        dataset_id=config.dataset.id, summary="covariance", mechanism=config.mechanism, epsilon=p.epsilon, delta=0.0,
        sensitivity_formula=p.sensitivity_formula, budget_splits=p.budget_splits,
        config_sha256=config_sha256, internal=internal,
    )


@noise_task(name="draw-covariance")
def draw_covariance(
    ledger_url: str, release_id: str, plan: CovariancePlanEnvelope, summary: CovarianceSummary, noised: bool = False
) -> Any:
    """Mark the charge as final (unless ``tau: auto``'s draw already did), then draw the OpenDP Laplace noise once."""
    if not noised:
        mark_noised(ledger_url, release_id)
    return draw_covariance_release(plan.plan, summary.coefficients, draws=1)[0]


def _lower_bound(plan: Any) -> float:
    """The public value a neighbouring pair reaches (MATH.md §6): ``y' = 0``, ``y`` along the Perron vector."""
    a = covariance_weights(plan.basis.eigenvalues, plan.eta, plan.psi)
    lam_max = float(np.linalg.eigvalsh(a + np.diag(np.diag(a)))[-1])
    n, tau = plan.n, plan.tau
    return tau**2 * lam_max / (2 * n) if plan.centering == "public" else (n - 1) * tau**2 * lam_max / (2 * n**2)


def _surface_names(config: CovarianceReleaseConfig) -> tuple[str, str]:
    """What the released surface is for the config's centring: a title phrase and a colour-bar name.

    Only a centre on the mean makes it a covariance; a public centre makes it the second moment about that
    centre (docs/summaries/covariance.md).
    """
    c = config.centering
    if c.kind == "public" and c.reference is None:
        offset = f"value_offset {config.dataset.value_offset:g}"
        return f"second moment about {offset} (not a covariance about the mean)", f"second moment about {offset}"
    if c.kind == "public":
        return ("second moment about the public reference curve (not a covariance about the mean)",
                "second moment about the reference")
    if c.kind == "private_mean":
        return f"covariance (centred on the private mean release {c.release_id!r})", "covariance"
    return "covariance (centred on the sample mean)", "covariance"


def public_covariance_release(
    release_id: str, config: CovarianceReleaseConfig, plan: CovariancePlanEnvelope, coefficients: Any,
    prov: dict[str, Any],
) -> dict[str, Any]:
    """Manifest and file bytes of a covariance release (private outputs and public parameters only)."""
    p, ds, out = plan.plan, config.dataset, config.output
    grid = p.basis.grid
    m = psd_projection(coefficients) if out.psd else np.asarray(coefficients)
    surface = covariance_surface(m, p.basis) * ds.value_scale**2
    k = min(out.n_components, p.basis.n_basis)
    values, funs = leading_eigenfunctions(m, p.basis, k)
    t_source, _ = to_source_units(funs[:, 0], grid.grid_points, time_domain=ds.time_domain, grid_domain=grid.domain_range)
    s_idx, t_idx = np.meshgrid(np.arange(grid.size), np.arange(grid.size), indexing="ij")
    meta = {"fdp.release_id": release_id, "fdp.dataset_id": ds.id}
    surface_pq = _publish._parquet_bytes({
        "s": grid.grid_points[s_idx.ravel()], "t": grid.grid_points[t_idx.ravel()],
        "s_source": t_source[s_idx.ravel()], "t_source": t_source[t_idx.ravel()], "value": surface.ravel(),
    }, meta)
    eig_cols: dict[str, Any] = {"t": grid.grid_points, "t_source": t_source}
    eig_cols.update({f"eigenfunction_{r + 1}": funs[:, r] for r in range(k)})
    eig_cols.update({f"eigenvalue_{r + 1}": np.full(grid.size, values[r] * ds.value_scale**2) for r in range(k)})
    eig_pq = _publish._parquet_bytes(eig_cols, meta)
    l2_source, l2 = expected_l2_error(config, p)  # type: ignore[misc]
    what, short = _surface_names(config)
    length = float(grid.domain_range[1] - grid.domain_range[0])
    units = f"{ds.value_column} squared"
    rms = "its root mean square" if length == 1.0 else f"{length:g} x its root mean square ({l2_source / length:.3g})"
    png = surface_png(t_source, t_source, surface, xlabel=f"{ds.time_column}, first time of the pair",
                      ylabel=f"{ds.time_column}, second time of the pair",
                      title=f"{release_id}: private {what}", colorbar=f"{short} ({units})",
                      subtitle=privacy_subtitle(p.epsilon, 0.0, _publish.clip_radius_text(p),
                                                "noise only (clipping and smoothing bias not included): expected L2 "
                                                f"error {l2_source:.3g} {units} = {rms} over the surface"))
    unit = ds.privacy_unit
    guarantee = (f"pure {p.epsilon:g}-differential privacy for each {_publish.unit_noun(unit)} (replace-one adjacency, n public), by the "
                 "tensor ICLP-QR mechanism with Laplace noise on the upper triangle of the surface's coefficients"
                 + _publish.bought_text(p.public_choices))
    if plan.link is not None:
        guarantee += (f"; the centre is the private mean release {plan.link['centering_release_id']!r} "
                      f"(epsilon {plan.link['centering_epsilon']:g}), so both releases together are "
                      f"{plan.link['combined_epsilon']:g}-DP")
    center = config.centering
    manifest = CovarianceManifest(
        release_id=release_id, dataset_id=ds.id, mechanism=config.mechanism, n=p.n,
        privacy={"epsilon": p.epsilon, "delta": 0.0, "privacy_unit": unit, "guarantee": guarantee},  # type: ignore[arg-type]
        budget_splits=p.budget_splits,  # type: ignore[arg-type]
        sensitivity={"norm": "1,C(x)C on the upper triangle j <= l (l1 of the whitened coefficients)",  # type: ignore[arg-type]
                     "value": p.sensitivity, "bound": p.sensitivity_formula, "attained_lower_bound": _lower_bound(p)},
        parameters={
            "grid": {"rule": grid.rule, "size": grid.size, "domain": list(grid.domain_range),
                     "points": grid.grid_points.tolist()},
            "kernel": p.basis.kernel.as_dict(), "noise_kernel": "c (x) c (separable product, MATH.md §1.6)",
            "kernel_trace_normalized": True, "n_basis": p.basis.n_basis, "noised_coefficients": p.dimension,
            "eta": p.eta, "psi": p.psi, "tuning": {"rule": p.tuning, "formula": p.tuning_formula, "beta": p.beta,
                                                  **_publish.signal_record(p, stated=False)},
            "centering": {"kind": center.kind, "reference": center.reference.model_dump() if center.reference else None,
                          "release_id": center.release_id,
                          "mode": "public centre, centred curves clipped to tau_c" if p.centering == "public"
                          else "sample mean of the clipped records (larger bound)"},
            "tau": p.tau, "normalisation": "1/n",
            **({"public_choices": [c.as_manifest() for c in p.public_choices]} if p.public_choices else {}),
            "privacy_unit": unit, "contribution_rule": CONTRIBUTION_RULE,
            "psd_projection": out.psd, "n_components": k,
            "time_domain": list(ds.time_domain), "value_offset": ds.value_offset, "value_scale": ds.value_scale,
            "alignment": alignment_rule(config),
            "release_columns": (f"release.parquet: surface values (source units squared) on the grid x grid; "
                                f"{EIGEN_FILE}: leading eigenfunctions (W-orthonormal on the grid domain, signs "
                                "arbitrary) and eigenvalues (source units squared x grid-domain length)"),
        },
        noise={"distribution": "Laplace on whitened coefficients (j <= l): coefficient (j, l) ~ "
                               "Lap(whitened_scale sqrt(lambda_j lambda_l)), mirrored to (l, j)",
               "sampler": _publish.SAMPLER_TEXT["laplace"], "whitened_scale": p.calibration.scale,
               "expected_l2_error": l2_source, "expected_l2_error_scaled": l2,
               "expected_l2_error_note": "sqrt(E||noise||^2) before the PSD projection (which only moves the surface "
                                         "closer to every PSD operator): "
                                         + curve_error_text("covariance", grid.domain_range, ds.time_domain),
               "expected_l2_error_with_bias": expected_l2_error_with_bias(config, p),
               "expected_l2_error_with_bias_note": with_bias_note(config, p)},
        composition=plan.link,
        formulas=sorted({*p.formulas, "preprocess.align_linear@2",
                         *(("postprocess.cov.psd_projection@1",) if out.psd else ()),
                         *(("preprocess.quantise_lattice@1",) if config.engine.name != "memory" else ()),
                         *(("accounting.pure.sequential@1",) if plan.link else ()),
                         *_publish.signal_formulas(_publish.signal_record(p, stated=False))}),
        outputs=[{"path": name, "sha256": hashlib.sha256(data).hexdigest()}  # type: ignore[misc]
                 for name, data in ((_publish.RELEASE_FILE, surface_pq), (EIGEN_FILE, eig_pq), (_publish.PLOT_FILE, png))],
        provenance=prov,  # type: ignore[arg-type]
    )
    return {"manifest": manifest.model_dump(mode="json"),
            "files": {_publish.RELEASE_FILE: base64.b64encode(surface_pq).decode(),
                      EIGEN_FILE: base64.b64encode(eig_pq).decode(), _publish.PLOT_FILE: base64.b64encode(png).decode()}}


def publish_summary(
    ledger_url: str, release_id: str, config: Any, public: dict[str, Any], out_dir: str, note: str
) -> dict[str, Any]:
    """Ledger first, then files, then the keyed Prefect artifacts (release note and budget-split table)."""
    public = close_release(ledger_url, release_id, public)  # first: a crash after this is recovered by a re-run from the ledger
    manifest = _publish.write_release(public, Path(out_dir))
    period, budget = period_and_budget(ledger_url, release_id)
    key = _publish.artifact_prefix(config)
    summary = manifest["summary"]
    create_markdown_artifact(key=f"{key}-release-note", description=f"Release note of {release_id}", markdown="\n".join([
        f"# {summary.capitalize()} release `{release_id}`", "",
        _publish.protection_text(manifest), "",
        note, "",
        *((f"![released {summary}](data:image/png;base64,{public['files'][_publish.PLOT_FILE]})", "")
          if _publish.PLOT_FILE in public["files"] else ()),
        _publish.budget_text(manifest, budget, period) + " Parts of this release: "
        + ", ".join(f"{s['name']} ε = {s['epsilon']:g}" for s in manifest["budget_splits"]) + ".", "",
        "| file | sha256 |", "| --- | --- |", *(f"| {o['path']} | `{o['sha256']}` |" for o in manifest["outputs"]),
    ]))
    create_table_artifact(key=f"{key}-budget-splits", table=manifest["budget_splits"],
                          description=f"Budget splits of {release_id}")
    return manifest


@data_task(name="publish-covariance")
def publish_covariance(
    ledger_url: str, release_id: str, config: CovarianceReleaseConfig, config_sha256: str,
    plan: CovariancePlanEnvelope, coefficients: Any, out_dir: str,
) -> dict[str, Any]:
    """Close the ledger entry, write the surface and eigenfunction Parquet files + manifest, create the artifacts."""
    public = public_covariance_release(release_id, config, plan, coefficients, provenance(config_sha256, public=True))
    m = public["manifest"]
    note = (_publish.covariance_released_text(m) + " "
            f"Expected L2 size of the noise: {m['noise']['expected_l2_error']:.4g} (before the PSD projection: "
            f"{curve_error_text('covariance', m['parameters']['grid']['domain'], m['parameters']['time_domain'])}); "
            "it comes from the mechanism alone, not from the data.")
    return publish_summary(ledger_url, release_id, config, public, out_dir, note)
