"""Data-dependent tuning: exponential-mechanism selection (DP, MATH.md §5.3) and PCV (not DP, §5.2).

Both score a fixed, data-independent list of candidates (``psi`` values, or ``M`` for FRL) on a
data-independent split of the records by position: the first ``n_t`` records train, the rest
validate. The exponential mechanism is ``epsilon_1``-DP and is charged as its own budget split;
PCV is **not** differentially private and exists for simulations only (§5.2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import opendp.prelude as dp

from fdpcore import _validate
from fdpcore._typing import ArrayLike, NDArrayFloat
from fdpcore.errors import DomainError, InternalError

__all__ = [
    "SelectionSpec",
    "exponential_select",
    "selection_score_sensitivity",
    "selection_scores",
    "split_sizes",
]


@dataclass(frozen=True)
class SelectionSpec:
    """A data-independent selection problem (public).

    Attributes:
        method: ``"dp_select"`` (exponential mechanism) or ``"pcv"`` (not DP).
        parameter: ``"psi"`` or ``"n_basis"``.
        candidates: the candidate values, fixed before seeing the data.
        penalties: expected privacy error ``2 Delta^2 tr(C) / eps_2^2`` (or its Gaussian analogue)
            of the final release for each candidate; data-independent.
        n_train, n_val: sizes of the positional split.
        epsilon: ``epsilon_1`` of the selection (0 for PCV).
        score_sensitivity: ``Delta_u`` (0 for PCV).
        folds: number of PCV folds (0 for dp_select).
    """

    method: str
    parameter: str
    candidates: tuple[float, ...]
    penalties: tuple[float, ...]
    n_train: int
    n_val: int
    epsilon: float
    score_sensitivity: float
    folds: int = 0


def split_sizes(n: int, train_fraction: float = 2.0 / 3.0) -> tuple[int, int]:
    """Positional split ``(n_t, n_v)`` with ``n_t = floor(train_fraction * n)`` (data-independent).

    >>> split_sizes(508)
    (338, 170)
    """
    n = _validate.positive_int("n", n, minimum=2)
    if not 0 < train_fraction < 1:
        raise DomainError(f"train_fraction ({train_fraction!r}) must be in (0, 1)")
    n_t = min(max(int(math.floor(train_fraction * n)), 1), n - 1)
    return n_t, n - n_t


def selection_score_sensitivity(tau: float, n_train: int, n_val: int) -> float:
    """Sensitivity of the validation score (formula ``selection.exp_mech.score_sensitivity@1``, MATH.md §5.3).

    .. math:: \\Delta_u = \\max\\Big(\\frac{4\\tau^2}{n_v},\\ \\frac{8\\tau^2}{n_t}\\Big)

    Requires every record clipped to ``tau`` and a 1-Lipschitz estimator with ``||mu_hat||_W <= tau``
    (ICLP-QR shrinkage, ICLP-AR soft thresholding and FRL truncation all qualify).

    >>> selection_score_sensitivity(1.0, 200, 100)
    0.04
    """
    tau = _validate.positive_finite("tau", tau)
    n_train = _validate.positive_int("n_train", n_train)
    n_val = _validate.positive_int("n_val", n_val)
    return max(4.0 * tau * tau / n_val, 8.0 * tau * tau / n_train)


def selection_scores(
    val_coefficients: ArrayLike, val_sq_norms: ArrayLike, fits: ArrayLike, penalties: ArrayLike
) -> NDArrayFloat:
    """Scores ``u(c) = -(1/n_v) sum_val ||X_i - mu_c||_W^2 - pi(c)`` for each candidate ``c`` (MATH.md §5.3).

    Computed in coefficients: ``||X - mu||_W^2 = ||X||_W^2 - 2 theta(X).theta(mu) + ||theta(mu)||^2``
    with ``val_sq_norms`` the full ``||X_i||_W^2`` (so components outside the kept span count too).
    The scores are pre-noise statistics: never publish or log them.

    >>> selection_scores([[1.0, 0.0]], [1.0], [[1.0, 0.0], [0.0, 0.0]], [0.5, 0.0]).tolist()
    [-0.5, -1.0]
    """
    v = np.asarray(val_coefficients, dtype=np.float64)
    sq = np.asarray(val_sq_norms, dtype=np.float64)
    f = np.asarray(fits, dtype=np.float64)
    pen = np.asarray(penalties, dtype=np.float64)
    loss = sq.mean() - 2.0 * (v.mean(axis=0) @ f.T) + np.sum(f * f, axis=1)
    return -(loss + pen)


def exponential_select(
    scores: ArrayLike,
    *,
    epsilon: float,
    sensitivity: float,
    secure: bool = True,
    rng: np.random.Generator | None = None,
) -> int:
    """Exponential mechanism by report-noisy-max with Gumbel noise (formula ``selection.exp_mech.gumbel@1``).

    .. math:: \\Pr[\\hat c = c_l] \\propto \\exp\\Big(\\frac{\\epsilon_1 u(c_l)}{2\\Delta_u}\\Big)
              \\iff \\hat l = \\arg\\max_l\\{u(c_l) + \\mathrm{Gumbel}(2\\Delta_u/\\epsilon_1)\\}

    Secure: OpenDP's ``make_noisy_max`` (max-divergence, Gumbel) with scale ``2 Delta_u / epsilon_1``,
    whose privacy map must certify ``map(Delta_u) <= epsilon_1`` before the draw.

    >>> exponential_select([0.0, 100.0, 0.0], epsilon=1.0, sensitivity=0.01, secure=False,
    ...                    rng=np.random.default_rng(0))
    1
    """
    u = np.asarray(scores, dtype=np.float64)
    if u.ndim != 1 or u.shape[0] == 0 or not np.all(np.isfinite(u)):
        raise DomainError("scores must be a non-empty finite 1-D array")
    eps = _validate.positive_finite("epsilon", epsilon)
    d = _validate.positive_finite("sensitivity", sensitivity)
    scale = 2.0 * d / eps
    if secure:
        meas = _opendp_noisy_max(u.shape[0], scale)
        for _ in range(64):
            if meas.map(d) <= eps:
                break
            scale = math.nextafter(scale, math.inf)
            meas = _opendp_noisy_max(u.shape[0], scale)
        else:  # pragma: no cover
            raise InternalError("OpenDP could not certify the noisy-max scale")
        return int(meas(u.tolist()))
    gen = rng if rng is not None else np.random.default_rng()
    return int(np.argmax(u + gen.gumbel(0.0, scale, size=u.shape[0])))


def _opendp_noisy_max(size: int, scale: float) -> dp.Measurement:
    dp.enable_features("contrib")
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=size)
    return dp.m.make_noisy_max(domain, dp.linf_distance(T=float), dp.max_divergence(), scale=scale)
