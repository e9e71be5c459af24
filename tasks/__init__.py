"""Prefect tasks: thin wrappers that call fdpcore and pass schemas along.

Raw-data tasks and noise tasks never cache or persist results; the noise task has
no retries (a retry would draw fresh noise for the same charge).
"""

from fdp.tasks.mean import (
    cancel_reservation,
    charge_budget,
    check_existing_release,
    clip_curves,
    draw_noise,
    load_curves,
    plan_release,
    publish_release,
    republish_release,
    summarise_curves,
)

__all__ = [
    "cancel_reservation",
    "charge_budget",
    "check_existing_release",
    "clip_curves",
    "draw_noise",
    "load_curves",
    "plan_release",
    "publish_release",
    "republish_release",
    "summarise_curves",
]
