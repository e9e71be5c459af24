"""Release notes (the Prefect ``<series>-release-note`` artifact) read as sentences and say exactly what is released.

From a new operator's trial: the covariance note called a second moment about a public centre "the covariance
surface … (centring: public)"; the covariance and FPCA notes printed "Each record is one *…*. pure 1-differential
privacy for each …"; the covariance note lacked the per-period budget line of the mean and FPCA notes.
"""

from __future__ import annotations

import re
from pathlib import Path

from flow_support import REPO, artifacts, release, write_config

from fdpcore.ledger import Ledger, current_period

COVARIANCE = REPO / "examples" / "electricity_covariance.yaml"
FPCA = REPO / "examples" / "growth_fpca.yaml"
DATA = REPO / "examples" / "data" / "electricity_monday.parquet"

SENTENCE = re.compile(r"\*\*What is protected\.\*\* Each record is one \*[^*]+\*\. Replacing any one of them by any "
                      r"other possible record changes the probability of any published result by at most a factor e\^"
                      r".*The number of records is published exactly: the guarantee compares data sets of the same "
                      r"size in which any one record is swapped for any other\.")


def _note(key: str, release_id: str) -> str:
    [note] = [n for n in artifacts(key) if f"`{release_id}`" in n]
    return note


def test_the_covariance_note_says_second_moment_protects_in_sentences_and_shows_the_periods_budget(tmp_path: Path) -> None:
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    Ledger(ledger).set_budget("adelaide-electricity-monday", 12.0, period="month", epsilon_per_period=2.0)
    cfg = write_config(tmp_path, COVARIANCE, data=DATA, prefix="cov", release__name="notes-cov")
    assert release(cfg, tmp_path / "out", ledger, "notes-cov-1") == 0
    note = _note("notes-cov-release-note", "notes-cov-1")
    assert SENTENCE.search(note), note[:600]
    assert "*. pure" not in note  # the guarantee is never glued after the unit as a fragment
    assert "The second moment of the curves about the public constant value_offset" in note
    assert "covariance plus (X̄ − c) ⊗ (X̄ − c)" in note and "covariance surface" not in note
    period = current_period()
    assert f"charged to period {period}" in note
    assert "This period: allowance ε = 2, spent ε = 1, left ε = 1." in note
    assert "Parts of this release: covariance ε = 1." in note


def test_the_fpca_note_protects_in_sentences(tmp_path: Path) -> None:
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    cfg = write_config(tmp_path, FPCA, prefix="fpca", release__name="notes-fpca")
    assert release(cfg, tmp_path / "out", ledger, "notes-fpca-1") == 0
    note = _note("notes-fpca-release-note", "notes-fpca-1")
    assert SENTENCE.search(note), note[:600]
    assert "*. pure" not in note
