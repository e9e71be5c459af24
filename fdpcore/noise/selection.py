"""Data-dependent tuning: exponential-mechanism selection (DP, MATH.md §5.3) and PCV (not DP, §5.2).

Both score a fixed, data-independent list of candidates (``psi`` values, or ``M`` for FRL).
``dp_select`` splits the records by a keyed hash of each unit's own id (:func:`keyed_split`, key
drawn per release from :mod:`secrets` and never stored): replacing one unit moves no other unit
across the split, which the score sensitivity ``selection.exp_mech.score_sensitivity@2`` needs.
The exponential mechanism is ``epsilon_1``-DP and is charged as its own budget split; PCV (folds by
position) is **not** differentially private and exists for simulations only (§5.2).
"""

from __future__ import annotations

import hashlib
import math
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import opendp.prelude as dp

from fdpcore import _validate
from fdpcore._typing import ArrayLike, NDArrayBool, NDArrayFloat
from fdpcore.errors import DomainError, InternalError

__all__ = [
    "SELECTION_KEY_BYTES",
    "TRAIN_FRACTION",
    "SelectionSpec",
    "exponential_select",
    "keyed_split",
    "project_ball",
    "selection_key",
    "selection_normalisers",
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
        n_train: the public normaliser ``m_t = f n`` of the training sums (``dp_select``; the actual
            counts of the keyed-hash split are data and never published), or the positional size of PCV.
        n_val: the public normaliser ``m_v = (1 - f) n`` of the validation sums, likewise.
        epsilon: ``epsilon_1`` of the selection (0 for PCV).
        score_sensitivity: ``Delta_u`` (0 for PCV).
        folds: number of PCV folds (0 for dp_select).
    """

    method: str
    parameter: str
    candidates: tuple[float, ...]
    penalties: tuple[float, ...]
    n_train: float
    n_val: float
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


#: Expected share of the units in the training part of ``dp_select``'s split.
TRAIN_FRACTION = 2.0 / 3.0
#: Length of the per-release split key (drawn from :mod:`secrets`, never stored).
SELECTION_KEY_BYTES = 32


def selection_normalisers(n: int, train_fraction: float = TRAIN_FRACTION) -> tuple[float, float]:
    """Public normalisers ``(m_t, m_v) = (f n, (1 - f) n)`` of ``dp_select``'s split sums (data-independent).

    >>> selection_normalisers(6)
    (4.0, 2.0)
    """
    n = _validate.positive_int("n", n, minimum=2)
    if not 0 < train_fraction < 1:
        raise DomainError(f"train_fraction ({train_fraction!r}) must be in (0, 1)")
    m_t = float(train_fraction * n)
    return m_t, float(n - m_t)


def selection_key(rng: np.random.Generator | None = None) -> bytes:
    """A fresh split key: :func:`secrets.token_bytes` (``rng.bytes`` only for ``secure=False`` simulations).

    The key is a local value of one selection: it is never stored, logged or published.
    """
    return secrets.token_bytes(SELECTION_KEY_BYTES) if rng is None else rng.bytes(SELECTION_KEY_BYTES)


def keyed_split(unit_ids: Sequence[object], key: bytes, train_fraction: float = TRAIN_FRACTION) -> NDArrayBool:
    """Training mask of ``dp_select``'s split: unit ``u`` trains iff ``H_key(u) / 2^64 < f``.

    ``H_key`` is keyed BLAKE2b (8-byte digest) of the unit id's text. Each unit's side depends on its
    own id and the key only, so replacing one unit changes no other unit's side (the premise of
    ``selection.exp_mech.score_sensitivity@2``). The flow passes the dataset's unit ids, the Python
    facade the caller's ``unit_ids`` (default: row numbers).

    >>> keyed_split(["a", "b", "c"], b"k" * 32).tolist() == keyed_split(["c", "b", "a"], b"k" * 32).tolist()[::-1]
    True
    """
    if not 0 < train_fraction < 1:
        raise DomainError(f"train_fraction ({train_fraction!r}) must be in (0, 1)")
    if len(key) < 16:
        raise DomainError(f"key length ({len(key)}) must be >= 16 bytes")
    cut = int(train_fraction * 2**64)
    digests = [int.from_bytes(hashlib.blake2b(str(u).encode(), key=key, digest_size=8).digest(), "big")
               for u in unit_ids]
    return np.asarray(digests, dtype=np.uint64) < np.uint64(cut)


def selection_score_sensitivity(tau: float, n_train: float, n_val: float) -> float:
    """Sensitivity of the selection score (formula ``selection.exp_mech.score_sensitivity@2``, MATH.md §5.3).

    .. math:: \\Delta_u = \\frac{8\\tau^2}{\\min(m_t, m_v)}

    for the score ``u(c) = -||A - B_c||^2 - pi(c)`` of :func:`selection_scores`, with
    ``A = P_tau(S_V / m_v)``, ``B_c = fit_c(P_tau(S_T / m_t))``, a split by :func:`keyed_split` and
    public normalisers ``m_t``, ``m_v``. Requires every record clipped to ``tau`` and a fit that is
    1-Lipschitz and norm-non-increasing (ICLP-QR shrinkage, ICLP-AR soft thresholding and FRL
    truncation all qualify). Proof: ``docs/proofs/selection.exp_mech.score_sensitivity@2.md``.

    >>> selection_score_sensitivity(1.0, 200.0, 100.0)
    0.08
    """
    tau = _validate.positive_finite("tau", tau)
    m_t = _validate.positive_finite("n_train", n_train)
    m_v = _validate.positive_finite("n_val", n_val)
    return 8.0 * tau * tau / min(m_t, m_v)


def project_ball(x: ArrayLike, radius: float) -> NDArrayFloat:
    """Euclidean projection onto the ball of ``radius`` (1-Lipschitz; the identity inside the ball).

    Examples:
        >>> [round(float(v), 12) for v in project_ball([3.0, 4.0], 1.0)]
        [0.6, 0.8]
    """
    v = np.asarray(x, dtype=np.float64)
    norm = float(np.linalg.norm(v))
    return v if norm <= radius else v * (radius / norm)


def selection_scores(val_mean: ArrayLike, fits: ArrayLike, penalties: ArrayLike) -> NDArrayFloat:
    """Scores ``u(c) = -||A - B_c||^2 - pi(c)`` for each candidate ``c`` (MATH.md §5.3, in coefficients).

    ``A`` is the projected validation mean ``P_tau(S_V / m_v)``, ``B_c`` the candidate's fit of the
    projected training mean. With ``m_v`` equal to the validation count and no projection active this
    ranks candidates exactly as the hold-out loss ``(1/n_v) sum_val ||X_i - mu_c||_W^2`` does (the two
    differ by a term that is the same for every candidate). The scores are pre-noise statistics:
    never publish or log them.

    >>> selection_scores([1.0, 0.0], [[1.0, 0.0], [0.0, 0.0]], [0.5, 0.0]).tolist()
    [-0.5, -1.0]
    """
    a = np.asarray(val_mean, dtype=np.float64)
    f = np.asarray(fits, dtype=np.float64)
    pen = np.asarray(penalties, dtype=np.float64)
    scores: NDArrayFloat = -(np.sum((f - a[None, :]) ** 2, axis=1) + pen)
    return scores


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
            if meas.map(d) <= eps:  # type: ignore[no-untyped-call]  # OpenDP's map is untyped
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
