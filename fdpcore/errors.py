"""Error types of fdp.

Every error a user can cause derives from :class:`FdpError` (a ``ValueError``);
broken invariants raise :class:`InternalError`. Messages name the offending
field, row or file and never contain data values or pre-noise statistics.
"""

from __future__ import annotations

__all__ = [
    "BudgetExceededError",
    "ConfigError",
    "DataError",
    "DomainError",
    "FdpError",
    "InternalError",
    "LedgerError",
    "PrivacyParameterError",
    "ReleaseConflictError",
]


class FdpError(ValueError):
    """Base class of every error a user can cause (bad config, bad data, no budget)."""


class PrivacyParameterError(FdpError):
    """A privacy parameter (epsilon, delta, tau, eta, psi, ...) is invalid."""


class DomainError(FdpError):
    """An input lies outside the domain a function requires (grid, kernel, shapes)."""


class ConfigError(FdpError):
    """A release configuration is invalid; the message names the field."""


class DataError(FdpError):
    """An input data file is missing, unreadable or malformed; the message names file/column/row."""


class ReleaseConflictError(FdpError):
    """A release id is reused with a different configuration, or cannot be resumed."""


class LedgerError(FdpError):
    """The ledger cannot be reached or is inconsistent with the request."""


class NotResumableError(ReleaseConflictError):
    """The release id drew its noise but was never published: it cannot be resumed (a new id is needed)."""


class ConcurrentRunError(LedgerError):
    """Another run of the same release id moved its ledger entry first (e.g. it drew the noise)."""


class BudgetExceededError(FdpError):
    """A charge would exceed a dataset's privacy budget (its total or a period's allowance). Nothing was spent.

    The message shows requested, remaining and their difference, per measure
    (``epsilon``/``delta``, or ``rho`` on a zCDP-accounted dataset).
    """

    def __init__(
        self,
        dataset_id: str,
        requested: tuple[float, ...],
        remaining: tuple[float, ...],
        *,
        scope: str = "budget",
        measures: tuple[str, ...] = ("epsilon", "delta"),
        period: str | None = None,
    ) -> None:
        self.dataset_id = dataset_id
        self.requested = requested
        self.remaining = remaining
        self.scope = scope
        self.measures = measures
        self.period = period  # the period (YYYY-MM) whose allowance would be exceeded; None for the total

        def show(values: tuple[float, ...], sign: str = "") -> str:
            return ", ".join(f"{m}={v:{sign}.6g}" for m, v in zip(measures, values, strict=True))

        diff = tuple(r - m for r, m in zip(requested, remaining, strict=True))
        super().__init__(
            f"{scope} of dataset {dataset_id!r} would be exceeded; nothing was spent. "
            f"Requested: {show(requested)}. Remaining: {show(remaining)}. Difference: {show(diff, '+')}."
        )


class OutOfMemoryError(MemoryError):
    """Memory ran out (e.g. while Arrow read a file); the message names the step, never a value. Exit 1."""


class InternalError(RuntimeError):
    """An internal invariant was broken: a bug in fdp, never the user's input."""
