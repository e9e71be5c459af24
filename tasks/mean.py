"""Tasks of the mean-curve release."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from fdp.schemas import ChargeRequest, CurveBatch, MeanSummary, NoisePlan, ReleaseConfig
from fdp.tasks import _publish
from fdp.tasks._settings import data_task, noise_task
from fdp.tasks.ledger import close_release, mark_noised, period_and_budget, provenance
from fdp.tasks.planning import mean_plan, public_choices, public_reference, release_grid
from fdp.tasks.preflight import read_and_align

import fdpcore
from fdpcore.data.preprocess import add_reference, centre_on_reference, clip_l2
from fdpcore.noise.quantiles import PublicChoice, draw_public_choice, record_levels, record_norms
from fdpcore.summaries.mean import draw_mean_release, select_mean_parameters, summarise_mean

__all__ = ["charge_request", "check_same_cost", "choose_public_parameters", "clip_curves", "draw_noise", "load_curves",
           "mean_reference", "plan_public_choices", "plan_release", "publish_release", "release_grid", "select_parameters",
           "summarise_curves", "uses_public_choices"]


@data_task(name="load-curves")
def load_curves(config: ReleaseConfig, config_dir: str, value_offset: float | None = None) -> CurveBatch:
    """Ingest the long table, map it publicly onto the grid domain, align record-wise.

    ``value_offset`` overrides the config's (the released DP centre of ``value_offset: auto``); with
    ``auto`` and no override the values are only divided by ``value_scale`` (offset 0).
    """
    return _load(config, config_dir, value_offset)


def mean_reference(config: ReleaseConfig) -> Any:
    """The public reference curve (``centering``) on the release grid in rescaled units, or ``None`` without one.

    The same interpolation as the FPCA, FoSR and covariance centres (:func:`fdpcore.summaries.fpca.reference_on_grid`);
    ``value_offset`` is a number here (``auto`` is refused with a reference) and cancels out of the centred records.
    """
    c, ds = getattr(config, "centering", None), config.dataset
    if c is None or config.summary != "mean":  # covariance/FoSR/FPCA centre with their own blocks, in their tasks
        return None
    if isinstance(ds.value_offset, str):
        raise fdpcore.InternalError("value_offset 'auto' with a centering reference (the schema refuses it)")
    return public_reference(config)


def _load(config: ReleaseConfig, config_dir: str, value_offset: float | None) -> CurveBatch:
    table, aligned, n_outside = read_and_align(config, config_dir, value_offset)
    counts = {
        "n_rows": table.n_rows, "n_rows_outside_time_domain": n_outside, "n_rows_nonfinite": aligned.n_rows_dropped,
        "n_duplicates_merged": aligned.n_duplicates_merged, "n_unalignable_units": aligned.n_unalignable,
    }
    reference = mean_reference(config)  # record-wise, before clipping; an unaligned unit stays 0 (contributes r)
    data = aligned.data_matrix if reference is None else centre_on_reference(aligned.data_matrix, reference,
                                                                             aligned=aligned.aligned)
    return CurveBatch(data_matrix=data, n_samples=aligned.n_samples, counts=counts, unit_ids=aligned.unit_ids,
                      aligned=aligned.aligned)


def recentred(batch: CurveBatch, shift: float) -> CurveBatch:
    """``batch`` (read at ``value_offset`` 0) as if read at the released centre: ``shift`` = centre / value_scale.

    Rescaling, alignment (linear interpolation, end carry, averaging within a unit) and a public reference curve
    are all affine in the values, so each aligned record moves by ``-shift`` and nothing else changes; a unit
    that could not be aligned stays the zero record (the centre itself). Record-wise: one unit, one row.
    """
    if batch.aligned is None:
        raise fdpcore.InternalError("re-centring needs the batch's aligned mask")
    mask = np.asarray(batch.aligned, dtype=bool)
    data = batch.data_matrix - shift * mask[:, None]
    return batch.model_copy(update={"data_matrix": data})


@data_task(name="clip-curves")
def clip_curves(batch: CurveBatch, config: ReleaseConfig, tau: float | None = None) -> CurveBatch:
    """Clip every record to the L2 radius tau (the config's, or the released one of ``tau: auto``)."""
    radius = tau if tau is not None else config.clipping.tau
    if isinstance(radius, str):
        raise fdpcore.InternalError("clip_curves needs the drawn tau of 'tau: auto'")
    clipped, n_clipped = clip_l2(batch.data_matrix, release_grid(config).weights, radius)
    return CurveBatch(data_matrix=clipped, n_samples=batch.n_samples, counts={**batch.counts, "n_clipped": n_clipped},
                      unit_ids=batch.unit_ids, aligned=batch.aligned)


def uses_public_choices(config: Any) -> bool:
    """Whether the release buys ``tau`` or ``value_offset`` with budget (``auto``; any curve release config)."""
    return config.clipping.tau == "auto" or getattr(config.dataset, "value_offset", None) == "auto"


@data_task(name="plan-public-choices")
def plan_public_choices(config: Any, n: int) -> tuple[PublicChoice, ...]:
    """The splits, candidates and quantile levels of ``value_offset: auto`` / ``tau: auto`` (public inputs only).

    Any curve release config: the mean's choices, or ``tau: auto`` of a covariance, FoSR or FPCA release.
    """
    return public_choices(config, n)


@data_task(name="plan-release")
def plan_release(
    config: ReleaseConfig, n: int, tau: float | None = None, choices: tuple[PublicChoice, ...] = ()
) -> NoisePlan:
    """Fix parameters, sensitivity and calibration from public inputs only (OpenDP-certified).

    With ``tuning.rule`` ``dp_select`` or ``pcv`` the plan is pending: :func:`select_parameters`
    finishes it after the charge. With ``tau: auto``, ``tau`` is the released value (or 1 for the
    plan that only prices the charge: the cost and its splits do not depend on ``tau``) and
    ``choices`` are the public choices it was bought with.
    """
    return NoisePlan(plan=mean_plan(config, n, tau, choices))  # the same plan `fdp plan` reports (fdp.tasks.planning)


@noise_task(name="choose-public-parameters")
def choose_public_parameters(
    ledger_url: str, release_id: str, config: Any, config_dir: str, batch: CurveBatch,
    choices: tuple[PublicChoice, ...],
) -> tuple[CurveBatch, tuple[PublicChoice, ...]]:
    """Draw the bought public parameters (after the charge; marks it final first), then clip.

    The centre first (mean only): a DP median of the records' domain averages (source units, read at
    offset 0), then the same records are re-centred on it (:func:`recentred`: no second read of the file, so the
    centre and the mean come from one version of it); then ``tau``: a DP quantile of
    the norms of ``batch``'s records — exactly the records the clip applies to (a covariance, FoSR or
    FPCA release passes them centred by its public or released centre, or raw for a sample-mean
    covariance); they are clipped to it. Every draw is OpenDP's; nothing pre-noise leaves.
    """
    mark_noised(ledger_url, release_id)  # the quantiles depend on the data: never refunded after this
    weights = release_grid(config).weights
    drawn: list[PublicChoice] = []
    tau = config.clipping.tau
    for choice in choices:
        if choice.name == "value_offset":
            levels = record_levels(batch.data_matrix, weights) * config.dataset.value_scale
            centre = draw_public_choice(choice, levels)
            drawn.append(centre)
            batch = recentred(batch, float(centre.value or 0.0) / config.dataset.value_scale)
        else:
            chosen = draw_public_choice(choice, record_norms(batch.data_matrix, weights))
            drawn.append(chosen)
            tau = chosen.value if chosen.value is not None else tau
    if isinstance(tau, str):
        raise fdpcore.InternalError("tau 'auto' without a drawn value")
    clipped, n_clipped = clip_l2(batch.data_matrix, weights, tau)
    out = CurveBatch(data_matrix=clipped, n_samples=batch.n_samples, counts={**batch.counts, "n_clipped": n_clipped},
                     unit_ids=batch.unit_ids)
    return out, tuple(drawn)


@noise_task(name="select-parameters")
def select_parameters(
    ledger_url: str, release_id: str, batch: CurveBatch, plan: NoisePlan, noised: bool = False
) -> NoisePlan:
    """Data-dependent tuning after the charge: the exponential mechanism (marks the charge final first) or PCV."""
    if plan.plan.tuning == "dp_select" and not noised:
        mark_noised(ledger_url, release_id)  # its Gumbel draw depends on the data: never refunded after this
    return NoisePlan(plan=select_mean_parameters(batch.data_matrix, plan.plan, unit_ids=batch.unit_ids))


@data_task(name="summarise-curves")
def summarise_curves(batch: CurveBatch, plan: NoisePlan) -> MeanSummary:
    """Pre-noise whitened coordinates of the estimator (kept in memory only)."""
    return MeanSummary(coefficients=summarise_mean(batch.data_matrix, plan.plan))


@noise_task(name="draw-noise")
def draw_noise(ledger_url: str, release_id: str, plan: NoisePlan, summary: MeanSummary, noised: bool = False) -> Any:
    """Mark the charge as final (unless a selection already did), then draw OpenDP noise once."""
    if not noised:
        mark_noised(ledger_url, release_id)
    return draw_mean_release(plan.plan, summary.coefficients, draws=1)[0]


@data_task(name="publish-release")
def publish_release(
    ledger_url: str, release_id: str, config: ReleaseConfig, config_sha256: str, plan: NoisePlan, values: Any, out_dir: str
) -> dict[str, Any]:
    """Write Parquet + manifest, create the Prefect artifacts, close the ledger entry.

    With a ``centering`` reference the released curve (and its band, plot and file) is the reference plus the
    noisy centred mean (post-processing), and the manifest records the reference and its source.
    """
    reference = mean_reference(config)
    released = values if reference is None else add_reference(values, reference)
    public = _publish.public_release(release_id, config, plan.plan, released, provenance(config_sha256, public=True))
    if reference is not None:
        public = _with_reference(public, config)
    public = close_release(ledger_url, release_id, public)  # first: a crash after this is recovered by a re-run from the ledger
    manifest = _publish.write_release(public, Path(out_dir))
    period, budget = period_and_budget(ledger_url, release_id)
    _publish.create_artifacts(manifest, _publish.release_note(manifest, budget, period, public["files"][_publish.PLOT_FILE]),
                              config)
    return manifest


def _with_reference(public: dict[str, Any], config: ReleaseConfig) -> dict[str, Any]:
    """The public record with ``parameters.centering`` (the public reference and its source) and its formula id."""
    c = config.centering
    if c is None:  # pragma: no cover - called only with a reference
        return public
    manifest = dict(public["manifest"])
    manifest["parameters"] = {**manifest["parameters"], "centering": {
        "time": list(c.time), "value": list(c.value), "source": c.source, "formula": REFERENCE_FORMULA,
        "rule": "public reference r(t) in source units, linearly interpolated onto the grid: every aligned record "
                "minus r before clipping, r added back after the noise (a unit without an alignable curve "
                "contributes r); value_offset cancels out"}}
    manifest["formulas"] = sorted({*manifest["formulas"], REFERENCE_FORMULA})
    return {**public, "manifest": manifest}


#: The formula of the mean's public reference curve (``centering``).
REFERENCE_FORMULA = "preprocess.public_reference@1"


def check_same_cost(request: ChargeRequest, plan: Any) -> None:
    """Refuse to draw when the finished plan's cost differs from what was charged (a broken invariant).

    ``plan`` is any envelope whose ``plan`` has ``budget_splits`` and ``epsilon`` (``delta`` 0 when absent).
    """
    charged = [(s.name, s.epsilon, s.delta) for s in request.budget_splits]
    planned = [(str(s["name"]), float(s["epsilon"]), float(s["delta"])) for s in plan.plan.budget_splits]
    delta = getattr(plan.plan, "delta", 0.0)
    if charged != planned or request.epsilon != plan.plan.epsilon or request.delta != delta:
        raise fdpcore.InternalError(f"the finished plan costs {planned} but the ledger charged {charged}")


def charge_request(config: ReleaseConfig, config_sha256: str, plan: NoisePlan, counts: dict[str, int]) -> ChargeRequest:
    """What the ledger is asked to charge for a mean release (its parts sum exactly to the cost)."""
    p = plan.plan
    return ChargeRequest(
        dataset_id=config.dataset.id, summary=config.summary, mechanism=p.estimator, epsilon=p.epsilon,
        delta=p.delta, rho=p.rho, sensitivity_formula=p.sensitivity_formula, budget_splits=p.budget_splits,
        config_sha256=config_sha256, internal={"counts": counts}, non_private=p.non_private,
    )
