"""One JSON Schema for every summary (issue 16): a union discriminated by ``summary``, every field described."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest
import yaml
from fdp.schemas.union import CONFIG_MODELS, AnyReleaseConfig, release_config_json_schema
from pydantic import BaseModel, TypeAdapter

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


def _nested_models(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _nested_models(arg)]


def _fields(model: type[BaseModel], seen: set[type[BaseModel]]) -> list[tuple[str, str, str | None]]:
    if model in seen:
        return []
    seen.add(model)
    out = []
    for name, field in model.model_fields.items():
        out.append((model.__name__, name, field.description))
        for nested in _nested_models(field.annotation):
            out += _fields(nested, seen)
    return out


@pytest.mark.parametrize("summary", sorted(CONFIG_MODELS))
def test_every_field_of_every_summary_config_has_a_description(summary: str) -> None:
    fields = _fields(CONFIG_MODELS[summary], set())
    assert len(fields) > 10
    missing = [f"{m}.{n}" for m, n, d in fields if not d]
    assert not missing, f"fields without a description: {missing}"


def test_the_schema_is_one_union_discriminated_by_summary() -> None:
    schema = release_config_json_schema()
    assert schema["discriminator"]["propertyName"] == "summary"
    assert set(schema["discriminator"]["mapping"]) == set(CONFIG_MODELS) == {"mean", "covariance", "fosr", "fpca", "kde", "erm"}
    assert len(schema["oneOf"]) == 6
    fpca = schema["$defs"]["ReferenceCurveSpec"]["properties"]
    assert "source time units" in fpca["time"]["description"] and "source value units" in fpca["value"]["description"]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_config_validates_against_the_emitted_json_schema(example: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    raw = yaml.safe_load(example.read_text())
    jsonschema.Draft202012Validator(release_config_json_schema()).validate(raw)
    parsed = TypeAdapter(AnyReleaseConfig).validate_python(raw)  # and through pydantic, by its summary
    assert parsed.summary == raw.get("summary", "mean")


def test_the_json_schema_rejects_a_config_of_one_summary_tagged_as_another() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    raw = yaml.safe_load((REPO / "examples" / "growth_fosr.yaml").read_text())
    raw["summary"] = "covariance"
    with pytest.raises(jsonschema.ValidationError, match="is not valid under any of the given schemas"):
        jsonschema.Draft202012Validator(release_config_json_schema()).validate(raw)


def test_kde_bandwidth_auto_is_accepted_described_and_its_share_only_with_auto() -> None:
    from pydantic import ValidationError

    raw = yaml.safe_load((REPO / "examples" / "kde_1d.yaml").read_text())
    schema = release_config_json_schema()
    kde = schema["$defs"]["KdeReleaseConfig"]["properties"]
    assert "auto" in str(kde["bandwidth"]) and "tuning.kde.bandwidth_auto@1" in kde["bandwidth"]["description"]
    assert kde["bandwidth_share"]["default"] == 0.1 and "auto" in kde["bandwidth_share"]["description"]
    parsed = TypeAdapter(AnyReleaseConfig).validate_python({**raw, "bandwidth": "auto", "bandwidth_share": 0.2})
    assert parsed.bandwidth == "auto" and parsed.bandwidth_share == 0.2  # type: ignore[union-attr]
    with pytest.raises(ValidationError, match="bandwidth_share is only used with bandwidth 'auto'"):
        TypeAdapter(AnyReleaseConfig).validate_python({**raw, "bandwidth_share": 0.2})
