"""Schema contracts: JSON round trip, extra fields and NaN rejected, JSON Schema export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from fdp.schemas import BudgetSplit, ReleaseConfig, ReleaseManifest
from pydantic import ValidationError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "electricity_mean.yaml"


def _example() -> dict:
    return yaml.safe_load(EXAMPLE.read_text())


def test_example_config_round_trips_through_json() -> None:
    cfg = ReleaseConfig.model_validate(_example())
    again = ReleaseConfig.model_validate_json(cfg.model_dump_json())
    assert again == cfg
    assert cfg.kernel == {"name": "matern", "nu": 1.5, "rho": 0.1}


@pytest.mark.parametrize(
    ("path", "value", "match"),
    [
        (("privacy", "epsilon"), float("nan"), "privacy.epsilon"),
        (("privacy", "epsilon"), 0, "privacy.epsilon"),
        (("privacy", "epsilon"), True, "not a boolean"),
        (("privacy", "epsilon"), "1", "not text"),
        (("privacy", "epsilon"), "1e-3", r"not text \(YAML reads an exponent without a decimal point as text: write 1.0e-3\)"),
        (("privacy", "epsilon"), 1e-300, "must be at least 1e-09"),
        (("clipping", "tau"), "0.5", "not text"),
        (("grid", "size"), 10**6, "grid.size"),
        (("privacy", "delta"), 1.0, "privacy.delta"),
        (("privacy", "delta"), 0.01, "pure-DP"),
        (("clipping", "tau"), -1, "clipping.tau"),
        (("grid", "size"), 1, "grid.size"),
        (("budget", "epsilon"), float("inf"), "budget.epsilon"),
        (("tuning", "eta"), 1.5, "eta and psi must be given together"),
        (("tuning", "rule"), "oracle", "tuning.rule"),
        (("kernel",), {"name": "matern", "nu": 1.5, "rho": -0.1}, "kernel.rho"),
        (("kernel",), {"name": "cosine"}, "kernel.name"),
        (("dataset", "time_domain"), [1.0, 0.0], "time_domain"),
        (("surprise",), 1, "surprise"),
    ],
)
def test_invalid_configs_are_rejected_naming_the_field(path: tuple[str, ...], value: object, match: str) -> None:
    raw = _example()
    node = raw
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(ValidationError, match=match):
        ReleaseConfig.model_validate(raw)


def test_trapezoid_grid_needs_increasing_points() -> None:
    raw = _example()
    raw["grid"] = {"rule": "trapezoid", "points": [0.0, 0.5, 0.5, 1.0]}
    with pytest.raises(ValidationError, match="strictly increasing"):
        ReleaseConfig.model_validate(raw)


def test_budget_split_rejects_negative_and_extra() -> None:
    with pytest.raises(ValidationError, match="epsilon"):
        BudgetSplit(name="mean", epsilon=-0.1)
    with pytest.raises(ValidationError, match="extra"):
        BudgetSplit.model_validate({"name": "mean", "epsilon": 0.1, "seed": 1})


def test_manifest_schema_exports_required_fields() -> None:
    schema = ReleaseManifest.model_json_schema()
    for key in ("release_id", "dataset_id", "n", "privacy", "budget_splits", "sensitivity", "noise", "outputs", "provenance"):
        assert key in schema["required"]
    json.dumps(schema)
    assert schema["additionalProperties"] is False


def test_every_manifest_describes_idealized_numerics_and_the_with_bias_figure() -> None:
    """Trial H, F10: ``idealized_numerics: true`` was in every manifest with no description in ``fdp schema manifest``."""
    from fdp.schemas.covariance import CovarianceManifest
    from fdp.schemas.fosr import FosrManifest
    from fdp.schemas.fpca import FpcaManifest
    from fdp.schemas.kde import PointManifest

    for model in (ReleaseManifest, CovarianceManifest, FosrManifest, FpcaManifest, PointManifest):
        field = model.model_json_schema()["properties"]["idealized_numerics"]
        assert field["default"] is True
        assert "proved in exact real arithmetic" in field["description"], model.__name__
        assert "not bounded in the proofs" in field["description"]
    noise = ReleaseManifest.model_json_schema()["$defs"]["NoiseRecord"]["properties"]
    assert "not the bias of this data" in noise["expected_l2_error_with_bias"]["description"]


@pytest.mark.parametrize("example", ["kde_2d.yaml", "erm_svm_2d.yaml"])
def test_a_two_coordinate_grid_counts_its_tensor_nodes_against_the_grid_limit(example: str) -> None:
    """Trial M: a 100 x 100 density surface was accepted and kept `fdp plan` busy for over 5 minutes."""
    from fdp.schemas.erm import ErmReleaseConfig
    from fdp.schemas.kde import KdeReleaseConfig

    model = KdeReleaseConfig if example.startswith("kde") else ErmReleaseConfig
    raw = yaml.safe_load((Path(__file__).resolve().parents[2] / "examples" / example).read_text())
    raw["grid"]["size"] = 63  # 3969 nodes: allowed
    assert model.model_validate(raw).grid.size == 63
    raw["grid"]["size"] = 64
    with pytest.raises(ValidationError, match=r"64 x 64 tensor grid, 4096 nodes; at most 4000 .* grid.size at most 63"):
        model.model_validate(raw)
