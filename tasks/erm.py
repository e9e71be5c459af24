"""Tasks of the RKHS-regularised ERM release (MATH.md §9); loading, charging, noise and publishing are shared with KDE."""

from __future__ import annotations

from typing import Any

import numpy as np
from fdp.schemas.erm import ErmReleaseConfig
from fdp.schemas.kde import PointBatch, PointPlanEnvelope, PointSummary
from fdp.tasks._settings import data_task
from fdp.tasks.kde import public_point_release, publish_point_release
from fdp.tasks.ledger import provenance
from fdp.tasks.planning import erm_plan, point_value_units

from fdpcore.summaries.erm import summarise_erm
from fdpcore.summaries.kde import PointPlan

WHAT = {"ridge": "kernel ridge regression function", "logistic": "logistic regression function",
        "hinge": "support vector machine decision function"}


@data_task(name="plan-erm")
def plan_erm(config: ErmReleaseConfig, n: int) -> PointPlanEnvelope:
    """Fix the kernel, Lipschitz constant, sensitivity and calibration from public inputs only (OpenDP-certified)."""
    return PointPlanEnvelope(plan=erm_plan(config, n))  # the same plan `fdp plan` reports (fdp.tasks.planning)


@data_task(name="summarise-erm")
def summarise_points_erm(batch: PointBatch, plan: PointPlanEnvelope) -> PointSummary:
    """Solve the ERM to the certified tolerance; pre-noise whitened coordinates (kept in memory only)."""
    return PointSummary(coefficients=summarise_erm(batch.points, batch.labels, batch.unit_codes, plan.plan))


def solver_record(plan: PointPlan) -> dict[str, Any]:
    """What the solver did and what the bound assumes (public: tolerance and method only)."""
    par = plan.parameters
    method = {"ridge": "closed form (linear solve)", "logistic": "damped Newton",
              "hinge": f"Newton on the Huber-smoothed hinge of width {par.get('hinge_smoothing')} (the estimator's loss: "
                       "convex, 1-Lipschitz, M = 1)"}[par["loss"]]
    return {
        "method": method + "; if not certified, Nesterov's accelerated gradient for at most "
        f"{par.get('fallback_iterations')} iterations (estimator.erm.fixed_iterations@1)",
        "tolerance": par["tolerance"],
        "certificate": "gradient bound ||grad F||^2/(4 psi) <= tolerance, or the accelerated-gradient theorem after the "
        "fixed iteration count; hence ||f - f_hat||_{C^eta} <= sqrt(tolerance/psi)",
        "assumption": (
            "The sensitivity M kappa/(psi n) of MATH.md §9 holds for the exact minimiser. The solver's output has an "
            f"optimality gap <= {par['tolerance']:g}, by its certificate or by the accelerated-gradient theorem after "
            "the fixed iteration count (it never stops a release); the noise is calibrated to that bound plus "
            "2 sqrt(tolerance/psi), which covers the solver's distance to the exact minimiser on both neighbours "
            "(idealised arithmetic)."
        ),
    }


@data_task(name="publish-erm")
def publish_erm(ledger_url: str, release_id: str, config: ErmReleaseConfig, config_sha256: str,
                plan: PointPlanEnvelope, values: Any, out_dir: str) -> dict[str, Any]:
    """Publish the private function (and, for classifiers, its sign as the predicted label)."""
    p: PointPlan = plan.plan
    f = np.asarray(values)
    columns: dict[str, Any] = {"value": f + config.label_offset}  # ridge: the public centre added back (post-processing)
    if config.loss != "ridge":
        columns["predicted_label"] = np.where(f >= 0.0, 1.0, -1.0)
    public = public_point_release(
        release_id, config, p, values, provenance(config_sha256, public=True), columns, 1.0,
        {"value_units": point_value_units(config), **({"label_offset": config.label_offset} if config.loss == "ridge" else {})},
        solver_record(p),
    )
    return publish_point_release(ledger_url, release_id, config, public, out_dir, WHAT[config.loss])
