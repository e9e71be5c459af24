"""Tasks of the private FPCA release (MATH.md §10): plan, centre, summarise, draw, publish.

Ingest and clipping reuse :func:`fdp.tasks.load_curves` and :func:`fdp.tasks.clip_curves`;
the ledger steps are the generic ones of :mod:`fdp.tasks.ledger`.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from pathlib import Path
from typing import Any

import numpy as np
from fdp.schemas import ChargeRequest, CurveBatch
from fdp.schemas.fpca import (
    FpcaGram,
    FpcaManifest,
    FpcaPlanEnvelope,
    FpcaReleaseConfig,
)
from fdp.tasks import _publish
from fdp.tasks._plots import privacy_subtitle, profiles_png, value_label
from fdp.tasks._settings import data_task, noise_task
from fdp.tasks.ledger import close_release, mark_noised, period_and_budget, provenance
from fdp.tasks.planning import fpca_plan, public_reference
from threadpoolctl import threadpool_limits

import fdpcore
from fdpcore.data.preprocess import centre_on_reference, to_source_units
from fdpcore.noise.quantiles import PublicChoice
from fdpcore.summaries.fpca import (
    FpcaPlan,
    draw_fpca_components,
    fpca_gram,
)

PLOT_FILE = "components.png"


@data_task(name="plan-fpca")
def plan_fpca(
    config: FpcaReleaseConfig, n: int | None = None, tau: float | None = None,
    choices: tuple[PublicChoice, ...] | None = None,
) -> FpcaPlanEnvelope:
    """Fix the basis, Sigma, tau, c and the burn-in from public inputs only.

    With ``tau: auto``: ``tau`` is the released value (or 1 for the plan that only prices the charge) and
    ``choices`` the public choice it was bought with (:func:`fdp.tasks.planning.fpca_plan`; ``n`` sizes its split).
    """
    plan = fpca_plan(config, n, tau, choices)  # the same plan `fdp plan` reports (fdp.tasks.planning)
    return FpcaPlanEnvelope(plan=plan, reference=public_reference(config))


@data_task(name="center-curves")
def center_curves(batch: CurveBatch, plan: FpcaPlanEnvelope) -> CurveBatch:
    """Subtract the public reference curve from every aligned record (record-wise; before clipping).

    A unit without an alignable curve stays the zero record: it counts as the reference itself
    (``preprocess.public_reference@1``).
    """
    if plan.reference is None:
        return batch
    return batch.model_copy(update={"data_matrix": centre_on_reference(batch.data_matrix, plan.reference,
                                                                       aligned=batch.aligned)})


@data_task(name="summarise-fpca")
def summarise_fpca(batch: CurveBatch, plan: FpcaPlanEnvelope) -> FpcaGram:
    """``X^T X`` of the clipped curves' basis coefficients (kept in memory only)."""
    p: FpcaPlan = plan.plan
    return FpcaGram(gram=fpca_gram(batch.data_matrix, p.basis, p.tau))


def fpca_charge_request(
    config: FpcaReleaseConfig, config_sha256: str, plan: FpcaPlanEnvelope, counts: dict[str, int]
) -> ChargeRequest:
    """What the ledger is asked to charge: the whole epsilon, in named parts (``tau`` when bought, the components)."""
    p: FpcaPlan = plan.plan
    return ChargeRequest(
        dataset_id=config.dataset.id, summary="fpca", mechanism=config.mechanism, epsilon=p.epsilon, delta=0.0,
        sensitivity_formula="sensitivity.fpca.projection_energy@1",
        budget_splits=p.budget_splits,  # type: ignore[arg-type]
        config_sha256=config_sha256, internal={"counts": counts},
    )


@noise_task(name="draw-components")
def draw_components(
    ledger_url: str, release_id: str, plan: FpcaPlanEnvelope, gram: FpcaGram, noised: bool = False
) -> Any:
    """Mark the charge as final (unless ``tau: auto``'s draw did), then draw the single released state once.

    No retries, cache or persistence.

    The generator is seeded from :mod:`secrets` and lives only inside this task: the seed
    and the chain's intermediate states are never stored, logged or returned.
    """
    if not noised:
        mark_noised(ledger_url, release_id)
    rng = np.random.Generator(np.random.PCG64(secrets.randbits(128)))
    # The sampler makes many tiny LAPACK calls; BLAS worker threads only add wake-up latency
    # (orders of magnitude on a busy machine), so the draw runs single-threaded.
    with threadpool_limits(limits=1, user_api="blas"):
        return draw_fpca_components(plan.plan, gram.gram, rng)


def _fpca_guarantee(p: FpcaPlan, unit: str) -> str:
    """The guarantee text: exactly what the plan's sampler proves (MATH.md §10.3, §10.5)."""
    if not p.private:  # pragma: no cover - refused by the config schema and by plan_fpca_release
        raise fdpcore.InternalError("an FPCA release without a certified guarantee cannot be published")
    text = (f"pure {p.epsilon:g}-differential privacy for each {_publish.unit_noun(unit)} (replace-one adjacency, n public), by the "
            "exponential mechanism with a Bingham base measure")
    eps = f"{p.epsilon_mechanism:g}" if p.public_choices else "epsilon"  # what the tau split leaves, when bought
    if p.public_choices:
        text += f" at epsilon {eps}"
    if p.n_components == 1:
        text += "; the released state is an exact draw"
    else:
        text += (f", applied {p.n_components} times on successively deflated subspaces ({eps}/{p.n_components} "
                 "each, sequential composition); every released state is an exact draw")
    text += (" (in idealised arithmetic: the draws use NumPy's floating-point samplers, not OpenDP's snapping ones — "
             "the only release family that does; sampler.caveat)")
    return text + _publish.bought_text(p.public_choices)


def _components_png(t_source: Any, curves: Any, config: FpcaReleaseConfig, plan: FpcaPlanEnvelope) -> bytes:
    """Each private component as a way curves vary around the public centre, for a reader who is not a statistician.

    The centre is public and is not a mean: the config's reference curve, or the constant ``value_offset`` (the
    components are then those of the second moment about it; docs/summaries/fpca.md). Each panel shows it and
    the reference +/- a public amount (``tau / 2`` in rescaled units, i.e. half the clipping radius) along the
    component; the component's variance is not released, so the size of the band is illustrative only.
    """
    ds = config.dataset
    ref = plan.reference if plan.reference is not None else np.zeros(curves.shape[0])
    base = ds.value_offset + ds.value_scale * np.asarray(ref)
    step = ds.value_scale * plan.plan.tau / 2.0
    centre = "the public reference curve" if plan.reference is not None else f"the constant value_offset {ds.value_offset:g}"
    k = curves.shape[1]
    return profiles_png(
        t_source, base, {f"component {r + 1}": step * curves[:, r] for r in range(k)}, xlabel=ds.time_column,
        ylabel=value_label(ds.value_column),
        title=(f"How curves vary around {centre} (a public centre, not the data's mean curve): each private "
               "component (sign and size illustrative)\n"
               + privacy_subtitle(plan.plan.epsilon, 0.0, _publish.clip_radius_text(plan.plan),
                                  f"the ± lines are τ/2 along each component, in {ds.value_column}'s units")),
        base_label="public reference curve" if plan.reference is not None else f"public value_offset {ds.value_offset:g}",
    )


def public_fpca_release(
    release_id: str, config: FpcaReleaseConfig, plan: FpcaPlanEnvelope, frame: Any, n: int, prov: dict[str, Any]
) -> dict[str, Any]:
    """Manifest and file bytes of an FPCA release (private outputs and public parameters only)."""
    p: FpcaPlan = plan.plan
    ds = config.dataset
    grid = p.basis.grid
    curves = p.basis.functions @ np.asarray(frame)
    t_source, _ = to_source_units(curves[:, 0], grid.grid_points, time_domain=ds.time_domain,
                                  grid_domain=grid.domain_range)
    columns: dict[str, Any] = {"t": grid.grid_points, "t_source": t_source}
    columns.update({f"component_{r + 1}": curves[:, r] for r in range(curves.shape[1])})
    parquet = _publish._parquet_bytes(columns, {"fdp.release_id": release_id, "fdp.dataset_id": ds.id})
    png = _components_png(t_source, curves, config, plan)
    exact = p.exact
    manifest = FpcaManifest(
        release_id=release_id, dataset_id=ds.id, mechanism=config.mechanism, n=n,
        privacy={  # type: ignore[arg-type]
            "epsilon": p.epsilon, "delta": 0.0, "privacy_unit": ds.privacy_unit,
            "guarantee": _fpca_guarantee(p, ds.privacy_unit),
        },
        budget_splits=p.budget_splits,  # type: ignore[arg-type]
        sensitivity={"value": p.sensitivity, "bound": "sensitivity.fpca.projection_energy@1"},  # type: ignore[arg-type]
        parameters={
            "grid": {"rule": grid.rule, "size": grid.size, "domain": list(grid.domain_range),
                     "points": grid.grid_points.tolist()},
            "n_components": p.n_components,
            "basis": {"kernel": p.basis.kernel.as_dict(), "kernel_trace_normalized": True, "n_basis": p.basis.n_basis,
                      "explained": p.basis.explained, "sigma": p.basis.sigma.tolist(),
                      "rule": None if config.basis.length_scale else "tuning.fpca.gaussian_basis@1"},
            "base_measure": {"form": "bingham", "density": "etr(-c V^T Sigma^-1 V) on the Stiefel manifold",
                             "prior_strength": p.prior_strength,
                             "prior_strength_rule": ("fixed" if config.base_measure.prior_strength != "paper" else
                                                     "paper: c = epsilon/2" if not p.public_choices else
                                                     "paper: c = epsilon/2, epsilon of the mechanism (after the tau split)")},
            "density": "p(V) ∝ etr(V^T A V), A = epsilon/(2 tau^2) X^T X - c Sigma^-1 (Haar measure)",
            "tau": p.tau,
            **({"public_choices": [c.as_manifest() for c in p.public_choices]} if p.public_choices else {}),
            "centering": None if config.centering is None else {
                "time": config.centering.time, "value": config.centering.value, "source": config.centering.source},
            "time_domain": list(ds.time_domain),
            "value_offset": ds.value_offset,
            "value_scale": ds.value_scale,
            "release_columns": "component curves B V on the grid, W-orthonormal, in rescaled units; order and signs arbitrary",
        },
        sampler={  # type: ignore[arg-type]
            "distribution": ("vector Bingham on the unit sphere of the basis coefficients" if p.n_components == 1 else
                             f"{p.n_components} successive vector-Bingham exponential mechanisms, each on the orthogonal "
                             "complement of the components already drawn (epsilon/k and c/k each)" if exact else
                             "matrix Bingham on the Stiefel manifold V_{m,k}"),
            "method": ("exact rejection draw (Kent-Ganeiber-Mardia ACG envelope), no chain" if p.n_components == 1 else
                       f"{p.n_components} exact rejection draws (Kent-Ganeiber-Mardia ACG envelope) on successively "
                       "deflated subspaces, no chain" if exact else
                       f"Gibbs sampler (column updates on the null space; {'exact ACG' if p.method == 'acg' else 'Hoff coordinate-scan'} conditional draws)"),
            "kind": "deflation" if exact else p.sampler,  # k = 1 draws exactly whichever sampler was asked for
            "exact": exact,
            "burn_in": None if exact else p.burn_in,
            "burn_in_choice": None if exact else config.sampler.burn_in_choice,
            "expected_energy_shortfall": p.expected_energy_shortfall(n) * ds.value_scale**2,
            "initialization": "Haar-random frame (QR of a Gaussian matrix), independent of the data",
            "rng": "NumPy Generator(PCG64) seeded from the operating system (secrets); seed never stored",
            "caveat": ("DP holds exactly for exact samples. " + ("Every released state is an exact draw. " if exact else
                       "The released state is the last of one chain, with no certified bound on its distance from the "
                       "target: NO differential-privacy guarantee. ")
                       + "Floating-point: samples use NumPy's floating-point normal/uniform/von Mises generators "
                       "(not OpenDP's snapping samplers); the guarantee is for idealised arithmetic."),
        },
        formulas=sorted({
            "grid.midpoint@1" if grid.rule == "midpoint" else "grid.trapezoid@1", "eigen.weighted_kl@1",
            "preprocess.align_linear@2", "preprocess.clip_l2@1", "accuracy.fpca.energy_shortfall@1", *p.formulas,
            *(() if config.basis.length_scale else ("tuning.fpca.gaussian_basis@1",)),
        }),
        outputs=[{"path": name, "sha256": hashlib.sha256(data).hexdigest()}  # type: ignore[misc]
                 for name, data in ((_publish.RELEASE_FILE, parquet), (PLOT_FILE, png))],
        provenance=prov,  # type: ignore[arg-type]
    )
    return {"manifest": manifest.model_dump(mode="json"),
            "files": {_publish.RELEASE_FILE: base64.b64encode(parquet).decode(), PLOT_FILE: base64.b64encode(png).decode()}}


@data_task(name="publish-fpca")
def publish_fpca(
    ledger_url: str, release_id: str, config: FpcaReleaseConfig, config_sha256: str, plan: FpcaPlanEnvelope,
    frame: Any, n: int, out_dir: str,
) -> dict[str, Any]:
    """Close the ledger entry, write Parquet + PNG + manifest, create the Prefect artifacts."""
    public = public_fpca_release(release_id, config, plan, frame, n, provenance(config_sha256, public=True))
    public = close_release(ledger_url, release_id, public)  # first: a crash after this is recovered by a re-run from the ledger
    manifest = _publish.write_release(public, Path(out_dir))
    period, budget = period_and_budget(ledger_url, release_id)
    _publish.create_artifacts(manifest, fpca_release_note(manifest, budget, period, public["files"][PLOT_FILE]), config)
    return manifest


def fpca_release_note(manifest: dict[str, Any], budget: dict[str, Any], period: str, png_b64: str) -> str:
    """Markdown for a non-expert, with the plot of the released curves (private values only)."""
    s, par = manifest["sampler"], manifest["parameters"]
    return "\n".join([
        f"# Private principal components `{manifest['release_id']}`",
        "",
        _publish.protection_text(manifest),
        "",
        f"**What is released.** The span of {par['n_components']} principal component curve(s) of the curves clipped to "
        f"norm {par['tau']:g}, drawn once from the exponential mechanism over {par['basis']['n_basis']} smooth basis "
        "functions. Order and signs of the curves carry no meaning."
        + (f" Also: {low}." if (low := _publish.low_tau_text(manifest)) else ""),
        "",
        f"**Accuracy (stated before release).** The randomness of the mechanism costs about "
        f"{s['expected_energy_shortfall']:.4g} (source units squared) of the energy per record that the best "
        f"{par['n_components']}-dimensional subspace of the basis captures (formula accuracy.fpca.energy_shortfall@1, an "
        "approximation); the smooth base measure adds a bias that depends on the data.",
        "",
        f"**Sampler.** {s['method']}; burn-in: {s['burn_in'] if s['burn_in'] is not None else 'none (exact draw)'}. "
        f"{s['caveat']}",
        "",
        _publish.budget_text(manifest, budget, period),
        "",
        f"![released components](data:image/png;base64,{png_b64})",
        "",
        "| file | sha256 |",
        "| --- | --- |",
        *(f"| {o['path']} | `{o['sha256']}` |" for o in manifest["outputs"]),
    ])
