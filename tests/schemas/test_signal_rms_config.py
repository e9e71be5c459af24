"""`tuning.signal_rms` (tuning.risk.signal_stated@1): a mean config's a-priori size of the mean, validated when read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from fdp.schemas import ReleaseConfig
from fdp.schemas.union import AnyReleaseConfig
from pydantic import TypeAdapter, ValidationError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _config(name: str, tuning: dict[str, Any]) -> Any:
    auto_offset = name == "electricity_mean_offset_auto"
    raw = yaml.safe_load((EXAMPLES / ("electricity_mean_auto.yaml" if auto_offset else name)).read_text())
    if auto_offset:
        raw["dataset"].update(value_offset="auto", value_offset_range=[0.0, 4000.0])
    raw["tuning"] = tuning
    return TypeAdapter(AnyReleaseConfig).validate_python(raw)


def test_a_mean_config_states_the_mean_size_and_the_schema_describes_it() -> None:
    assert _config("electricity_mean_auto.yaml", {"signal_rms": 0.2}).tuning.signal_rms == 0.2
    described = ReleaseConfig.model_json_schema()["$defs"]["TuningSpec"]["properties"]["signal_rms"]["description"]
    assert "known a priori" in described and "tuning.risk.signal_stated@1" in described


@pytest.mark.parametrize("name,tuning,match", [
    ("electricity_mean_auto.yaml", {"signal_rms": 0.2, "signal_fraction": 0.5}, "signal_rms .* or signal_fraction .* not both"),
    ("electricity_mean_auto.yaml", {"signal_rms": 0.0}, r"tuning\.signal_rms"),
    ("electricity_mean_auto.yaml", {"signal_rms": 0.2, "rule": "exact_balanced"}, "only used by tuning.rule 'risk_prior'"),
    ("electricity_mean_auto.yaml", {"signal_rms": 0.2, "eta": 2.0, "psi": 0.01}, "only used by tuning.rule 'risk_prior'"),
    ("electricity_covariance.yaml", {"signal_rms": 0.2}, r"signal_rms"),  # a mean's statement: not a covariance field
    ("electricity_mean_offset_auto", {"signal_rms": 0.2}, "value_offset: auto only chooses after the charge"),
])
def test_signal_rms_is_refused_where_it_would_be_ignored_or_contradicted(name: str, tuning: dict[str, Any],
                                                                         match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        _config(name, tuning)
