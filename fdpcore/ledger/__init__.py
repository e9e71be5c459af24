"""The persistent privacy-budget ledger (SQLite by default, PostgreSQL by URL; one code path)."""

from fdpcore.ledger._store import (
    RELEASE_STATES,
    DatasetBudget,
    Ledger,
    ReleaseRecord,
    ReserveOutcome,
    default_ledger_url,
)

__all__ = ["RELEASE_STATES", "DatasetBudget", "Ledger", "ReleaseRecord", "ReserveOutcome", "default_ledger_url"]
