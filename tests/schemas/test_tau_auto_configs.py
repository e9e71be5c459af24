"""``clipping: {tau: auto}`` in the covariance, FoSR and FPCA configs: accepted, described, refused where it cannot work."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from fdp.flows.config import load_config
from fdp.schemas.union import release_config_json_schema

from fdpcore.errors import ConfigError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SUMMARIES = {"covariance": "electricity_covariance", "fosr": "growth_fosr", "fpca": "growth_fpca"}


def _write(tmp_path: Path, summary: str, **changes: Any) -> Path:
    cfg = yaml.safe_load((EXAMPLES / f"{SUMMARIES[summary]}.yaml").read_text())
    cfg["dataset"]["path"] = str(EXAMPLES / cfg["dataset"]["path"])
    for key, value in changes.items():
        cfg[key] = value
    path = tmp_path / f"{summary}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.parametrize("summary", sorted(SUMMARIES))
def test_tau_auto_is_accepted_with_its_share_and_range(tmp_path: Path, summary: str) -> None:
    clipping = {"tau": "auto", "tau_share": 0.2, "tau_range": [0.05, 2.0]}
    config = load_config(_write(tmp_path, summary, clipping=clipping))
    assert (config.clipping.tau, config.clipping.tau_share, config.clipping.tau_range) == ("auto", 0.2, (0.05, 2.0))
    default = load_config(_write(tmp_path, summary, clipping={"tau": "auto"})).clipping
    assert (default.tau_share, default.tau_range) == (0.1, None)  # the mean's defaults
    raw = yaml.safe_load(_write(tmp_path, summary, clipping=clipping).read_text())
    jsonschema.validate(raw, release_config_json_schema())  # the emitted JSON Schema allows it too


@pytest.mark.parametrize("summary", sorted(SUMMARIES))
@pytest.mark.parametrize(("clipping", "match"), [
    ({"tau": 1.0, "tau_share": 0.2}, "clipping.tau_share/tau_range are only used with clipping.tau 'auto'"),
    ({"tau": 1.0, "tau_range": [0.1, 1.0]}, "clipping.tau_share/tau_range are only used with clipping.tau 'auto'"),
    ({"tau": "auto", "tau_range": [1.0, 0.1]}, r"clipping.tau_range \(\[1.0, 0.1\]\) must satisfy lo < hi"),
    ({"tau": "auto", "tau_share": 0.6}, "clipping.tau_share: Input should be less than or equal to 0.5"),
])
def test_tau_auto_fields_are_checked(tmp_path: Path, summary: str, clipping: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        load_config(_write(tmp_path, summary, clipping=clipping))


@pytest.mark.parametrize("summary", ["covariance", "fosr"])
def test_tau_auto_is_refused_with_a_streaming_engine(tmp_path: Path, summary: str) -> None:
    """The DP quantile reads every record's norm in memory: a streaming engine is refused, naming the field."""
    cfg = _write(tmp_path, summary, clipping={"tau": "auto"}, engine={"name": "local", "chunk_rows": 1000})
    with pytest.raises(ConfigError, match=r"clipping.tau \('auto'\) needs engine 'memory', not 'local'"):
        load_config(cfg)
    load_config(_write(tmp_path, summary, clipping={"tau": 0.5}, engine={"name": "local", "chunk_rows": 1000}))
