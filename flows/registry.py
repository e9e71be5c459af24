"""Which config model and which flow serve each ``summary`` of a release config.

A new summary registers here once; ``fdp release`` and :func:`fdp.flows.config.load_config`
dispatch on the config's ``summary`` key (default ``"mean"``). Flows are registered by their import
path and imported on first use, so a command imports Prefect and a summary's tasks only when it runs
that summary (``fdp schema``, ``fdp budget`` and ``fdp audit`` never import Prefect).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from fdp.schemas import CovarianceReleaseConfig, FpcaReleaseConfig, ReleaseConfig
from fdp.schemas.erm import ErmReleaseConfig
from fdp.schemas.fosr import FosrReleaseConfig
from fdp.schemas.kde import KdeReleaseConfig
from pydantic import BaseModel

__all__ = ["SUMMARIES", "Summary"]


@dataclass(frozen=True)
class Summary:
    """A releasable summary: its config model and its flow (``"module:attribute"``, imported on use).

    The flow is called as ``flow(config=..., config_sha256=..., config_dir=..., out_dir=...,
    ledger_url=..., release_id=..., period=...)`` and returns the public manifest (a dict);
    ``period`` (``YYYY-MM`` or None for the current month) is the budget period to charge.
    """

    config_model: type[BaseModel]
    flow_path: str

    @property
    def flow(self) -> Callable[..., dict[str, Any]]:
        """The Prefect flow, imported from :attr:`flow_path` (Python caches the module after the first use)."""
        module, _, name = self.flow_path.partition(":")
        flow: Callable[..., dict[str, Any]] = getattr(import_module(module), name)
        return flow


SUMMARIES: dict[str, Summary] = {
    "mean": Summary(ReleaseConfig, "fdp.flows.mean_release:mean_release"),
    "fpca": Summary(FpcaReleaseConfig, "fdp.flows.fpca_release:fpca_release"),
    "covariance": Summary(CovarianceReleaseConfig, "fdp.flows.covariance_release:covariance_release"),
    "fosr": Summary(FosrReleaseConfig, "fdp.flows.fosr_release:fosr_release"),
    "kde": Summary(KdeReleaseConfig, "fdp.flows.kde_release:kde_release"),
    "erm": Summary(ErmReleaseConfig, "fdp.flows.erm_release:erm_release"),
}
