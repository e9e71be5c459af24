"""Scheduled runs (``fdp serve``): two runs of one release id at once, re-writes, and the failure notification.

From a new operator's trial: after ``kill -9`` and a restart, two runs of one scheduled release id ran at
once; one published, the other failed with "drew its noise but was not published" and the webhook told
the team to spend the budget again under a new id. A run that finds the id held by another live run now
waits for it and completes; the notification reads the ledger when it is sent and never advises a new id
while the release is published or may still be publishing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fdp.flows.config import config_sha256, load_config
from fdp.flows.scheduled import already_notified, failure_message, forget_notified, notify_failure
from flow_support import small_csv_release
from prefect.logging import disable_run_logger
from prefect.settings import PREFECT_API_URL

from fdpcore.ledger import Ledger, current_period

DRIVER = Path(__file__).with_name("scheduled_driver.py")
SERIES = "sched-mean"


@pytest.fixture
def series(tmp_path: Path) -> dict[str, Any]:
    """A small CSV dataset (30 units x 6 times), its release config of series ``sched-mean`` and run parameters."""
    path = small_csv_release(tmp_path, "sched", release={"name": SERIES})
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    params = {"config_path": str(path), "series": SERIES, "config_sha256_served": config_sha256(load_config(path)),
              "ledger_url": url, "out_root": str(tmp_path / "releases"), "dataset_id": "sched"}
    return {"params": params, "url": url, "rid": f"{SERIES}-{current_period()}", "root": tmp_path}


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value()), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "FDP_LINEAGE_FILE": str(tmp_path / "lineage.jsonl"), "FDP_WAIT_SECONDS": "180", **extra}


def _driver(params: dict[str, Any], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(DRIVER), json.dumps(params)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_for_state(url: str, rid: str, state: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = Ledger(url).get(rid) if Path(url.removeprefix("sqlite:///")).exists() else None
        if record is not None and record.state == state:
            return
        time.sleep(0.2)
    raise AssertionError(f"{rid} never reached {state}")


def test_a_second_run_of_the_same_scheduled_release_waits_for_the_live_one_and_completes(series: dict[str, Any]) -> None:
    """Two runs of one id at once: the second finds it noised by the first (alive, about to publish), waits,
    and completes by re-writing the files — nothing charged twice, no failure, every lineage START ended."""
    params, url, rid, root = series["params"], series["url"], series["rid"], series["root"]
    flag = root / "publish-now"
    first = _driver(params, _env(root, PAUSE_BEFORE_PUBLISH=str(flag)))
    try:
        _wait_for_state(url, rid, "noised")  # the first run drew its noise and is alive, before its ledger entry closes
        second = _driver(params, _env(root))
        assert second.stderr is not None
        seen = []
        for line in second.stderr:  # the second run loads the data and plans; its next step is the charge
            seen.append(line)
            if "noise planned from public inputs" in line:
                break
        time.sleep(3)  # it reached the charge: it must be waiting for the first run, not failed
        assert second.poll() is None, "".join(seen)[-3000:] + second.communicate()[1][-3000:]
        assert Ledger(url).get(rid).state == "noised"
        flag.touch()
        out1, err1 = first.communicate(timeout=180)
        out2, err2 = second.communicate(timeout=180)
        err2 = "".join(seen) + err2
    finally:
        for proc in (first, locals().get("second")):
            if proc is not None and proc.poll() is None:
                proc.kill()
    assert first.returncode == 0, err1[-3000:]
    assert second.returncode == 0, err2[-3000:]
    assert "NotResumableError" not in err2
    assert "already published — files re-written, nothing charged" in err2  # one INFO line in the run's log
    assert json.loads(out2.splitlines()[-1]) == {"release_id": rid}
    led = Ledger(url)
    assert led.get(rid).state == "published" and led.budgets("sched")[0].spent == (1.0, 0.0) and led.verify() == []
    manifest = json.loads((root / "releases" / SERIES / current_period() / "manifest.json").read_text())
    assert manifest == led.get(rid).public["manifest"]
    events = [json.loads(line) for line in (root / "lineage.jsonl").read_text().splitlines()]
    starts = [e["run"]["runId"] for e in events if e["eventType"] == "START"]
    ends = [e["run"]["runId"] for e in events if e["eventType"] in ("COMPLETE", "FAIL", "ABORT")]
    assert len(starts) == 2 and sorted(starts) == sorted(ends), events


def test_a_rerun_of_a_published_scheduled_release_logs_it_and_ends_its_lineage_run(series: dict[str, Any]) -> None:
    """Issue: 24 START vs 4 COMPLETE + 4 FAIL; a re-write run logged nothing saying what it did."""
    params, root = series["params"], series["root"]
    for _ in range(2):
        proc = _driver(params, _env(root))
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
    said = [line for line in err.splitlines() if "already published — files re-written, nothing charged" in line]
    assert len(said) == 2, err[-3000:]  # the re-run says so once in each of its runs: the scheduled one, its summary's
    assert all(f"Flow run '{SERIES}-{current_period()}'" in line for line in said)
    events = [json.loads(line) for line in (root / "lineage.jsonl").read_text().splitlines()]
    assert [e["eventType"] for e in events] == ["START", "COMPLETE", "START", "COMPLETE"]
    first, rerun = events[1], events[3]
    assert rerun["run"]["runId"] == events[2]["run"]["runId"] != first["run"]["runId"]
    assert "fdp_privacy" in first["run"]["facets"]
    assert "fdp_privacy" not in rerun["run"].get("facets", {})  # a re-write is not a second release: no second facet
    assert Ledger(series["url"]).budgets("sched")[0].spent == (1.0, 0.0)


# ------------------------------------------------------------------ the failure notification


def _reserved(url: str, rid: str) -> None:
    led = Ledger(url)
    led.set_budget("sched", 3.0)
    led.reserve(release_id=rid, dataset_id="sched", epsilon=1.0, delta=0.0, config_sha256="c" * 64, summary="mean",
                mechanism="iclp_qr", sensitivity_formula="sensitivity.mean.iclp_qr.exact_l2@1",
                budget_splits=[{"name": "mean", "epsilon": 1.0, "delta": 0.0}], provenance={}, internal={})


def _noised_by_a_live_process(url: str, rid: str) -> subprocess.Popen[str]:
    """Another process of this host draws the noise of ``rid`` (the ledger records it) and stays alive."""
    _reserved(url, rid)
    code = (f"import sys, time; from fdpcore.ledger import Ledger; Ledger({url!r}).mark_noised({rid!r}); "
            "print('noised', flush=True); time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "noised"
    return proc


def test_the_notification_never_advises_a_new_id_while_another_run_may_be_publishing(tmp_path: Path) -> None:
    url, period = f"sqlite:///{tmp_path / 'l.sqlite'}", current_period()
    rid = f"{SERIES}-{period}"
    alive = _noised_by_a_live_process(url, rid)
    try:
        text = failure_message(SERIES, period, "Failed", url, "sched")
    finally:
        alive.kill()
        alive.wait()
    assert "Ledger: noised." in text
    assert "another run of this release is publishing it right now" in text
    assert f"check `fdp audit show {rid}` in 10 minutes" in text  # FDP_WAIT_SECONDS, default 600
    assert "-b" not in text and "release id is used up" not in text
    # the run that drew the noise is gone: now the id is used up, and the text says so
    gone = failure_message(SERIES, period, "Failed", url, "sched")
    assert "release id is used up" in gone and f"--release-id {rid}-b" in gone


def test_the_notification_reads_the_ledger_when_it_is_sent(tmp_path: Path) -> None:
    """Published meanwhile by the other run: the text says published (no new id)."""
    url, period = f"sqlite:///{tmp_path / 'l.sqlite'}", current_period()
    rid = f"{SERIES}-{period}"
    _reserved(url, rid)
    Ledger(url).mark_noised(rid)
    Ledger(url).publish(rid, {"manifest": {"release_id": rid}, "files": {}})
    text = failure_message(SERIES, period, "Failed", url, "sched")
    assert "Ledger: published." in text and "the release is published" in text and "-b" not in text


def test_a_dataset_not_yet_in_the_ledger_is_told_as_such_not_as_an_unreadable_ledger(tmp_path: Path) -> None:
    url, period = f"sqlite:///{tmp_path / 'l.sqlite'}", current_period()
    Ledger(url)  # created, readable, empty
    text = failure_message(SERIES, period, "Failed", url, "nottingham-missing")
    assert "Budget: no budget policy for dataset nottingham-missing yet." in text
    assert "could not be read" not in text
    broken = tmp_path / "not-a-db.sqlite"
    broken.write_text("garbage")
    unread = failure_message(SERIES, period, "Failed", f"sqlite:///{broken}", "nottingham-missing")
    assert "Budget: unknown (the ledger could not be read)." in unread
    # trial Q (F1): the release's state is unknown too, never "no entry" with "nothing was charged"
    assert "Ledger: unknown (the ledger could not be read)." in unread and "no entry" not in unread
    assert "nothing was charged: fix" not in unread and f"`fdp audit show {SERIES}-{period}` says which" in unread


def test_an_exhausted_allowance_or_total_is_told_with_its_real_next_step(tmp_path: Path) -> None:
    url, period = f"sqlite:///{tmp_path / 'l.sqlite'}", current_period()
    Ledger(url).set_budget("sched", 12.0, period="month", epsilon_per_period=2.0)
    cause = (f"Flow run encountered an exception: BudgetExceededError: allowance of period {period} of dataset "
             "'sched' would be exceeded; nothing was spent. Requested: epsilon=1, delta=0.")
    text = failure_message(SERIES, period, "Failed", url, "sched", cause)
    assert f"`fdp budget grant sched --period {period} --epsilon E`" in text
    assert "or wait for the next month" in text and "fix the cause" not in text
    assert "Requested:" not in text  # the error's own text is never sent
    total = failure_message(SERIES, period, "Failed", url, "sched",
                            "BudgetExceededError: total budget of dataset 'sched' would be exceeded; nothing was spent.")
    assert "total budget of dataset sched cannot pay" in total and "`fdp budget set sched" in total
    proposal = failure_message(SERIES, period, "Failed", url, "other", cause)  # refused before the dataset existed
    assert "the config's `budget:` proposal for dataset other" in proposal
    assert "Next step: nothing was charged: fix the cause" in failure_message(SERIES, period, "Failed", url, "sched",
                                                                             "ConfigError: column 'x' is missing")


def _hook_call(url: str, notify: str, message: str) -> None:
    run = SimpleNamespace(parameters={"series": SERIES, "ledger_url": url, "dataset_id": "sched", "notify_url": notify},
                          expected_start_time=None)
    with disable_run_logger():  # a hook runs in its flow run's context; here there is none
        notify_failure(None, run, SimpleNamespace(name="Failed", message=message))


def test_a_series_failing_every_minute_notifies_once_per_month_and_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A minute cron and a failing series: one webhook per series, month and cause, not one per tick."""
    from prefect.blocks.notifications import CustomWebhookNotificationBlock

    sent: list[str] = []
    monkeypatch.setattr(CustomWebhookNotificationBlock, "notify", lambda self, body, subject=None: sent.append(body))
    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    Ledger(url)
    for _ in range(5):
        _hook_call(url, "http://127.0.0.1:9/hook", "ConfigError: column 'x' is missing")
    assert len(sent) == 1
    _hook_call(url, "http://127.0.0.1:9/hook", "ConfigError: column 'y' is missing")  # another cause: told
    assert len(sent) == 2
    forget_notified(SERIES)  # a completed run in between: the same cause is told again
    _hook_call(url, "http://127.0.0.1:9/hook", "ConfigError: column 'y' is missing")
    assert len(sent) == 3
    assert json.loads((tmp_path / "fdp-state" / "notified.json").read_text())[SERIES]["period"] == current_period()
    assert "column" not in (tmp_path / "fdp-state" / "notified.json").read_text()  # a digest, never the message
    assert not already_notified("other-series", current_period(), "x")
    assert already_notified("other-series", current_period(), "x")
    assert not already_notified("other-series", "2099-01", "x")  # a new month notifies again


def test_a_run_the_budget_refuses_logs_the_reason_without_a_traceback(series: dict[str, Any]) -> None:
    """A new user's `fdp serve` printed the full traceback of every budget-refused run three or four times."""
    led = Ledger(series["url"])
    led.set_budget("sched", 0.5)  # the release costs 1
    run = _driver(series["params"], _env(series["root"]))
    _, err = run.communicate(timeout=300)
    assert run.returncode != 0
    assert "would be exceeded" in err  # the reason is logged ...
    assert "Traceback (most recent call last)" not in err, err[-3000:]  # ... as a message, not a stack
    assert led.budgets("sched")[0].spent == (0.0, 0.0)
    # trial Q, F4: refused before the summary's run reads the data (it did read and plan every tick, then refuse)
    assert "curves aligned" not in err and f"Beginning subflow run '{SERIES}-" not in err, err[-3000:]


def test_a_run_refused_for_a_changed_config_is_told_to_restart_serve_not_to_trigger_again(tmp_path: Path) -> None:
    """Trial I: after a config edit the month's release was already published, and the webhook said "the release is
    published: trigger the deployment again" — which fails the same way (and is then de-duplicated)."""
    url, period = f"sqlite:///{tmp_path / 'l.sqlite'}", current_period()
    rid = f"{SERIES}-{period}"
    _reserved(url, rid)
    Ledger(url).mark_noised(rid)
    Ledger(url).publish(rid, {"manifest": {"release_id": rid}, "files": {}})
    cause = (f"Flow run encountered an exception: ConfigError: config 'c.yaml' changed since series {SERIES!r} was "
             "served (config sha256 0123456789ab... instead of ba9876543210...); restart `fdp serve` ...")
    text = failure_message(SERIES, period, "Failed", url, "sched", cause)
    assert "Ledger: published." in text  # the month's release is there
    assert "`fdp serve` is restarted" in text and "triggering the deployment again fails the same way" in text
    assert "trigger the deployment again to re-write" not in text
