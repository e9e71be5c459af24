"""The two kinds of Prefect task a release uses, defined once (STYLE.md "Randomness and Prefect settings").

* ``data_task``: touches raw data or pre-noise statistics — never cached, results never persisted.
* ``noise_task``: draws the data-dependent randomness of a release — additionally no retries, since a
  retry would draw fresh noise for the same charge.
"""

from __future__ import annotations

import logging
from functools import partial

from prefect import task
from prefect.cache_policies import NO_CACHE

from fdpcore.errors import FdpError

__all__ = ["data_task", "noise_task", "quiet_expected_tracebacks"]

data_task = partial(task, cache_policy=NO_CACHE, persist_result=False)
noise_task = partial(task, retries=0, cache_policy=NO_CACHE, persist_result=False)


class _NoTracebackForExpectedErrors(logging.Filter):
    """Prefect logs a task's exception with its traceback; for fdp's own errors the message is enough."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], FdpError):
            record.exc_info, record.exc_text = None, None
        return True


_QUIET = _NoTracebackForExpectedErrors()


def quiet_expected_tracebacks() -> None:
    """Log fdp's own errors (:class:`~fdpcore.errors.FdpError`) without a traceback, in this process (the CLI, or a Dask worker running a task); idempotent."""
    for name in ("prefect.flow_runs", "prefect.task_runs", "distributed.worker"):
        logger = logging.getLogger(name)
        if _QUIET not in logger.filters:
            logger.addFilter(_QUIET)
