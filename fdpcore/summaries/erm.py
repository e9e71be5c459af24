"""RKHS-regularised empirical risk minimisation released as a function on a grid (MATH.md §9).

Data are points ``x_i`` in the unit box (one covariate, or two on a tensor grid) with labels
``y_i``, grouped into privacy units. The hypothesis space is ``H_{C^eta}`` of a public kernel
``C`` on the grid (points snapped to their nearest node, record-wise). With
``f = sum_j theta_j phi_j`` and ``beta_j = theta_j lambda_j^(-eta/2)`` the problem is a
ridge-penalised linear model in the features ``Psi_ij = lambda_j^(eta/2) phi_j(x_i)``:

.. math:: \\min_\\beta\\ \\frac1n\\sum_u\\frac1{m_u}\\sum_{i\\in u}\\ell((\\Psi\\beta)_i,y_i)+\\psi\\|\\beta\\|_2^2 .

Losses: ``ridge`` (squared, labels clipped to ``[-B_y, B_y]``, closed form), ``logistic`` (Newton)
and ``hinge`` (Newton on smoothed hinges), labels ``±1`` for the last two. Each solve is run
until a *certified* optimality gap ``F(beta) - F* <= tolerance`` (gradient bound
``||grad F||^2 / (4 psi)`` for the smooth losses, the duality gap for hinge); strong convexity then
gives ``||f - f_hat||_{C^eta} <= sqrt(tolerance / psi)``, and the sensitivity used for the noise
adds ``2 sqrt(tolerance / psi)`` to the exact-minimiser bound ``M kappa / (psi n)`` of MATH.md §9.

A unit contributes the average of its points' loss terms: the stability argument of §9 then
holds unchanged (``docs/proofs/preprocess.points.unit_average@1.md``). Noise: ICLP (Laplace on
whitened coefficients, pure DP) or a Gaussian process ``GP(0, C)`` (approximate DP), through
:class:`fdpcore.summaries.kde.PointPlan` and :func:`fdpcore.summaries.kde.draw_point_release`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from fdpcore import _validate
from fdpcore._typing import ArrayLike, NDArrayFloat, NDArrayInt
from fdpcore.basis.grids import Grid
from fdpcore.errors import DomainError, PrivacyParameterError
from fdpcore.summaries.kde import (
    PointPlan,
    PointSpace,
    _calibrate,
    _unit_points,
    draw_point_release,
    point_space,
    unit_point_weights,
)

__all__ = [
    "ERM_MECHANISMS",
    "LOSSES",
    "ErmSolution",
    "erm_gp_sensitivity",
    "erm_iclp_sensitivity",
    "erm_lipschitz",
    "erm_rkhs_sensitivity",
    "plan_erm_release",
    "release_erm",
    "solve_erm",
    "summarise_erm",
]

#: Loss names.
LOSSES = ("ridge", "logistic", "hinge")
#: Noise mechanisms: ICLP (pure epsilon-DP) or Gaussian process (epsilon, delta).
ERM_MECHANISMS = ("iclp", "gp")
#: Default certified optimality gap of the solvers.
DEFAULT_TOLERANCE = 1e-9


def _kappa(space: PointSpace, eta: float) -> float:
    """``kappa_eta = sqrt(max_k c_eta(t_k, t_k))``: the sup of the reproducing kernel of ``H_{C^eta}`` on the grid."""
    return float(math.sqrt(float(((space.eigenfunctions**2) @ space.eigenvalues**eta).max())))


def erm_lipschitz(loss: str, *, kappa: float, psi: float, label_bound: float | None = None) -> float:
    """Lipschitz constant ``M`` of an M-admissible loss (formula ``sensitivity.erm.lipschitz@1``, MATH.md §9).

    .. math:: M_{\\rm hinge}=M_{\\rm logistic}=1,\\qquad M_{\\rm ridge}=2B_y\\big(1+\\kappa/\\sqrt\\psi\\big)

    For the squared loss with ``|y| <= B_y``, comparing with ``f = 0`` gives ``||f_hat|| <= B_y/sqrt(psi)``,
    so ``|f_hat(x)| <= kappa B_y / sqrt(psi)`` and ``|d/df (f - y)^2| <= 2 B_y (1 + kappa/sqrt(psi))``.

    >>> erm_lipschitz("hinge", kappa=1.0, psi=0.1), erm_lipschitz("ridge", kappa=1.0, psi=0.25, label_bound=1.0)
    (1.0, 6.0)
    """
    k = _validate.positive_finite("kappa", kappa, privacy=False)
    p = _validate.positive_finite("psi", psi)
    if loss in ("hinge", "logistic"):
        if label_bound is not None:
            raise DomainError(f"label_bound is a parameter of loss 'ridge' only, not {loss!r}")
        return 1.0
    if loss == "ridge":
        if label_bound is None:
            raise PrivacyParameterError("label_bound (None) must be given for loss 'ridge'")
        b = _validate.positive_finite("label_bound", label_bound)
        return 2.0 * b * (1.0 + k / math.sqrt(p))
    raise DomainError(f"loss ({loss!r}) must be one of {list(LOSSES)}")


def erm_rkhs_sensitivity(lipschitz: float, *, kappa: float, psi: float, n: int, tolerance: float = 0.0) -> float:
    """``H_{C^eta}``-norm sensitivity of the regularised minimiser (formula ``sensitivity.erm.rkhs@1``, MATH.md §9).

    .. math:: \\|\\hat f_D-\\hat f_{D'}\\|_{\\mathcal H}\\le\\frac{M\\kappa}{\\psi n}+2\\sqrt{\\mathrm{tol}/\\psi}

    The first term is [HRW]'s bound for exact minimisers (tight over M-admissible losses). The
    second covers solutions with certified gap ``F(beta) - F* <= tol`` on each side:
    ``psi ||beta - beta*||^2 <= F(beta) - F*`` by ``2 psi``-strong convexity.

    >>> erm_rkhs_sensitivity(1.0, kappa=1.0, psi=0.1, n=100)
    0.1
    """
    m = _validate.positive_finite("lipschitz", lipschitz, privacy=False)
    k = _validate.positive_finite("kappa", kappa, privacy=False)
    p = _validate.positive_finite("psi", psi)
    n = _validate.positive_int("n", n)
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise DomainError(f"tolerance ({tolerance!r}) must be finite and >= 0")
    return m * k / (p * n) + 2.0 * math.sqrt(tolerance / p)


def erm_iclp_sensitivity(rkhs_sensitivity: float, space: PointSpace, *, eta: float) -> float:
    """``1,C`` sensitivity of the released function for ICLP noise (formula ``sensitivity.erm.iclp_one_c@1``, MATH.md §9).

    .. math:: \\Delta_{1,C}=\\Delta_{\\mathcal H}\\sqrt{\\mathrm{tr}(C^{\\eta-1})}

    Cauchy-Schwarz, ``sum_j |theta_j|/sqrt(lambda_j) <= ||theta||_{C^eta} (sum_j lambda_j^(eta-1))^(1/2)``;
    it is attained over the ``H_{C^eta}`` ball, so it is the exact supremum given only the ball.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> s = point_space({"name": "matern", "nu": 1.5, "rho": 0.2}, [midpoint_grid(30)])
    >>> round(erm_iclp_sensitivity(1.0, s, eta=1.0) ** 2, 6) == s.n_basis
    True
    """
    e = _validate.positive_finite("eta", eta)
    return float(rkhs_sensitivity * math.sqrt(float(np.sum(space.eigenvalues ** (e - 1.0)))))


def erm_gp_sensitivity(rkhs_sensitivity: float, space: PointSpace, *, eta: float) -> float:
    """Cameron-Martin sensitivity for ``GP(0, C)`` noise (formula ``sensitivity.erm.gp_cm@1``, MATH.md §9).

    .. math:: \\Delta_{C}=\\Delta_{\\mathcal H}\\max_{j\\in\\mathcal J}\\lambda_j^{(\\eta-1)/2}

    ``||h||_C^2 = sum_j theta_j^2/lambda_j <= max_j lambda_j^(eta-1) sum_j theta_j^2/lambda_j^eta``;
    for ``eta >= 1`` the maximum is ``lambda_1^((eta-1)/2)``.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> s = point_space({"name": "matern", "nu": 1.5, "rho": 0.2}, [midpoint_grid(30)])
    >>> erm_gp_sensitivity(2.0, s, eta=1.0)
    2.0
    """
    e = _validate.positive_finite("eta", eta)
    return float(rkhs_sensitivity * float(np.max(space.eigenvalues ** ((e - 1.0) / 2.0))))


@dataclass(frozen=True)
class ErmSolution:
    """A solved ERM problem (pre-noise: never publish it).

    Attributes:
        theta: coefficients of ``f`` on the kept eigenbasis (``J``).
        gap: certified upper bound on ``F(beta) - F*`` (``<=`` the tolerance).
        iterations: solver iterations.
    """

    theta: NDArrayFloat
    gap: float
    iterations: int


def _aggregate(node: NDArrayInt, labels: NDArrayFloat, weights: NDArrayFloat, loss: str) -> tuple[Any, Any, Any]:
    """Merge points at the same node (and label): the objective changes by a constant only."""
    if loss == "ridge":
        keys, inv = np.unique(node, return_inverse=True)
        wsum = np.bincount(inv, weights=weights)
        ybar = np.bincount(inv, weights=weights * labels) / wsum
        return keys, ybar, wsum
    key = node * 2 + (labels > 0)
    keys, inv = np.unique(key, return_inverse=True)
    wsum = np.bincount(inv, weights=weights)
    return keys // 2, np.where(keys % 2 == 1, 1.0, -1.0), wsum


def solve_erm(
    node_index: ArrayLike,
    labels: ArrayLike,
    weights: ArrayLike,
    space: PointSpace,
    *,
    loss: str,
    eta: float,
    psi: float,
    tolerance: float = DEFAULT_TOLERANCE,
) -> ErmSolution:
    """Solve the regularised ERM on snapped points to a certified gap (formula ``estimator.erm.rkhs@1``, MATH.md §9).

    .. math:: \\hat\\beta=\\arg\\min_\\beta\\sum_i w_i\\,\\ell((\\Psi\\beta)_i,y_i)+\\psi\\|\\beta\\|_2^2,
              \\qquad \\Psi_{ij}=\\lambda_j^{\\eta/2}\\phi_j(x_i),\\quad \\theta_j=\\lambda_j^{\\eta/2}\\beta_j

    ``weights`` are ``1/(n m_u)`` (they sum to 1). Ridge: closed form. Logistic: damped Newton.
    Hinge: Newton on Huber-smoothed hinges with decreasing smoothing, certified by the duality
    gap ``P(beta) - D(a)`` of a dual-feasible ``a`` (``D(a) = sum a - ||Psi^T(a y)||^2/(4 psi)``,
    ``0 <= a_i <= w_i``).

    Raises:
        DomainError: the certified gap did not reach ``tolerance`` (raise it, or ``psi``).

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> s = point_space({"name": "matern", "nu": 1.5, "rho": 0.2}, [midpoint_grid(20)])
    >>> sol = solve_erm([2, 15], [-1.0, 1.0], [0.5, 0.5], s, loss="hinge", eta=1.5, psi=0.1)
    >>> f = s.eigenfunctions @ sol.theta
    >>> bool(f[2] < 0 < f[15]), sol.gap <= 1e-9
    (True, True)
    """
    if loss not in LOSSES:
        raise DomainError(f"loss ({loss!r}) must be one of {list(LOSSES)}")
    e = _validate.positive_finite("eta", eta)
    p = _validate.positive_finite("psi", psi)
    tol = _validate.positive_finite("tolerance", tolerance, privacy=False)
    node = np.asarray(node_index, dtype=np.int64)
    y = np.asarray(labels, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if not (node.shape == y.shape == w.shape and node.ndim == 1 and node.shape[0] > 0):
        raise DomainError("node_index, labels and weights must be non-empty 1-D arrays of the same length")
    if not np.all(np.isfinite(y)):
        raise DomainError("labels must be finite")
    keys, yy, ww = _aggregate(node, y, w, loss)
    root = space.eigenvalues ** (e / 2.0)
    psi_mat = space.eigenfunctions[keys] * root  # q x J, q <= 2K distinct (node, label) rows
    if loss == "ridge":
        a = psi_mat.T @ (ww[:, None] * psi_mat) + p * np.eye(root.shape[0])
        b = psi_mat.T @ (ww * yy)
        beta = np.linalg.solve(a, b)
        grad = 2.0 * (a @ beta - b)
        beta, gap, its = beta, float(grad @ grad) / (4.0 * p), 1
    elif loss == "logistic":
        beta, gap, its = _newton_logistic(psi_mat, yy, ww, p, tol)
    else:
        beta, gap, its = _smoothed_hinge(psi_mat, yy, ww, p, tol)
    if not gap <= tol:
        raise DomainError(
            f"tolerance ({tol!r}) must be reachable: the {loss} solver stopped before its certified optimality gap "
            "fell below it; raise erm.tolerance or psi"
        )
    return ErmSolution(np.asarray(root * beta, dtype=np.float64), gap, its)


def _newton_logistic(x: NDArrayFloat, y: NDArrayFloat, w: NDArrayFloat, psi: float, tol: float) -> tuple[NDArrayFloat, float, int]:
    beta = np.zeros(x.shape[1])

    def objective(b: NDArrayFloat) -> float:
        return float(w @ np.logaddexp(0.0, -y * (x @ b)) + psi * b @ b)

    gap = math.inf
    for it in range(1, 201):  # Newton iterations on a J-dimensional problem (quadratic convergence)
        margin = y * (x @ beta)
        grad = x.T @ (w * -y * special.expit(-margin)) + 2.0 * psi * beta
        gap = float(grad @ grad) / (4.0 * psi)
        if gap <= tol / 10.0:
            return beta, gap, it
        curv = w * special.expit(margin) * special.expit(-margin)
        hess = x.T @ (curv[:, None] * x) + 2.0 * psi * np.eye(x.shape[1])
        step = np.linalg.solve(hess, grad)
        f0, t = objective(beta), 1.0
        while objective(beta - t * step) > f0 - 0.25 * t * float(grad @ step) and t > 1e-12:
            t /= 2.0
        beta = beta - t * step
    return beta, gap, 200


def _smoothed_hinge(x: NDArrayFloat, y: NDArrayFloat, w: NDArrayFloat, psi: float, tol: float) -> tuple[NDArrayFloat, float, int]:
    """Newton on Huber-smoothed hinges with a decreasing smoothing ``mu``, certified by the true duality gap.

    With ``u_i = 1 - y_i f_i`` and ``a_i = w_i min(1, max(0, u_i/mu))`` (dual feasible), the gap
    ``P(beta) - D(a)`` bounds ``P(beta) - P*``; at the smoothed optimum it is at most ``mu/4``.
    """
    z = x * y[:, None]  # rows y_i Psi_i
    eye = np.eye(x.shape[1])

    def primal(b: NDArrayFloat) -> float:
        return float(w @ np.maximum(0.0, 1.0 - z @ b) + psi * b @ b)

    def smoothed(b: NDArrayFloat, mu: float) -> float:
        u = 1.0 - z @ b
        h = np.where(u >= mu, u - mu / 2.0, np.where(u > 0.0, u * u / (2.0 * mu), 0.0))
        return float(w @ h + psi * b @ b)

    beta, gap, its, mu = np.zeros(x.shape[1]), math.inf, 0, 0.5
    while True:
        for _ in range(100):  # Newton on the smoothed problem (piecewise quadratic: finitely many pieces)
            u = 1.0 - z @ beta
            grad = -z.T @ (w * np.clip(u / mu, 0.0, 1.0)) + 2.0 * psi * beta
            if float(grad @ grad) / (4.0 * psi) <= tol / 10.0:
                break
            mid = (u > 0.0) & (u < mu)
            hess = (z[mid].T * (w[mid] / mu)) @ z[mid] + 2.0 * psi * eye
            step = np.linalg.solve(hess, grad)
            f0, t = smoothed(beta, mu), 1.0
            while smoothed(beta - t * step, mu) > f0 - 0.25 * t * float(grad @ step) and t > 1e-12:
                t /= 2.0
            beta, its = beta - t * step, its + 1
        a = w * np.clip((1.0 - z @ beta) / mu, 0.0, 1.0)
        v = z.T @ a
        gap = primal(beta) - (float(a.sum()) - float(v @ v) / (4.0 * psi))
        if gap <= tol or mu <= tol:
            return beta, max(gap, 0.0), its
        mu = max(mu / 10.0, tol)


def _labels(labels: ArrayLike, loss: str, label_bound: float | None) -> NDArrayFloat:
    y = np.asarray(labels, dtype=np.float64)
    if y.ndim != 1 or not np.all(np.isfinite(y)):
        raise DomainError("labels must be a finite 1-D array")
    if loss in ("hinge", "logistic"):
        bad = np.flatnonzero(np.abs(y) != 1.0)
        if bad.size:
            raise DomainError(f"labels (entry {int(bad[0])}) must be -1 or +1 for loss {loss!r}")
        return y
    b = label_bound if label_bound is not None else math.inf
    return np.clip(y, -b, b)  # record-wise clipping to [-B_y, B_y] (privacy-neutral, MATH.md §1.7)


def plan_erm_release(
    axes: Grid | Sequence[Grid],
    kernel: Mapping[str, object],
    *,
    n: int,
    epsilon: float,
    loss: str,
    psi: float,
    eta: float = 1.5,
    mechanism: str = "iclp",
    label_bound: float | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    delta: float = 0.0,
    calibration: str = "analytic",
    secure: bool = True,
) -> PointPlan:
    """Fix the noise of an ERM release from public inputs only (MATH.md §9).

    Args:
        axes: grid on ``[0, 1]`` (one covariate) or two axis grids (two covariates, separable kernel).
        kernel: the kernel ``C`` (e.g. ``{"name": "matern", "nu": 1.5, "rho": 0.2}``); ``H = H_{C^eta}``.
        n: number of privacy units (public).
        epsilon: guarantee (``delta = 0`` for ``iclp``, ``> 0`` for ``gp``).
        delta: see ``epsilon``.
        loss: ``"ridge"``, ``"logistic"`` or ``"hinge"``.
        psi: regularisation weight (fixed a priori).
        eta: power of the kernel (``eta > 1 + 1/beta`` keeps the ICLP bound grid-uniform).
        mechanism: ``"iclp"`` (Laplace, pure) or ``"gp"`` (Gaussian process, approximate).
        label_bound: ``B_y`` (ridge only); labels are clipped to ``[-B_y, B_y]``.
        calibration: ``"analytic"`` or ``"classical"`` Gaussian calibration (``gp`` only).
        secure: OpenDP's floating-point-safe samplers; ``False`` uses NumPy (simulations only).
        tolerance: certified optimality gap of the solver (its slack is added to the sensitivity).

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> p = plan_erm_release(midpoint_grid(30), {"name": "matern", "nu": 1.5, "rho": 0.2}, n=200, epsilon=1.0,
    ...                      loss="hinge", psi=0.05, secure=False)
    >>> p.sensitivity_formula, p.parameters["lipschitz"]
    ('sensitivity.erm.iclp_one_c@1', 1.0)
    """
    grids = (axes,) if isinstance(axes, Grid) else tuple(axes)
    n = _validate.positive_int("n", n)
    eps = _validate.positive_finite("epsilon", epsilon)
    dl = _validate.delta_value(delta)
    e = _validate.positive_finite("eta", eta)
    if e < 1.0:
        raise PrivacyParameterError(f"eta ({eta!r}) must be >= 1 (MATH.md §9)")
    p = _validate.positive_finite("psi", psi)
    tol = _validate.positive_finite("tolerance", tolerance, privacy=False)
    if mechanism not in ERM_MECHANISMS:
        raise DomainError(f"mechanism ({mechanism!r}) must be one of {list(ERM_MECHANISMS)}")
    space = point_space(kernel, grids)
    kappa = _kappa(space, e)
    m = erm_lipschitz(loss, kappa=kappa, psi=p, label_bound=label_bound)
    exact_h = erm_rkhs_sensitivity(m, kappa=kappa, psi=p, n=n)
    used_h = erm_rkhs_sensitivity(m, kappa=kappa, psi=p, n=n, tolerance=tol)
    gaussian = mechanism == "gp"
    if gaussian and dl == 0.0:
        raise PrivacyParameterError("delta (0.0) must be > 0 for mechanism 'gp' (Gaussian noise)")
    if gaussian:
        sens, paper, sid, norm = (erm_gp_sensitivity(used_h, space, eta=e), erm_gp_sensitivity(exact_h, space, eta=e),
                                  "sensitivity.erm.gp_cm@1", "Cameron-Martin (C)")
    else:
        sens, paper, sid, norm = (erm_iclp_sensitivity(used_h, space, eta=e), erm_iclp_sensitivity(exact_h, space, eta=e),
                                  "sensitivity.erm.iclp_one_c@1", "1,C")
    cal = _calibrate(sens, eps, dl, space.n_basis, gaussian=gaussian, calibration=calibration, secure=secure)
    grid_ids = {"grid.midpoint@1" if g.rule == "midpoint" else "grid.trapezoid@1" for g in grids}
    ids = {*grid_ids, "eigen.weighted_kl@1", "preprocess.points.unit_average@1", "estimator.erm.rkhs@1",
           "sensitivity.erm.lipschitz@1", "sensitivity.erm.rkhs@1", sid, "noise.whitened.expected_sq_l2@1",
           "kernel.power_trace@1",
           f"calibration.gaussian.{calibration}@1" if gaussian else "calibration.iclp.laplace_whitened@1",
           *(("eigen.tensor_kron@1",) if len(grids) == 2 else ())}
    params: dict[str, Any] = {
        "loss": loss, "eta": e, "psi": p, "kernel": space.kernel, "dim": len(grids), "kappa_eta": kappa,
        "lipschitz": m, "label_bound": label_bound, "rkhs_sensitivity": used_h, "rkhs_sensitivity_exact_minimiser": exact_h,
        "tolerance": tol, "snapping": "each covariate point to its nearest grid node (record-wise)",
        "calibration": calibration if gaussian else None, "rho": cal.rho if gaussian else None,  # type: ignore[union-attr]
    }
    return PointPlan("erm", mechanism, space, n, eps, dl, sens, sid, paper, sid, norm, cal, params, tuple(sorted(ids)))


def summarise_erm(points: ArrayLike, labels: ArrayLike, unit_codes: ArrayLike, plan: PointPlan) -> NDArrayFloat:
    """Solve the plan's ERM and return the pre-noise whitened coordinates ``theta_j / sqrt(lambda_j)`` (never publish).

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> p = plan_erm_release(midpoint_grid(20), {"name": "matern", "nu": 1.5, "rho": 0.2}, n=2, epsilon=1.0,
    ...                      loss="ridge", psi=0.1, label_bound=1.0, secure=False)
    >>> summarise_erm([[0.1], [0.9]], [-3.0, 0.5], [0, 1], p).shape == (p.space.n_basis,)
    True
    """
    space = plan.space
    par = plan.parameters
    n, w = unit_point_weights(unit_codes)
    x = _unit_points(points, space.dim)
    y = _labels(labels, par["loss"], par["label_bound"])
    if not (x.shape[0] == y.shape[0] == w.shape[0]):
        raise DomainError("points, labels and unit_codes must have the same length")
    if n != plan.n:
        raise DomainError(f"the table has {n} privacy units but the plan is for n = {plan.n}")
    sol = solve_erm(space.snap(x), y, w / n, space, loss=par["loss"], eta=par["eta"], psi=par["psi"],
                    tolerance=par["tolerance"])
    return np.asarray(sol.theta / np.sqrt(space.eigenvalues), dtype=np.float64)


def release_erm(
    points: ArrayLike,
    labels: ArrayLike,
    unit_codes: ArrayLike | None = None,
    *,
    axes: Grid | Sequence[Grid],
    kernel: Mapping[str, object],
    epsilon: float,
    loss: str,
    psi: float,
    eta: float = 1.5,
    mechanism: str = "iclp",
    label_bound: float | None = None,
    delta: float = 0.0,
    draws: int = 1,
    secure: bool = True,
    rng: np.random.Generator | None = None,
) -> tuple[NDArrayFloat, PointPlan]:
    """Release a private RKHS-regularised ERM function on the grid (the Python facade): ``(draws x K, plan)``.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(size=(300, 1)); y = np.where(x[:, 0] > 0.5, 1.0, -1.0)
    >>> v, p = release_erm(x, y, axes=midpoint_grid(30), kernel={"name": "matern", "nu": 1.5, "rho": 0.2},
    ...                    epsilon=1.0, loss="logistic", psi=0.05, secure=False, rng=rng)
    >>> v.shape
    (1, 30)
    """
    x = np.asarray(points, dtype=np.float64)
    codes = np.arange(x.shape[0]) if unit_codes is None else unit_codes
    n, _ = unit_point_weights(codes)
    plan = plan_erm_release(axes, kernel, n=n, epsilon=epsilon, loss=loss, psi=psi, eta=eta, mechanism=mechanism,
                            label_bound=label_bound, delta=delta, secure=secure)
    return draw_point_release(plan, summarise_erm(x, labels, codes, plan), draws=draws, rng=rng), plan
