"""Prefect flows of fdp and the ``fdp`` command line."""

from fdp.flows.mean_release import mean_release

__all__ = ["mean_release"]
