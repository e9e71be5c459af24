"""The mean config's public reference curve (`centering`): the FPCA/FoSR block, validated when the config is read;
errors name the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from fdp.schemas import ReleaseConfig
from fdp.schemas.config import ReferenceCurveSpec
from fdp.schemas.fpca import ReferenceCurveSpec as FpcaReferenceCurveSpec
from pydantic import ValidationError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "electricity_mean.yaml"
GOOD = {"time": [0.5, 24.5, 48.5], "value": [1300.0, 1800.0, 1300.0], "source": "a published profile"}


def _config(centering: Any, **dataset: Any) -> ReleaseConfig:
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["centering"] = centering
    raw["dataset"].update(dataset)
    return ReleaseConfig.model_validate(raw)


def test_the_mean_takes_the_same_reference_block_as_fpca_and_fosr() -> None:
    assert ReferenceCurveSpec is FpcaReferenceCurveSpec
    assert _config(GOOD).centering == ReferenceCurveSpec(**GOOD)
    assert _config(None).centering is None  # default: today's behaviour (centred on value_offset)
    assert "centering" in ReleaseConfig.model_json_schema()["properties"]


@pytest.mark.parametrize("centering,match", [
    ({**GOOD, "time": [1.5, 24.5, 48.5]}, r"centering\.time \(\[1\.5, 48\.5\]\) must reach from at most 1 "
                                          r"to at least 48, the first and last grid points of dataset\.time_domain "
                                          r"\[0\.5, 48\.5\]"),
    ({**GOOD, "time": [0.5, 24.5, 40.0]}, r"centering\.time \(\[0\.5, 40\]\) must reach from at most 1 to at least 48"),
    ({**GOOD, "time": [0.5, 48.5, 24.5]}, r"centering\.time must be strictly increasing"),
    ({**GOOD, "value": [1300.0, 1800.0]}, r"centering: time \(3 values\) and value \(2 values\) must have the same length"),
    ({**GOOD, "value": [1300.0, float("nan"), 1300.0]}, r"centering\.value\.1\n.*finite number"),
    ({**GOOD, "time": [0.5, float("inf"), 48.5]}, r"centering\.time\.1\n.*finite number"),
    ({**GOOD, "source": "   "}, r"centering\.source must say where the public reference comes from"),
    ({**GOOD, "source": ""}, r"centering\.source\n.*at least 1 character"),
    ({k: v for k, v in GOOD.items() if k != "source"}, r"centering\.source\n.*Field required"),
    ({**GOOD, "value": ["a", "b", "c"]}, r"centering\.value\.0"),
])
def test_a_bad_reference_is_refused_naming_the_field(centering: dict[str, Any], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        _config(centering)


def test_value_offset_auto_is_refused_with_a_reference() -> None:
    with pytest.raises(ValidationError, match=r"dataset\.value_offset \('auto'\) cannot be used with centering: the "
                                              r"reference curve replaces the constant centre"):
        _config(GOOD, value_offset="auto", value_offset_range=[0.0, 3000.0])
    assert _config(GOOD, value_offset=0.0).dataset.value_offset == 0.0  # any fixed number: it cancels out


@pytest.mark.parametrize(("example", "key", "field"), [
    ("electricity_covariance.yaml", ("centering", "reference"), "centering.reference"),
    ("growth_fosr.yaml", ("centering",), "centering"),
    ("growth_fpca.yaml", ("centering",), "centering"),
])
def test_covariance_fosr_and_fpca_refuse_a_short_reference_when_the_config_is_read(example: str, key: tuple[str, ...],
                                                                                  field: str) -> None:
    """The same coverage check as the mean's, before any data is read (it used to wait for the release's plan)."""
    from fdp.schemas.union import CONFIG_MODELS

    raw = yaml.safe_load((EXAMPLE.parent / example).read_text())
    a, b = raw["dataset"]["time_domain"]
    short = {"time": [a, a + 0.5 * (b - a)], "value": [1.0, 1.0], "source": "half the domain"}
    if key == ("centering", "reference"):
        raw["centering"] = {"kind": "public", "reference": short}
    else:
        raw["centering"] = short
    with pytest.raises(ValidationError, match=rf"{field.replace('.', r'[.]')}[.]time \(\[.*\]\) must reach from at most"):
        CONFIG_MODELS[raw["summary"]].model_validate(raw)
