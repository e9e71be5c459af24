"""Composition of privacy costs (MATH.md §12.1).

Costs are added exactly: floats are converted to fractions from their shortest
decimal representation, so ``0.1 + 0.2`` equals ``0.3`` and a budget that exactly
fits is never refused by rounding, nor exceeded by it.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

__all__ = ["compose_pure", "exact"]


def exact(value: float) -> Fraction:
    """The fraction of ``value``'s shortest decimal representation.

    >>> exact(0.1) + exact(0.2) == exact(0.3)
    True
    """
    return Fraction(repr(float(value)))


def compose_pure(costs: Iterable[tuple[float, float]]) -> tuple[Fraction, Fraction]:
    """Basic sequential composition ``(sum eps_i, sum delta_i)`` (formula ``accounting.pure.sequential@1``).

    >>> [float(x) for x in compose_pure([(0.5, 0.0), (0.25, 1e-6)])]
    [0.75, 1e-06]
    """
    eps, delta = Fraction(0), Fraction(0)
    for e, d in costs:
        eps += exact(e)
        delta += exact(d)
    return eps, delta
