"""One JSON Schema for every release config: a union discriminated by ``summary`` (default ``"mean"``).

``fdp schema release-config`` prints :func:`release_config_json_schema`; :data:`AnyReleaseConfig`
validates any config with pydantic (the same models :func:`fdp.flows.config.load_config` uses).
"""

from __future__ import annotations

from typing import Annotated, Any, Union

from fdp.schemas.config import ReleaseConfig
from fdp.schemas.covariance import CovarianceReleaseConfig
from fdp.schemas.erm import ErmReleaseConfig
from fdp.schemas.fosr import FosrReleaseConfig
from fdp.schemas.fpca import FpcaReleaseConfig
from fdp.schemas.kde import KdeReleaseConfig
from pydantic import BaseModel, Discriminator, Tag, TypeAdapter

__all__ = ["CONFIG_MODELS", "AnyReleaseConfig", "release_config_json_schema"]

#: The config model of each ``summary``.
CONFIG_MODELS: dict[str, type[BaseModel]] = {
    "mean": ReleaseConfig, "covariance": CovarianceReleaseConfig, "fosr": FosrReleaseConfig,
    "fpca": FpcaReleaseConfig, "kde": KdeReleaseConfig, "erm": ErmReleaseConfig,
}


def _summary(value: Any) -> str | None:
    """The tag of a raw config (``summary``, default ``"mean"``) or of a validated one."""
    if isinstance(value, dict):
        tag = value.get("summary", "mean")
        return tag if isinstance(tag, str) else None
    return getattr(value, "summary", None)


#: The union of every summary's config, discriminated by ``summary`` (built from :data:`CONFIG_MODELS`, so a new
#: summary is added in one place; a type checker sees it as ``Any``).
AnyReleaseConfig: Any = Annotated[
    Union[tuple(Annotated[model, Tag(name)] for name, model in CONFIG_MODELS.items())],  # noqa: UP007
    Discriminator(_summary),
]


def release_config_json_schema() -> dict[str, Any]:
    """JSON Schema (2020-12) of every release config: ``oneOf`` the summaries, discriminated by ``summary``."""
    schema = TypeAdapter(AnyReleaseConfig).json_schema()
    refs = {name: f"#/$defs/{model.__name__}" for name, model in CONFIG_MODELS.items()}
    schema["discriminator"] = {"propertyName": "summary", "mapping": refs}
    schema["title"] = "fdp release config"
    schema["description"] = ("A release config (YAML). `summary` selects the model: " + ", ".join(refs)
                             + " (default mean). Every field states its units where it has any.")
    return schema
