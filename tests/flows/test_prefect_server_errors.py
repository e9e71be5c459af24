"""A Prefect server that fails (HTTP 500 from a busy SQLite-backed server) never costs a release, and fdp says what
the ledger holds.

The budget-race test's audit injected a 500 into each of a release's Prefect requests: on the 85 % progress update
("noise drawn") the release failed after its noise was drawn and charged; on Prefect's version check fdp blamed
itself ("a bug in fdp") without saying nothing was charged; after the files were written it said they were not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fdp.flows._steps as steps
import fdp.tasks._publish as publish
import httpx
import pytest
from fdp.flows.cli import _explain_failure
from flow_support import REPO, release
from prefect.exceptions import PrefectHTTPStatusError

from fdpcore.ledger import Ledger

EXAMPLE = REPO / "examples" / "electricity_mean.yaml"


def test_a_failed_progress_update_after_the_noise_is_skipped_and_the_release_publishes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    original = steps.update_progress_artifact
    seen: list[float] = []

    def flaky(artifact_id: Any, progress: float, **kwargs: Any) -> Any:
        seen.append(progress)
        if progress == 85:  # "noise drawn": after the charge is final and the noise exists
            raise RuntimeError("Server error '500 Internal Server Error'")
        return original(artifact_id, progress, **kwargs)

    monkeypatch.setattr(steps, "update_progress_artifact", flaky)
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert release(EXAMPLE, tmp_path / "out", ledger, "p-1") == 0
    err = capsys.readouterr().err
    assert 85 in seen and seen[-1] == 100  # the bar went on after the failed update
    assert "fdp: warning: p-1: the Prefect server did not take a progress update (RuntimeError); the release goes on" in err
    assert "fdp: [ 85%] p-1: noise drawn" in err  # the terminal's line is still printed
    assert Ledger(ledger).get("p-1").state == "published"  # type: ignore[union-attr]
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["release_id"] == "p-1"


def _server_error(path: str) -> PrefectHTTPStatusError:
    request = httpx.Request("GET", f"http://127.0.0.1:4200/api{path}")
    response = httpx.Response(500, request=request)
    return PrefectHTTPStatusError.from_httpx_error(httpx.HTTPStatusError("500", request=request, response=response))


def test_a_failed_version_check_is_the_servers_error_and_charged_nothing(tmp_path: Path) -> None:
    ledger = Ledger(f"sqlite:///{tmp_path / 'l.sqlite'}")
    try:  # Prefect's client wraps the version check's error so
        raise RuntimeError("Failed to reach API at http://127.0.0.1:4200/api") from _server_error("/admin/version")
    except RuntimeError as exc:
        message = str(_explain_failure(exc, ledger, "v-1", None))
    assert message.startswith("the Prefect server answered HTTP 500")
    assert message.endswith("release 'v-1': this run charged nothing. Run again")
    assert "bug in fdp" not in message and "if anything" not in message


def test_a_server_error_after_the_files_were_written_says_they_were(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def failing(*args: Any, **kwargs: Any) -> None:
        raise _server_error("/artifacts/")

    monkeypatch.setattr(publish, "create_artifacts", failing)
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert release(EXAMPLE, tmp_path / "out", ledger, "a-1") == 1
    err = capsys.readouterr().err
    assert "the Prefect server answered HTTP 500" in err
    assert (f"release 'a-1' IS published and its files are written in {str(tmp_path / 'out')!r}; the failure came "
            "after them") in err and "files were not written" not in err
    assert Ledger(ledger).get("a-1").state == "published"  # type: ignore[union-attr]
    monkeypatch.undo()
    assert release(EXAMPLE, tmp_path / "out", ledger, "a-1") == 0  # the re-run it names charges nothing
    assert Ledger(ledger).budgets("adelaide-electricity-monday")[0].spent == (1.0, 0.0)
