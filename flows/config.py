"""Loading and hashing release configs (YAML -> validated ReleaseConfig)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from fdp.flows.registry import SUMMARIES
from fdpcore.errors import ConfigError


def load_config(path: str | Path) -> Any:
    """Read and validate a YAML release config; errors name the file and the field.

    The config's ``summary`` (default ``"mean"``) selects its model in :data:`fdp.flows.registry.SUMMARIES`.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file {str(p)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {str(p)!r} cannot be read ({exc})") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p.name}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{p.name}: the config must be a YAML mapping")
    summary = raw.get("summary", "mean")
    if summary not in SUMMARIES:
        raise ConfigError(f"{p.name}: invalid config\n  summary: {summary!r} must be one of {sorted(SUMMARIES)}")
    try:
        return SUMMARIES[summary].config_model.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{p.name}: invalid config\n{format_validation_error(exc)}") from None


def format_validation_error(exc: ValidationError) -> str:
    """One line per problem: ``  field.path: message``."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        lines.append(f"  {loc}: {msg}")
    return "\n".join(lines)


def config_sha256(config: BaseModel) -> str:
    """SHA-256 of the canonical JSON of a validated config (public; identifies the release definition)."""
    canonical = json.dumps(config.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()
