"""Every formula id resolves to a function, has a proof note and a test; manifests cite only registered ids."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from fdp.flows.config import load_config
from fdp.tasks._publish import public_release
from fdp.tasks.mean import release_grid

from fdpcore.errors import DomainError
from fdpcore.privacy.formulas import FORMULAS, formula, resolve
from fdpcore.summaries.mean import plan_mean_release

REPO = Path(__file__).resolve().parents[2]
TEST_TEXT = "\n".join(p.read_text() for p in (REPO / "tests").rglob("*.py"))


@pytest.mark.parametrize("fid", sorted(FORMULAS))
def test_formula_resolves_has_proof_note_and_test(fid: str) -> None:
    fn = resolve(fid)
    assert callable(fn)
    note = REPO / FORMULAS[fid].proof_note
    assert note.is_file(), f"missing proof note {note}"
    assert fid in note.read_text()
    name = FORMULAS[fid].function.rpartition(".")[2]
    assert ">>>" in (fn.__doc__ or "") or name in TEST_TEXT, f"{fid}: no doctest and no test mentions {name}"


def test_unknown_formula_is_rejected() -> None:
    with pytest.raises(DomainError, match="not registered"):
        formula("sensitivity.mean.magic@1")


def test_example_manifest_cites_only_registered_ids(tmp_path: Path) -> None:
    config = load_config(REPO / "examples" / "electricity_mean.yaml")
    plan = plan_mean_release(release_grid(config), config.kernel, n=508, tau=1.0, epsilon=1.0, secure=False)
    public = public_release("r", config, plan, np.zeros(48), {
        "code_version": "0", "created_at": "2026-01-01T00:00:00Z", "config_sha256": "0" * 64})
    cited = set(public["manifest"]["formulas"]) | {public["manifest"]["sensitivity"]["bound"],
                                                    public["manifest"]["sensitivity"]["paper_formula"]}
    assert cited <= set(FORMULAS)
    json.dumps(public)
