"""Run ``fdp`` in this process and SIGKILL it at one stage of a release (a test helper, not a test).

    python crash_driver.py STAGE fdp-arguments...

Stages: ``before_charge`` (data loaded, nothing charged), ``after_charge`` (reserved, no noise),
``after_noise`` (noise drawn, ledger entry not closed), ``after_publish`` (ledger closed, no file
written), ``after_files`` (files written, Prefect artifacts not created).
"""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from fdp.flows.cli import main
from fdp.tasks import _publish
from fdpcore.ledger import Ledger


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


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
    "after_noise": (Ledger, "publish", False),
    "after_publish": (_publish, "write_release", False),
    "after_files": (_publish, "create_artifacts", False),
}

if __name__ == "__main__":
    owner, attr, kill_after = STAGES[sys.argv[1]]
    _kill_around(owner, attr, after=kill_after)
    sys.exit(main(sys.argv[2:]))
