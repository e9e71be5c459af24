"""The two kinds of Prefect task a release uses, defined once (STYLE.md "Randomness and Prefect settings").

* ``data_task``: touches raw data or pre-noise statistics — never cached, results never persisted.
* ``noise_task``: draws the data-dependent randomness of a release — additionally no retries, since a
  retry would draw fresh noise for the same charge.
"""

from __future__ import annotations

from functools import partial

from prefect import task
from prefect.cache_policies import NO_CACHE

__all__ = ["data_task", "noise_task"]

data_task = partial(task, cache_policy=NO_CACHE, persist_result=False)
noise_task = partial(task, retries=0, cache_policy=NO_CACHE, persist_result=False)
