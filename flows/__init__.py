"""Prefect flows of fdp and the ``fdp`` command line."""

import os

# Prefect reads its settings when it is first imported, so these defaults come first.
# A fresh Prefect home migrates its database before the temporary API answers, which takes
# longer than Prefect's 20 s default on a small machine; analytics would need the internet.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

from fdp.flows.mean_release import mean_release  # noqa: E402

__all__ = ["mean_release"]
