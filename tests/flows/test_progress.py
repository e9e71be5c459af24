"""The progress bar is for the eye: a Prefect server that fails a progress update never fails the release.

The budget-race test saw a busy SQLite-backed Prefect server answer HTTP 500 to the 85 % update ("noise drawn"): the
release failed after its noise was drawn and charged, nothing was published, and the id could not be resumed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fdp.flows._steps as steps
import pytest
from flow_support import REPO, release

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
