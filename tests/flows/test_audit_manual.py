"""docs/audit.md: the privacy officer's and the auditor's walk-throughs, run line by line as written.

Each ``fdp`` line of the ```` ```bash ```` blocks marked ``<!-- audit-walkthrough: officer -->`` and
``<!-- audit-walkthrough: auditor -->`` runs through the CLI's ``main`` with ``/secure`` and
``/archive`` moved into a temporary folder and ``AUDITOR_PUBLIC_KEY`` replaced by the key that the
walk-through's ``keygen`` printed; every line must exit 0. Between the two, releases are published
through the ledger and their manifests copied to the archive, as an office does. Then the database
is put back to an older copy, and the auditor's ``verify`` line must fail naming the first lost entry.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
from fdp.flows.cli import main
from fdp.schemas import ReleaseManifest

from fdpcore.ledger import Ledger

REPO = Path(__file__).resolve().parents[2]
DATASET = "adelaide-electricity-monday"


def _walkthrough(name: str, root: Path) -> list[list[str]]:
    text = (REPO / "docs" / "audit.md").read_text()
    block = re.search(rf"<!-- audit-walkthrough: {name} -->\n```bash\n(.*?)```", text, re.S)
    assert block is not None, f"docs/audit.md has no audit walk-through {name!r}"
    commands = []
    for line in block.group(1).splitlines():
        line = line.split("  #")[0].strip()
        if not line or line.startswith("#"):
            continue
        words = [w.replace("/secure/", f"{root}/secure/").replace("/archive/", f"{root}/archive/")
                 for w in shlex.split(line)]
        assert words[0] == ".venv/bin/fdp", line
        commands.append([str(REPO / w) if w.startswith("examples/") else w for w in words[1:]])
    return commands


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    rc = main(argv)
    out = capsys.readouterr()
    assert rc == 0, (argv, out.err)
    return out.out


def _publish(led: Ledger, rid: str, archive: Path) -> None:
    """A release as the flows make one (ledger entry, then the manifest the ledger returns), archived."""
    led.reserve(release_id=rid, dataset_id=DATASET, epsilon=1.0, delta=0.0, config_sha256="0" * 64, summary="mean",
                mechanism="iclp_qr", sensitivity_formula="s", budget_splits=[{"name": "mean", "epsilon": 1.0, "delta": 0.0}],
                provenance={"operator": "ops", "git_sha": "f" * 40}, internal={})
    led.mark_noised(rid)
    manifest = {"release_id": rid, "dataset_id": DATASET, "summary": "mean", "privacy": {"epsilon": 1.0}}
    stored = led.publish(rid, {"manifest": manifest})["manifest"]
    (archive / rid).mkdir(parents=True)
    (archive / rid / "manifest.json").write_text(json.dumps(stored, indent=2))


def test_readme_audit_walkthrough_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "ledger.sqlite"
    monkeypatch.setenv("FDP_LEDGER_URL", f"sqlite:///{db}")
    monkeypatch.delenv("FDP_OFFICER_KEY", raising=False)
    for argv in _walkthrough("officer", tmp_path):
        _run(argv, capsys)
    led = Ledger(f"sqlite:///{db}")
    assert led.policy_key() is not None and led.budgets(DATASET)[0].total[0] == 12.0
    assert main(["budget", "set", DATASET, "--epsilon", "50"]) == 2  # the operator alone cannot raise it
    assert "must be signed by the privacy officer's key" in capsys.readouterr().err
    archive = tmp_path / "archive" / "manifests"
    _publish(led, "mean-2026-10", archive)
    older = tmp_path / "older.sqlite"
    shutil.copy(db, older)  # a backup taken here
    _publish(led, "mean-2026-11", archive)

    public_key = ""
    outputs = []
    for argv in _walkthrough("auditor", tmp_path):
        argv = [public_key if w == "AUDITOR_PUBLIC_KEY" else w for w in argv]
        out = _run(argv, capsys)
        outputs.append(out)
        if argv[:2] == ["audit", "keygen"]:
            public_key = re.search(r"public key ([0-9a-f]{64})", out).group(1)  # type: ignore[union-attr]
    checkpoint, head, verify, listing, export, config_hash = outputs[1:]
    assert f"recorded checkpoint key {public_key}" in checkpoint and "entry 9," in checkpoint
    assert "entry  9\n" in head
    assert "consistent" not in verify and "2 manifest(s) and 1 checkpoint(s), the latest at entry 9" in verify
    assert "[policy #" in listing and "mean-2026-11" in listing and "ops" in listing and "ffffffffffff" in listing
    # trial R: the checkpoint key's registration was listed as an unsigned policy change; it is signed by the key
    keys = [ln for ln in listing.splitlines() if "audit.key_registered" in ln]  # the officer's and the auditor's
    assert len(keys) == 2 and all("  [key #" in ln and " self-signed " in ln for ln in keys)
    rows = [r for r in csv.DictReader(io.StringIO(export)) if r["event"] == "audit.key_registered"]
    assert public_key in {r["signed_by"] for r in rows} and all(len(r["signed_by"]) == 64 for r in rows)
    assert export.splitlines()[0].startswith("seq,at,actor,host,event,dataset_id,release_id,state,summary,period,epsilon")
    canonical, digest = config_hash.splitlines()
    assert json.loads(canonical)["dataset"]["id"] == DATASET and len(digest) == 64
    ReleaseManifest.model_json_schema()  # the commitment is part of the published schema
    assert "audit_commitment" in ReleaseManifest.model_json_schema()["properties"]

    shutil.copy(older, db)  # put the older copy back: a valid chain, one release and its charge gone
    assert main(["audit", "verify"]) == 0
    verify_line = next(a for a in _walkthrough("auditor", tmp_path) if a[:2] == ["audit", "verify"])
    capsys.readouterr()
    assert main([public_key if w == "AUDITOR_PUBLIC_KEY" else w for w in verify_line]) == 1
    err = capsys.readouterr().err
    assert "the first entry that differs from the published evidence is entry 6 (missing)" in err
