"""Run ``fdp`` in this process and SIGKILL it at one stage of a release (a test helper, not a test).

    python crash_driver.py STAGE fdp-arguments...

``$CRASH_SIGNAL`` picks another signal sent to the process itself at that stage (``TERM``, ``INT``), or
``WAIT`` to stop there (the test then signals the process from outside).

Stages: ``before_charge`` (data loaded, nothing charged), ``after_charge`` (reserved, no noise),
``before_noise`` (reserved, inside the flow's noise step, just before the ledger marks it noised),
``after_noise`` (noise drawn, ledger entry not closed), ``after_publish`` (ledger closed, no file
written), ``after_files`` (files written, Prefect artifacts not created).
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from fdp.flows.cli import main
from fdp.tasks import _publish

from fdpcore.ledger import Ledger


def _die() -> None:
    how = os.environ.get("CRASH_SIGNAL", "KILL")
    if how == "WAIT":
        print("crash-driver: waiting", file=sys.stderr, flush=True)
        time.sleep(600)
        return
    os.kill(os.getpid(), getattr(signal, f"SIG{how}"))


def _kill_around(owner: Any, name: str, *, after: bool) -> None:
    original: Callable[..., Any] = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not after:
            _die()
        result = original(*args, **kwargs)
        _die()
        return result

    setattr(owner, name, wrapper)


STAGES = {
    "before_charge": (Ledger, "reserve", False),
    "after_charge": (Ledger, "reserve", True),
    "before_noise": (Ledger, "mark_noised", False),
    "after_noise": (Ledger, "publish", False),
    "after_publish": (_publish, "write_release", False),
    "after_files": (_publish, "create_artifacts", False),
}

if __name__ == "__main__":
    owner, attr, kill_after = STAGES[sys.argv[1]]
    _kill_around(owner, attr, after=kill_after)
    sys.exit(main(sys.argv[2:]))
