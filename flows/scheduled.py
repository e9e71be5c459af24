"""Scheduled organisational releases: one Prefect deployment per release config, on a cron schedule.

The release calendar maps a scheduled run to its budget period and release id:

* period = the calendar month (UTC) of the run's *scheduled* start time, so a late or re-triggered
  run of the same schedule slot still belongs to its month;
* release id = ``<dataset id>-<period>`` (e.g. ``adelaide-electricity-monday-2026-11``), so a
  re-triggered run of the same period is idempotent: it re-writes the published files from the
  ledger and charges nothing.

The run is charged to that period: when the dataset's allowance for the period (or its total) is
exhausted, the run fails with the budget message (visible in the Prefect UI), and nothing is spent.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prefect import flow
from prefect.runtime import flow_run

from fdp.flows.config import DEFAULT_CRON, config_sha256, load_config
from fdp.flows.registry import SUMMARIES
from fdpcore.ledger import current_period, default_ledger_url

__all__ = ["DEFAULT_CRON", "release_calendar", "scheduled_release"]


def release_calendar(dataset_id: str, scheduled_start: datetime) -> tuple[str, str]:
    """The (period, release id) of a scheduled run of ``dataset_id``.

    >>> release_calendar("elec", datetime(2026, 11, 30, 23, 59, tzinfo=UTC))
    ('2026-11', 'elec-2026-11')
    """
    period = current_period(scheduled_start.astimezone(UTC))
    return period, f"{dataset_id}-{period}"


@flow(name="scheduled-release", flow_run_name="scheduled-{config_path}", persist_result=False, retries=0)
def scheduled_release(config_path: str, ledger_url: str | None = None, out_root: str = "releases") -> dict[str, Any]:
    """Run the release of ``config_path`` for the period of this run's scheduled start.

    Files go to ``<out_root>/<dataset id>/<period>/``. The summary's own flow runs as a subflow,
    so its artifacts (release note, budget splits, plot) appear under it in the UI.
    """
    config = load_config(config_path)
    scheduled = flow_run.scheduled_start_time or datetime.now(UTC)
    period, release_id = release_calendar(config.dataset.id, scheduled)
    url = ledger_url or default_ledger_url()
    out_dir = Path(out_root) / config.dataset.id / period
    manifest: dict[str, Any] = SUMMARIES[config.summary].flow(
        config=config, config_sha256=config_sha256(config), config_dir=str(Path(config_path).resolve().parent),
        out_dir=str(out_dir), ledger_url=url, release_id=release_id, period=period,
    )
    return manifest
