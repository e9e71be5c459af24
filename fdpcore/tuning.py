"""Privacy-safe selection of tuning parameters (MATH.md §5.1, PSS).

PSS picks ``(eta, psi)`` from ``n``, ``epsilon`` and the kernel's decay rate
``beta`` only — all public — so the choice costs no privacy budget. The constants
follow the constant-1 convention of MATH.md §2.4 (trace-normalised kernel, tau = 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from fdpcore import _validate
from fdpcore.errors import DomainError

__all__ = ["PSS_RULES", "PssChoice", "pss_iclp_qr"]

#: Free-privacy margin varsigma added to the boundary eta (MATH.md §5.1).
FREE_MARGIN = 0.25

#: PSS rules for ICLP-QR: name -> (formula id, description).
PSS_RULES: dict[str, str] = {
    "exact_balanced": "eta = 1 + 1/beta, psi = 1/(n eps^2): privacy error of the order of 1/n with the exact sensitivity",
    "exact_free": "eta = 1 + 1/beta + 0.25, psi = 1/n: privacy error o(1/n) with the exact sensitivity",
    "paper_balanced": "eta = 1 + 2/beta, psi = 1/(n eps^2): [ICLP-v2] Cor. 1 balanced choice",
    "paper_free": "eta = 1 + 2/beta + 0.25, psi = 1/n: [ICLP-v2] Cor. 1 free-privacy choice",
}


@dataclass(frozen=True)
class PssChoice:
    """A PSS choice: the parameters and the formula id that produced them."""

    eta: float
    psi: float
    rule: str
    formula_id: str
    beta: float


def pss_iclp_qr(rule: str, *, beta: float, n: int, epsilon: float) -> PssChoice:
    """PSS values of ``(eta, psi)`` for ICLP-QR (formula ``tuning.pss.iclp_qr.<rule>@1``, MATH.md §5.1).

    .. math:: \\text{exact\\_balanced: }\\eta = 1 + 1/\\beta,\\ \\psi = (n\\epsilon^2)^{-1}

    Privacy assumptions: ``beta`` comes from the kernel and grid only; ``n`` is public.

    >>> c = pss_iclp_qr("exact_balanced", beta=4.0, n=100, epsilon=1.0)
    >>> (c.eta, c.psi)
    (1.25, 0.01)
    """
    beta = _validate.positive_finite("beta", beta, privacy=False)
    n = _validate.positive_int("n", n)
    epsilon = _validate.positive_finite("epsilon", epsilon)
    if rule not in PSS_RULES:
        raise DomainError(f"tuning.rule ({rule!r}) must be one of {sorted(PSS_RULES)}")
    base = 1.0 + (1.0 if rule.startswith("exact") else 2.0) / beta
    if rule.endswith("balanced"):
        eta, psi = base, 1.0 / (n * epsilon**2)
    else:
        eta, psi = base + FREE_MARGIN, 1.0 / n
    return PssChoice(eta, psi, rule, f"tuning.pss.iclp_qr.{rule}@1", beta)
