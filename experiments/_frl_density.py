"""FRL densities for the KDE experiments, built from the library's FRL mean release (MATH.md §4.1).

fdpcore has no FRL density estimator and MATH.md derives no FRL KDE sensitivity. The experiments
build one from library pieces without new mathematics: each record (a point, snapped to its nearest
grid node as ``fdpcore.summaries.kde`` snaps) contributes the curve ``f_i = kappa k_h(., x_i)`` on the grid; the
density estimate is the mean of these curves, and the FRL release of that mean is exactly the
library's FRL mean release (``plan_mean_release(..., estimator="frl")``) on records whose norm is at
most ``tau = max_j ||kappa k_h(., t_j)||_W`` over the grid nodes (public: grid, kernel and bandwidth
only). Its guarantee is therefore the FRL mean's (sensitivity ``2 tau sqrt(M)/n``, replace-one);
the basis is the eigenbasis of the KDE kernel itself and ``M`` the library's PSS rule ``exact``.
"""

from __future__ import annotations

import math

import numpy as np

from fdpcore.basis.grids import Grid
from fdpcore.basis.kernels import kernel_matrix
from fdpcore.summaries.mean import MeanPlan, plan_mean_release, whitened_from_mean_coefficients


def bumps(grid: Grid, bandwidth: float) -> np.ndarray:
    """``K x K``: row ``j`` is the Gaussian bump ``kappa k_h(., t_j)`` of a point at node ``j``, on the grid."""
    spec = {"name": "gaussian", "length_scale": bandwidth}
    kappa = 1.0 / (bandwidth * math.sqrt(2.0 * math.pi))
    return np.asarray(kappa * kernel_matrix(spec, grid.grid_points, grid.grid_points), dtype=np.float64)


def frl_density_plan(grid: Grid, bandwidth: float, *, n: int, epsilon: float, rule: str = "exact") -> tuple[MeanPlan, np.ndarray]:
    """The FRL mean plan of the records' bumps (``tau`` = the largest bump norm) and the bump matrix."""
    b = bumps(grid, bandwidth)
    tau = float(np.max(grid.norm(b)))
    plan = plan_mean_release(grid, {"name": "gaussian", "length_scale": bandwidth}, n=n, tau=tau, epsilon=epsilon,
                             estimator="frl", tuning=rule, secure=False)
    return plan, b


def frl_density_summary(plan: MeanPlan, b: np.ndarray, node_weights: np.ndarray, n: int) -> np.ndarray:
    """Whitened pre-noise summary ``z`` from the number of records at each node (the mean of the bumps)."""
    mean_curve = np.asarray(node_weights, dtype=np.float64) @ b / n
    return whitened_from_mean_coefficients(plan.basis.coefficients(mean_curve), plan)
