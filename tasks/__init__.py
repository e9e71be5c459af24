"""Prefect tasks: thin wrappers that call fdpcore and pass schemas along.

Raw-data tasks and noise tasks never cache or persist results; the noise task has
no retries (a retry would draw fresh noise for the same charge). Ledger tasks shared
by every release flow live in :mod:`fdp.tasks.ledger`.
"""

from fdp.tasks.ledger import cancel_reservation, charge_budget, check_existing_release, republish_release
from fdp.tasks.mean import (
    charge_request,
    clip_curves,
    draw_noise,
    load_curves,
    plan_release,
    publish_release,
    summarise_curves,
)

__all__ = [
    "cancel_reservation",
    "charge_budget",
    "charge_request",
    "check_existing_release",
    "clip_curves",
    "draw_noise",
    "load_curves",
    "plan_release",
    "publish_release",
    "republish_release",
    "summarise_curves",
]
