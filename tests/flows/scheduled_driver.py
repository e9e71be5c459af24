"""Run one scheduled release (``scheduled_release``) in this process (a test helper, not a test).

    python scheduled_driver.py '{"config_path": ..., "series": ..., ...}'

With ``$PAUSE_BEFORE_PUBLISH`` = a path, the run stops after its noise is drawn (the ledger says ``noised``,
by this live process), prints ``scheduled-driver: noised`` on standard error and publishes only once that
path exists: so a test can start a second run of the same release id while the first holds it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from fdp.flows.scheduled import scheduled_release

from fdpcore.errors import FdpError
from fdpcore.ledger import Ledger


def _pause_before_publish(flag: str) -> None:
    original = Ledger.publish

    def publish(self: Ledger, *args: Any, **kwargs: Any) -> Any:
        print("scheduled-driver: noised", file=sys.stderr, flush=True)
        while not os.path.exists(flag):
            time.sleep(0.1)
        return original(self, *args, **kwargs)

    Ledger.publish = publish  # type: ignore[method-assign]


if __name__ == "__main__":
    if os.environ.get("PAUSE_BEFORE_PUBLISH"):
        _pause_before_publish(os.environ["PAUSE_BEFORE_PUBLISH"])
    try:
        manifest = scheduled_release(**json.loads(sys.argv[1]))
    except FdpError as exc:  # what the run logged is the test's subject; this process's own exit says only the type
        print(f"scheduled-driver: failed with {type(exc).__name__}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"release_id": manifest["release_id"]}))
