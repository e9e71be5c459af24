"""Assembling, writing and announcing a release's public outputs (no math: fdpcore computes)."""

from __future__ import annotations

import base64
import hashlib
import io
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from fdp.schemas import ReleaseConfig, ReleaseManifest
from fdpcore.errors import DataError
from fdpcore.io.files import write_bytes_atomic, write_json_atomic
from fdpcore.mechanisms import iclp_pointwise_band
from fdpcore.preprocess import to_source_units
from fdpcore.release import MeanPlan

RELEASE_FILE = "release.parquet"
MANIFEST_FILE = "manifest.json"
BAND_LEVEL = 0.95


def public_release(
    release_id: str, config: ReleaseConfig, plan: MeanPlan, values: Any, provenance: dict[str, Any]
) -> dict[str, Any]:
    """The public record of a release: the manifest and the bytes of every published file."""
    ds = config.dataset
    grid = plan.basis.grid
    t_source, v_source = to_source_units(
        np.asarray(values), grid.grid_points, time_domain=ds.time_domain, grid_domain=grid.domain_range,
        value_offset=ds.value_offset, value_scale=ds.value_scale,
    )
    band = iclp_pointwise_band(plan.basis.eigenfunctions, plan.basis.eigenvalues, plan.calibration.scale, level=BAND_LEVEL)
    band_source = band * ds.value_scale
    columns = {
        "t": grid.grid_points,
        "t_source": t_source,
        "value": v_source,
        "band_lower": v_source - band_source,
        "band_upper": v_source + band_source,
    }
    parquet = _parquet_bytes(columns, {"fdp.release_id": release_id, "fdp.dataset_id": ds.id})
    l2_scaled = float(np.sqrt(plan.expected_sq_l2_error))
    manifest = ReleaseManifest(
        release_id=release_id,
        dataset_id=ds.id,
        summary=config.summary,
        mechanism=plan.estimator,
        n=plan.n,
        privacy={
            "epsilon": plan.epsilon, "delta": plan.delta, "privacy_unit": ds.privacy_unit,
            "guarantee": f"pure {plan.epsilon:g}-differential privacy for each {ds.privacy_unit} "
            "(replace-one adjacency, n public), by the ICLP mechanism",
        },
        budget_splits=[{"name": "mean", "epsilon": plan.epsilon, "delta": plan.delta}],
        sensitivity={
            "norm": "1,C", "value": plan.sensitivity, "bound": plan.sensitivity_formula,
            "paper_bound": plan.paper_sensitivity, "paper_formula": plan.paper_formula,
        },
        parameters={
            "grid": {"rule": grid.rule, "size": grid.size, "domain": list(grid.domain_range),
                     "points": grid.grid_points.tolist()},
            "kernel": plan.basis.kernel.as_dict(),
            "kernel_trace_normalized": True,
            "n_basis": plan.basis.n_basis,
            "eta": plan.eta,
            "psi": plan.psi,
            "tuning": {"rule": plan.tuning, "formula": plan.tuning_formula, "beta": plan.beta},
            "tau": plan.tau,
            "time_domain": list(ds.time_domain),
            "value_offset": ds.value_offset,
            "value_scale": ds.value_scale,
            "alignment": "preprocess.align_linear@1: linear interpolation within each curve's observed range; "
            "a unit without an alignable curve contributes the zero curve (the public reference)",
        },
        noise={
            "distribution": "Laplace on whitened KL coefficients: coefficient j ~ Lap(scale * sqrt(lambda_j))",
            "sampler": "opendp.measurements.make_laplace (floating-point safe)",
            "whitened_scale": plan.calibration.scale,
            "expected_l2_error": l2_scaled * ds.value_scale,
            "expected_l2_error_scaled": l2_scaled,
            "band_level": BAND_LEVEL,
            "band_half_width_max": float(band_source.max()),
        },
        formulas=sorted(
            f
            for f in (
                "grid.midpoint@1" if grid.rule == "midpoint" else "grid.trapezoid@1",
                "eigen.weighted_kl@1", "preprocess.align_linear@1", "preprocess.clip_l2@1",
                "estimator.mean.iclp_qr@1", plan.sensitivity_formula, plan.paper_formula,
                "calibration.iclp.laplace_whitened@1", "noise.iclp.expected_sq_l2@1",
                plan.tuning_formula, "accounting.pure.sequential@1",
            )
            if f is not None
        ),
        outputs=[{"path": RELEASE_FILE, "sha256": hashlib.sha256(parquet).hexdigest()}],
        provenance=provenance,
    )
    return {"manifest": manifest.model_dump(mode="json"), "files": {RELEASE_FILE: base64.b64encode(parquet).decode()}}


def write_release(public: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """Write the published files and ``manifest.json`` into ``out_dir`` (atomically)."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, b64 in public["files"].items():
            write_bytes_atomic(out_dir / name, base64.b64decode(b64))
        write_json_atomic(out_dir / MANIFEST_FILE, public["manifest"])
    except OSError as exc:
        raise DataError(f"--out: cannot write the release into {str(out_dir)!r} ({exc.strerror}); choose a writable directory") from None
    manifest: dict[str, Any] = public["manifest"]
    return manifest


def create_artifacts(manifest: dict[str, Any], budget: dict[str, Any]) -> None:
    """The keyed Prefect artifacts: a release note for non-experts and the budget-split table."""
    key = _artifact_key(manifest["dataset_id"])
    create_markdown_artifact(key=f"{key}-release-note", markdown=release_note(manifest, budget),
                             description=f"Release note of {manifest['release_id']}")
    create_table_artifact(key=f"{key}-budget-splits", table=manifest["budget_splits"],
                          description=f"Budget splits of {manifest['release_id']}")


def release_note(manifest: dict[str, Any], budget: dict[str, Any]) -> str:
    """Markdown explaining the release to a non-expert (private values and public parameters only)."""
    p, nz, par = manifest["privacy"], manifest["noise"], manifest["parameters"]
    return "\n".join([
        f"# {manifest['summary'].capitalize()} curve release `{manifest['release_id']}`",
        "",
        f"**What is protected.** Each record is one *{p['privacy_unit']}*. Whether or not any one of them is in the "
        f"data changes the probability of any published result by at most a factor e^{p['epsilon']:g} "
        f"({p['epsilon']:g}-differential privacy, replace-one adjacency; the number of records n = {manifest['n']} is public).",
        "",
        f"**How.** The average curve was computed from curves clipped to norm {par['tau']:g} (after a public rescaling), "
        f"smoothed, and perturbed with random noise ({manifest['mechanism']} mechanism, {par['kernel']['name']} kernel).",
        "",
        f"**Accuracy (noise only).** Expected L2 size of the noise: {nz['expected_l2_error']:.4g} (value units). "
        f"At each time point the noise lies within ±{nz['band_half_width_max']:.4g} with probability "
        f"{nz['band_level']:.0%} or more (band columns in the Parquet file). "
        "These figures come from the mechanism alone, not from the data.",
        "",
        f"**Budget.** This release spent ε = {p['epsilon']:g}. Dataset `{manifest['dataset_id']}`: "
        f"total ε = {budget['total']['epsilon']:g}, spent ε = {budget['spent']['epsilon']:g}, "
        f"remaining ε = {budget['remaining']['epsilon']:g}.",
        "",
        "| file | sha256 |",
        "| --- | --- |",
        *(f"| {o['path']} | `{o['sha256']}` |" for o in manifest["outputs"]),
    ])


def _artifact_key(name: str) -> str:
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", name.lower())).strip("-") or "release"


def _parquet_bytes(columns: dict[str, Any], metadata: dict[str, str]) -> bytes:
    table = pa.table({k: pa.array(np.asarray(v, dtype=np.float64)) for k, v in columns.items()})
    table = table.replace_schema_metadata({k.encode(): v.encode() for k, v in metadata.items()})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()
