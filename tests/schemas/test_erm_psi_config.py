"""ERM config's ``psi`` (issue 16): ``auto`` (the public rule tuning.erm.psi.risk_prior@1) is the default; a number still works."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fdp.schemas.erm import ErmReleaseConfig
from pydantic import ValidationError

REPO = Path(__file__).resolve().parents[2]


def _raw() -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((REPO / "examples" / "erm_ridge.yaml").read_text())


def test_psi_defaults_to_auto_accepts_auto_and_keeps_numbers() -> None:
    raw = _raw()
    assert ErmReleaseConfig.model_validate(raw).psi == 0.2  # the shipped example's number, unchanged
    del raw["psi"]
    assert ErmReleaseConfig.model_validate(raw).psi == "auto"
    raw["psi"] = "auto"
    assert ErmReleaseConfig.model_validate(raw).psi == "auto"
    assert "tuning.erm.psi.risk_prior@1" in (ErmReleaseConfig.model_fields["psi"].description or "")


@pytest.mark.parametrize("bad", ["best", -0.1, 0.0, float("nan")])
def test_psi_rejects_anything_but_a_positive_number_or_auto(bad: object) -> None:
    raw = _raw()
    raw["psi"] = bad
    with pytest.raises(ValidationError, match="psi"):
        ErmReleaseConfig.model_validate(raw)
