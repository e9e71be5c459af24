"""Prefect flows of fdp and the ``fdp`` command line.

Importing this package does not import Prefect: ``fdp.flows.mean_release`` (the flow, as before)
is imported on first access, and the CLI imports a summary's flow only when it runs it.
"""

import os
import sys
import types
from typing import Any

# Prefect reads its settings when it is first imported, so these defaults come first.
# A fresh Prefect home migrates its database before the temporary API answers, which takes
# longer than Prefect's 20 s default on a small machine; analytics would need the internet.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

__all__ = ["mean_release"]


class _FlowsPackage(types.ModuleType):
    """The package whose ``mean_release`` attribute is the flow, imported on first access."""

    @property
    def mean_release(self) -> Any:
        """The ``mean_release`` Prefect flow (:mod:`fdp.flows.mean_release`)."""
        from fdp.flows.mean_release import mean_release

        return mean_release

    @mean_release.setter
    def mean_release(self, value: Any) -> None:
        # Importing the submodule binds it under the same name; the package keeps exposing the flow.
        pass


sys.modules[__name__].__class__ = _FlowsPackage
