"""Public records: the manifest published beside every release and its parts.

They hold no value computed from the data before noise, except ``n``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from fdp.schemas._base import Frozen
from pydantic import Field

__all__ = [
    "AuditCommitment", "BudgetSplit", "NoiseRecord", "OutputFile", "PrivacyRecord", "Provenance", "ReleaseManifest", "SensitivityRecord",
]


class BudgetSplit(Frozen):
    """One named part of a release's cost; the parts sum exactly to the cost."""

    name: str = Field(min_length=1)
    epsilon: float = Field(ge=0)
    delta: float = Field(0.0, ge=0, lt=1)


class SensitivityRecord(Frozen):
    """The sensitivity that set the noise, and the paper's bound for comparison."""

    norm: str = Field(description="norm of the sensitivity, e.g. '1,C' (MATH.md §1.5)")
    value: float = Field(gt=0, description="the sensitivity used")
    bound: str = Field(description="formula id of the sensitivity used")
    paper_bound: float = Field(gt=0, description="the source paper's bound for the same setting")
    paper_formula: str = Field(description="formula id of the paper's bound")
    status: Literal["EXACT", "UPPER"] | None = Field(
        None, description="EXACT: some neighbouring pair attains 'value'; UPPER: 'value' is an upper bound"
    )


class PrivacyRecord(Frozen):
    """The guarantee of the release."""

    epsilon: float = Field(gt=0)
    delta: float = Field(ge=0, lt=1)
    adjacency: Literal["replace-one"] = "replace-one"
    privacy_unit: str
    guarantee: str


#: What a manifest's ``idealized_numerics: true`` asserts (``fdp schema manifest``; docs/configuration.md, "Public manifest").
IDEALIZED_NUMERICS_DESCRIPTION = (
    "Always true: the privacy guarantee is proved in exact real arithmetic (docs/proofs), while the release is "
    "computed in float64. Made floating-point safe: the noise draws (OpenDP's samplers, at a scale whose privacy map "
    "OpenDP certifies for the stated sensitivity; FPCA excepted), the DP quantiles, each clipped record's norm "
    "(re-checked to be <= tau in floating point) and a streaming engine's exact lattice sums. Idealised: that the "
    "float64 computation of what the sampler perturbs (the sums of the in-memory engine, the whitening, the "
    "eigenbasis, ERM's solver) has exactly the sensitivity the real-arithmetic formula states — its rounding error "
    "(of the order of float64's relative precision) is not bounded in the proofs — and, for FPCA, NumPy's "
    "floating-point samplers (no snapping; its sampler.caveat)."
)


class NoiseRecord(Frozen):
    """The noise law and accuracy of the release, computed from the mechanism alone."""

    distribution: str
    sampler: str
    whitened_scale: float = Field(gt=0)
    expected_l2_error: float = Field(ge=0, description="sqrt(E||noise||^2): the L2 norm over the grid domain (on [0, 1] "
                                     "the RMS over time) in source units; see the release's accuracy note")
    expected_l2_error_scaled: float = Field(ge=0, description="sqrt(E||noise||_W^2) on the rescaled curves")
    band_level: float = Field(gt=0, lt=1)
    band_half_width_max: float = Field(ge=0, description="largest pointwise band half-width (source units)")
    expected_l2_error_with_bias: float | None = Field(
        None, ge=0, description="fdp plan's 'with bias' at the released tau, eta and psi (ICLP-QR and GP only): "
        "sqrt(E||noise||^2 + bias^2) in source units, the bias being the smoothing bias of a typical mean of norm "
        "signal_fraction x tau under the risk_prior prior (tuning.risk.iclp_qr.prior@2) — a function of public inputs, "
        "not the bias of this data; the clipping bias is not included")
    expected_l2_error_with_bias_note: str | None = Field(
        None, description="what expected_l2_error_with_bias is, with its public numbers (signal_fraction, tau)")


class OutputFile(Frozen):
    """A published file and its SHA-256."""

    path: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class Provenance(Frozen):
    """Where a release came from (public part; the ledger adds operator and host)."""

    code_version: str
    git_sha: str | None = None
    created_at: datetime
    config_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    flow_run_id: str | None = None


class AuditCommitment(Frozen):
    """The ledger's audit chain at publication (docs/audit.md; ``fdp audit verify --against``).

    Taken in the transaction that publishes the release: ``seq``/``head`` are the chain's last
    entry before the release's own ``release.published`` entry (entry ``seq + 1``, which records
    the SHA-256 of this manifest's canonical JSON without this field).
    """

    ledger_id: str = Field(description="the ledger's UUID (fdp_meta)")
    seq: int = Field(ge=0, description="number of the chain's last entry before this release's publication")
    head: str = Field(pattern=r"^[0-9a-f]{64}$", description="hash of entry seq")
    prefixes: str = Field(pattern=r"^([0-9a-f]{8})*$",
                          description="first 8 hex digits of the hash of each entry 1..seq, concatenated "
                          "(names the first entry that differs)")


class ReleaseManifest(Frozen):
    """The public manifest written beside the released Parquet."""

    schema_version: Literal[1] = 1
    release_id: str
    dataset_id: str
    summary: str
    mechanism: str
    n: int = Field(ge=1)
    privacy: PrivacyRecord
    budget_splits: list[BudgetSplit]
    sensitivity: SensitivityRecord
    parameters: dict[str, Any]
    noise: NoiseRecord
    formulas: list[str]
    idealized_numerics: bool = Field(True, description=IDEALIZED_NUMERICS_DESCRIPTION)
    outputs: list[OutputFile]
    provenance: Provenance
    charged_period: str | None = Field(
        None, description="the budget period (YYYY-MM) the ledger charged this release to, set by the ledger at "
        "publication (a run started near a month's end can be charged to the next month); absent in manifests "
        "published before session 32")
    audit_commitment: AuditCommitment | None = Field(None, description="set by the ledger at publication")
