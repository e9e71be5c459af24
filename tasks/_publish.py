"""Assembling, writing and announcing a release's public outputs (no math: fdpcore computes).

Prefect is imported only where an artifact is created: ``fdp plan`` imports this module for the accuracy texts
it shares with the release (:func:`low_level_text`, :func:`clip_target`).
"""

from __future__ import annotations

import base64
import errno
import hashlib
import io
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from fdp.schemas import ReleaseConfig, ReleaseManifest
from fdp.schemas.config import series_name
from fdp.tasks._plots import curves_png, privacy_subtitle, value_label
from fdp.tasks.planning import (
    BAND_LEVEL,
    alignment_rule,
    curve_error_text,
    expected_l2_error,
    expected_l2_error_with_bias,
    noise_band,
    point_error_text,
    with_bias_note,
)

from fdpcore.data.preprocess import to_source_units
from fdpcore.errors import DataError, InternalError
from fdpcore.io.files import publish_directory
from fdpcore.privacy.tuning import SIGNAL_DEFAULT_FORMULA, SIGNAL_STATED_FORMULA
from fdpcore.summaries.mean import SENSITIVITY_NORMS, MeanPlan

RELEASE_FILE = "release.parquet"
PLOT_FILE = "release.png"
MANIFEST_FILE = "manifest.json"


NOISE_TEXT = {
    "iclp_qr": ("Laplace on whitened KL coefficients (ICLP): coefficient j ~ Lap(whitened_scale * sqrt(lambda_j)), "
                "all kept j"),
    "iclp_ar": ("Laplace on whitened KL coefficients (ICLP) of the active set A = {1..J*}: coefficient j ~ "
                "Lap(whitened_scale * sqrt(lambda_j)); coefficients outside A are exactly 0"),
    "frl": "Laplace on the first M KL coefficients: each ~ Lap(whitened_scale) (finite representation Laplace)",
    "gp": ("Gaussian process whitened_scale * GP(0, C): whitened KL coefficients i.i.d. N(0, whitened_scale^2), "
           "i.e. coefficient j ~ N(0, whitened_scale^2 lambda_j)"),
    "bernstein": ("Laplace on the k + 1 Bernstein lattice values: each ~ Lap(whitened_scale); the release is the "
                  "Bernstein polynomial of the noisy values (diffpriv DPMechBernstein semantics)"),
}
SAMPLER_TEXT = {
    "laplace": "opendp.measurements.make_laplace (floating-point safe)",
    "gaussian": "opendp.measurements.make_gaussian (zCDP privacy map, floating-point safe)",
}
NON_PRIVATE_TEXT = (
    "NOT differentially private: the tuning parameter was chosen by private cross-validation (PCV, MATH.md §5.2), "
    "which looks at the data without spending privacy budget, so the noise scale itself depends on the data. "
    "The epsilon below describes the noise for a fixed parameter only and is not a guarantee for this release."
)


_UNIT_ARTICLE = re.compile(r"^(?:one|each|every|any|a|an)\s+(?=\S)", re.IGNORECASE)


def unit_noun(privacy_unit: str) -> str:
    """The config's ``privacy_unit`` phrase as a noun to follow "for each" or "one" in the guarantee and the notes.

    A leading "one", "each", "every", "any", "a" or "an" is dropped, so the natural phrasing "one country's
    fertility series" reads "for each country's fertility series", not "for each one country's …"; a phrase
    without one is unchanged. The manifest's ``privacy.privacy_unit`` keeps the phrase as written.

    >>> unit_noun("one country's fertility series"), unit_noun("Monday demand curve (all 48 half-hours of one Monday)")
    ("country's fertility series", 'Monday demand curve (all 48 half-hours of one Monday)')
    >>> unit_noun("Each cow (all test days of one cow)"), unit_noun("anyone"), unit_noun("one")
    ('cow (all test days of one cow)', 'anyone', 'one')
    """
    return _UNIT_ARTICLE.sub("", privacy_unit.strip(), count=1)


def _guarantee(plan: MeanPlan, unit: str) -> str:
    if plan.non_private:
        return NON_PRIVATE_TEXT
    if plan.noise == "gaussian":
        cal = plan.calibration
        rule = getattr(cal, "calibration", "analytic")
        text = (f"({plan.epsilon:g}, {plan.delta:g})-differential privacy for each {unit_noun(unit)} (replace-one adjacency, "
                f"n public), by Gaussian-process noise calibrated with the {rule} Gaussian mechanism; "
                f"equivalently rho = {plan.rho:.6g} zero-concentrated DP")
    else:
        text = (f"pure {plan.epsilon:g}-differential privacy for each {unit_noun(unit)} (replace-one adjacency, n public), "
                f"by the {plan.estimator} mechanism with Laplace noise")
    if plan.selection is not None and plan.selection.method == "dp_select":
        text += (f"; of which epsilon {plan.selection.epsilon:g} selects {plan.selection.parameter} by the "
                 "exponential mechanism (MATH.md §5.3) and the rest releases the mean (sequential composition)")
    return text + bought_text(plan.public_choices)


def bought_text(choices: Any) -> str:
    """The guarantee's clause for each public choice bought with the release (``tau: auto``; empty without).

    A choice that bought nothing (``tuning.tau.a_priori_fallback@2``, ``tuning.tau.bound_pays@1``) is named as the
    public value it is, with the reason.
    """
    return "".join(
        f"; {c.name} = {c.value:.6g} is the public upper end of its range ({c.a_priori_reason})"
        if c.a_priori else
        f"; of which epsilon {c.epsilon:g} buys {c.name} = {c.value:.6g} by OpenDP's DP quantile "
        f"(level {c.alpha:.4g}, exponential mechanism; {c.formula_id}), published with the release"
        for c in choices)


def released_value_offset(config: ReleaseConfig, plan: MeanPlan) -> float:
    """The value offset the release used: the config's, or the released DP centre of ``value_offset: auto``."""
    for choice in plan.public_choices:
        if choice.name == "value_offset" and choice.value is not None:
            return choice.value
    if isinstance(config.dataset.value_offset, str):
        raise InternalError("value_offset 'auto' without a drawn centre")
    return config.dataset.value_offset


def signal_record(plan: Any, *, stated: bool, signal_rms: float | None = None) -> dict[str, Any]:
    """A ``risk_prior`` plan's public signal scale for the manifest, with the formula that made it unless stated.

    ``stated``: the config gave ``signal_fraction``; ``signal_rms``: the config gave the mean's size, recorded with the
    fraction of the released tau it made (``tuning.risk.signal_stated@1``); neither: ``tuning.risk.signal_default@1``.
    """
    if plan.tuning != "risk_prior":
        return {}
    if signal_rms is not None:
        return {"signal_fraction": plan.signal_fraction, "signal_rms": signal_rms,
                "signal_fraction_formula": SIGNAL_STATED_FORMULA}
    return {"signal_fraction": plan.signal_fraction, **({} if stated else {"signal_fraction_formula": SIGNAL_DEFAULT_FORMULA})}


def signal_formulas(tuning: dict[str, Any]) -> tuple[str, ...]:
    """The formula a manifest's ``tuning`` record cites for its signal scale (none when the config stated the fraction)."""
    return (tuning["signal_fraction_formula"],) if "signal_fraction_formula" in tuning else ()


def public_release(
    release_id: str, config: ReleaseConfig, plan: MeanPlan, values: Any, provenance: dict[str, Any]
) -> dict[str, Any]:
    """The public record of a release: the manifest and the bytes of every published file."""
    ds = config.dataset
    grid = plan.basis.grid
    offset = released_value_offset(config, plan)
    t_source, v_source = to_source_units(
        np.asarray(values), grid.grid_points, time_domain=ds.time_domain, grid_domain=grid.domain_range,
        value_offset=offset, value_scale=ds.value_scale,
    )
    if plan.calibration is None or plan.recolour is None or plan.sensitivity is None or plan.paper_sensitivity is None:
        raise InternalError("cannot publish a release whose plan is not finished")
    band_source = noise_band(config, plan)  # the band `fdp plan` reports (fdp.tasks.planning)
    columns = {
        "t": grid.grid_points,
        "t_source": t_source,
        "value": v_source,
        "band_lower": v_source - band_source,
        "band_upper": v_source + band_source,
    }
    parquet = _parquet_bytes(columns, {"fdp.release_id": release_id, "fdp.dataset_id": ds.id})
    png = curves_png(
        t_source, {f"private {config.summary} ({plan.estimator})": v_source}, xlabel=ds.time_column,
        ylabel=value_label(ds.value_column),
        title=f"{release_id}: released curve and its noise-only {BAND_LEVEL:.0%} band (not a confidence interval)",
        subtitle=privacy_subtitle(plan.epsilon, plan.delta, clip_radius_text(plan),
                                  "clipping and smoothing bias not in the band"),
        band=(v_source - band_source, v_source + band_source),
    )
    l2_source, l2_scaled = expected_l2_error(config, plan)  # type: ignore[misc]
    parameters: dict[str, Any] = {
        "grid": {"rule": grid.rule, "size": grid.size, "domain": list(grid.domain_range),
                 "points": grid.grid_points.tolist()},
        "kernel": plan.basis.kernel.as_dict(),
        "kernel_trace_normalized": True,
        "n_basis": plan.basis.n_basis,
        "estimator": plan.estimator,
        "eta": plan.eta,
        "psi": plan.psi,
        "tuning": {"rule": plan.tuning, "formula": plan.tuning_formula, "beta": plan.beta},
        "tau": plan.tau,
        "time_domain": list(ds.time_domain),
        "value_offset": offset,
        "value_scale": ds.value_scale,
        "alignment": alignment_rule(config),
        "whitened_dimension": int(plan.recolour.shape[0]),
        "non_private": plan.non_private,
    }
    if plan.estimator == "frl":
        parameters["frl_n_coefficients"] = plan.n_basis
    if plan.estimator == "iclp_ar":
        parameters["active_set_size"] = int(plan.recolour.shape[0])
    if plan.estimator == "bernstein":
        parameters.update(lattice_k=plan.lattice_k, sup_clip=plan.sup_clip,
                          lattice="nu/k on the grid domain mapped to [0, 1] (expand.grid order)")
    if plan.estimator == "gp":
        parameters.update(calibration=plan.gp_calibration, rho=plan.rho)
    if plan.public_choices:  # bought with budget: private outputs, published with their splits
        parameters["public_choices"] = [c.as_manifest() for c in plan.public_choices]
    parameters["tuning"].update(signal_record(plan, stated=config.tuning.signal_fraction is not None,
                                              signal_rms=config.tuning.signal_rms))
    if plan.selection is not None:
        sel = plan.selection
        parameters["selection"] = {
            "method": sel.method, "parameter": sel.parameter, "candidates": list(sel.candidates),
            "n_train": sel.n_train, "n_validation": sel.n_val,
            "split": ("keyed hash of the unit id (BLAKE2b, key drawn per release and never stored): a unit trains "
                      "with probability 2/3; n_train and n_validation are the public normalisers of the sums"
                      if sel.method == "dp_select" else "by position (10 folds)"),
            "epsilon": sel.epsilon, "score_sensitivity": sel.score_sensitivity,
            "differentially_private": sel.method == "dp_select",
        }
    manifest = ReleaseManifest(
        release_id=release_id,
        dataset_id=ds.id,
        summary=config.summary,
        mechanism=plan.estimator,
        n=plan.n,
        privacy={
            "epsilon": plan.epsilon, "delta": plan.delta, "privacy_unit": ds.privacy_unit,
            "guarantee": _guarantee(plan, ds.privacy_unit),
        },
        budget_splits=plan.budget_splits,
        sensitivity={
            "norm": SENSITIVITY_NORMS[plan.estimator], "value": plan.sensitivity, "bound": plan.sensitivity_formula,
            "paper_bound": plan.paper_sensitivity, "paper_formula": plan.paper_formula,
            "status": plan.sensitivity_status,
        },
        parameters=parameters,
        noise={
            "distribution": NOISE_TEXT[plan.estimator],
            "sampler": SAMPLER_TEXT[plan.noise],
            "whitened_scale": plan.calibration.scale,
            "expected_l2_error": l2_source,
            "expected_l2_error_scaled": l2_scaled,
            "band_level": BAND_LEVEL,
            "band_half_width_max": float(band_source.max()),
            "expected_l2_error_with_bias": expected_l2_error_with_bias(config, plan),
            "expected_l2_error_with_bias_note": with_bias_note(config, plan),
        },
        formulas=sorted({*plan.formulas, "preprocess.align_linear@2",
                         *(("preprocess.quantise_lattice@1",) if config.engine.name != "memory" else ()),
                         *signal_formulas(parameters["tuning"])}),
        outputs=[{"path": name, "sha256": hashlib.sha256(data).hexdigest()}
                 for name, data in ((RELEASE_FILE, parquet), (PLOT_FILE, png))],
        provenance=provenance,
    )
    return {"manifest": manifest.model_dump(mode="json"),
            "files": {RELEASE_FILE: base64.b64encode(parquet).decode(), PLOT_FILE: base64.b64encode(png).decode()}}


def clip_radius_text(plan: Any, name: str = "τ", attribute: str = "tau") -> str:
    """The clipping radius a plot states: its value, its units, and whether budget bought it (a DP output).

    >>> from types import SimpleNamespace as NS
    >>> clip_radius_text(NS(tau=0.11224, public_choices=(NS(name="tau", epsilon=0.1),), estimator="iclp_qr"))
    'τ = 0.1122 (rescaled units, DP-bought)'
    >>> clip_radius_text(NS(tau=1.0, sup_clip=1.5, public_choices=(), estimator="bernstein"))
    'sup clip = 1.5 (rescaled units)'
    """
    if getattr(plan, "estimator", None) == "bernstein":
        return f"sup clip = {plan.sup_clip:.4g} (rescaled units)"
    bought = any(c.name == "tau" and c.epsilon > 0 for c in getattr(plan, "public_choices", ()))  # FoSR: tau_y
    return f"{name} = {getattr(plan, attribute):.4g} (rescaled units{', DP-bought' if bought else ''})"


def write_release(public: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """Publish the files and ``manifest.json`` as the directory ``out_dir``, atomically: a reader sees all of them or none (:func:`fdpcore.io.files.publish_directory`)."""
    files = {name: base64.b64decode(b64) for name, b64 in public["files"].items()}
    files[MANIFEST_FILE] = (json.dumps(public["manifest"], indent=2, sort_keys=False) + "\n").encode()
    try:
        publish_directory(out_dir, files)
    except FileExistsError:
        raise DataError(f"--out: {str(out_dir)!r} holds files that are not this release's, and a release directory "
                        "is replaced as a whole; choose a new or empty directory") from None
    except OSError as exc:
        what = "the disk is full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else exc.strerror
        raise DataError(f"--out: cannot write the release into {str(out_dir)!r} ({what}: {exc.strerror}); no file of "
                        "it was published there") from None
    manifest: dict[str, Any] = public["manifest"]
    return manifest


def create_artifacts(manifest: dict[str, Any], note: str, config: Any) -> None:
    """The keyed Prefect artifacts of a release: its note for non-experts and the budget-split table.

    Keys are ``<series>-release-note`` and ``<series>-budget-splits`` (:func:`artifact_prefix`), so two
    series of one dataset, even of the same summary, never overwrite each other's artifacts.
    """
    from prefect.artifacts import create_markdown_artifact, create_table_artifact  # here: `fdp plan` imports this module

    key = artifact_prefix(config)
    create_markdown_artifact(key=f"{key}-release-note", markdown=note, description=f"Release note of {manifest['release_id']}")
    create_table_artifact(key=f"{key}-budget-splits", table=manifest["budget_splits"],
                          description=f"Budget splits of {manifest['release_id']}")


def budget_text(manifest: dict[str, Any], budget: dict[str, Any], period: str) -> str:
    """The release note's budget paragraph: this release, the dataset's total, and the release's period."""
    p = manifest["privacy"]
    text = (f"**Budget.** This release spent ε = {p['epsilon']:g}"
            + (f", δ = {p['delta']:g}" if p["delta"] else "")
            + f", charged to period {period}. Dataset `{manifest['dataset_id']}`: total ε = {budget['total']['epsilon']:g}, "
            f"spent ε = {budget['spent']['epsilon']:.6g}, remaining ε = {budget['remaining']['epsilon']:.6g}.")
    usage = next((u for u in budget.get("periods", []) if u["period"] == period), None)
    if usage is not None and usage["allowance"] is not None:
        text += (f" This period: allowance ε = {usage['allowance']['epsilon']:g}, spent ε = {usage['spent']['epsilon']:.6g}, "
                 f"left ε = {usage['remaining']['epsilon']:.6g}.")
    elif usage is not None:
        text += f" This period: spent ε = {usage['spent']['epsilon']:.6g} (no per-period allowance)."
    return text


def release_note(manifest: dict[str, Any], budget: dict[str, Any], period: str, png_b64: str | None = None) -> str:
    """Markdown explaining the release to a non-expert (private values and public parameters only)."""
    nz, par = manifest["noise"], manifest["parameters"]
    return "\n".join([
        f"# {manifest['summary'].capitalize()} curve release `{manifest['release_id']}`",
        "",
        protection_text(manifest),
        "",
        f"**How.** The average curve was computed from curves clipped to norm {par['tau']:g} (after a public rescaling), "
        f"smoothed, and perturbed with random noise ({manifest['mechanism']} mechanism, {par['kernel']['name']} kernel).",
        "",
        *((_reference_text(par["centering"]), "") if par.get("centering") else ()),
        f"**Accuracy (noise only).** Expected L2 size of the noise: {nz['expected_l2_error']:.4g} "
        f"({curve_error_text(manifest['summary'], par['grid']['domain'], par['time_domain'])}). "
        f"At each time point the noise lies within ±{nz['band_half_width_max']:.4g} with probability "
        f"{nz['band_level']:.0%} or more (band columns in the Parquet file). "
        "These figures come from the mechanism alone, not from the data: they are the NOISE part only — clipping "
        "and smoothing add a bias that is not included, and the band is not a confidence interval for the true "
        "curve." + (f" Also: {low}." if (low := low_tau_text(manifest)) else "")
        + (f" `fdp plan`'s error {biased} (the manifest's noise.expected_l2_error_with_bias)."
           if (biased := with_bias_text(manifest)) else ""),
        "",
        budget_text(manifest, budget, period),
        "",
        *((f"![released curve and noise band](data:image/png;base64,{png_b64})", "") if png_b64 else ()),
        "| file | sha256 |",
        "| --- | --- |",
        *(f"| {o['path']} | `{o['sha256']}` |" for o in manifest["outputs"]),
    ])


def _reference_text(centering: dict[str, Any]) -> str:
    """The mean note's paragraph on its public reference curve (``preprocess.public_reference@1``)."""
    return (f"**Reference curve.** The curves were centred on a public reference curve ({centering['source']}) before "
            "clipping, and it was added back after the noise: the release is the reference plus the private mean of "
            "the differences from it, so clipping and smoothing shrink each curve's deviation from the reference (not "
            "from a constant); a unit whose curve could not be aligned counts as the reference itself.")


def accuracy_text(manifest: dict[str, Any]) -> str | None:
    """The release's expected error with its units and norm, as ``fdp plan`` states it (``fdp release`` prints it).

    Mean, covariance, KDE, ERM: ``noise.expected_l2_error``; FoSR: ``noise.expected_l2_error_T2``; FPCA (no
    additive noise): ``sampler.expected_energy_shortfall``. ``None`` when the manifest states none.
    """
    summary, par = manifest["summary"], manifest.get("parameters") or {}
    noise = manifest.get("noise") or {}
    if summary == "fpca":
        shortfall = (manifest.get("sampler") or {}).get("expected_energy_shortfall")
        if not isinstance(shortfall, (int, float)):
            return None
        return (f"expected captured-energy shortfall {shortfall:.4g} per record, against the best "
                f"{par.get('n_components')}-dimensional subspace of the basis (source units squared; the noise part "
                "only, accuracy.fpca.energy_shortfall@1)")
    key = "expected_l2_error_T2" if summary == "fosr" else "expected_l2_error"
    error = noise.get(key)
    if not isinstance(error, (int, float)):
        return None
    if summary in ("kde", "erm"):
        norm = point_error_text(par["domain"], par["value_units"])
    else:
        norm = curve_error_text(summary, par["grid"]["domain"], par["time_domain"])
    what = "the T2 (cross-moment) noise" if summary == "fosr" else "the noise"
    return f"expected L2 error of {what} {error:.4g} ({norm}) — {noise_only_text(summary)}"


def with_bias_text(manifest: dict[str, Any]) -> str | None:
    """``fdp plan``'s ``with bias`` at the released parameters, as the manifest states it; ``None`` without one.

    The manifest's ``noise.expected_l2_error_with_bias`` (mean with ICLP-QR/GP, covariance, FoSR's ``T2``): the noise
    plus the smoothing bias of a *typical* target under the tuning's ``risk_prior`` prior — public inputs only, never
    this data's bias — followed by the manifest's note on what it is.

    >>> with_bias_text({"noise": {"expected_l2_error_with_bias": 29.61, "expected_l2_error_with_bias_note": "note"}})
    'with bias 29.61: note'
    """
    noise = manifest.get("noise") or {}
    value = noise.get("expected_l2_error_with_bias")
    if not isinstance(value, (int, float)):
        return None
    return f"with bias {value:.4g}: {noise.get('expected_l2_error_with_bias_note') or 'the noise plus a typical smoothing bias'}"


def noise_only_text(summary: str) -> str:
    """What the stated error leaves out, in words: it is the noise's, never the release's whole error.

    >>> noise_only_text("mean")
    'the NOISE part only: clipping and smoothing add a bias that is not included'
    """
    if summary == "fosr":
        return ("T2 noise; the coefficients' error is larger (the inverse of T1 amplifies it), and clipping and "
                "smoothing add a bias that is not included")
    if summary in ("kde", "erm"):
        return "the NOISE part only: the estimator's own bias (smoothing, regularisation) is not included"
    return "the NOISE part only: clipping and smoothing add a bias that is not included"


#: A ``tau: auto`` quantile level below this is named as a clipping bias (about 1 - level of the records expected shrunk).
LOW_TAU_LEVEL = 0.9
#: The summaries whose ``tau: auto`` can target a level below :data:`LOW_TAU_LEVEL`.
LOW_TAU_SUMMARIES = ("mean", "covariance", "fosr", "fpca")


def clip_target(centering: Any, value_offset: Any) -> str:
    """The centre whose deviations clipping shrinks, from its public centring (a manifest's or a config's).

    ``centering`` is the manifest's ``parameters.centering`` (or the config's ``centering`` dumped): a mean's or
    FoSR's public reference curve, a covariance's ``{kind, reference, release_id}``; ``None`` without one.

    >>> clip_target(None, 1500.0)
    'value_offset = 1500 (the constant the curves are centred on)'
    >>> clip_target({"kind": "private_mean", "release_id": "m1"}, 0.0)
    "the private mean release 'm1' (the centre)"
    """
    if isinstance(centering, dict):
        kind = centering.get("kind")
        if kind == "private_mean":
            return f"the private mean release {centering.get('release_id')!r} (the centre)"
        if kind is None or (kind == "public" and centering.get("reference")):
            return "the public reference curve"
    if isinstance(value_offset, (int, float)):
        return f"value_offset = {value_offset:g} (the constant the curves are centred on)"
    return "the DP centre value_offset (the constant the curves are centred on)"


#: A FoSR coefficient that keeps less than this share through the safe inverse is named as shrunk by its floor.
PASS_THROUGH_WARN = 0.9


def floor_shrunk_text(manifest: dict[str, Any]) -> str | None:
    """FoSR: the coefficients the safe inverse's floor shrinks towards 0 (``None`` when every one keeps >= 90 %).

    From public values only: ``parameters.safe_inverse_pass_through`` (``diag(T1~^+ T1~)`` of the released design
    moments, :func:`fdpcore.summaries.fosr.safe_inverse_pass_through`). The band does not contain this bias, so a flat
    curve near 0 there is not evidence of no effect.

    >>> floor_shrunk_text({"parameters": {"safe_inverse_pass_through": [0.99, 0.05], "intercept": True,
    ...                                   "design_columns": ["diet=2"]}})[:60]
    'the safe inverse shrinks beta_diet=2 (keeps 5 %) towards 0: '
    """
    par = manifest.get("parameters") or {}
    names = (["intercept"] if par.get("intercept") else []) + list(par.get("design_columns") or [])
    kept = par.get("safe_inverse_pass_through") or []
    low = [(name, v) for name, v in zip(names, kept, strict=False)
           if isinstance(v, (int, float)) and v < PASS_THROUGH_WARN]
    if not low:
        return None
    names = ", ".join(f"beta_{name} (keeps {100 * v:.0f} %)" for name, v in low)
    return (f"the safe inverse shrinks {names} towards 0: its floor raised the small eigenvalues of the released design "
            "moments T1, so these curves are biased towards 0 by an unknown amount that the noise band does not "
            "contain — a flat curve there is not evidence of no effect (more epsilon, more units per level, or a "
            "public reference curve (centering) that makes the intercept small help; docs/summaries/fosr.md)")


#: A FoSR coefficient whose released size is below this many times its stated noise cannot be told from 0.
DISTINCT_FROM_ZERO = 2.0


def indistinct_names(coefficients: list[dict[str, Any]]) -> list[str]:
    """FoSR: the covariate coefficients whose released size is below :data:`DISTINCT_FROM_ZERO` x their stated noise.

    From the manifest's ``noise.coefficients`` (released values only; the intercept has no size there).

    >>> indistinct_names([{"name": "intercept", "expected_l2_noise": 1.0, "released_l2_norm": None},
    ...                   {"name": "sex=F", "expected_l2_noise": 0.4, "released_l2_norm": 0.08},
    ...                   {"name": "age", "expected_l2_noise": 0.1, "released_l2_norm": 0.5}])
    ['beta_sex=F (size 0.08, noise 0.4)']
    """
    return [f"beta_{c['name']} (size {c['released_l2_norm']:.3g}, noise {c['expected_l2_noise']:.3g})"
            for c in coefficients if isinstance(c.get("released_l2_norm"), (int, float))
            and c["released_l2_norm"] < DISTINCT_FROM_ZERO * c["expected_l2_noise"]]


def coefficient_noise_text(manifest: dict[str, Any]) -> str | None:
    """FoSR: each coefficient curve's stated noise (T1 and T2) given the released design moments; ``None`` otherwise.

    >>> print(coefficient_noise_text({"noise": {"coefficients": [
    ...     {"name": "intercept", "expected_l2_noise": 1.25, "T2_part": 1.2, "T1_part": 0.35, "released_l2_norm": None},
    ...     {"name": "sex=F", "expected_l2_noise": 0.4, "T2_part": 0.3, "T1_part": 0.26, "released_l2_norm": 0.08}]}})[-56:])
    beta_intercept 1.25, beta_sex=F 0.4 (released size 0.08)
    """
    rows = (manifest.get("noise") or {}).get("coefficients")
    if not rows:
        return None
    parts = [f"beta_{c['name']} {c['expected_l2_noise']:.3g}"
             + ("" if c.get("released_l2_norm") is None else f" (released size {c['released_l2_norm']:.3g})")
             for c in rows]
    return ("each coefficient curve's noise, given the released design moments (T1 and T2; same norm and units per "
            "covariate unit): " + ", ".join(parts))


def indistinct_text(manifest: dict[str, Any]) -> str | None:
    """FoSR's caution for the coefficients :func:`indistinct_names` lists (``None`` when there are none)."""
    names = indistinct_names((manifest.get("noise") or {}).get("coefficients") or [])
    if not names:
        return None
    return (f"{', '.join(names)}: the released curve is smaller than twice its stated noise, so at this epsilon the "
            "release cannot tell this effect from 0, nor its sign (more epsilon or more units in each level help; "
            "docs/summaries/fosr.md)")


def low_tau_text(manifest: dict[str, Any]) -> str | None:
    """The clipping bias of a ``tau`` bought at a low quantile level (< :data:`LOW_TAU_LEVEL`); ``None`` otherwise.

    From public parameters only: the level is in the manifest's ``public_choices``. Mean, covariance, FoSR and FPCA
    (whose level is always the median: ``tuning.tau.summary_level@1``).
    """
    summary, par = manifest["summary"], manifest.get("parameters") or {}
    if summary not in LOW_TAU_SUMMARIES:
        return None
    choice = next((c for c in par.get("public_choices") or () if c.get("name") == "tau" and c.get("epsilon", 0) > 0
                   and isinstance(c.get("quantile_level"), (int, float))), None)
    if choice is None or choice["quantile_level"] >= LOW_TAU_LEVEL:
        return None
    return low_level_text(summary, choice["quantile_level"], clip_target(par.get("centering"), par.get("value_offset")))


def low_level_text(summary: str, level: float | Sequence[float], target: str, *, planned: bool = False) -> str:
    """The sentence on a low ``tau`` level: ``fdp release``, its note, and ``fdp plan`` (``planned``: future tense).

    ``fdp plan`` passes the levels of several epsilons at once (in the order of its epsilons) and the sentence lists
    them, so its general part is said once. Public inputs only: the level comes from ``n`` and the tau split
    (``tuning.tau.quantile_level@3``). The level is the
    quantile's *target*: the DP draw lands near it, not on it, and at small ``n * epsilon`` it occasionally lands below
    every record (1.1 % of draws in a trial at n = 72, epsilon 1), so the sentence gives the share as an expectation.
    Clipping shortens each large record's deviation from the centre, the largest the most, so the bias of a mean need
    not lie between the truth and that centre (on skewed data it can cross it): the sentence does not say it does.

    >>> print(low_level_text("mean", 0.5, "the public reference curve"))  # doctest: +NORMALIZE_WHITESPACE
    tau is a DP estimate aimed at the 0.5 quantile of the record norms: about 50% of the records are expected to have
    been above it and shrunk to it, but a DP draw can land away from its target — at small n * epsilon occasionally
    below every record, so that all of them were shrunk; clipping
    shortens each shrunk record's deviation from the public reference curve, the largest the most, so the release is
    biased in a direction set by the data — not necessarily towards that centre: on skewed data (a few large records
    shrunk hard) the mean can end up on the other side of it; the error can be several times the figure
    """
    deviation = f"clipping shortens each shrunk record's deviation from {target}, the largest the most"
    effect = {"mean": f"{deviation}, so the release is biased in a direction set by the data — not necessarily towards "
                      "that centre: on skewed data (a few large records shrunk hard) the mean can end up on the other "
                      "side of it",
              "covariance": f"{deviation}, so the surface shrinks, most along the directions of the largest records",
              "fosr": f"{deviation}, so the coefficient curves are biased in a direction set by the data — often towards "
                      "0 (the intercept towards that centre), but on skewed data not necessarily",
              "fpca": "clipping changes what the components describe: each shrunk record weighs as if its norm were tau, so "
                      "records far from the centre count less than in the unclipped principal components"}[summary]
    expected = "are expected above it and will be shrunk to it" if planned else \
        "are expected to have been above it and shrunk to it"
    levels = [float(level)] if isinstance(level, (int, float)) else [float(v) for v in level]
    levels = levels[:1] if len({f"{v:.3g}" for v in levels}) == 1 else levels  # one level for all: said once
    quantiles, above = ", ".join(f"{v:.3g}" for v in levels), ", ".join(f"{1 - v:.0%}" for v in levels)
    return (f"tau {'will be' if planned else 'is'} a DP estimate aimed at the {quantiles} quantile of the record norms: "
            f"about {above} of the records {expected}, but a DP draw can land away from its target — at small "
            f"n * epsilon occasionally below every record, so that all of them {'are' if planned else 'were'} "
            f"shrunk; {effect}"
            + ("" if summary == "fpca" else "; the error can be several times the "
               + ("expected L2 error `fdp plan` states" if planned else "figure")))


def protection_text(manifest: dict[str, Any]) -> str:
    """The release note's "What is protected" paragraph, as sentences, for every summary.

    It names the privacy unit and says what the guarantee means in words; when the guarantee has several
    parts (a budget bought ``tau``, a design-moment share) the manifest's own statement follows, as a sentence.
    """
    p = manifest["privacy"]
    if (manifest.get("parameters") or {}).get("non_private"):
        return f"**NOT PROTECTED.** {p['guarantee']}"
    unit, eps, n = p["privacy_unit"], p["epsilon"], manifest["n"]
    text = (f"**What is protected.** Each record is one *{unit_noun(unit)}*. Replacing any one of them by any other possible "
            f"record changes the probability of any published result by at most a factor e^{eps:g}")
    if p["delta"] > 0:
        text += (f", except with probability {p['delta']:g} (({eps:g}, {p['delta']:g})-differential privacy, "
                 f"replace-one adjacency; the number of records n = {n} is public).")
    else:
        text += f" ({eps:g}-differential privacy, replace-one adjacency; the number of records n = {n} is public)."
    text += (" The number of records is published exactly: the guarantee compares data sets of the same size in "
             "which any one record is swapped for any other.")
    parts = manifest.get("budget_splits") or []
    if len(parts) > 1:
        guarantee = str(p["guarantee"]).strip().rstrip(".")
        text += f" In full: {guarantee[:1].upper()}{guarantee[1:]}."
    return text


def covariance_released_text(manifest: dict[str, Any]) -> str:
    """What a covariance release holds, exactly, for its centring (docs/summaries/covariance.md).

    With a public centre ``c`` the surface is the second moment about ``c``, which is the covariance only where
    ``c`` matches the mean; with ``private_mean`` or ``sample_mean`` it is the covariance about that mean.
    """
    par = manifest["parameters"]
    size, center = par["grid"]["size"], par["centering"]
    if center["kind"] == "public":
        centre = ("a public reference curve" if center.get("reference") else
                  f"the public constant value_offset = {par.get('value_offset', 0.0):g}")
        what = (f"The second moment of the curves about {centre} (the centre c) on a {size} x {size} grid: "
                "(1/n) Σ (X_i − c)(X_i − c)ᵀ, which is the covariance plus (X̄ − c) ⊗ (X̄ − c), X̄ the mean curve. "
                "It is the covariance about the mean only where the centre matches the mean; elsewhere the "
                "rank-one term adds to the surface and its leading eigenfunction")
    elif center["kind"] == "private_mean":
        what = (f"The covariance surface of the curves about the published private mean release "
                f"`{center.get('release_id')}` on a {size} x {size} grid")
    else:
        what = f"The covariance surface of the curves about their sample mean on a {size} x {size} grid"
    low = low_tau_text(manifest)
    return f"**What is released.** {what}, smoothed and perturbed with Laplace-process noise, and its " \
           f"{par['n_components']} leading eigenfunctions. Clipping and smoothing bias the surface, and that bias " \
           "is not in the noise figure that follows (the NOISE part only)" + (f"; {low}." if low else ".")


def artifact_prefix(config: Any) -> str:
    """The prefix of a release's Prefect artifact keys: its release series, as a Prefect key.

    The series (:func:`fdp.schemas.config.series_name`: ``release.name``, else ``<dataset>-<summary>``) is
    lower-cased and every character other than ``a-z``, ``0-9`` and ``-`` becomes ``-`` (Prefect's key rule).

    >>> from types import SimpleNamespace as NS
    >>> artifact_prefix(NS(release=NS(name="Elec_Monthly.v2"), dataset=NS(id="elec"), summary="mean"))
    'elec-monthly-v2'
    """
    name = series_name(config)
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", name.lower())).strip("-") or "release"


def _parquet_bytes(columns: dict[str, Any], metadata: dict[str, str]) -> bytes:
    table = pa.table({k: pa.array(np.asarray(v, dtype=np.float64)) for k, v in columns.items()})
    table = table.replace_schema_metadata({k.encode(): v.encode() for k, v in metadata.items()})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()
