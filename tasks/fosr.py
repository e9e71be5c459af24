"""Tasks of the function-on-scalar regression release (MATH.md §7): covariates, plan, summarise, draw, publish.

Curves come from :func:`fdp.tasks.load_curves` / :func:`fdp.tasks.clip_curves` (one averaged record per
privacy unit); covariates from :func:`fdpcore.io.covariates.read_unit_covariates` (one value per unit).
With a streaming engine (``engine.name`` ``local``/``dask``) both are read chunk by chunk by
:func:`fdp.tasks.streaming.stream_curves` (``covariates=True``, the public reference as centre) into
exact sums, summarised by :func:`summarise_fosr_stream`.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import numpy as np
from fdp.schemas import ChargeRequest, CurveBatch
from fdp.schemas.covariance import CONTRIBUTION_RULE
from fdp.schemas.engine import StreamBatch
from fdp.schemas.fosr import FosrData, FosrManifest, FosrPlanEnvelope, FosrReleaseConfig
from fdp.tasks import _publish
from fdp.tasks._plots import coefficients_png, privacy_subtitle
from fdp.tasks._settings import data_task, noise_task
from fdp.tasks.covariance import publish_summary
from fdp.tasks.ledger import mark_noised, provenance
from fdp.tasks.planning import (
    alignment_rule,
    expected_l2_error,
    expected_l2_error_with_bias,
    fosr_plan,
    public_reference,
    with_bias_note,
)

from fdpcore.data.accumulate import summarise_fosr_sums
from fdpcore.data.preprocess import to_source_units
from fdpcore.errors import DataError
from fdpcore.io.covariates import read_unit_covariates
from fdpcore.noise.quantiles import PublicChoice
from fdpcore.summaries.fosr import (
    clip_covariates,
    draw_fosr_release,
    fosr_coefficient_noise,
    fosr_t2_noise_band,
    safe_inverse_pass_through,
    summarise_fosr,
)


@data_task(name="plan-fosr")
def plan_fosr(
    config: FosrReleaseConfig, n: int, tau: float | None = None, choices: tuple[PublicChoice, ...] | None = None
) -> FosrPlanEnvelope:
    """Fix gamma, (eta, psi), both sensitivities, both OpenDP calibrations and the floor from public inputs.

    With ``tau: auto``: ``tau`` is the released ``tau_Y`` (or 1 for the plan that only prices the charge) and
    ``choices`` the public choice it was bought with (:func:`fdp.tasks.planning.fosr_plan`).
    """
    return FosrPlanEnvelope(plan=fosr_plan(config, n, tau, choices), reference=fosr_reference(config))


def fosr_reference(config: FosrReleaseConfig) -> Any:
    """The public reference curve on the release grid (scaled units), or ``None`` without centring."""
    return public_reference(config)


@data_task(name="load-covariates")
def load_covariates(config: FosrReleaseConfig, config_dir: str, n: int) -> CurveBatch:
    """Encoded covariates, one row per privacy unit in the curves' unit order (raw data: never persisted)."""
    ds = config.dataset
    path = Path(ds.path) if Path(ds.path).is_absolute() else Path(config_dir) / ds.path
    cov = read_unit_covariates(path, ds.format, unit_column=ds.unit_column, csv_delimiter=ds.csv_delimiter,
                               covariates=[(name, enc) for _, name, enc in config.design_columns()],
                               within_unit=config.covariates_within_unit)
    if cov.n_units != n:  # pragma: no cover - both readers see the same unit column
        raise DataError(f"{path.name}: covariates cover {cov.n_units} units but the curves {n}")
    return CurveBatch(data_matrix=cov.values, n_samples=n, counts={"n_units_covariate_averaged": cov.n_varying_units})


@data_task(name="summarise-fosr")
def summarise_fosr_data(curves: CurveBatch, covariates: CurveBatch, plan: FosrPlanEnvelope) -> FosrData:
    """Clip the covariates to B, then the pre-noise whitened T1 entries and T2 coefficients (memory only)."""
    z, _ = clip_covariates(covariates.data_matrix, plan.plan.bound)
    t1, t2 = summarise_fosr(z, curves.data_matrix, plan.plan)
    return FosrData(t1=t1, t2=t2)


@data_task(name="summarise-fosr-sums")
def summarise_fosr_stream(batch: StreamBatch, plan: FosrPlanEnvelope) -> FosrData:
    """Pre-noise whitened T1 entries and T2 coefficients from a streaming engine's exact sums (memory only)."""
    t1, t2 = summarise_fosr_sums(batch.sums, plan.plan)
    return FosrData(t1=t1, t2=t2)


def fosr_charge_request(
    config: FosrReleaseConfig, config_sha256: str, plan: FosrPlanEnvelope, counts: dict[str, int]
) -> ChargeRequest:
    """The whole epsilon in named parts (``tau`` when bought, T1, T2) that sum exactly to it."""
    p = plan.plan
    return ChargeRequest(
        dataset_id=config.dataset.id, summary="fosr", mechanism=config.mechanism, epsilon=p.epsilon, delta=0.0,
        sensitivity_formula="sensitivity.fosr.t2.exact@1", budget_splits=p.budget_splits,
        config_sha256=config_sha256, internal={"counts": counts},
    )


@noise_task(name="draw-fosr")
def draw_fosr(ledger_url: str, release_id: str, plan: FosrPlanEnvelope, data: FosrData, noised: bool = False) -> Any:
    """Mark the charge final (unless ``tau: auto``'s draw did), draw both parts' noise once, assemble beta~.

    Returns the coefficient curves, the released ``T1~`` and the plan of the draw (``T2``'s ``(eta, psi)`` chosen
    from ``T1~``: :func:`fdpcore.summaries.fosr.given_t1`), which the manifest records.
    """
    if not noised:
        mark_noised(ledger_url, release_id)
    coef, t1, plans = draw_fosr_release(plan.plan, data.t1, data.t2, draws=1)
    return coef[0], t1[0], plans[0]


def public_fosr_release(
    release_id: str, config: FosrReleaseConfig, plan: FosrPlanEnvelope, coef: Any, t1: Any, prov: dict[str, Any]
) -> dict[str, Any]:
    """Manifest and file bytes of a FoSR release (private outputs and public parameters only)."""
    p, ds = plan.plan, config.dataset
    grid = p.basis.grid
    names = config.coefficient_names()
    curves = np.asarray(coef) * ds.value_scale
    if p.intercept:  # the intercept carries the public offset and reference back (post-processing)
        ref = plan.reference if plan.reference is not None else np.zeros(grid.size)
        curves[0] = curves[0] + ds.value_offset + ds.value_scale * ref
    t_source, _ = to_source_units(curves[0], grid.grid_points, time_domain=ds.time_domain, grid_domain=grid.domain_range)
    columns: dict[str, Any] = {"t": grid.grid_points, "t_source": t_source}
    columns.update({f"beta_{name}": curves[m] for m, name in enumerate(names)})
    band = fosr_t2_noise_band(p, t1, level=_publish.BAND_LEVEL) * ds.value_scale  # given the released T1~: post-processing
    kept = dict(zip(names, (round(float(v), 6) for v in safe_inverse_pass_through(t1, p.floor)), strict=True))  # post-proc.
    shrunk = [name for name, v in kept.items() if v < _publish.PASS_THROUGH_WARN]
    coefficient_noise = _coefficient_noise(p, t1, coef, names, ds.value_scale)  # post-processing of released values
    unclear = _publish.indistinct_names(coefficient_noise)
    for m, name in enumerate(names):
        columns[f"band_lower_{name}"], columns[f"band_upper_{name}"] = curves[m] - band[m], curves[m] + band[m]
    parquet = _publish._parquet_bytes(columns, {"fdp.release_id": release_id, "fdp.dataset_id": ds.id})
    png = coefficients_png(t_source, {n: curves[m] for m, n in enumerate(names)},
                           {n: (curves[m] - band[m], curves[m] + band[m]) for m, n in enumerate(names)},
                           xlabel=ds.time_column, ylabel=f"{ds.value_column}: intercept in source units, others per covariate unit",
                           title=f"{release_id}: private coefficient curves and the noise-only {_publish.BAND_LEVEL:.0%} band "
                                 "of their T2 part (not a confidence interval)",
                           subtitle=privacy_subtitle(p.epsilon, 0.0, _publish.clip_radius_text(p, "τ_y", "tau_y"),
                                                     "clipping and smoothing bias not in the band")
                           + ("" if not shrunk else "\nshrunk towards 0 by the safe inverse (bias not in the band): "
                              + ", ".join(f"{name} keeps {100 * kept[name]:.0f} %" for name in shrunk))
                           + ("" if not unclear else "\ncannot be told from 0 (size below twice its noise): "
                              + ", ".join(unclear)),
                           panel_notes={c["name"]: f"noise ≈ {c['expected_l2_noise']:.3g} (T1 and T2, L2)"
                                        for c in coefficient_noise})
    l2_source, l2 = expected_l2_error(config, p)  # type: ignore[misc]
    guarantee = (f"pure {p.epsilon:g}-differential privacy for each {_publish.unit_noun(ds.privacy_unit)} (replace-one adjacency, n public): "
                 f"Laplace noise on the design moments T1 (epsilon {p.epsilon1:g}) and ICLP noise on the cross-moment "
                 f"curves T2 (epsilon {p.epsilon2:g}), sequential composition"
                 + (" (T2's smoothing chosen from the released T1, adaptively)" if p.t2_amplification is not None else "")
                 + "; the coefficient curves are post-processing" + _publish.bought_text(p.public_choices))
    manifest = FosrManifest(
        release_id=release_id, dataset_id=ds.id, mechanism=config.mechanism, n=p.n,
        privacy={"epsilon": p.epsilon, "delta": 0.0, "privacy_unit": ds.privacy_unit, "guarantee": guarantee},  # type: ignore[arg-type]
        budget_splits=p.budget_splits,  # type: ignore[arg-type]
        sensitivity={
            "T1": {"norm": "l1 of the noised upper-triangle entries of T1", "value": p.delta1,
                   "bound": "sensitivity.fosr.t1.l1@1", "status": "UPPER", "paper_bound": None,
                   "paper_note": "[ICLP-v2] C.2's scalar example assumes sensitivity 1; MATH.md §7 computes it"},
            "T2": {"norm": "1,C on H_K^p (sum of the p componentwise 1,C norms)", "value": p.delta2,
                   "bound": "sensitivity.fosr.t2.exact@1", "status": "EXACT", "paper_bound": None,
                   "paper_note": "[ICLP-v2] C.2 gives no explicit bound"},
        },
        parameters={
            "grid": {"rule": grid.rule, "size": grid.size, "domain": list(grid.domain_range),
                     "points": grid.grid_points.tolist()},
            "kernel": p.basis.kernel.as_dict(), "kernel_trace_normalized": True, "n_basis": p.basis.n_basis,
            "eta": p.eta, "psi": p.psi, "tuning": {"rule": p.tuning, "formula": p.tuning_formula, "beta": p.beta,
                                                   **_t2_tuning_note(p)},
            "covariates": [c.model_dump() for c in config.covariates], "intercept": p.intercept,
            "design_columns": [label for label, _, _ in config.design_columns()],
            "structural_zeros": [list(pair) for pair in p.zero_pairs],
            "p": p.p, "covariate_bound": p.bound,
            "covariate_bound_meaning": "||z_i||_2 <= B_z on the non-constant covariates" if p.intercept
            else "||x_i||_2 <= B_x", "tau_y": p.tau_y,
            **({"public_choices": [c.as_manifest() for c in p.public_choices]} if p.public_choices else {}),
            "gamma": p.gamma, "gamma_rule": "tuning.fosr.gamma_balanced@1" if p.gamma_rule == "balanced" else "fixed",
            "safe_inverse_floor": p.floor,
            "safe_inverse_pass_through": list(kept.values()),
            "safe_inverse_pass_through_note": "per coefficient (intercept first, then design_columns): diag(T1~^+ T1~) "
                                              "of the released design moments (postprocess.fosr.safe_inverse@1), the "
                                              "share the floored inverse lets through; below 0.9 the curve is shrunk "
                                              "towards 0 by a bias the band does not contain",
            "safe_inverse_floor_rule": "c Delta1/(gamma eps), c = max(sqrt(2 log p^2), 1)" if config.split.floor is None
            else "fixed (public lower bound on the design's smallest eigenvalue)",
            "centering": None if config.centering is None else config.centering.model_dump(),
            "privacy_unit": ds.privacy_unit, "contribution_rule": CONTRIBUTION_RULE
            + ("; covariates must be constant within a unit (a file where one varies is refused: "
               "covariates_within_unit: error)" if config.covariates_within_unit == "error" else
               "; one covariate value per unit: a covariate that varies within a unit enters as the unit's mean over "
               "its rows (covariates_within_unit: average; a one-hot column becomes the unit's share of rows at "
               "the level)"),
            "time_domain": list(ds.time_domain), "value_offset": ds.value_offset, "value_scale": ds.value_scale,
            "alignment": alignment_rule(config),
            "release_columns": "beta_<name>: coefficient curve of each covariate in source units per unit of the "
                               "encoded covariate; beta_intercept includes value_offset and the reference curve; "
                               "band_lower_<name>/band_upper_<name>: 95% pointwise band of the T2 noise given the "
                               "released T1 (simulated from the noise alone; T1's own noise not included)",
        },
        noise={"T1": f"Lap({p.calibration1.scale:.6g}) on each of the {len(p.t1_index[0])} noised entries"
                     + (f"; then {len(p.zero_pairs)} entries (parameters.structural_zeros, design indices with the "
                        "intercept 0) set to 0: two indicators of one one-hot covariate, which every unit takes at one "
                        "level (covariates_within_unit: error), are never both non-zero (public; post-processing, "
                        "postprocess.fosr.structural_zeros@1)" if p.zero_pairs else ""),
               "T2": "coefficient (m, l) ~ Lap(whitened_scale_T2 sqrt(lambda_l)) for each of the p curves",
               "whitened_scale_T1": p.calibration1.scale, "whitened_scale_T2": p.calibration2.scale,
               "sampler": _publish.SAMPLER_TEXT["laplace"],
               "expected_l2_error_T2": l2_source, "expected_l2_error_T2_scaled": l2,
               "expected_l2_error_note": "sqrt(E||T2~ - T2hat||^2) summed over the p curves; beta~ = T1~^+ T2~ "
                                         "scales it by at most 1/safe_inverse_floor",
               "expected_l2_error_with_bias": expected_l2_error_with_bias(config, p),
               "expected_l2_error_with_bias_note": with_bias_note(config, p),
               "coefficients": coefficient_noise, "coefficients_note": COEFFICIENT_NOISE_NOTE},
        design_moments=np.asarray(t1).tolist(),
        formulas=sorted({*p.formulas, "preprocess.align_linear@2", COEFFICIENT_NOISE_FORMULA,
                         *(("grid.trapezoid@1",) if grid.rule == "trapezoid" else ()),
                         *(("preprocess.quantise_lattice@1",) if config.engine.name != "memory" else ())}),
        outputs=[{"path": name, "sha256": hashlib.sha256(data).hexdigest()}  # type: ignore[misc]
                 for name, data in ((_publish.RELEASE_FILE, parquet), (_publish.PLOT_FILE, png))],
        provenance=prov,  # type: ignore[arg-type]
    )
    return {"manifest": manifest.model_dump(mode="json"), "files": {_publish.RELEASE_FILE: base64.b64encode(parquet).decode(),
                                                                   _publish.PLOT_FILE: base64.b64encode(png).decode()}}


#: The formula of each coefficient curve's stated noise (manifest ``noise.coefficients``).
COEFFICIENT_NOISE_FORMULA = "accuracy.fosr.coefficient_noise@1"
#: What ``noise.coefficients`` states, in the manifest's words.
COEFFICIENT_NOISE_NOTE = (
    "per coefficient (intercept first, then design_columns), in source units per covariate unit, the grid L2 norm as "
    "expected_l2_error_T2: expected_l2_noise = sqrt(T2_part^2 + T1_part^2); T2_part is T2's noise through the safe "
    "inverse of the released design_moments (exact given them), T1_part an estimate of what T1's noise does (first "
    "order, from the released curves, less what their own T2 noise adds; accuracy.fosr.coefficient_noise@1); "
    "released_l2_norm is the released curve's size (none for the intercept). Post-processing of released values; "
    "neither part includes the safe inverse's shrinkage, clipping or smoothing bias. A curve whose size is below "
    "twice its noise cannot be told from 0 at this epsilon")


def _coefficient_noise(plan: Any, t1: Any, coef: Any, names: list[str], scale: float) -> list[dict[str, Any]]:
    """Manifest ``noise.coefficients``: each curve's stated noise and size (source units), from released values only."""
    t2_sq, t1_sq = fosr_coefficient_noise(plan, t1, coef)
    norms = plan.basis.grid.norm(np.asarray(coef)) * scale
    return [{"name": name, "expected_l2_noise": float(np.sqrt(t2_sq[m] + t1_sq[m]) * scale),
             "T2_part": float(np.sqrt(t2_sq[m]) * scale), "T1_part": float(np.sqrt(t1_sq[m]) * scale),
             "released_l2_norm": None if plan.intercept and m == 0 else float(norms[m])}
            for m, name in enumerate(names)]


def _t2_tuning_note(p: Any) -> dict[str, Any]:
    """The manifest's account of a T2 smoothing chosen from the released T1~ (tuning.fosr.t2_given_t1@1)."""
    if p.t2_amplification is None:
        return {}
    return {"t2_amplification": p.t2_amplification,
            "note": "eta and psi of T2 were chosen after T1 was released: the risk_prior rule with T2's noise scaled by "
                    "t2_amplification = tr((T1~^+)^2)/p, computed from the released design_moments and the public "
                    "safe_inverse_floor (post-processing); T2's sensitivity and noise are those of the chosen pair"}


@data_task(name="publish-fosr")
def publish_fosr(
    ledger_url: str, release_id: str, config: FosrReleaseConfig, config_sha256: str, plan: FosrPlanEnvelope,
    drawn: Any, out_dir: str,
) -> dict[str, Any]:
    """Close the ledger entry, write Parquet + manifest, create the artifacts."""
    coef, t1, drawn_plan = drawn
    plan = plan.model_copy(update={"plan": drawn_plan})  # T2's (eta, psi) as drawn: chosen from the released T1~
    public = public_fosr_release(release_id, config, plan, coef, t1, provenance(config_sha256, public=True))
    m = public["manifest"]
    names = ", ".join(c.name for c in config.covariates)
    note = (f"**What is released.** The coefficient curves of a regression of each curve on {names}"
            f"{' with an intercept' if m['parameters']['intercept'] else ''} (function-on-scalar regression). "
            f"The budget is split: {m['parameters']['gamma']:g} of it protects the design moments, the rest the "
            "curves; the coefficients are computed from the two noisy parts only.")
    note += ("\n\n**Accuracy (noise only).** The cross-moment curves T2 carry noise of expected L2 size "
             f"{m['noise']['expected_l2_error_T2']:.4g}; {_publish.coefficient_noise_text(m)}. These figures come from the mechanism and the released values, "
             "not from the data; clipping and smoothing add a bias that is not included, and the bands are T2's "
             "noise only, not confidence intervals.")
    for caution in (_publish.floor_shrunk_text(m), _publish.indistinct_text(m)):
        if caution is not None:
            note += f" **Caution.** {caution[0].upper()}{caution[1:]}."
    return publish_summary(ledger_url, release_id, config, public, out_dir, note)
