"""The two kinds of Prefect task a release uses, defined once (STYLE.md "Randomness and Prefect settings").

* ``data_task``: touches raw data or pre-noise statistics — never cached, results never persisted.
* ``noise_task``: draws the data-dependent randomness of a release — additionally no retries, since a
  retry would draw fresh noise for the same charge.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from functools import wraps
from typing import Any, ParamSpec, TypeVar

from prefect import task
from prefect.cache_policies import NO_CACHE

from fdpcore.errors import DataError, FdpError

P = ParamSpec("P")
R = TypeVar("R")

__all__ = ["data_task", "noise_task", "quiet_expected_tracebacks", "without_rows"]

_ROW = re.compile(r"\brows? \d+(?:\s*(?:-|–|to)\s*\d+)?")


def without_rows(message: str) -> str:
    """A data error's message as Prefect may keep it: row numbers removed (they point into the data).

    >>> without_rows("p.csv: column 'x' has a missing or non-finite entry at row 5; every point needs ...")
    "p.csv: column 'x' has a missing or non-finite entry at a row; every point needs ..."
    """
    return _ROW.sub("a row", message)


def _rows_stay_with_the_curator(fn: Callable[P, R]) -> Callable[P, R]:
    """Re-raise a :class:`~fdpcore.errors.DataError` with its row numbers removed (issue 17).

    Prefect logs a task's exception and shows it in the UI; a row number says which record decided that
    a release did not happen. The full message stays on the exception object (``curator_message``), which
    ``fdp release`` (same process) prints on the curator's terminal; it is never logged or persisted.
    """

    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except DataError as exc:
            redacted = DataError(without_rows(str(exc)))
            redacted.curator_message = str(exc)  # type: ignore[attr-defined]
            raise redacted from None

    return wrapper


def data_task(fn: Callable[P, R] | None = None, /, **options: Any) -> Any:
    """A Prefect task that touches raw data or pre-noise statistics: no cache, no persisted result, rows redacted."""
    settings = {"cache_policy": NO_CACHE, "persist_result": False, **options}
    if fn is None:
        return lambda f: task(_rows_stay_with_the_curator(f), **settings)
    return task(_rows_stay_with_the_curator(fn), **settings)


def noise_task(fn: Callable[P, R] | None = None, /, **options: Any) -> Any:
    """A Prefect task that draws a release's noise: a :func:`data_task` (rows redacted too) with no retries."""
    return data_task(fn, **{**options, "retries": 0})


#: What Prefect's engine logs, a second time, when a flow run's own exception ends its process (``fdp serve``'s runs).
ENGINE_EXIT = "Engine execution exited with unexpected exception"


class _NoTracebackForExpectedErrors(logging.Filter):
    """Prefect logs a task's exception with its traceback; for fdp's own errors the message is enough.

    The engine's closing line for such an error (:data:`ENGINE_EXIT`) is dropped: the run's *Failed* state already
    carries the message, and the line was logged under the run's first, generated name (trial Q: "Flow run
    'tungsten-alpaca' - Engine execution exited …" after every budget-refused tick).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], FdpError):
            if record.getMessage() == ENGINE_EXIT:
                return False
            record.exc_info, record.exc_text = None, None
        return True


_QUIET = _NoTracebackForExpectedErrors()


def quiet_expected_tracebacks() -> None:
    """Log fdp's own errors (:class:`~fdpcore.errors.FdpError`) without a traceback, in this process; idempotent.

    The CLI's release, a Dask worker running a task, and a scheduled run (in the process ``fdp serve``'s runner starts).
    """
    for name in ("prefect.flow_runs", "prefect.task_runs", "prefect.flow_engine", "prefect.task_engine",
                 "distributed.worker"):
        logger = logging.getLogger(name)
        if _QUIET not in logger.filters:
            logger.addFilter(_QUIET)
