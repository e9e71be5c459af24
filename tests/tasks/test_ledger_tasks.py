"""Two live runs of one release id never race for the same noise: a resumed reservation waits for its live owner.

``fdp.tasks.ledger.await_other_run`` (called by every flow's charge step when the id is already reserved with
the same config) waits while the run that reserved it is alive, takes the reservation over atomically when that
run stopped, and reports a publication or a cancellation by the other run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fdp.tasks.ledger import await_other_run

from fdpcore.errors import ConcurrentRunError, NotResumableError
from fdpcore.ledger import Ledger, owner_may_be_running, release_owner, this_process

KW = dict(config_sha256="0" * 64, summary="mean", mechanism="iclp_qr", sensitivity_formula="s",
          budget_splits=[], provenance={}, internal={})


@pytest.fixture
def other_process() -> Iterator[subprocess.Popen[bytes]]:
    """A live process of this host standing for another fdp run."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


def _reserved_by(tmp_path: Path, owner: dict[str, object]) -> tuple[Ledger, str]:
    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    led = Ledger(url)
    led.set_budget("ds", 3.0)
    led.reserve(release_id="r", dataset_id="ds", epsilon=1.0, delta=0.0, **KW)
    record = led.get("r")
    assert record is not None and release_owner(record) == this_process()  # the reserving run is recorded
    led.update_internal("r", {"reserved_by": owner})
    return led, url


def test_a_reservation_held_by_a_live_run_is_waited_for_not_resumed(
    tmp_path: Path, other_process: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    owner = {**this_process(), "pid": other_process.pid}
    led, url = _reserved_by(tmp_path, owner)
    monkeypatch.setenv("FDP_WAIT_SECONDS", "1")
    start = time.monotonic()
    with pytest.raises(ConcurrentRunError, match=r"still working on it after FDP_WAIT_SECONDS = 1 s.*charged nothing"):
        await_other_run.fn(url, "r")
    assert time.monotonic() - start >= 1.0
    record = led.get("r")
    assert record is not None and record.state == "reserved" and release_owner(record) == owner  # untouched


def test_the_other_run_publishing_meanwhile_is_reported(
    tmp_path: Path, other_process: subprocess.Popen[bytes]
) -> None:
    owner = {**this_process(), "pid": other_process.pid}
    led, url = _reserved_by(tmp_path, owner)

    def publish() -> None:  # what the other run does: draw (recording itself as the drawer), then publish
        time.sleep(1.0)
        led._transition("r", "reserved", "noised", internal=json.dumps({"reserved_by": owner, "noised_by": owner}))
        time.sleep(1.0)
        led.publish("r", {"manifest": {}, "files": {}})

    worker = threading.Thread(target=publish)
    worker.start()
    assert await_other_run.fn(url, "r") == "published"
    worker.join()


def test_the_other_run_giving_its_reservation_back_is_reported(
    tmp_path: Path, other_process: subprocess.Popen[bytes]
) -> None:
    led, url = _reserved_by(tmp_path, {**this_process(), "pid": other_process.pid})
    threading.Timer(0.8, led.cancel, args=("r",)).start()
    assert await_other_run.fn(url, "r") == "cancelled"


def test_a_reservation_whose_run_stopped_is_taken_over_once(
    tmp_path: Path, other_process: subprocess.Popen[bytes]
) -> None:
    led, url = _reserved_by(tmp_path, {**this_process(), "pid": other_process.pid})
    other_process.kill()
    other_process.wait()
    assert await_other_run.fn(url, "r") == "mine"
    record = led.get("r")
    assert record is not None and release_owner(record) == this_process()
    assert not owner_may_be_running(release_owner(record))  # its owner is this process: never "another live run"


_WAITER = """
import sys, time
from fdp.tasks.ledger import await_other_run
from pathlib import Path
try:
    print(await_other_run.fn(sys.argv[1], "r"), flush=True)
except Exception as exc:
    print(type(exc).__name__, flush=True)
deadline = time.monotonic() + 60
while not Path(sys.argv[2]).exists() and time.monotonic() < deadline:
    time.sleep(0.1)  # a run that took the reservation over stays alive (it would be computing its release)
"""


def test_of_two_runs_finding_the_same_abandoned_reservation_exactly_one_takes_it_over(tmp_path: Path) -> None:
    led, url = _reserved_by(tmp_path, {**this_process(), "pid": 2**22 + 12345})  # a process that is gone
    env = {**os.environ, "FDP_WAIT_SECONDS": "2"}
    done = tmp_path / "both-answered"
    procs = [subprocess.Popen([sys.executable, "-c", _WAITER, url, str(done)], stdout=subprocess.PIPE, text=True,
                              env=env) for _ in range(2)]
    # Each stays alive until both have answered: however late one starts (a loaded machine), the taker is still live.
    answers = [p.stdout.readline().strip() if p.stdout else "" for p in procs]
    done.touch()
    for p in procs:
        p.communicate(timeout=60)
    outcomes = sorted(answers)
    assert outcomes == ["ConcurrentRunError", "mine"]  # the other one waited for the live taker
    record = led.get("r")
    assert record is not None and record.state == "reserved" and release_owner(record)["pid"] in {p.pid for p in procs}


def test_noise_drawn_by_a_run_that_stopped_cannot_be_resumed(
    tmp_path: Path, other_process: subprocess.Popen[bytes]
) -> None:
    led, url = _reserved_by(tmp_path, this_process())
    led.mark_noised("r")
    led.update_internal("r", {"noised_by": {**this_process(), "pid": other_process.pid}})
    other_process.kill()
    other_process.wait()
    with pytest.raises(NotResumableError, match="The run that drew it stopped"):
        await_other_run.fn(url, "r")
