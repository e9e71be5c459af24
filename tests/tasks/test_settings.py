"""fdp's own errors in Prefect's logs: a message without a traceback, and no second engine line (trial Q, F2)."""

from __future__ import annotations

import logging

import pytest
from fdp.tasks._settings import ENGINE_EXIT, quiet_expected_tracebacks

from fdpcore.errors import ConfigError


class _Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def flow_run_log(monkeypatch: pytest.MonkeyPatch) -> _Keep:
    """Prefect's flow-run logger with fdp's filter, its records kept here (not sent to an API: no run exists)."""
    quiet_expected_tracebacks()
    logger = logging.getLogger("prefect.flow_runs")
    keep = _Keep()
    monkeypatch.setattr(logger, "handlers", [keep])
    monkeypatch.setattr(logger, "propagate", False)
    return keep


def _log(message: str, exc: BaseException) -> None:
    try:
        raise exc
    except BaseException:
        logging.getLogger("prefect.flow_runs").error(message, exc_info=True)


def test_an_fdp_error_is_logged_once_without_a_traceback(flow_run_log: _Keep) -> None:
    refused = ConfigError("config 'c.yaml' changed since series 's' was served")
    _log("Finished in state Failed('Flow run encountered an exception: ConfigError: …')", refused)
    _log(ENGINE_EXIT, refused)  # the engine's second line for the same error, under the run's generated name
    [record] = flow_run_log.records
    assert record.getMessage().startswith("Finished in state Failed") and record.exc_info is None


def test_an_unexpected_error_keeps_the_engine_line_and_its_traceback(flow_run_log: _Keep) -> None:
    _log(ENGINE_EXIT, RuntimeError("a bug"))
    [record] = flow_run_log.records
    assert record.getMessage() == ENGINE_EXIT and record.exc_info is not None
