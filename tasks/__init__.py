"""Prefect tasks: thin wrappers that call fdpcore and pass schemas along.

Raw-data tasks and noise tasks never cache or persist results; the noise task has
no retries (a retry would draw fresh noise for the same charge). Ledger tasks shared
by every release flow live in :mod:`fdp.tasks.ledger`.

The names below are imported from their modules on first access, so importing one task module
(e.g. :mod:`fdp.tasks.ledger`) does not import the others.
"""

from importlib import import_module
from typing import Any

_HOMES = {
    "cancel_reservation": "fdp.tasks.ledger",
    "charge_budget": "fdp.tasks.ledger",
    "check_existing_release": "fdp.tasks.ledger",
    "republish_release": "fdp.tasks.ledger",
    "charge_request": "fdp.tasks.mean",
    "clip_curves": "fdp.tasks.mean",
    "draw_noise": "fdp.tasks.mean",
    "load_curves": "fdp.tasks.mean",
    "plan_release": "fdp.tasks.mean",
    "publish_release": "fdp.tasks.mean",
    "summarise_curves": "fdp.tasks.mean",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    """Import a task named in ``__all__`` from its module on first access."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(_HOMES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))
