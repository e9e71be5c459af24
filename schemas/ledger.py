"""Ledger records: what a release asks the ledger to charge, budgets, and the (internal) ledger entry.

:class:`ChargeRequest` and :class:`LedgerEntry` are internal: they may carry data-dependent
counts for the auditor (``internal``) and are never published. :class:`PrivacyBudget` is what
``fdp budget show --json`` prints.
"""

from __future__ import annotations

from typing import Any, Literal

from fdp.schemas._base import SCHEMA_VERSION, Frozen
from fdp.schemas.config import BudgetSpec
from fdp.schemas.records import BudgetSplit, Provenance
from pydantic import Field, model_validator

from fdpcore.privacy.accounting import exact

__all__ = [
    "BudgetAmount", "ChargeRequest", "LedgerEntry", "LedgerProvenance", "PeriodBudget", "PrivacyBudget", "RemainingAmount",
]


class ChargeRequest(Frozen):
    """The full cost of one release, as named parts that sum exactly to it (internal)."""

    dataset_id: str = Field(min_length=1)
    summary: str = Field(min_length=1, description="the released summary, e.g. 'mean'")
    mechanism: str = Field(min_length=1, description="estimator/mechanism name")
    epsilon: float = Field(ge=0, description="epsilon of the whole release (sum of the parts)")
    delta: float = Field(0.0, ge=0, lt=1, description="delta of the whole release (sum of the parts)")
    rho: float | None = Field(None, gt=0, description="zCDP rho of the release (Gaussian mechanisms), if any")
    sensitivity_formula: str = Field(min_length=1, description="formula id of the sensitivity that set the noise")
    budget_splits: list[BudgetSplit] = Field(min_length=1, description="named parts of the cost")
    config_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    period: str | None = Field(None, description="budget period charged (default: the current one)")
    budget_proposal: BudgetSpec | None = Field(
        None, description="the config's budget policy, used only if the ledger does not know the dataset yet"
    )
    internal: dict[str, Any] = Field(default_factory=dict, description="auditor-only facts (never published)")
    non_private: bool = Field(
        False, description="the release is NOT differentially private (e.g. PCV tuning): charged as kind 'non_private'"
    )

    @model_validator(mode="after")
    def _parts_sum_to_cost(self) -> ChargeRequest:
        eps = sum((exact(s.epsilon) for s in self.budget_splits), exact(0.0))
        delta = sum((exact(s.delta) for s in self.budget_splits), exact(0.0))
        if eps != exact(self.epsilon) or delta != exact(self.delta):
            raise ValueError(
                f"budget_splits sum to (epsilon={float(eps)!r}, delta={float(delta)!r}) but the release costs "
                f"(epsilon={self.epsilon!r}, delta={self.delta!r}); the parts must sum exactly to the cost"
            )
        return self


class BudgetAmount(Frozen):
    """An (epsilon, delta) pair."""

    epsilon: float = Field(ge=0)
    delta: float = Field(ge=0, le=1)


class RemainingAmount(Frozen):
    """What is left of a budget or allowance: negative when more was spent than it allows now (a ledger from before allowances were checked against spending; ``fdp budget set`` refuses to make one)."""

    epsilon: float
    delta: float


class PeriodBudget(Frozen):
    """Spending in one budget period (a calendar month), and its allowance and remainder if the dataset has one."""

    period: str = Field(pattern=r"^\d{4}-(0[1-9]|1[0-2])$")
    allowance: BudgetAmount | None = Field(description="the per-period allowance plus this period's grants")
    spent: BudgetAmount
    remaining: RemainingAmount | None
    rho_spent: float = Field(ge=0, description="sum of zCDP rho in the period (zcdp accounting)")
    releases: int = Field(ge=0, description="releases charged to the period")
    granted: BudgetAmount | None = Field(None, description="one-month grants of this period (fdp budget grant)")


class PrivacyBudget(Frozen):
    """A dataset's budget as the ledger holds it (``fdp budget show --json``)."""

    schema_version: Literal[1] = SCHEMA_VERSION
    dataset_id: str
    accounting: Literal["basic", "zcdp"] = Field(description="how releases compose (MATH.md §12.1)")
    total: BudgetAmount
    spent: BudgetAmount
    remaining: RemainingAmount
    rho_spent: float = Field(ge=0, description="sum of zCDP rho over releases (zcdp accounting)")
    releases: int = Field(ge=0)
    period: Literal["month"] | None = Field(None, description="allowance period, if any")
    current_period: PeriodBudget | None = None
    periods: list[PeriodBudget] = Field(default_factory=list, description="every period with spending")
    non_private_releases: int = Field(
        0, ge=0, description="releases charged as non-private (their epsilon is counted but guarantees nothing)"
    )


class LedgerProvenance(Provenance):
    """Provenance as the ledger keeps it: the public fields plus who ran the release and where."""

    operator: str | None = Field(None, description="OS user who ran the release (absent before ledger schema 2)")
    host: str | None = Field(None, description="host the release ran on (absent before ledger schema 2)")


class LedgerEntry(Frozen):
    """One release in the ledger (internal: ``internal`` holds auditor-only counts)."""

    schema_version: Literal[1] = SCHEMA_VERSION
    release_id: str
    dataset_id: str
    state: Literal["reserved", "noised", "published", "cancelled"]
    epsilon: float = Field(ge=0)
    delta: float = Field(ge=0, lt=1)
    rho: float | None = None
    period: str
    summary: str
    mechanism: str
    sensitivity_formula: str
    config_sha256: str
    budget_splits: list[BudgetSplit]
    provenance: LedgerProvenance
    internal: dict[str, Any]
    created_at: str
    updated_at: str
    charge_kind: Literal["dp", "non_private"] = Field(
        "dp", description="'dp': epsilon/delta is a DP guarantee; 'non_private': counted but guarantees nothing"
    )
