"""RKHS-regularised empirical risk minimisation released as a function on a grid (MATH.md §9).

Data are points ``x_i`` in the unit box (one covariate, or two on a tensor grid) with labels
``y_i``, grouped into privacy units. The hypothesis space is ``H_{C^eta}`` of a public kernel
``C`` on the grid (points snapped to their nearest node, record-wise). With
``f = sum_j theta_j phi_j`` and ``beta_j = theta_j lambda_j^(-eta/2)`` the problem is a
ridge-penalised linear model in the features ``Psi_ij = lambda_j^(eta/2) phi_j(x_i)``:

.. math:: \\min_\\beta\\ \\frac1n\\sum_u\\frac1{m_u}\\sum_{i\\in u}\\ell((\\Psi\\beta)_i,y_i)+\\psi\\|\\beta\\|_2^2 .

Losses: ``ridge`` (squared, labels clipped to ``[-B_y, B_y]``, closed form), ``logistic`` (Newton)
and ``hinge`` -- the Huber-smoothed hinge of width ``HINGE_SMOOTHING`` (Newton with a decreasing
smoothing), convex and 1-Lipschitz like the hinge -- labels ``±1`` for the last two. Every solve
returns a ``beta`` with ``F(beta) - F* <= tolerance``: Newton first, certified by the gradient bound
``||grad F||^2 / (4 psi)``; if it is not certified, Nesterov's accelerated gradient from 0 runs for
at most ``T`` iterations, ``T`` a function of public constants only (formula
``estimator.erm.fixed_iterations@1``), returning the first certified iterate or the ``T``-th, within
the tolerance by the theorem. No data can make the solver stop a release; the plan refuses, before
any charge and for every dataset alike, a configuration whose ``T x K x J`` exceeds ``WORK_LIMIT``.
Strong convexity then gives ``||f - f_hat||_{C^eta} <= sqrt(tolerance / psi)``, and the sensitivity
used for the noise adds ``2 sqrt(tolerance / psi)`` to the exact-minimiser bound ``M kappa / (psi n)``
of MATH.md §9.

``psi`` is fixed a priori or, with ``psi="auto"``, chosen by the public rule :func:`erm_psi_risk_prior` (formula
``tuning.erm.psi.risk_prior@1``): the ``psi`` minimising the release's expected squared noise plus the prior
smoothing bias and sampling variance, from public inputs only; the plan then uses it exactly as that number.

A unit contributes the average of its points' loss terms: the stability argument of §9 then
holds unchanged (``docs/proofs/preprocess.points.unit_average@1.md``). Noise: ICLP (Laplace on
whitened coefficients, pure DP) or a Gaussian process ``GP(0, C)`` (approximate DP), through
:class:`fdpcore.summaries.kde.PointPlan` and :func:`fdpcore.summaries.kde.draw_point_release`.
"""

from __future__ import annotations

import dataclasses
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
from fdpcore.noise.iclp import whitened_expected_sq_error
from fdpcore.privacy.tuning import prior_sq_bias
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
    "ERM_PSIS",
    "ERM_SIGNAL_FRACTION",
    "HINGE_SMOOTHING",
    "LOSSES",
    "MARGIN_SIGNAL",
    "PSI_RULE_FORMULA",
    "ErmPsiChoice",
    "ErmSolution",
    "erm_fallback_iterations",
    "erm_gp_sensitivity",
    "erm_iclp_sensitivity",
    "erm_lipschitz",
    "erm_prior_sq_error",
    "erm_prior_sq_risk",
    "erm_psi_risk_prior",
    "erm_rkhs_sensitivity",
    "plan_erm_release",
    "release_erm",
    "solve_erm",
    "summarise_erm",
    "WORK_LIMIT",
]

#: Loss names.
LOSSES = ("ridge", "logistic", "hinge")
#: Noise mechanisms: ICLP (pure epsilon-DP) or Gaussian process (epsilon, delta).
ERM_MECHANISMS = ("iclp", "gp")
#: Default certified optimality gap of the solvers.
DEFAULT_TOLERANCE = 1e-9
#: Width ``mu_h`` of the Huber-smoothed hinge that ``loss: hinge`` minimises (convex, 1-Lipschitz:
#: ``M = 1``; its minimiser is within ``sqrt(mu_h / (2 psi))`` of the hinge minimiser in ``H_{C^eta}``).
HINGE_SMOOTHING = 1e-4
#: Largest ``T x K x J`` (fallback iterations x grid nodes x basis functions) a plan accepts: each
#: iteration is two ``K x J`` matrix-vector products, so about ``1e11`` multiply-adds in the worst case.
WORK_LIMIT = 5e10
#: Formula id of the public ``psi: auto`` rule (:func:`erm_psi_risk_prior`).
PSI_RULE_FORMULA = "tuning.erm.psi.risk_prior@1"
#: Default public L2 size of a ridge regression function over the domain, and the residual sd of the responses
#: about it, as a fraction of ``label_bound`` (the ``psi: auto`` prior): the clipped responses lie in ``[-B_y, B_y]``, so
#: both are at most ``B_y``; half of it is the log-scale centre of the plausible range ``[B_y/4, B_y]`` (the mean's
#: ``DEFAULT_SIGNAL_FRACTION`` of ``tau``, :mod:`fdpcore.privacy.tuning`).
ERM_SIGNAL_FRACTION = 0.5
#: Prior of ``psi: auto`` for logistic and hinge: a decision function of L2 size 1 (the margin: the hinge's target is
#: ``sign(2p - 1)``, of size 1; a log-odds of 1 is ``p = 0.73``) fitted with the logistic loss's curvature ``1/4`` at
#: the boundary, so the unregularised fit has variance ``1/(1/4) = 4`` per effective dimension and unit.
MARGIN_SIGNAL = 1.0
#: ``psi`` values the ``psi: auto`` rule searches: ``10^(k/8)`` for ``k = -96 .. 24`` (``1e-12 .. 1e3``); values whose
#: solver bound exceeds :data:`WORK_LIMIT` on the grid are left out (a function of public inputs only).
ERM_PSIS = tuple(10.0 ** (k / 8.0) for k in range(-96, 25))


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
    """A solved ERM problem (pre-noise: never publish it, nor its route or iteration count).

    Attributes:
        theta: coefficients of ``f`` on the kept eigenbasis (``J``).
        gap: proven upper bound on ``F(beta) - F*`` (``<=`` the tolerance): the certificate
            ``||grad F||^2 / (4 psi)`` of the returned iterate, or the theorem's bound after ``T`` iterations.
        iterations: solver iterations (Newton, plus accelerated-gradient iterations when it ran).
        route: ``"newton"`` (Newton certified), ``"certified"`` (the accelerated gradient stopped on the
            certificate) or ``"theorem"`` (it ran exactly ``T`` iterations; formula ``estimator.erm.fixed_iterations@1``).
    """

    theta: NDArrayFloat
    gap: float
    iterations: int
    route: str = "newton"


def _curvature(loss: str, smoothing: float) -> float:
    """``c = sup ell''``: ``1/4`` (logistic), ``2`` (squared loss), ``1/mu_h`` (Huber-smoothed hinge)."""
    return {"logistic": 0.25, "ridge": 2.0}.get(loss, 1.0 / smoothing)


def _loss_at_zero(loss: str, smoothing: float, label_bound: float) -> float:
    """``max_y ell(0, y)``: ``log 2``, ``B_y^2`` or ``h_mu(1) = 1 - mu_h/2``."""
    return {"logistic": math.log(2.0), "ridge": label_bound**2}.get(loss, 1.0 - smoothing / 2.0)


def erm_fallback_iterations(
    loss: str, *, kappa_sq: float, psi: float, tolerance: float, objective_at_zero: float,
    smoothing: float = HINGE_SMOOTHING,
) -> int:
    """Iterations ``T`` after which the accelerated gradient is proved within ``tolerance`` (formula ``estimator.erm.fixed_iterations@1``, MATH.md §9).

    .. math:: T=\\Big\\lceil\\frac{\\ln(F(0)/\\mathrm{tol})}{-\\ln(1-\\sqrt{\\mu/L})}\\Big\\rceil,\\qquad
              \\mu=2\\psi,\\quad L=2\\psi+c\\,\\kappa_\\eta^2

    Nesterov's constant-momentum scheme from ``beta_0 = 0`` has ``F(beta_T) - F* <= (1 - sqrt(mu/L))^T
    (F(0) - F* + psi ||beta*||^2)`` and the bracket is ``<= F(0)`` (``psi ||beta*||^2 <= F* `` as
    ``ell >= 0``). ``c = sup ell''`` (``1/4`` logistic, ``2`` ridge, ``1/mu_h`` smoothed hinge);
    ``kappa_sq`` bounds ``sum_i w_i ||Psi_i||^2 >= lambda_max(Psi^T W Psi)``. Every argument is
    public (``objective_at_zero <= max_y ell(0, y)``), so ``T`` is fixed before any data is read.

    >>> erm_fallback_iterations("logistic", kappa_sq=0.5, psi=0.01, tolerance=1e-9, objective_at_zero=math.log(2))
    44
    """
    if loss not in LOSSES:
        raise DomainError(f"loss ({loss!r}) must be one of {list(LOSSES)}")
    k2 = _validate.positive_finite("kappa_sq", kappa_sq, privacy=False)
    p = _validate.positive_finite("psi", psi)
    tol = _validate.positive_finite("tolerance", tolerance, privacy=False)
    f0 = float(objective_at_zero)
    if not (math.isfinite(f0) and f0 >= 0.0):
        raise DomainError(f"objective_at_zero ({objective_at_zero!r}) must be finite and >= 0")
    if f0 <= tol:
        return 0  # F(0) - F* <= F(0) <= tol: beta = 0 is already within the tolerance
    rate = math.sqrt(2.0 * p / (2.0 * p + _curvature(loss, _validate.positive_finite("smoothing", smoothing)) * k2))
    return max(1, math.ceil(math.log(f0 / tol) / -math.log1p(-rate)))


class _NodeLoss:
    """The loss summed per grid node (vectorised): value, derivative and ``sup`` of the curvature per unit weight.

    Logistic and hinge rows of one node carry weights ``w+`` (label +1) and ``w-`` (label -1); the
    ridge rows ``w`` and the weighted mean label. The hinge is Huber-smoothed with width ``mu_h``:
    ``h(u) = 0`` (``u <= 0``), ``u^2/(2 mu_h)`` (``0 < u < mu_h``), ``u - mu_h/2`` (``u >= mu_h``).
    """

    def __init__(self, loss: str, plus: NDArrayFloat, minus: NDArrayFloat, smoothing: float) -> None:
        self.loss, self.plus, self.minus, self.mu = loss, plus, minus, smoothing  # ridge: plus = w, minus = ybar

    def _huber(self, u: NDArrayFloat) -> NDArrayFloat:
        return np.asarray(np.where(u >= self.mu, u - self.mu / 2.0, np.where(u > 0.0, u * u / (2.0 * self.mu), 0.0)))

    def value(self, f: NDArrayFloat) -> float:
        if self.loss == "ridge":
            return float(self.plus @ (f - self.minus) ** 2)
        if self.loss == "logistic":
            return float(self.plus @ np.logaddexp(0.0, -f) + self.minus @ np.logaddexp(0.0, f))
        return float(self.plus @ self._huber(1.0 - f) + self.minus @ self._huber(1.0 + f))

    def derivative(self, f: NDArrayFloat) -> NDArrayFloat:
        if self.loss == "ridge":
            return np.asarray(2.0 * self.plus * (f - self.minus))
        if self.loss == "logistic":
            return np.asarray(self.minus * special.expit(f) - self.plus * special.expit(-f))
        return np.asarray(self.minus * np.clip((1.0 + f) / self.mu, 0.0, 1.0)
                          - self.plus * np.clip((1.0 - f) / self.mu, 0.0, 1.0))

    def total_weight(self) -> float:
        return float(self.plus.sum()) if self.loss == "ridge" else float(self.plus.sum() + self.minus.sum())


def _accelerated(
    x: NDArrayFloat, node_loss: _NodeLoss, psi: float, tol: float, *, kappa_sq: float, early_stop: bool = True
) -> tuple[NDArrayFloat, float, int, str]:
    """Nesterov's accelerated gradient (constant momentum) on ``F``, ``T`` iterations from 0 (formula ``estimator.erm.fixed_iterations@1``).

    ``x`` is the ``q x J`` node-feature matrix (``q`` distinct nodes). Each iteration is two
    matrix-vector products. With ``early_stop`` the first gradient point whose certificate
    ``||grad F||^2/(4 psi)`` is ``<= tol`` is returned (route ``"certified"``); otherwise ``x_T``
    (route ``"theorem"``, bound ``(1 - sqrt(mu/L))^T F(0) <= tol``).
    """
    mu = 2.0 * psi
    curv_bound = _curvature(node_loss.loss, node_loss.mu) * kappa_sq * node_loss.total_weight()
    lip = mu + curv_bound
    f0 = node_loss.value(np.zeros(x.shape[0]))
    steps = erm_fallback_iterations(node_loss.loss, kappa_sq=kappa_sq * node_loss.total_weight(), psi=psi,
                                    tolerance=tol, objective_at_zero=f0, smoothing=node_loss.mu)
    momentum = (math.sqrt(lip) - math.sqrt(mu)) / (math.sqrt(lip) + math.sqrt(mu))
    prev = np.zeros(x.shape[1])
    look = prev.copy()
    for it in range(steps):
        grad = x.T @ node_loss.derivative(x @ look) + mu * look
        cert = float(grad @ grad) / (4.0 * psi)
        if early_stop and cert <= tol:
            return look, cert, it, "certified"
        nxt = look - grad / lip
        look = nxt + momentum * (nxt - prev)
        prev = nxt
    return prev, (1.0 - math.sqrt(mu / lip)) ** steps * f0, steps, "theorem"


def _node_loss(keys: NDArrayInt, yy: NDArrayFloat, ww: NDArrayFloat, loss: str, smoothing: float) -> tuple[NDArrayInt, _NodeLoss]:
    """Per-node weights from the aggregated (node, label) rows: ``(nodes, loss)``."""
    if loss == "ridge":
        return keys, _NodeLoss(loss, ww, yy, smoothing)
    nodes, inv = np.unique(keys, return_inverse=True)
    plus = np.asarray(np.bincount(inv, weights=ww * (yy > 0), minlength=nodes.shape[0]), dtype=np.float64)
    minus = np.asarray(np.bincount(inv, weights=ww * (yy < 0), minlength=nodes.shape[0]), dtype=np.float64)
    return nodes, _NodeLoss(loss, plus, minus, smoothing)


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
    smoothing: float = HINGE_SMOOTHING,
) -> ErmSolution:
    """Solve the regularised ERM on snapped points to a proven gap (formulas ``estimator.erm.rkhs@1``, ``estimator.erm.fixed_iterations@1``, MATH.md §9).

    .. math:: \\hat\\beta=\\arg\\min_\\beta\\sum_i w_i\\,\\ell((\\Psi\\beta)_i,y_i)+\\psi\\|\\beta\\|_2^2,
              \\qquad \\Psi_{ij}=\\lambda_j^{\\eta/2}\\phi_j(x_i),\\quad \\theta_j=\\lambda_j^{\\eta/2}\\beta_j

    ``weights`` are ``1/(n m_u)`` (they sum to 1). ``hinge`` is the Huber-smoothed hinge ``h_mu``
    of width ``smoothing`` (convex and 1-Lipschitz, like the hinge: same ``M = 1``). First ridge:
    closed form; logistic: damped Newton; hinge: Newton with a decreasing smoothing down to
    ``smoothing`` -- each certified by ``||grad F||^2/(4 psi) <= tolerance`` (``2 psi``-strong
    convexity). If that certificate is not reached, Nesterov's accelerated gradient runs from 0 for
    at most ``T`` iterations (:func:`erm_fallback_iterations`, a function of public constants only)
    and returns either the first iterate whose certificate is ``<= tolerance`` or the ``T``-th, whose
    gap is ``<= tolerance`` by the theorem. So a solution within ``tolerance`` is always returned (in
    exact arithmetic): the solver never stops a release. ``ErmSolution.route`` and ``iterations``
    say which (internal only: data-derived).

    Raises:
        DomainError: invalid inputs only (unknown loss, non-positive ``eta``/``psi``/``tolerance``,
            mismatched or empty arrays, non-finite labels, negative weights).

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
    mu_h = _validate.positive_finite("smoothing", smoothing, privacy=False)
    node = np.asarray(node_index, dtype=np.int64)
    y = np.asarray(labels, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if not (node.shape == y.shape == w.shape and node.ndim == 1 and node.shape[0] > 0):
        raise DomainError("node_index, labels and weights must be non-empty 1-D arrays of the same length")
    if not np.all(np.isfinite(y)):
        raise DomainError("labels must be finite")
    if not (np.all(np.isfinite(w)) and np.all(w >= 0.0)):
        raise DomainError("weights must be finite and >= 0")
    keys, yy, ww = _aggregate(node, y, w, loss)
    root = space.eigenvalues ** (e / 2.0)
    psi_mat = space.eigenfunctions[keys] * root  # q x J, q <= 2K distinct (node, label) rows
    if loss == "ridge":
        beta, gap, its = _ridge(psi_mat, yy, ww, p)
    elif loss == "logistic":
        beta, gap, its = _newton_logistic(psi_mat, yy, ww, p, tol)
    else:
        beta, gap, its = _newton_hinge(psi_mat, yy, ww, p, tol, mu_h)
    if gap <= tol:
        return ErmSolution(np.asarray(root * beta, dtype=np.float64), gap, its, "newton")
    nodes, node_loss = _node_loss(keys, yy, ww, loss, mu_h)
    beta, gap, more, route = _accelerated(space.eigenfunctions[nodes] * root, node_loss, p, tol,
                                          kappa_sq=_kappa(space, e) ** 2)
    return ErmSolution(np.asarray(root * beta, dtype=np.float64), gap, its + more, route)


def _certificate(grad: NDArrayFloat, psi: float) -> float:
    """``||grad F||^2/(4 psi) >= F(beta) - F*`` for a ``2 psi``-strongly convex ``F``."""
    return float(grad @ grad) / (4.0 * psi)


def _ridge(x: NDArrayFloat, y: NDArrayFloat, w: NDArrayFloat, psi: float) -> tuple[NDArrayFloat, float, int]:
    a = x.T @ (w[:, None] * x) + psi * np.eye(x.shape[1])
    b = x.T @ (w * y)
    beta = np.asarray(np.linalg.solve(a, b), dtype=np.float64)
    return beta, _certificate(2.0 * (a @ beta - b), psi), 1


def _newton_logistic(x: NDArrayFloat, y: NDArrayFloat, w: NDArrayFloat, psi: float, tol: float) -> tuple[NDArrayFloat, float, int]:
    """Damped Newton; returns the last iterate and *its* certificate (which may exceed ``tol``)."""
    beta = np.zeros(x.shape[1])

    def objective(b: NDArrayFloat) -> float:
        return float(w @ np.logaddexp(0.0, -y * (x @ b)) + psi * b @ b)

    def gradient(b: NDArrayFloat) -> NDArrayFloat:
        return np.asarray(x.T @ (w * -y * special.expit(-y * (x @ b))) + 2.0 * psi * b)

    for it in range(200):  # Newton iterations on a J-dimensional problem (quadratic convergence)
        grad = gradient(beta)
        if _certificate(grad, psi) <= tol / 10.0:
            return beta, _certificate(grad, psi), it
        margin = y * (x @ beta)
        curv = w * special.expit(margin) * special.expit(-margin)
        hess = x.T @ (curv[:, None] * x) + 2.0 * psi * np.eye(x.shape[1])
        step = np.linalg.solve(hess, grad)
        f0, t = objective(beta), 1.0
        while objective(beta - t * step) > f0 - 0.25 * t * float(grad @ step) and t > 1e-12:
            t /= 2.0
        beta = beta - t * step
    return beta, _certificate(gradient(beta), psi), 200


def _newton_hinge(
    x: NDArrayFloat, y: NDArrayFloat, w: NDArrayFloat, psi: float, tol: float, smoothing: float
) -> tuple[NDArrayFloat, float, int]:
    """Newton on Huber-smoothed hinges, smoothing decreased from 0.5 to ``smoothing``; certificate of the last iterate.

    Each level warm-starts the next; the certificate ``||grad F_mu||^2/(4 psi)`` is that of the
    target objective (width ``smoothing``), which is smooth, so the gradient bound applies.
    """
    z = x * y[:, None]  # rows y_i Psi_i
    eye = np.eye(x.shape[1])

    def smoothed(b: NDArrayFloat, mu: float) -> float:
        u = 1.0 - z @ b
        h = np.where(u >= mu, u - mu / 2.0, np.where(u > 0.0, u * u / (2.0 * mu), 0.0))
        return float(w @ h + psi * b @ b)

    def gradient(b: NDArrayFloat, mu: float) -> NDArrayFloat:
        return np.asarray(-z.T @ (w * np.clip((1.0 - z @ b) / mu, 0.0, 1.0)) + 2.0 * psi * b)

    beta, its, mu = np.zeros(x.shape[1]), 0, max(0.5, smoothing)
    while True:
        for _ in range(100):  # Newton on the smoothed problem (piecewise quadratic: finitely many pieces)
            grad = gradient(beta, mu)
            if _certificate(grad, psi) <= tol / 10.0:
                break
            u = 1.0 - z @ beta
            mid = (u > 0.0) & (u < mu)
            hess = (z[mid].T * (w[mid] / mu)) @ z[mid] + 2.0 * psi * eye
            step = np.linalg.solve(hess, grad)
            f0, t = smoothed(beta, mu), 1.0
            while smoothed(beta - t * step, mu) > f0 - 0.25 * t * float(grad @ step) and t > 1e-12:
                t /= 2.0
            beta, its = beta - t * step, its + 1
        if mu <= smoothing:
            return beta, _certificate(gradient(beta, smoothing), psi), its
        mu = max(mu / 10.0, smoothing)


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


def _check_work(loss: str, kappa_sq: float, psi: float, tol: float, smoothing: float, label_bound: float | None,
                space: PointSpace) -> int:
    """The fallback's ``T`` from public inputs; refuse the configuration when ``T x K x J > WORK_LIMIT``."""
    steps, size, f0 = _work(loss, kappa_sq, psi, tol, smoothing, label_bound, space)
    if steps * size <= WORK_LIMIT:
        return steps
    most = int(WORK_LIMIT // size)
    rate = math.sqrt(2.0 * psi / (2.0 * psi + _curvature(loss, smoothing) * kappa_sq))
    fits = (f"erm.tolerance >= {f0 * (1.0 - rate) ** most * 1.0001:.3g} fits" if most >= 1
            else "no tolerance fits this grid")
    raise DomainError(
        f"tolerance ({tol!r}) needs a solver bound of T = {steps} accelerated-gradient iterations on "
        f"{space.eigenfunctions.shape[0]} grid nodes x {space.n_basis} basis functions ({steps * size:.3g} > the work "
        f"limit {WORK_LIMIT:.0e}); {fits}, or raise psi (T grows like 1/sqrt(psi)) or use a coarser grid. "
        "This depends on the configuration only, never on the data (MATH.md §9)"
    )


def _prior_model(loss: str, label_bound: float | None, signal_fraction: float) -> tuple[float, float, float]:
    """``(c, s, r)`` of the ``psi: auto`` prior: the loss's curvature, the target's L2 size, the unregularised fit's sd per unit.

    Ridge: ``c = 2`` (the squared loss is quadratic: exact), ``s = r = signal_fraction * B_y``. Logistic and hinge:
    ``c = 1/4`` (the logistic curvature at the boundary; the hinge has none and is priced as its logistic
    surrogate), ``s = MARGIN_SIGNAL``, ``r = 1/sqrt(c) = 2``.
    """
    f = _validate.positive_finite("signal_fraction", signal_fraction, privacy=False)
    if loss == "ridge":
        if label_bound is None:
            raise PrivacyParameterError("label_bound (None) must be given for loss 'ridge'")
        b = _validate.positive_finite("label_bound", label_bound)
        return 2.0, f * b, f * b
    if loss in ("logistic", "hinge"):
        return 0.25, MARGIN_SIGNAL, 2.0
    raise DomainError(f"loss ({loss!r}) must be one of {list(LOSSES)}")


def erm_prior_sq_error(
    space: PointSpace, *, eta: float, psi: ArrayLike, loss: str, n: int, label_bound: float | None = None,
    signal_fraction: float = ERM_SIGNAL_FRACTION,
) -> NDArrayFloat:
    """Prior squared smoothing bias plus sampling variance of the regularised fit, before noise (formula ``tuning.erm.psi.risk_prior@1``).

    .. math:: B^2(\\psi)+V(\\psi)=s^2\\sum_j\\Big(\\frac{\\psi'}{\\lambda_j^\\eta+\\psi'}\\Big)^2w_j
              +\\frac{r^2}{n}\\sum_j\\Big(\\frac{\\lambda_j^\\eta}{\\lambda_j^\\eta+\\psi'}\\Big)^2,\\qquad \\psi'=\\frac{2\\psi}{c}

    on the unit box, in label units (a decision value for logistic and hinge). For covariates spread uniformly
    over the domain, the population objective ``E l(f(X), Y) + psi ||f||^2`` near its unregularised minimiser
    ``f_0`` is ``(c/2) ||f - f_0||^2 + psi sum_j theta_j^2 / lambda_j^eta`` in the kernel's W-orthonormal
    eigenbasis, so the fit is ``theta_j = lambda_j^eta / (lambda_j^eta + psi') (theta_0j + e_j)`` with ``e_j`` the
    empirical gradient's noise, of variance ``r^2 / n`` (ridge: exactly the kernel ridge shrinkage). The
    prior ``E theta_0j^2 = s^2 w_j`` is that of the mean's rule (:func:`fdpcore.privacy.tuning.prior_sq_bias`,
    ``mixture`` weights); ``(c, s, r)``: ridge ``(2, f B_y, f B_y)`` with ``f = signal_fraction``, logistic and
    hinge ``(1/4, 1, 2)``. Public inputs only; ``psi`` may be an array.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> s = point_space({"name": "matern", "nu": 1.5, "rho": 0.2}, [midpoint_grid(30)])
    >>> e = erm_prior_sq_error(s, eta=1.5, psi=[1e-6, 1e-2, 1e2], loss="ridge", n=100, label_bound=2.0)
    >>> bool(e[1] < e[0]) and bool(e[1] < e[2]) and bool(e[2] < 1.0)  # variance, balance, bias (s^2 = 1)
    True
    """
    c, s, r = _prior_model(loss, label_bound, signal_fraction)
    n = _validate.positive_int("n", n)
    e = _validate.positive_finite("eta", eta)
    p = np.asarray(psi, dtype=np.float64)
    if not (np.all(np.isfinite(p)) and np.all(p > 0.0)):
        raise PrivacyParameterError(f"psi ({psi!r}) must be finite and > 0")
    lam = space.eigenvalues
    eff = 2.0 * p / c
    bias = np.asarray(prior_sq_bias(lam, e, eff, signal=s), dtype=np.float64)
    keep = lam**e / (lam**e + eff[..., None])
    return np.asarray(bias + r * r / n * np.sum(keep * keep, axis=-1), dtype=np.float64)


def _noise_sensitivity(space: PointSpace, *, loss: str, eta: float, psi: float, n: int, tolerance: float,
                       label_bound: float | None, gaussian: bool) -> tuple[float, float, float, float, float, float]:
    """``(sensitivity used, exact-minimiser sensitivity, used_h, exact_h, M, kappa)`` at ``psi``: the plan's formulas."""
    kappa = _kappa(space, eta)
    m = erm_lipschitz(loss, kappa=kappa, psi=psi, label_bound=label_bound)
    exact_h = erm_rkhs_sensitivity(m, kappa=kappa, psi=psi, n=n)
    used_h = erm_rkhs_sensitivity(m, kappa=kappa, psi=psi, n=n, tolerance=tolerance)
    norm = erm_gp_sensitivity if gaussian else erm_iclp_sensitivity
    return norm(used_h, space, eta=eta), norm(exact_h, space, eta=eta), used_h, exact_h, m, kappa


def _work(loss: str, kappa_sq: float, psi: float, tol: float, smoothing: float, label_bound: float | None,
          space: PointSpace) -> tuple[int, int, float]:
    """``(T, q x J, F(0))``: the fallback's iterations, the work per iteration and the objective at 0 (public inputs)."""
    f0 = _loss_at_zero(loss, smoothing, label_bound if label_bound is not None else 0.0)
    steps = erm_fallback_iterations(loss, kappa_sq=kappa_sq, psi=psi, tolerance=tol, objective_at_zero=f0,
                                    smoothing=smoothing)
    return steps, space.eigenfunctions.shape[0] * space.n_basis, f0  # q x J with q <= K distinct grid nodes


def _fits_work(loss: str, kappa_sq: float, psi: float, tol: float, smoothing: float, label_bound: float | None,
               space: PointSpace) -> bool:
    """Whether :func:`_check_work` accepts ``psi`` (public inputs only)."""
    steps, size, _ = _work(loss, kappa_sq, psi, tol, smoothing, label_bound, space)
    return steps * size <= WORK_LIMIT


@dataclass(frozen=True)
class ErmPsiChoice:
    """The ``psi`` of ``psi: auto`` (formula ``tuning.erm.psi.risk_prior@1``) and the prior it minimised; all public.

    Attributes:
        psi: the chosen regularisation weight (then used exactly as a numeric ``psi``).
        prior_sq_risk: the minimised prior risk (unit box, label units squared): noise, bias and sampling variance.
        signal: the prior's L2 size ``s`` of the target; ``residual``: the unregularised fit's sd ``r`` per unit.
        curvature: the loss curvature ``c`` of the prior (``psi' = 2 psi / c``).
        rule, formula_id: ``"risk_prior"`` and :data:`PSI_RULE_FORMULA`.
    """

    psi: float
    prior_sq_risk: float
    signal: float
    residual: float
    curvature: float
    rule: str = "risk_prior"
    formula_id: str = PSI_RULE_FORMULA


def _noise_per_sensitivity(space: PointSpace, epsilon: float, delta: float, *, gaussian: bool, calibration: str) -> float:
    """``E||noise||_W^2`` per unit sensitivity squared: ``2 tr C / epsilon^2`` (Laplace) or ``(sigma/Delta)^2 tr C`` (GP)."""
    cal = _calibrate(1.0, epsilon, delta, space.n_basis, gaussian=gaussian, calibration=calibration, secure=False)
    s = cal.scale
    return whitened_expected_sq_error(space.recolour, space.weights, s * s if gaussian else 2.0 * s * s)


def erm_psi_risk_prior(
    space: PointSpace,
    *,
    n: int,
    epsilon: float,
    loss: str,
    eta: float = 1.5,
    mechanism: str = "iclp",
    label_bound: float | None = None,
    delta: float = 0.0,
    calibration: str = "analytic",
    tolerance: float = DEFAULT_TOLERANCE,
    smoothing: float = HINGE_SMOOTHING,
    signal_fraction: float = ERM_SIGNAL_FRACTION,
    psis: Sequence[float] = ERM_PSIS,
) -> ErmPsiChoice:
    """``psi: auto``: the ``psi`` minimising a prior risk of the released function (formula ``tuning.erm.psi.risk_prior@1``).

    .. math:: \\hat\\psi=\\arg\\min_{\\psi\\in\\Psi}\\ B^2(\\psi)+V(\\psi)+\\kappa_\\epsilon\\,\\Delta(\\psi)^2,\\qquad
              \\Delta(\\psi)=\\Big(\\frac{M(\\psi)\\kappa_\\eta}{\\psi n}+2\\sqrt{\\mathrm{tol}/\\psi}\\Big)\\,N_\\eta

    ``B^2 + V`` is :func:`erm_prior_sq_error` (smoothing bias of a target of public size and the sampling
    variance); ``kappa_eps Delta^2`` is the release's expected squared L2 noise ``E||noise||_W^2``, with the
    sensitivity the plan uses at that ``psi`` -- :func:`erm_lipschitz` (``M`` grows like ``1/sqrt(psi)`` for
    ridge), :func:`erm_rkhs_sensitivity` with the solver slack, ``N = sqrt(tr C^(eta-1))`` (ICLP) or
    ``max lambda^((eta-1)/2)`` (GP) -- and ``kappa_eps = 2 tr C / epsilon^2`` (Laplace) or ``(sigma/Delta)^2 tr C``
    (the Gaussian calibration). ``Psi`` is ``psis`` less the values whose solver bound exceeds
    :data:`WORK_LIMIT`. More budget lowers ``kappa_eps``, so the argmin moves to smaller ``psi`` and the minimal
    risk falls as epsilon grows.

    Privacy assumptions: every input is public (kernel and grid through ``space``, ``n`` under replace-one,
    ``epsilon``/``delta``, loss, ``label_bound``, the fixed prior); no data is read, so the choice costs nothing
    and the sensitivity at the chosen ``psi`` is exactly that of a numeric ``psi``.

    Raises:
        DomainError: no candidate ``psi`` fits the solver's work limit on this grid (raise the tolerance).

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> s = point_space({"name": "matern", "nu": 1.5, "rho": 0.2}, [midpoint_grid(50)])
    >>> a = erm_psi_risk_prior(s, n=272, epsilon=1.0, loss="ridge", label_bound=40.0)
    >>> b = erm_psi_risk_prior(s, n=272, epsilon=5.0, loss="ridge", label_bound=40.0)
    >>> b.psi < a.psi and b.prior_sq_risk < a.prior_sq_risk, a.formula_id
    (True, 'tuning.erm.psi.risk_prior@1')
    """
    n = _validate.positive_int("n", n)
    eps = _validate.positive_finite("epsilon", epsilon)
    dl = _validate.delta_value(delta)
    e = _validate.positive_finite("eta", eta)
    tol = _validate.positive_finite("tolerance", tolerance, privacy=False)
    mu_h = _validate.positive_finite("smoothing", smoothing, privacy=False)
    if mechanism not in ERM_MECHANISMS:
        raise DomainError(f"mechanism ({mechanism!r}) must be one of {list(ERM_MECHANISMS)}")
    gaussian = mechanism == "gp"
    if gaussian and dl == 0.0:
        raise PrivacyParameterError("delta (0.0) must be > 0 for mechanism 'gp' (Gaussian noise)")
    c, s, r = _prior_model(loss, label_bound, signal_fraction)
    kappa_sq = _kappa(space, e) ** 2
    grid = [float(_validate.positive_finite("psi", p)) for p in psis]
    cands = np.asarray([p for p in grid if _fits_work(loss, kappa_sq, p, tol, mu_h, label_bound, space)])
    if cands.size == 0:
        raise DomainError(f"psi: auto found no psi in [{min(grid):.3g}, {max(grid):.3g}] whose solver bound fits the work "
                          f"limit {WORK_LIMIT:.0e} on this grid; raise erm.tolerance or use a coarser grid")
    factor = _noise_per_sensitivity(space, eps, dl, gaussian=gaussian, calibration=calibration)
    noise = np.asarray([factor * _noise_sensitivity(space, loss=loss, eta=e, psi=float(p), n=n, tolerance=tol,
                                                    label_bound=label_bound, gaussian=gaussian)[0] ** 2 for p in cands])
    risk = erm_prior_sq_error(space, eta=e, psi=cands, loss=loss, n=n, label_bound=label_bound,
                              signal_fraction=signal_fraction) + noise
    k = int(np.argmin(risk))
    return ErmPsiChoice(float(cands[k]), float(risk[k]), s, r, c)


def erm_prior_sq_risk(plan: PointPlan, *, signal_fraction: float = ERM_SIGNAL_FRACTION) -> float:
    """The prior risk of an ERM plan at its ``psi`` (unit box): ``E||noise||^2`` plus :func:`erm_prior_sq_error`.

    What ``fdp plan`` shows as ``with bias`` (times the source domain's ``sqrt(area)``): for ``psi: auto`` the
    minimum that :func:`erm_psi_risk_prior` found; for a numeric ``psi`` the same prior at that ``psi``. Public inputs
    only; the real bias depends on the (unknown) regression function.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> g, k = midpoint_grid(50), {"name": "matern", "nu": 1.5, "rho": 0.2}
    >>> auto = plan_erm_release(g, k, n=272, epsilon=1.0, loss="ridge", psi="auto", label_bound=40.0, secure=False)
    >>> fixed = plan_erm_release(g, k, n=272, epsilon=1.0, loss="ridge", psi=0.01, label_bound=40.0, secure=False)
    >>> erm_prior_sq_risk(auto) < erm_prior_sq_risk(fixed)
    True
    """
    par = plan.parameters
    return float(plan.expected_sq_l2_error + erm_prior_sq_error(
        plan.space, eta=par["eta"], psi=par["psi"], loss=par["loss"], n=plan.n, label_bound=par["label_bound"],
        signal_fraction=signal_fraction))


def plan_erm_release(
    axes: Grid | Sequence[Grid],
    kernel: Mapping[str, object],
    *,
    n: int,
    epsilon: float,
    loss: str,
    psi: float | str,
    eta: float = 1.5,
    mechanism: str = "iclp",
    label_bound: float | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    delta: float = 0.0,
    calibration: str = "analytic",
    secure: bool = True,
    smoothing: float = HINGE_SMOOTHING,
) -> PointPlan:
    """Fix the noise of an ERM release from public inputs only (MATH.md §9).

    Args:
        axes: grid on ``[0, 1]`` (one covariate) or two axis grids (two covariates, separable kernel).
        kernel: the kernel ``C`` (e.g. ``{"name": "matern", "nu": 1.5, "rho": 0.2}``); ``H = H_{C^eta}``.
        n: number of privacy units (public).
        epsilon: guarantee (``delta = 0`` for ``iclp``, ``> 0`` for ``gp``).
        delta: see ``epsilon``.
        loss: ``"ridge"``, ``"logistic"`` or ``"hinge"``.
        psi: regularisation weight fixed a priori, or ``"auto"``: the public rule :func:`erm_psi_risk_prior`
            (formula ``tuning.erm.psi.risk_prior@1``, recorded in ``parameters["psi_rule"]``), whose ``psi`` then
            sets the sensitivity exactly as the same number would.
        eta: power of the kernel (``eta > 1 + 1/beta`` keeps the ICLP bound grid-uniform).
        mechanism: ``"iclp"`` (Laplace, pure) or ``"gp"`` (Gaussian process, approximate).
        label_bound: ``B_y`` (ridge only); labels are clipped to ``[-B_y, B_y]``.
        calibration: ``"analytic"`` or ``"classical"`` Gaussian calibration (``gp`` only).
        secure: OpenDP's floating-point-safe samplers; ``False`` uses NumPy (simulations only).
        tolerance: proven optimality gap of the solver (its slack is added to the sensitivity).
        smoothing: width ``mu_h`` of the Huber-smoothed hinge (``hinge`` only).

    Raises:
        DomainError: the solver's worst case ``T x K x J`` (fallback iterations x grid nodes x
            basis functions, :func:`erm_fallback_iterations`) exceeds :data:`WORK_LIMIT`; the message
            names ``erm.tolerance`` / ``psi`` and the smallest tolerance that fits. It depends on public
            inputs only, so it is the same for every dataset (and is raised before any charge).

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
    if isinstance(psi, str) and psi != "auto":
        raise PrivacyParameterError(f"psi ({psi!r}) must be a number > 0 or 'auto'")
    fixed = None if isinstance(psi, str) else _validate.positive_finite("psi", psi)
    tol = _validate.positive_finite("tolerance", tolerance, privacy=False)
    if mechanism not in ERM_MECHANISMS:
        raise DomainError(f"mechanism ({mechanism!r}) must be one of {list(ERM_MECHANISMS)}")
    mu_h = _validate.positive_finite("smoothing", smoothing, privacy=False)
    gaussian = mechanism == "gp"
    if gaussian and dl == 0.0:
        raise PrivacyParameterError("delta (0.0) must be > 0 for mechanism 'gp' (Gaussian noise)")
    space = point_space(kernel, grids)
    choice: ErmPsiChoice | None = None
    if fixed is None:  # psi: auto -- public inputs only; the chosen psi is then used exactly as a number would be
        choice = erm_psi_risk_prior(space, n=n, epsilon=eps, loss=loss, eta=e, mechanism=mechanism,
                                    label_bound=label_bound, delta=dl, calibration=calibration, tolerance=tol,
                                    smoothing=mu_h)
        p = choice.psi
    else:
        p = fixed
    sens, paper, used_h, exact_h, m, kappa = _noise_sensitivity(space, loss=loss, eta=e, psi=p, n=n, tolerance=tol,
                                                                label_bound=label_bound, gaussian=gaussian)
    steps = _check_work(loss, kappa**2, p, tol, mu_h, label_bound, space)
    sid, norm = ("sensitivity.erm.gp_cm@1", "Cameron-Martin (C)") if gaussian else ("sensitivity.erm.iclp_one_c@1", "1,C")
    cal = _calibrate(sens, eps, dl, space.n_basis, gaussian=gaussian, calibration=calibration, secure=secure)
    grid_ids = {"grid.midpoint@1" if g.rule == "midpoint" else "grid.trapezoid@1" for g in grids}
    ids = {*grid_ids, "eigen.weighted_kl@1", "preprocess.points.unit_average@1", "estimator.erm.rkhs@1",
           "estimator.erm.fixed_iterations@1",
           "sensitivity.erm.lipschitz@1", "sensitivity.erm.rkhs@1", sid, "noise.whitened.expected_sq_l2@1",
           "kernel.power_trace@1",
           f"calibration.gaussian.{calibration}@1" if gaussian else "calibration.iclp.laplace_whitened@1",
           *(("eigen.tensor_kron@1",) if len(grids) == 2 else ()), *((PSI_RULE_FORMULA,) if choice else ())}
    params: dict[str, Any] = {
        "loss": loss, "eta": e, "psi": p, "kernel": space.kernel, "dim": len(grids), "kappa_eta": kappa,
        "lipschitz": m, "label_bound": label_bound, "rkhs_sensitivity": used_h, "rkhs_sensitivity_exact_minimiser": exact_h,
        "tolerance": tol, "hinge_smoothing": mu_h if loss == "hinge" else None, "fallback_iterations": steps,
        "snapping": "each covariate point to its nearest grid node (record-wise)",
        "calibration": calibration if gaussian else None, "rho": cal.rho if gaussian else None,  # type: ignore[union-attr]
        "psi_rule": "fixed" if choice is None else choice.rule, "psi_formula": None if choice is None else choice.formula_id,
    }
    plan = PointPlan("erm", mechanism, space, n, eps, dl, sens, sid, paper, sid, norm, cal, params, tuple(sorted(ids)))
    # the public prior of tuning.erm.psi.risk_prior@1 and the error under it at this psi (fixed or chosen): what
    # `fdp plan` shows as 'with bias' (root mean square over the domain, label units)
    c, s, r = _prior_model(loss, label_bound, ERM_SIGNAL_FRACTION)
    prior: dict[str, Any] = {"signal_l2": s, "residual_sd": r, "curvature": c,
                             "signal_fraction": ERM_SIGNAL_FRACTION if loss == "ridge" else None,
                             "rms_error_with_bias": math.sqrt(erm_prior_sq_risk(plan))}
    if choice is not None:
        prior["candidates"] = [min(ERM_PSIS), max(ERM_PSIS)]
    return dataclasses.replace(plan, parameters={**params, "psi_prior": prior})


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
                    tolerance=par["tolerance"], smoothing=par.get("hinge_smoothing") or HINGE_SMOOTHING)
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
    psi: float | str,
    eta: float = 1.5,
    mechanism: str = "iclp",
    label_bound: float | None = None,
    label_offset: float = 0.0,
    delta: float = 0.0,
    draws: int = 1,
    secure: bool = True,
    rng: np.random.Generator | None = None,
) -> tuple[NDArrayFloat, PointPlan]:
    """Release a private RKHS-regularised ERM function on the grid (the Python facade): ``(draws x K, plan)``.

    ``psi`` is a number fixed a priori or ``"auto"`` (the public rule :func:`erm_psi_risk_prior`; the plan records
    the ``psi`` it chose in ``parameters["psi"]``). ``label_offset`` (ridge only) is a public centre chosen a priori: it is subtracted from every response
    before the clipping to ``[-label_bound, label_bound]`` and added to the released function (record-wise
    pre-processing and post-processing with a public constant, so the guarantee is the plan's).

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
    c = _validate.finite("label_offset", label_offset)
    if c != 0.0 and loss != "ridge":
        raise DomainError(f"label_offset is a parameter of loss 'ridge' only, not {loss!r}")
    plan = plan_erm_release(axes, kernel, n=n, epsilon=epsilon, loss=loss, psi=psi, eta=eta, mechanism=mechanism,
                            label_bound=label_bound, delta=delta, secure=secure)
    y = np.asarray(labels, dtype=np.float64) - c
    return draw_point_release(plan, summarise_erm(x, y, codes, plan), draws=draws, rng=rng) + c, plan
