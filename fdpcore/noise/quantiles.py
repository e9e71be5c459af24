"""Public parameters bought with budget: the clipping radius and the centre (MATH.md §1.7, §12.3).

MATH.md §1.7 forbids deriving ``tau`` or the centre from the data *without spending privacy budget
on it*. This module spends it: each parameter is a private output of OpenDP's DP quantile
(``opendp.measurements.make_private_quantile``: the [Smith11] rank score, report-noisy-max with
exponential noise of scale ``2 Delta / epsilon``, i.e. permute-and-flip [MS20]), charged
as its own named budget split before any draw, and then published.

* ``tau: auto`` (formula ``tuning.tau.dp_norm_quantile@2``): the ``alpha``-quantile of the records'
  L2 norms ``||X_i||_W`` (after alignment and the public rescaling, one record per privacy unit), each
  multiplied by an independent log-uniform dither of two candidate steps (:func:`dither_norms`), over a
  public geometric grid of candidates. The level ``alpha`` is fixed from public inputs only
  (:func:`tau_quantile_level`).
* ``value_offset: auto`` (formula ``preprocess.centre.dp_median@1``): the median of the records'
  domain averages ``(sum_k w_k X_i(t_k)) / (sum_k w_k)`` over a public evenly spaced grid of
  candidates in source units.

Both read one number per record, so under replace-one adjacency (``n`` public) a neighbour changes
one input of the quantile; OpenDP's privacy map of the known-size vector domain under the symmetric
distance is evaluated at ``d_in = 2`` (one replacement) and must certify ``<= epsilon`` before the draw.
The draws are the library's, never hand-written; no seed exists to store.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import ClassVar, TypeVar

import numpy as np
import opendp.prelude as dp

from fdpcore import _validate
from fdpcore._typing import ArrayLike, NDArrayFloat
from fdpcore.basis.grids import Grid
from fdpcore.data.preprocess import weighted_norms
from fdpcore.errors import DomainError, InternalError, PrivacyParameterError
from fdpcore.privacy.accounting import exact
from fdpcore.privacy.tuning import default_signal_fraction, stated_signal_fraction

__all__ = [
    "CENTRE_CANDIDATES",
    "DEFAULT_CENTRE_SHARE",
    "DEFAULT_TAU_RANGE",
    "DEFAULT_TAU_SHARE",
    "TAU_DITHER_STEPS",
    "TAU_FORMULA",
    "TAU_PER_DECADE",
    "TAU_RAISE_SHARE",
    "TAU_TARGET_LEVEL",
    "PublicChoice",
    "centre_candidates",
    "a_priori_tau_choice",
    "BOUND_PAYS_FORMULA",
    "bound_pays",
    "centre_choice",
    "default_tau_range",
    "dp_quantile",
    "epsilon_after_choices",
    "equal_parts",
    "dither_norms",
    "draw_public_choice",
    "choice_epsilon",
    "choice_formulas",
    "PaysChoicesFirst",
    "choice_splits",
    "split_epsilon",
    "quantile_rank_margin",
    "record_levels",
    "record_norms",
    "one_draw_with_auto",
    "plan_with_tau",
    "prior_signal_fraction",
    "summary_tau_choice",
    "summary_tau_level",
    "tau_candidates",
    "tau_choice",
    "tau_epsilon",
    "tau_quantile_level",
    "UnitNoise",
]

#: Default share of ``privacy.epsilon`` spent on ``tau: auto`` (10 %).
DEFAULT_TAU_SHARE = 0.1
#: Default share of ``privacy.epsilon`` spent on ``value_offset: auto`` (5 %).
DEFAULT_CENTRE_SHARE = 0.05
#: Default public search range of ``tau`` in units of the a-priori bound ``sqrt(|T|)`` (the norm of a curve
#: whose rescaled values reach +-1 everywhere on a domain of length ``|T|``): two decades below it, and
#: never above it — ``tau: auto`` can only tighten the a-priori radius, so a draw that lands on the flat
#: part of the score above every record costs at most the a-priori noise.
DEFAULT_TAU_RANGE = (0.01, 1.0)
#: Candidates per decade of the ``tau`` grid (consecutive candidates differ by 10^(1/20) = 1.122).
TAU_PER_DECADE = 20
#: Half-width of the log-uniform dither of the norms, in candidate steps (:func:`dither_norms`): 10^(+-2/20) = x/ 1.26.
TAU_DITHER_STEPS = 2
#: Largest share of ``privacy.epsilon`` a public choice may take when ``n`` is too small for its default share.
MAX_SHARE = 0.5
#: Quantile level that ``tau: auto``'s split is raised to make reachable (``tuning.tau.quantile_level@3``).
TAU_TARGET_LEVEL = 0.8
#: Largest share of ``privacy.epsilon`` that raise may take (``tuning.tau.quantile_level@3``).
TAU_RAISE_SHARE = 0.25
#: Number of evenly spaced centre candidates over ``value_offset_range``.
CENTRE_CANDIDATES = 201
#: Failure probability budgeted in the quantile's rank margin (:func:`quantile_rank_margin`).
MARGIN_FAILURE = 0.05
#: Replace-one adjacency as a symmetric distance between known-size vectors.
REPLACE_ONE_D_IN = 2


@dataclass(frozen=True)
class PublicChoice:
    """A public parameter bought with budget: what is charged and, after the draw, what was released.

    Attributes:
        name: ``"tau"`` or ``"value_offset"`` (the budget split's name).
        epsilon: the split's epsilon (pure DP, delta 0).
        formula_id: ``tuning.tau.dp_norm_quantile@2`` or ``preprocess.centre.dp_median@1``.
        alpha: the quantile level (public).
        candidates: the public candidate grid.
        value: the released value (``None`` until drawn); a private output, so it may be published.
    """

    name: str
    epsilon: float
    formula_id: str
    alpha: float
    candidates: tuple[float, ...]
    value: float | None = None

    @property
    def a_priori(self) -> bool:
        """True for ``tau: auto`` that bought nothing: the public upper end of its range (:func:`a_priori_tau_choice`)."""
        return self.epsilon == 0.0

    @property
    def a_priori_reason(self) -> str:
        """Why an a-priori choice bought nothing, as the plan, manifest and guarantee say it (public)."""
        if self.formula_id == BOUND_PAYS_FORMULA:
            return ("with the mean's size stated, buying it could not pay for its split: a draw one dither width above "
                    "the lowest candidate would not beat the upper end with the whole epsilon (tuning.tau.bound_pays@1)")
        return "n * epsilon is too small to buy it"

    def record(self, **fields: object) -> dict[str, object]:
        """The manifest fields every choice has (name, value, split, formula), then ``fields``."""
        return {"name": self.name, "value": self.value, "epsilon": self.epsilon, "delta": 0.0,
                "formula": self.formula_id, **fields}

    def as_manifest(self) -> dict[str, object]:
        """The manifest record of this choice (public: parameters and the private output)."""
        if self.a_priori:
            return self.record(mechanism=f"none: {self.a_priori_reason}, so tau is the public upper end of tau_range "
                                         "(a priori; no data read, nothing charged)")
        return self.record(
            quantile_level=self.alpha,
            candidates={"first": self.candidates[0], "last": self.candidates[-1], "count": len(self.candidates)},
            mechanism="opendp.measurements.make_private_quantile (exponential mechanism, known n)"
                      + (f" of the norms, each times an independent log-uniform dither of +-{TAU_DITHER_STEPS} candidate "
                         "steps (never stored)" if self.formula_id == TAU_FORMULA else ""),
        )


def tau_candidates(lo: float, hi: float, per_decade: int = TAU_PER_DECADE) -> tuple[float, ...]:
    """The public geometric grid ``lo * 10^(k / per_decade)`` up to ``hi`` (both ends included).

    Examples:
        >>> c = tau_candidates(0.1, 10.0, 2)
        >>> [round(x, 4) for x in c]
        [0.1, 0.3162, 1.0, 3.1623, 10.0]
    """
    lo = _validate.positive_finite("tau_range[0]", lo, privacy=False)
    hi = _validate.positive_finite("tau_range[1]", hi, privacy=False)
    if not lo < hi:
        raise DomainError(f"tau_range ({[lo, hi]}) must satisfy 0 < lo < hi")
    per_decade = _validate.positive_int("per_decade", per_decade)
    steps = int(math.ceil(per_decade * math.log10(hi / lo) - 1e-9))
    grid = lo * 10.0 ** (np.arange(steps + 1) / per_decade)
    grid[-1] = hi
    return tuple(float(x) for x in grid)


#: Formula of ``tau: auto``'s draw: the DP quantile of the dithered norms.
TAU_FORMULA = "tuning.tau.dp_norm_quantile@2"


def dither_norms(norms: ArrayLike, candidates: tuple[float, ...]) -> NDArrayFloat:
    """Each norm times ``r^U``, ``U ~ Uniform(-TAU_DITHER_STEPS, TAU_DITHER_STEPS)`` i.i.d., ``r`` the grid's ratio (``tuning.tau.dp_norm_quantile@2``).

    Record-wise and independent of the other records, so the DP quantile of the dithered vector is exactly as
    private as that of the norms. It bounds how many records can fall between two adjacent candidates: the
    dithered log-norms have a density of at most ``1 / (2 TAU_DITHER_STEPS log r)``, so at most a quarter of the
    records are expected between consecutive candidates whatever the data — norms bunched inside one gap of the
    grid (which left the rank score flat over every candidate below them) are spread over four. The factors come
    from a fresh generator seeded from OS entropy, never seeded by the caller or stored.

    >>> d = dither_norms([0.5] * 1000, (0.1, 0.1 * 10 ** 0.05, 1.0))
    >>> bool(d.min() >= 0.5 * 10 ** -0.1 and d.max() <= 0.5 * 10 ** 0.1)
    True
    """
    x = np.asarray(norms, dtype=np.float64)
    if len(candidates) < 2 or not candidates[0] > 0:
        raise DomainError("candidates must be a positive geometric grid of at least 2 values")
    half = TAU_DITHER_STEPS * math.log(candidates[1] / candidates[0])
    return np.asarray(x * np.exp(np.random.default_rng().uniform(-half, half, x.shape)), dtype=np.float64)


def centre_candidates(lo: float, hi: float, count: int = CENTRE_CANDIDATES) -> tuple[float, ...]:
    """``count`` evenly spaced public centre candidates on ``[lo, hi]`` (source units).

    >>> centre_candidates(0.0, 10.0, 3)
    (0.0, 5.0, 10.0)
    """
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise DomainError(f"value_offset_range ({[lo, hi]}) must be finite with lo < hi")
    count = _validate.positive_int("count", count, minimum=2)
    return tuple(float(x) for x in np.linspace(lo, hi, count))


def record_norms(curves: ArrayLike, weights: ArrayLike) -> NDArrayFloat:
    """``||X_i||_W`` of each record (one row per privacy unit); pre-noise, never publish.

    Scaled by each row's largest value first (as the clip), so a finite record never gives ``nan`` and gives
    ``inf`` only when its norm exceeds the float range.

    >>> (record_norms([[3.0, 4.0], [3e200, 4e200]], [1.0, 1.0]) / [1.0, 1e200]).round(12).tolist()
    [5.0, 5.0]
    """
    return weighted_norms(np.asarray(curves, dtype=np.float64), np.asarray(weights, dtype=np.float64))


def record_levels(curves: ArrayLike, weights: ArrayLike) -> NDArrayFloat:
    """Each record's average over the domain, ``(sum_k w_k X_i(t_k)) / sum_k w_k``; pre-noise, never publish.

    Scaled by each row's largest value first, so a finite record never gives ``nan`` (at worst ``+-inf``).

    >>> record_levels([[1.0, 3.0], [1e308, -1e308]], [5.0, 5.0]).tolist()
    [2.0, 0.0]
    """
    x = np.asarray(curves, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    m = np.max(np.abs(x), axis=1, initial=0.0) if x.ndim == 2 else np.zeros(0)
    m = np.where(m > 0, m, 1.0)
    with np.errstate(over="ignore"):
        out: NDArrayFloat = m * (((x / m[:, None]) @ w) / float(w.sum()))
    return out


def quantile_rank_margin(epsilon: float, n_candidates: int, failure: float = MARGIN_FAILURE) -> float:
    """Rank margin ``m_dp = 4 (ln L + ln(1/p)) / epsilon`` of the DP quantile (formula ``tuning.tau.quantile_level@2``).

    OpenDP's known-``n`` quantile score is, in units of its sensitivity under one replacement
    (symmetric distance 2), the distance in ranks between a candidate and the target rank ``alpha n``
    (up to one rank). The exponential mechanism's utility bound ([MS20]; MATH.md §5.3 for the Gumbel
    form) then picks a candidate more than ``2 (ln L + t) / epsilon`` ranks worse than the best
    candidate with probability at most ``exp(-t)``; ``m_dp`` doubles that margin (slack for the
    rounding of ranks and for the best candidate's own distance on a coarse grid) at ``t = ln(1/p)``.
    A target rank at least ``m_dp`` below ``n`` keeps the draw from landing above every record, where
    the score is flat and all larger candidates are equally likely.

    >>> round(quantile_rank_margin(1.0, 65), 2)
    28.68
    """
    epsilon = _validate.positive_finite("epsilon", epsilon)
    n_candidates = _validate.positive_int("n_candidates", n_candidates)
    return 4.0 * (math.log(n_candidates) + math.log(1.0 / failure)) / epsilon


def tau_quantile_level(n: int, epsilon_tau: float, n_candidates: int, unit_noise_rmse: float) -> float:
    """The public quantile level ``alpha`` of ``tau: auto`` (formula ``tuning.tau.quantile_level@2``).

    .. math:: m = \\max\\big(n\\,r_1,\\ m_{dp}\\big),\\qquad \\alpha = \\min\\big(1 - 1/n,\\ \\max(1/2,\\ 1 - m/n)\\big)

    ``r_1`` is the release's expected L2 noise at ``tau = 1`` (the noise is linear in ``tau``). Raising
    ``tau`` by ``d tau`` lowers the clipping bias of a mean, at most ``(1/n) sum_i (||X_i|| - tau)_+``,
    by ``(#clipped / n) d tau`` and raises the noise by ``r_1 d tau``; they balance when about ``n r_1``
    records are clipped (the rule of [AKMV19] for one-dimensional sums, with the functional noise
    factor). ``m_dp`` (:func:`quantile_rank_margin`) keeps the target inside the data. Only public
    inputs enter: ``n``, the split's epsilon, the candidate count and ``r_1`` from the plan.

    >>> round(tau_quantile_level(1000, 1.0, 65, 0.01), 5)
    0.97132
    """
    n = _validate.positive_int("n", n, minimum=2)
    r1 = _validate.positive_finite("unit_noise_rmse", unit_noise_rmse, privacy=False)
    m = max(n * r1, quantile_rank_margin(epsilon_tau, n_candidates))
    return float(min(1.0 - 1.0 / n, max(0.5, 1.0 - m / n)))


def summary_tau_level(summary: str, n: int, epsilon_tau: float, n_candidates: int, *,
                      unit_noise_rmse: float | None = None, x_bound: float | None = None) -> float:
    """The quantile level of ``tau: auto`` for a covariance, FoSR or FPCA release (formula ``tuning.tau.summary_level@1``).

    * ``covariance``: :func:`tau_quantile_level` with ``r_1`` the surface's expected L2 noise at ``tau = 1``
      (MATH.md §6; the noise and the clipping bias are both linear in ``tau^2``, so the balance is that of
      the mean in the variable ``tau^2``, and a quantile of the norms is one of their squares).
    * ``fosr``: :func:`tau_quantile_level` with ``r_1`` the expected L2 noise of ``T2`` at ``tau_Y = 1`` divided
      by ``x_bound = sup ||x_i||_2`` (MATH.md §7: clipping ``Y_i`` moves ``T2`` by at most
      ``||x_i||_2 (||Y_i|| - tau_Y)_+ / n``).
    * ``fpca``: the median, ``1/2`` (MATH.md §10: no additive noise; the exponential mechanism weighs record
      ``i``'s direction by ``epsilon min(||X_i||^2, tau^2) / (2 tau^2)``, which a smaller ``tau`` only raises,
      and ``1/2`` is the lowest level the reliability floor of :func:`choice_epsilon` keeps inside the data).

    Public inputs only.

    >>> summary_tau_level("fpca", 93, 0.6, 21)
    0.5
    >>> summary_tau_level("fosr", 1000, 1.0, 65, unit_noise_rmse=0.02, x_bound=2.0) == tau_quantile_level(1000, 1.0, 65, 0.01)
    True
    """
    if summary == "fpca":
        return 0.5
    if unit_noise_rmse is None:
        raise DomainError(f"summary {summary!r} needs unit_noise_rmse")
    if summary == "covariance":
        return tau_quantile_level(n, epsilon_tau, n_candidates, unit_noise_rmse)
    if summary == "fosr":
        if x_bound is None:
            raise DomainError("summary 'fosr' needs x_bound")
        b = _validate.positive_finite("x_bound", x_bound, privacy=False)
        return tau_quantile_level(n, epsilon_tau, n_candidates, unit_noise_rmse / b)
    raise DomainError(f"summary ({summary!r}) must be 'covariance', 'fosr' or 'fpca' (the mean uses tau_quantile_level)")


def dp_quantile(values: ArrayLike, candidates: tuple[float, ...], *, alpha: float, epsilon: float) -> float:
    """An ``epsilon``-DP ``alpha``-quantile of ``values`` among ``candidates`` (OpenDP exponential mechanism).

    ``values`` holds one number per privacy unit (``n`` public). OpenDP's
    ``make_private_quantile`` on a known-size vector domain is built with the scale ``2 / epsilon``
    and widened until its privacy map at ``d_in = 2`` (replace-one) certifies ``<= epsilon``; the draw
    happens only then. Mark the ledger charge final before calling this (it is a noise draw).

    >>> dp_quantile([1.0] * 100, (0.5, 1.0, 2.0), alpha=0.5, epsilon=5.0) in (0.5, 1.0, 2.0)
    True
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.shape[0] < 2 or not np.all(np.isfinite(x)):
        raise DomainError("values must be a finite 1-D array of at least 2 records")
    eps = _validate.positive_finite("epsilon", epsilon)
    if not 0.0 <= alpha <= 1.0:
        raise DomainError(f"alpha ({alpha!r}) must be in [0, 1]")
    cands = [float(c) for c in candidates]
    if len(cands) < 2 or any(b <= a for a, b in zip(cands, cands[1:], strict=False)):
        raise DomainError("candidates must be at least 2 strictly increasing values")
    meas = _certified_quantile(int(x.shape[0]), cands, float(alpha), eps)
    return float(meas(x.tolist()))


def _certified_quantile(n: int, candidates: list[float], alpha: float, epsilon: float) -> dp.Measurement:
    dp.enable_features("contrib")
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=n)
    scale = 2.0 / epsilon
    for _ in range(64):
        meas = dp.m.make_private_quantile(domain, dp.symmetric_distance(), dp.max_divergence(),
                                          candidates=candidates, alpha=alpha, scale=scale)
        if meas.map(REPLACE_ONE_D_IN) <= epsilon:  # type: ignore[no-untyped-call]  # OpenDP's map is untyped
            return meas
        scale = math.nextafter(scale * (1.0 + 1e-12), math.inf)
    raise InternalError("OpenDP could not certify the quantile's scale")  # pragma: no cover


def default_tau_range(domain_length: float, signal_rms: float | None = None) -> tuple[float, float]:
    """The default search range of ``tau: auto``: ``DEFAULT_TAU_RANGE`` times ``sqrt(|T|)`` (rescaled values in [-1, 1]).

    With a mean's size stated a priori (``signal_rms``, ``tuning.risk.signal_stated@1``) the lower end is raised to
    that mean's norm ``signal_rms * sqrt(|T|)`` (at most one grid step below the upper end): the mean of records
    clipped to a smaller tau has a smaller norm than the stated mean's, so no such candidate is worth its share of the
    quantile's budget (fewer candidates: a cheaper DP quantile). Public inputs only.

    >>> default_tau_range(1.0), default_tau_range(4.0)
    ((0.01, 1.0), (0.02, 2.0))
    >>> default_tau_range(1.0, 0.3), default_tau_range(4.0, 0.001)
    ((0.3, 1.0), (0.02, 2.0))
    """
    r = math.sqrt(_validate.positive_finite("domain_length", domain_length, privacy=False))
    lo, hi = DEFAULT_TAU_RANGE[0] * r, DEFAULT_TAU_RANGE[1] * r
    if signal_rms is not None:
        m = _validate.positive_finite("signal_rms", signal_rms, privacy=False) * r
        lo = min(max(lo, m), hi / 10.0 ** (1.0 / TAU_PER_DECADE))
    return (lo, hi)


def split_epsilon(epsilon: float, share: float) -> float:
    """The epsilon of a named split: ``share * epsilon`` rounded to 4 significant digits (an exact decimal).

    >>> split_epsilon(1.0, 0.1), split_epsilon(0.25, 0.05)
    (0.1, 0.0125)
    """
    epsilon = _validate.positive_finite("epsilon", epsilon)
    if not 0.0 < share < 1.0:
        raise DomainError(f"share ({share!r}) must be in (0, 1)")
    return float(f"{epsilon * share:.4g}")


def choice_epsilon(name: str, n: int, epsilon: float, share: float, n_candidates: int) -> float:
    r"""Epsilon of a public choice: ``share * epsilon``, raised to a reliability floor (``tuning.tau.quantile_level@2``).

    .. math:: F = \frac{2\,m_{dp}(1)}{n} = \frac{8(\ln L + \ln 20)}{n},\qquad
              \epsilon_q = \begin{cases}\max(\text{share}\cdot\epsilon,\ F) & F \le \epsilon/2\\
                                        \epsilon/2 & \epsilon/2 < F \le \epsilon\end{cases}

    ``F`` is the smallest epsilon whose rank margin :func:`quantile_rank_margin` (the exponential mechanism's
    utility bound with a factor 2 of slack) fits below the median (``m_dp <= n/2``); with less, the draw may
    fall outside the data, where the score is flat. When ``F`` is more than half of ``epsilon`` but at most
    ``epsilon``, the choice gets ``MAX_SHARE`` (half) of it: the bound *without* the slack,
    ``2 (ln L + ln 20) / epsilon_q <= n/2``, still keeps the median inside the data with probability
    ``>= 0.95``. Below that (``n epsilon < 8 (ln L + ln 20)``) the choice is refused; ``tau: auto`` then takes
    the public upper end of its range (:func:`a_priori_tau_choice`), ``value_offset: auto`` is refused.
    Public inputs only.

    >>> choice_epsilon("tau", 508, 1.0, 0.1, 41), choice_epsilon("tau", 5080, 1.0, 0.1, 41)
    (0.1057, 0.1)
    >>> choice_epsilon("tau", 93, 1.0, 0.1, 21)  # F = 0.52 > epsilon / 2: half of epsilon
    0.5
    """
    n = _validate.positive_int("n", n, minimum=2)
    base = split_epsilon(epsilon, share)
    floor = 2.0 * quantile_rank_margin(1.0, n_candidates) / n
    if base >= floor:
        return base
    need = _round_up(floor)
    if need <= MAX_SHARE * epsilon:
        return need
    half = split_epsilon(epsilon, MAX_SHARE)
    if half * n >= quantile_rank_margin(1.0, n_candidates):
        return half
    least = quantile_rank_margin(1.0, n_candidates) / (MAX_SHARE * n)
    raise PrivacyParameterError(
        f"{name}: auto needs at least {least:.4g} of privacy.epsilon for its DP quantile alone with n = {n} records and "
        f"{n_candidates} candidates (half of epsilon buys it, and it needs n * epsilon_{name} >= "
        f"{n * least * MAX_SHARE:.1f}); epsilon is {epsilon:g}. Give {name} a public value chosen a priori "
        "(docs/configuration.md: choosing value_offset, value_scale and tau) or raise privacy.epsilon (`fdp plan` "
        "states the least epsilon that covers every part of the release)"
    )


def _round_up(x: float) -> float:
    """``x`` rounded up to 4 significant digits (an exact decimal, never below ``x``).

    >>> _round_up(0.52031), _round_up(0.25)
    (0.5204, 0.25)
    """
    quantum = 10.0 ** (math.floor(math.log10(x)) - 3)
    return float(f"{math.ceil(x / quantum) * quantum:.4g}")


def tau_epsilon(n: int, epsilon: float, share: float, n_candidates: int) -> float:
    r"""Epsilon of ``tau: auto``'s split (formula ``tuning.tau.quantile_level@3``): :func:`choice_epsilon`, raised so the level can reach 0.8.

    .. math:: G = \frac{m_{dp}(1)}{(1 - 0.8)\,n} = \frac{20(\ln L + \ln 20)}{n},\qquad
              \epsilon_\tau = \max\big(\epsilon_q,\ \min(\epsilon/4,\ G)\big)

    ``epsilon_q`` is :func:`choice_epsilon` (share, reliability floor, half of epsilon, refusal: all unchanged).
    With ``epsilon_q`` the rank margin ``m_dp(epsilon_q)`` of :func:`quantile_rank_margin` caps the level at
    ``1 - m_dp / n``; when that forces more than a fifth of the records to be clipped, the split is raised until
    the margin is a fifth of ``n`` (level 0.8), but never above a quarter of epsilon. Clipping a fifth or more of a
    heavy right tail of norms costs a bias that no smoothing removes; the raise costs at most a factor 4/3 of
    noise. Public inputs only: ``n``, ``epsilon``, ``share``, ``L``.

    >>> tau_epsilon(508, 1.0, 0.1, 41), choice_epsilon("tau", 508, 1.0, 0.1, 41)  # 10 % would force level 0.5
    (0.25, 0.1057)
    >>> tau_epsilon(508, 5.0, 0.1, 41), tau_epsilon(100_000, 1.0, 0.1, 41)  # 10 % already reaches 0.8
    (0.5, 0.1)
    >>> tau_epsilon(93, 1.0, 0.1, 21)  # half of epsilon (choice_epsilon's) is above the raise's cap
    0.5
    """
    base = choice_epsilon("tau", n, epsilon, share, n_candidates)
    target = quantile_rank_margin(1.0, n_candidates) / ((1.0 - TAU_TARGET_LEVEL) * n)
    return max(base, min(split_epsilon(epsilon, TAU_RAISE_SHARE), _round_up(target)))


def tau_choice(n: int, epsilon_tau: float, unit_noise_rmse: float, tau_range: tuple[float, float], *,
               alpha: float | None = None) -> PublicChoice:
    """The public plan of ``tau: auto``: its split, candidate grid and quantile level (no data).

    The level is :func:`tau_quantile_level` of ``unit_noise_rmse`` (the mean), or ``alpha`` when given
    (:func:`summary_tau_level`).

    >>> c = tau_choice(508, 0.1, 0.05, (0.01, 1.0))
    >>> c.name, len(c.candidates), round(c.alpha, 3)
    ('tau', 41, 0.5)
    """
    cands = tau_candidates(*tau_range)
    if alpha is None:
        alpha = tau_quantile_level(n, epsilon_tau, len(cands), unit_noise_rmse)
    elif not 0.0 < alpha < 1.0:
        raise DomainError(f"alpha ({alpha!r}) must be in (0, 1)")
    return PublicChoice("tau", epsilon_tau, TAU_FORMULA, alpha, cands)


#: The formula id of :func:`bound_pays`: ``tau: auto`` of a mean of stated size takes the a-priori bound.
BOUND_PAYS_FORMULA = "tuning.tau.bound_pays@1"


def bound_pays(epsilon: float, epsilon_tau: float, tau_range: tuple[float, float]) -> bool:
    r"""Whether a mean of stated size (``tuning.signal_rms``) should take ``tau``'s a-priori bound rather than buy it (``tuning.tau.bound_pays@1``).

    .. math:: \tau_{lo}\,10^{s/d}\ \ge\ \tau_{hi}\,\frac{\epsilon-\epsilon_\tau}{\epsilon}

    With the mean's size stated, the release's expected error (smoothing bias of a mean of that size plus noise,
    minimised over the tuning) depends on ``tau`` and the mechanism's epsilon only through ``tau / epsilon`` (the
    Laplace noise scales as ``tau / epsilon``, the bias does not depend on either), so buying pays exactly when the
    released ``tau`` is below ``tau_hi (epsilon - epsilon_tau) / epsilon`` (``epsilon``: what the mechanism and the
    split share; ``fdp plan``'s break-even). The DP quantile lands no lower than the range's lower end ``tau_lo``
    (raised to the stated mean's norm: a smaller ``tau`` clips the mean itself, and near it most records are
    clipped), and its dithered norms spread a draw ``s = TAU_DITHER_STEPS`` candidate steps (``d = TAU_PER_DECADE``
    per decade: a factor 1.26) either side of its target; where a draw one dither width above ``tau_lo`` would not
    beat the bound, the bound is taken, for free (docs/proofs/tuning.tau.bound_pays@1.md). Public inputs only.

    >>> bound_pays(0.5, 0.25, (0.49, 1.0)), bound_pays(2.0, 0.5, (0.49, 1.0))  # half of epsilon: no; a quarter: buy
    (True, False)
    """
    e = _validate.positive_finite("epsilon", epsilon)
    lo = _validate.positive_finite("tau_range lower end", tau_range[0], privacy=False)
    hi = _validate.positive_finite("tau_range upper end", tau_range[1], privacy=False)
    return bool(lo * 10.0 ** (TAU_DITHER_STEPS / TAU_PER_DECADE) >= hi * (e - epsilon_tau) / e)


def a_priori_tau_choice(tau_range: tuple[float, float], formula: str = "tuning.tau.a_priori_fallback@2") -> PublicChoice:
    """``tau: auto`` when ``n * epsilon`` is too small for its DP quantile: the range's upper end (``tuning.tau.a_priori_fallback@2``).

    ``formula``: why nothing is bought — the default, or :data:`BOUND_PAYS_FORMULA` where a mean of stated size could
    not gain from buying (:func:`bound_pays`); the value, the zero split and the manifest record are the same.

    The upper end of the public search range is the a-priori bound of a rescaled record (values in
    ``[-1, 1]``: ``sqrt(|T|)``), so clipping to it is what a user without budget for the quantile would
    choose. The choice depends on ``n``, ``epsilon`` and the range only (public), reads no data and
    costs nothing: it has no budget split (``epsilon = 0``).

    >>> c = draw_public_choice(a_priori_tau_choice((0.01, 1.0)), [])
    >>> c.value, c.epsilon, c.a_priori
    (1.0, 0.0, True)
    """
    hi = _validate.positive_finite("tau_range upper end", tau_range[1], privacy=False)
    return PublicChoice("tau", 0.0, formula, 1.0, (hi,))


def epsilon_after_choices(epsilon: float, choices: tuple[PublicChoice, ...]) -> float:
    """``epsilon`` minus the public choices' splits, as an exact decimal (the ledger's exact accounting), or raise.

    What is left for the release mechanism itself; the splits and it sum exactly to ``epsilon``.

    >>> epsilon_after_choices(1.0, (PublicChoice("tau", 0.1, "tuning.tau.dp_norm_quantile@2", 0.5, (0.1, 1.0)),))
    0.9
    """
    epsilon = _validate.positive_finite("epsilon", epsilon)
    parts = [c.epsilon for c in choices]
    rest = exact(epsilon) - sum((exact(p) for p in parts), exact(0.0))
    value = float(rest)
    if rest <= 0 or exact(value) != rest:
        raise PrivacyParameterError(
            f"the parts of epsilon bought for public choices ({parts!r}) leave nothing for the release itself out of "
            f"epsilon {epsilon!r}: raise privacy.epsilon, or fix tau / value_offset a priori"
        )
    return value


def equal_parts(epsilon: float, count: int) -> float:
    """The epsilon of each of ``count`` equal parts of a split, as a decimal whose ``count`` copies sum to at most ``epsilon``.

    Sequential composition (``accounting.pure.sequential@1``) of ``count`` draws at the returned epsilon costs at most
    ``epsilon`` exactly (the ledger's decimal arithmetic); the part is ``epsilon / count`` when that is a float's
    shortest decimal, else the next float below it.

    >>> equal_parts(0.1, 4), equal_parts(0.1057, 2)
    (0.025, 0.05285)
    """
    epsilon = _validate.positive_finite("epsilon", epsilon)
    count = _validate.positive_int("count", count)
    part = float(exact(epsilon) / count)
    while exact(part) * count > exact(epsilon):
        part = math.nextafter(part, 0.0)
    return part


def choice_splits(choices: tuple[PublicChoice, ...]) -> list[dict[str, float | str]]:
    """The named budget splits of the public choices (pure DP: delta 0), in order; the release's own parts follow.

    >>> choice_splits((PublicChoice("tau", 0.1, "tuning.tau.dp_norm_quantile@2", 0.5, (0.1, 1.0)),))
    [{'name': 'tau', 'epsilon': 0.1, 'delta': 0.0}]
    """
    return [{"name": c.name, "epsilon": c.epsilon, "delta": 0.0} for c in choices if not c.a_priori]


class PaysChoicesFirst:
    """Mixin of a plan whose public choices are paid first, then one mechanism named :attr:`split_name`.

    The plan (a dataclass) has ``epsilon`` (the total) and ``public_choices``; the mixin gives the mechanism's
    own epsilon and the named budget splits, which sum exactly to ``epsilon``.
    """

    epsilon: float
    public_choices: tuple[PublicChoice, ...]
    split_name: ClassVar[str]

    @property
    def epsilon_mechanism(self) -> float:
        """Epsilon of the mechanism itself: ``epsilon`` minus the public choices."""
        return epsilon_after_choices(self.epsilon, self.public_choices)

    @property
    def budget_splits(self) -> list[dict[str, float | str]]:
        """Named parts of the release (the public choices, then the mechanism); they sum exactly to ``epsilon``."""
        return [*choice_splits(self.public_choices), {"name": self.split_name, "epsilon": self.epsilon_mechanism,
                                                      "delta": 0.0}]


def choice_formulas(choices: tuple[PublicChoice, ...], *, raised: bool = True) -> set[str]:
    """Formula ids of the ``tau: auto`` choice of a covariance, FoSR or FPCA plan, and of its composition.

    ``raised``: the split is :func:`tau_epsilon`'s (``tuning.tau.quantile_level@3``: covariance, FoSR), else
    :func:`choice_epsilon`'s (``@2``: FPCA, whose level is the median whatever the split).

    >>> sorted(choice_formulas((PublicChoice("tau", 0.1, "tuning.tau.dp_norm_quantile@2", 0.5, (0.1, 1.0)),)))
    ['accounting.pure.sequential@1', 'tuning.tau.dp_norm_quantile@2', 'tuning.tau.quantile_level@3', 'tuning.tau.summary_level@1']
    >>> choice_formulas(())
    set()
    """
    if not choices:
        return set()
    if all(c.a_priori for c in choices):
        return {c.formula_id for c in choices}
    # the level is summary_level's; the split's epsilon is quantile_level's (@3 raised, @2 for FPCA)
    return {"tuning.tau.summary_level@1", f"tuning.tau.quantile_level@{3 if raised else 2}",
            "accounting.pure.sequential@1", *(c.formula_id for c in choices)}


def centre_choice(epsilon_centre: float, value_range: tuple[float, float]) -> PublicChoice:
    """The public plan of ``value_offset: auto``: the median over ``CENTRE_CANDIDATES`` points of the range.

    >>> centre_choice(0.05, (0.0, 4000.0)).candidates[1]
    20.0
    """
    eps = _validate.positive_finite("epsilon_centre", epsilon_centre)
    return PublicChoice("value_offset", eps, "preprocess.centre.dp_median@1", 0.5, centre_candidates(*value_range))


def rank_equivalent(values: ArrayLike, candidates: tuple[float, ...]) -> NDArrayFloat:
    """``values`` moved into ``[c_1 - s, c_L + s]`` (``s = c_L - c_1``): the same count below every candidate.

    The quantile's score reads only how many values lie below each candidate, so a value beyond the candidates
    may be replaced by any other on the same side: a record whose norm or level overflowed (``+-inf``, from a
    finite but huge record) then ranks as the largest (smallest) value it is, instead of stopping the release
    after its charge. Record-wise, so the DP quantile is unchanged.

    >>> rank_equivalent([-float("inf"), 0.5, float("inf")], (0.0, 1.0)).tolist()
    [-1.0, 0.5, 2.0]
    """
    lo, hi = float(candidates[0]), float(candidates[-1])
    span = hi - lo
    return np.clip(np.asarray(values, dtype=np.float64), lo - span, hi + span)


def draw_public_choice(choice: PublicChoice, values: ArrayLike) -> PublicChoice:
    """Draw ``choice`` on one value per record (norms for ``tau``, source-unit levels for the centre).

    A noise draw: the ledger charge must be final before this runs. Returns the choice with its value.

    >>> c = draw_public_choice(centre_choice(50.0, (0.0, 10.0)), [4.0] * 200)
    >>> 3.0 <= c.value <= 5.0
    True
    """
    if choice.value is not None:
        raise DomainError(f"the public choice {choice.name!r} was already drawn")
    if choice.a_priori:  # nothing bought: the public value, no data read
        return replace(choice, value=choice.candidates[-1])
    if choice.formula_id == TAU_FORMULA:
        values = dither_norms(values, choice.candidates)
    value = dp_quantile(rank_equivalent(values, choice.candidates), choice.candidates, alpha=choice.alpha,
                        epsilon=choice.epsilon)
    return PublicChoice(choice.name, choice.epsilon, choice.formula_id, choice.alpha, choice.candidates, value)


#: A release's plan (:func:`plan_with_tau` returns what its ``plan`` callable builds).
PlanT = TypeVar("PlanT")
#: The expected L2 noise of a summary's plan at ``tau = 1`` when it pays the given (undrawn) public choices, and the
#: plan's ``x_bound`` (FoSR; ``None`` for a covariance): public inputs only (:func:`summary_tau_choice`).
UnitNoise = Callable[[tuple[PublicChoice, ...]], tuple[float, float | None]]


def summary_tau_choice(summary: str, n: int, epsilon: float, *, tau_share: float, tau_range: tuple[float, float],
                       unit_noise: UnitNoise | None = None) -> PublicChoice:
    """``tau: auto`` of a covariance, FoSR or FPCA release, not yet drawn: its split, candidates and level (MATH.md §1.7).

    The split is :func:`tau_epsilon` of ``tau_share`` (as the mean's: ``tuning.tau.quantile_level@3``), for FPCA
    :func:`choice_epsilon`'s (its level is the median whatever the split); when ``n * epsilon`` is too small for a
    DP quantile (:class:`~fdpcore.errors.PrivacyParameterError`) the choice is :func:`a_priori_tau_choice` (the upper
    end of ``tau_range``, free). Otherwise the level is :func:`summary_tau_level` (formula
    ``tuning.tau.summary_level@1``): the median for FPCA, else from ``unit_noise`` of the release's own plan priced
    at ``tau = 1`` with the split already paid (a provisional choice of the same epsilon: a plan's cost and noise do
    not depend on the level). Public inputs only (MATH.md §12.3); the same rule for ``fdp release`` and the facades.

    >>> c = summary_tau_choice("fpca", 93, 2.0, tau_share=0.1, tau_range=(0.01, 1.0))
    >>> c.epsilon, c.alpha, len(c.candidates)
    (0.5772, 0.5, 41)
    >>> summary_tau_choice("fpca", 93, 0.1, tau_share=0.1, tau_range=(0.01, 1.0)).a_priori
    True
    >>> c = summary_tau_choice("covariance", 1000, 1.0, tau_share=0.1, tau_range=(0.01, 1.0),
    ...                        unit_noise=lambda choices: (0.01, None))
    >>> c.epsilon, c.alpha == tau_quantile_level(1000, 0.1342, 41, 0.01)  # raised from 0.1 so the level reaches 0.8
    (0.1342, True)
    """
    count = len(tau_candidates(*tau_range))
    try:
        e_tau = (choice_epsilon("tau", n, epsilon, tau_share, count) if summary == "fpca"
                 else tau_epsilon(n, epsilon, tau_share, count))
    except PrivacyParameterError:  # n * epsilon too small for a DP quantile: the public upper end, for free
        return a_priori_tau_choice(tau_range)
    if summary == "fpca":
        alpha = summary_tau_level(summary, n, e_tau, count)
    else:
        if unit_noise is None:
            raise DomainError(f"summary {summary!r} needs unit_noise (its plan's noise at tau = 1) to level tau: auto")
        r1, x_bound = unit_noise((tau_choice(n, e_tau, 1.0, tau_range),))
        alpha = summary_tau_level(summary, n, e_tau, count, unit_noise_rmse=r1, x_bound=x_bound)
    return tau_choice(n, e_tau, 1.0, tau_range, alpha=alpha)


def one_draw_with_auto(draws: int, name: str = "tau") -> None:
    """Refuse ``draws > 1`` with ``name='auto'`` in a facade: each draw is a separate release that buys its own radius.

    >>> one_draw_with_auto(1)
    >>> one_draw_with_auto(2)
    Traceback (most recent call last):
    ...
    fdpcore.errors.DomainError: draws (2) must be 1 with tau='auto': each draw is a separate release that would buy its own tau; call the facade once per draw
    """
    if draws != 1:
        raise DomainError(f"draws ({draws!r}) must be 1 with {name}='auto': each draw is a separate release that would "
                          f"buy its own {name}; call the facade once per draw")


def prior_signal_fraction(stated: float | None, choices: Sequence[PublicChoice], *, signal_rms: float | None = None,
                          tau: float | None = None, domain_length: float = 1.0) -> float:
    """The ``risk_prior`` signal scale a release uses (a fraction of ``tau``): stated, derived, else its ``tau`` rule's default.

    ``stated``: the config's ``signal_fraction``. ``signal_rms``: the mean's RMS distance from the offset known a
    priori, turned into a fraction of the release's ``tau`` by
    :func:`fdpcore.privacy.tuning.stated_signal_fraction` (``tuning.risk.signal_stated@1``; needs ``tau``). Neither:
    :func:`fdpcore.privacy.tuning.default_signal_fraction` (``tuning.risk.signal_default@1``), 0.1 where ``tau: auto``
    fell back to its a-priori bound, 0.5 otherwise. Public inputs only.

    >>> prior_signal_fraction(None, (a_priori_tau_choice((0.01, 1.0)),)), prior_signal_fraction(None, ())
    (0.1, 0.5)
    >>> prior_signal_fraction(0.3, (a_priori_tau_choice((0.01, 1.0)),))
    0.3
    >>> prior_signal_fraction(None, (), signal_rms=0.4, tau=0.5)
    0.8
    """
    if signal_rms is not None:
        if stated is not None:
            raise DomainError("state tuning.signal_rms (the mean's size, known a priori) or tuning.signal_fraction "
                              "(a fraction of tau), not both")
        if tau is None:
            raise InternalError("prior_signal_fraction: signal_rms needs the release's tau")
        return stated_signal_fraction(signal_rms, tau=tau, domain_length=domain_length)
    if stated is not None:
        return _validate.positive_finite("signal_fraction", stated, privacy=False)
    return default_signal_fraction(any(c.name == "tau" and c.a_priori for c in choices))


def plan_with_tau(
    tau: float | str, records: ArrayLike, grid: Grid, plan: Callable[[float, tuple[PublicChoice, ...]], PlanT], *,
    summary: str, epsilon: float, tau_share: float, tau_range: tuple[float, float] | None,
    unit_noise: UnitNoise | None = None, draws: int = 1, name: str = "tau",
) -> PlanT:
    """The plan of a covariance, FoSR or FPCA facade release at a given clip radius or at ``tau: auto`` (MATH.md §1.7).

    ``plan(radius, public_choices)`` builds the release's plan from public inputs. A number: ``plan(tau, ())``.
    ``"auto"``: :func:`summary_tau_choice` from public inputs only (``n``, the rows of ``records``; ``epsilon``;
    ``tau_range``, default :func:`default_tau_range` of ``grid``'s domain); the plan priced at ``tau = 1`` with that
    choice (so every public parameter is checked before any data is read); then **one** draw of OpenDP's DP quantile
    (:func:`draw_public_choice`) on the norms of ``records`` in ``grid``'s ``W`` norm — pass exactly the rows the
    release clips — and ``plan(drawn, (choice,))``: its splits are ``tau`` then the mechanism's, summing exactly to
    ``epsilon``, and its radius is the released candidate. An a-priori choice (``n * epsilon`` too small) reads no
    norms and costs nothing.

    A facade has no ledger: the split is part of the cost of the plan the caller reports (MATH.md §12.1). ``draws``
    above 1 with ``"auto"`` are refused: each draw is a separate release that would have to buy its own radius, and
    one release object holds one plan (call the facade once per release instead).

    Raises:
        DomainError: ``tau`` neither a number nor ``"auto"``; ``draws > 1`` with ``"auto"``; a malformed range.

    >>> from fdpcore.basis.grids import midpoint_grid
    >>> g, plan = midpoint_grid(2), lambda radius, choices: (radius, choices)
    >>> plan_with_tau(0.5, [[1.0, 2.0]], g, plan, summary="fpca", epsilon=1.0, tau_share=0.1, tau_range=None)
    (0.5, ())
    >>> tau, (c,) = plan_with_tau("auto", np.full((1000, 2), 0.3), g, plan, summary="fpca", epsilon=1.0, tau_share=0.1,
    ...                           tau_range=None)
    >>> tau in c.candidates and c.value == tau and c.epsilon
    0.1
    """
    if not isinstance(tau, str):
        return plan(tau, ())
    if tau != "auto":
        raise DomainError(f"{name} ({tau!r}) must be a positive number or 'auto'")
    one_draw_with_auto(draws, name)
    x = _validate.finite_matrix("records", records, grid.size)
    if tau_range is None:
        a, b = grid.domain_range
        tau_range = default_tau_range(b - a)
    elif len(tau_range) != 2:
        raise DomainError(f"tau_range ({tau_range!r}) must be a pair (lo, hi)")
    pending = summary_tau_choice(summary, int(x.shape[0]), epsilon, tau_share=tau_share,
                                 tau_range=(float(tau_range[0]), float(tau_range[1])), unit_noise=unit_noise)
    if unit_noise is None or pending.a_priori:  # else summary_tau_choice has priced plan(1.0, ...) with this split
        plan(1.0, (pending,))  # every public parameter checked, and the split priced, before any data is read
    drawn = draw_public_choice(pending, [] if pending.a_priori else record_norms(x, grid.weights))
    if drawn.value is None:  # pragma: no cover - draw_public_choice always sets it
        raise InternalError(f"{name} 'auto' without a drawn value")
    return plan(drawn.value, (drawn,))
