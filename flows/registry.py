"""Which config model and which flow serve each ``summary`` of a release config.

A new summary registers here once; ``fdp release`` and :func:`fdp.flows.config.load_config`
dispatch on the config's ``summary`` key (default ``"mean"``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from fdp.flows.covariance_release import covariance_release
from fdp.flows.erm_release import erm_release
from fdp.flows.fpca_release import fpca_release
from fdp.flows.kde_release import kde_release
from fdp.flows.mean_release import mean_release
from fdp.flows.regression_release import fosr_release
from fdp.schemas import CovarianceReleaseConfig, FpcaReleaseConfig, ReleaseConfig
from fdp.schemas.erm import ErmReleaseConfig
from fdp.schemas.kde import KdeReleaseConfig
from fdp.schemas.regression import FosrReleaseConfig

__all__ = ["SUMMARIES", "Summary"]


@dataclass(frozen=True)
class Summary:
    """A releasable summary: its config model and its flow.

    The flow is called as ``flow(config=..., config_sha256=..., config_dir=..., out_dir=...,
    ledger_url=..., release_id=..., period=...)`` and returns the public manifest (a dict);
    ``period`` (``YYYY-MM`` or None for the current month) is the budget period to charge.
    """

    config_model: type[BaseModel]
    flow: Callable[..., dict[str, Any]]


SUMMARIES: dict[str, Summary] = {
    "mean": Summary(ReleaseConfig, mean_release),
    "fpca": Summary(FpcaReleaseConfig, fpca_release),
    "covariance": Summary(CovarianceReleaseConfig, covariance_release),
    "fosr": Summary(FosrReleaseConfig, fosr_release),
    "kde": Summary(KdeReleaseConfig, kde_release),
    "erm": Summary(ErmReleaseConfig, erm_release),
}
