"""Composition of privacy costs (MATH.md §12.1).

Pure and approximate costs are added exactly: floats are converted to fractions from
their shortest decimal representation, so ``0.1 + 0.2`` equals ``0.3`` and a budget that
exactly fits is never refused by rounding, nor exceeded by it.

zCDP (Bun & Steinke) is used to account many Gaussian releases: ρ adds, a pure ε-DP
release counts as ρ = ε²/2, and the total converts to (ε, δ)-DP. Both conversions are
OpenDP's (``make_pureDP_to_zCDP``, ``make_zCDP_to_approxDP``), not hand-written.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from fractions import Fraction

import opendp.prelude as dp

from fdpcore import _validate
from fdpcore.errors import PrivacyParameterError

__all__ = ["compose_pure", "exact", "pure_to_zcdp", "zcdp_to_epsilon"]


def exact(value: float) -> Fraction:
    """The fraction of ``value``'s shortest decimal representation.

    >>> exact(0.1) + exact(0.2) == exact(0.3)
    True
    """
    return Fraction(repr(float(value)))


def compose_pure(costs: Iterable[tuple[float, float]]) -> tuple[Fraction, Fraction]:
    """Basic sequential composition ``(sum eps_i, sum delta_i)`` (formula ``accounting.pure.sequential@1``).

    Examples:
        >>> [float(x) for x in compose_pure([(0.5, 0.0), (0.25, 1e-6)])]
        [0.75, 1e-06]
    """
    eps, delta = Fraction(0), Fraction(0)
    for e, d in costs:
        eps += exact(e)
        delta += exact(d)
    return eps, delta


def pure_to_zcdp(epsilon: float) -> float:
    """ρ of a pure ε-DP release, ``ε²/2`` (formula ``accounting.zcdp.from_pure@1``; OpenDP ``make_pureDP_to_zCDP``).

    >>> pure_to_zcdp(1.0)
    0.5
    """
    eps = _validate.positive_finite("epsilon", epsilon)
    # A Laplace measurement with scale 1 has privacy map d_in -> d_in: its zCDP view at d_in = eps.
    return float(_pure_to_zcdp_map()(eps))


def zcdp_to_epsilon(rho: float, delta: float) -> float:
    """The ε for which ρ-zCDP implies (ε, δ)-DP (formula ``accounting.zcdp.to_approx@1``; OpenDP ``make_zCDP_to_approxDP``).

    OpenDP's conversion is tighter than the textbook ``ρ + 2√(ρ log(1/δ))`` (MATH.md §12.1),
    which it never exceeds. ``rho = 0`` gives 0.

    >>> round(zcdp_to_epsilon(0.5, 1e-5), 4)
    4.7284
    """
    if isinstance(rho, bool) or not math.isfinite(float(rho)) or float(rho) < 0:
        raise PrivacyParameterError(f"rho ({rho!r}) must be finite and >= 0")
    d = _validate.delta_value(delta)
    if d == 0.0:
        raise PrivacyParameterError("delta (0.0) must be > 0 to convert zCDP to (epsilon, delta)-DP")
    if float(rho) == 0.0:
        return 0.0
    gauss, convert = _zcdp_maps()
    # A Gaussian measurement with scale 1 has rho = d_in^2 / 2; take the smallest d_in whose rho is >= rho.
    d_in = math.sqrt(2.0 * float(rho))
    while gauss.map(d_in) < rho:  # type: ignore[no-untyped-call]  # OpenDP's map is untyped
        d_in = math.nextafter(d_in, math.inf)
    return float(convert.map(d_in).epsilon(d))  # type: ignore[no-untyped-call]  # OpenDP's map is untyped


@functools.cache
def _pure_to_zcdp_map() -> Callable[[float], float]:
    dp.enable_features("contrib")
    lap = dp.m.make_laplace(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=1.0)
    return dp.c.make_pureDP_to_zCDP(lap).map


@functools.cache
def _zcdp_maps() -> tuple[dp.Measurement, dp.Measurement]:
    dp.enable_features("contrib")
    gauss = dp.m.make_gaussian(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=1.0)
    return gauss, dp.c.make_zCDP_to_approxDP(gauss)
