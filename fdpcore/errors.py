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


class BudgetExceededError(FdpError):
    """A charge would exceed a dataset's privacy budget. Nothing was spent.

    The message shows requested, remaining and their difference.
    """

    def __init__(self, dataset_id: str, requested: tuple[float, float], remaining: tuple[float, float]) -> None:
        self.dataset_id = dataset_id
        self.requested = requested
        self.remaining = remaining
        d_eps = requested[0] - remaining[0]
        d_del = requested[1] - remaining[1]
        super().__init__(
            f"budget of dataset {dataset_id!r} would be exceeded; nothing was spent. "
            f"Requested: epsilon={requested[0]:.6g}, delta={requested[1]:.6g}. "
            f"Remaining: epsilon={remaining[0]:.6g}, delta={remaining[1]:.6g}. "
            f"Difference: epsilon={d_eps:+.6g}, delta={d_del:+.6g}."
        )


class InternalError(RuntimeError):
    """An internal invariant was broken: a bug in fdp, never the user's input."""
