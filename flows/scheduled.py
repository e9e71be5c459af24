"""Scheduled organisational releases: one Prefect deployment per release series, on a cron schedule.

A release config names its **series** (``release: {name: …}``, default ``<dataset id>-<summary>``;
:func:`fdp.flows.config.series_name`). ``fdp serve`` deploys each series as
``scheduled-release/<series>``; any number of series of one dataset run side by side and share the
dataset's budget in the ledger. The release calendar maps a scheduled run to its budget period and
release id:

* period = the calendar month (UTC) of the run's *scheduled* start time, so a late or re-triggered
  run of the same schedule slot still belongs to its month;
* release id = ``<series>-<period>`` (e.g. ``adelaide-electricity-monday-mean-2026-11``), so a
  re-triggered run of the same period is idempotent: it re-writes the published files from the
  ledger and charges nothing;
* files go to ``<out_root>/<series>/<period>/``; the run and its summary subflow are both named
  ``<series>-<period>`` (no paths, and months tell apart in the UI).

The run is charged to that period: when the dataset's allowance for the period (or its total) is
exhausted, the run fails with the budget message (visible in the Prefect UI), and nothing is spent.

A run that ends *Failed* or *Crashed* posts a notification to the webhook ``notify_url`` (``fdp serve
--notify URL`` or ``$FDP_NOTIFY_URL``) through Prefect's ``CustomWebhookNotificationBlock``, from a
flow-run state hook (:func:`notify_failure`): it names the series, the month, the ledger state and
budget of that month and the next step of docs/operations.md — never data, never the error text.
A hook runs in the run's own process, so a process killed outright (``kill -9``) sends nothing: the
next run of the release marks it *Crashed* (:func:`fdp.tasks.ledger.attach_flow_run`).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fdp.flows.config import DEFAULT_CRON, config_sha256, load_config, series_name
from fdp.flows.registry import SUMMARIES
from prefect import flow, get_run_logger
from prefect.runtime import flow_run

from fdpcore.errors import ConfigError
from fdpcore.ledger import Ledger, current_period, default_ledger_url

__all__ = ["DEFAULT_CRON", "NEXT_STEP", "failure_message", "notify_failure", "release_calendar", "scheduled_release",
           "scheduled_run_name"]

#: The next step for each ledger state of a failed run (docs/operations.md, "Recovering a failed run").
NEXT_STEP = {
    "none": "nothing was charged: fix the cause shown in the run's message, then trigger the deployment again",
    "reserved": "no noise was drawn: trigger the deployment again (it resumes without a second charge) or "
                "`fdp budget cancel {release_id}`",
    "noised": "the charge is final and this month's release id is used up: `fdp budget grant` if the month's "
              "allowance is spent, then `fdp release CONFIG --release-id {release_id}-b --period {period}`",
    "published": "the release is published: trigger the deployment again to re-write its files",
    "cancelled": "the reservation was given back: trigger the deployment again",
}


def release_calendar(series: str, scheduled_start: datetime) -> tuple[str, str]:
    """The (period, release id) of a scheduled run of ``series``.

    >>> release_calendar("elec-mean", datetime(2026, 11, 30, 23, 59, tzinfo=UTC))
    ('2026-11', 'elec-mean-2026-11')
    """
    period = current_period(scheduled_start.astimezone(UTC))
    return period, f"{series}-{period}"


def _scheduled_start() -> datetime:
    start = flow_run.scheduled_start_time
    return start if isinstance(start, datetime) else datetime.now(UTC)


def scheduled_run_name() -> str:
    """The flow run name ``<series>-<YYYY-MM>`` (Prefect calls it when the run starts)."""
    return release_calendar(str(flow_run.parameters.get("series", "release")), _scheduled_start())[1]


def failure_message(series: str, period: str, state_name: str, ledger_url: str | None, dataset_id: str | None) -> str:
    """The notification text of a failed run: series, month, ledger state and budget, next step (no data)."""
    release_id = f"{series}-{period}"
    record, budget_text = None, "unknown (the ledger could not be read)"
    try:
        ledger = Ledger(ledger_url or default_ledger_url(), read_only=True)
        record = ledger.get(release_id)
        dataset = dataset_id or (record.dataset_id if record is not None else None)
        budgets = ledger.budgets(dataset) if dataset else []
        if budgets:
            b = budgets[0]
            month = next((p for p in b.periods if p.period == period), None)
            budget_text = f"dataset {b.dataset_id}: remaining epsilon {b.remaining[0]:.6g} of {b.total[0]:g} in total"
            if month is not None and month.allowance is not None and month.remaining is not None:
                budget_text += (f"; {period}: spent epsilon {month.spent[0]:.6g} of {month.allowance[0]:g} allowed, "
                                f"remaining {month.remaining[0]:.6g}")
    except Exception:  # noqa: BLE001 - a notification is sent even when the ledger is the problem
        pass
    ledger_state = record.state if record is not None else "none"
    step = NEXT_STEP.get(ledger_state, NEXT_STEP["none"]).format(release_id=release_id, period=period)
    return (f"fdp: scheduled release {release_id} (series {series}, month {period}) ended {state_name}. "
            f"Ledger: {'no entry' if record is None else ledger_state}. Budget: {budget_text}. Next step: {step} "
            "(docs/operations.md, Recovering a failed run).")


def notify_failure(flow: Any, run: Any, state: Any) -> None:
    """Flow-run state hook (on failure and on crash): post :func:`failure_message` to the configured webhook."""
    from prefect.blocks.notifications import CustomWebhookNotificationBlock

    params = run.parameters or {}
    url = params.get("notify_url") or os.environ.get("FDP_NOTIFY_URL")
    if not url:
        return
    series = str(params.get("series", "?"))
    start = run.expected_start_time or datetime.now(UTC)
    period, release_id = release_calendar(series, start)
    text = failure_message(series, period, state.name, params.get("ledger_url"), params.get("dataset_id"))
    block = CustomWebhookNotificationBlock(
        name="fdp-failed-release", url=url, allow_private_urls=True, timeout=10,
        json_data={"text": "{{body}}", "subject": "{{subject}}", "series": series, "month": period,
                   "release_id": release_id, "state": state.name})
    try:
        block.notify(body=text, subject=f"fdp: {release_id} {state.name}")
    except Exception as exc:  # noqa: BLE001 - say so in the run's log; never mask the run's own state
        get_run_logger().warning("the failure notification to the webhook could not be sent (%s)", type(exc).__name__)


@flow(name="scheduled-release", flow_run_name=scheduled_run_name, persist_result=False, retries=0,
      on_failure=[notify_failure], on_crashed=[notify_failure])
def scheduled_release(
    config_path: str,
    series: str,
    config_sha256_served: str,
    ledger_url: str | None = None,
    out_root: str = "releases",
    notify_url: str | None = None,
    dataset_id: str | None = None,
) -> dict[str, Any]:
    """Run the release of series ``series`` (config ``config_path``) for the period of this run's scheduled start.

    Files go to ``<out_root>/<series>/<period>/``. The summary's own flow runs as a subflow with the
    same name, so its artifacts (release note, budget splits, plot) appear under it in the UI.
    ``notify_url`` (a webhook) is told when the run fails or crashes; ``dataset_id`` names the budget
    shown in that notification.

    Raises:
        ConfigError: the config file changed since ``fdp serve`` deployed it (its hash differs from
            ``config_sha256_served``), or names another series; nothing is charged.
    """
    config = load_config(config_path)
    digest = config_sha256(config)
    if digest != config_sha256_served or series_name(config) != series:
        raise ConfigError(
            f"config {Path(config_path).name!r} changed since series {series!r} was served (config sha256 "
            f"{digest[:12]}... instead of {config_sha256_served[:12]}...); restart `fdp serve` to serve the new "
            "definition (under a new release.name if the series has releases). Nothing was charged")
    period, release_id = release_calendar(series, _scheduled_start())
    url = ledger_url or default_ledger_url()
    out_dir = Path(out_root) / series / period
    summary_flow: Any = SUMMARIES[config.summary].flow
    manifest: dict[str, Any] = summary_flow.with_options(flow_run_name=release_id)(
        config=config, config_sha256=digest, config_dir=str(Path(config_path).resolve().parent),
        out_dir=str(out_dir), ledger_url=url, release_id=release_id, period=period,
    )
    return manifest
