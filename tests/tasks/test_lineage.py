"""OpenLineage events: one COMPLETE event per release, public facts only, configurable transport."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fdp.tasks.lineage import emit_lineage
from prefect.logging import disable_run_logger

from fdpcore.io.lineage import lineage_client, release_event

RUN_ID = "6a4c8c4e-3f0e-4d86-9b7f-8c2f3a0a9b11"
MANIFEST = {
    "release_id": "elec-2026-11", "dataset_id": "elec", "summary": "mean", "mechanism": "iclp_qr", "n": 508,
    "privacy": {"epsilon": 1.0, "delta": 0.0, "adjacency": "replace-one", "privacy_unit": "Monday",
                "guarantee": "pure 1-differential privacy"},
    "sensitivity": {"bound": "sensitivity.mean.iclp_qr.exact_l2@1", "value": 0.0848},
    "budget_splits": [{"name": "mean", "epsilon": 1.0, "delta": 0.0}],
    "outputs": [{"path": "release.parquet", "sha256": "a" * 64}],
    "provenance": {"flow_run_id": RUN_ID, "config_sha256": "b" * 64},
}


def test_event_carries_job_run_dataset_identity_outputs_and_the_privacy_facet(tmp_path: Path) -> None:
    event = release_event(MANIFEST, job_name="mean-release", out_dir=tmp_path)
    assert (event.job.namespace, event.job.name, event.run.runId) == ("fdp", "mean-release", RUN_ID)
    assert [(d.namespace, d.name) for d in event.inputs] == [("fdp", "elec")]
    assert sorted(Path(d.name).name for d in event.outputs) == ["manifest.json", "release.parquet"]
    facet = event.run.facets["fdp_privacy"]
    assert (facet.ledgerEntryId, facet.sensitivityFormula, facet.epsilon, facet.mechanism) == (
        "elec-2026-11", "sensitivity.mean.iclp_qr.exact_l2@1", 1.0, "iclp_qr")


def test_the_privacy_facet_carries_the_manifests_audit_commitment(tmp_path: Path) -> None:
    assert release_event(MANIFEST, job_name="mean-release", out_dir=tmp_path).run.facets["fdp_privacy"].auditCommitment is None
    commitment = {"ledger_id": "L", "seq": 7, "head": "c" * 64, "prefixes": "0" * 56}
    event = release_event({**MANIFEST, "audit_commitment": commitment}, job_name="mean-release", out_dir=tmp_path)
    assert event.run.facets["fdp_privacy"].auditCommitment == {"ledgerId": "L", "seq": 7, "head": "c" * 64}


def test_default_transport_appends_json_lines_in_the_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENLINEAGE_URL", raising=False)
    monkeypatch.delenv("OPENLINEAGE_CONFIG", raising=False)
    with disable_run_logger():
        assert emit_lineage.fn(MANIFEST, "mean-release", str(tmp_path / "out")) is True
        assert emit_lineage.fn({**MANIFEST, "release_id": "elec-2026-12"}, "mean-release", str(tmp_path)) is True
    lines = (tmp_path / "fdp-state" / "lineage.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    assert [e["run"]["facets"]["fdp_privacy"]["releaseId"] for e in events] == ["elec-2026-11", "elec-2026-12"]
    assert all(e["eventType"] == "COMPLETE" for e in events)
    text = "\n".join(lines)
    assert "b" * 64 not in text and "a" * 64 not in text  # no fingerprints of inputs or outputs


def test_lineage_can_be_switched_off_or_sent_to_a_configured_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FDP_LINEAGE", "off")
    assert lineage_client() is None
    monkeypatch.delenv("FDP_LINEAGE")
    target = tmp_path / "elsewhere" / "events.jsonl"
    monkeypatch.setenv("FDP_LINEAGE_FILE", str(target))
    with disable_run_logger():
        assert emit_lineage.fn(MANIFEST, "mean-release", str(tmp_path)) is True
    assert json.loads(target.read_text())["job"]["name"] == "mean-release"


def test_a_broken_lineage_backend_does_not_fail_the_release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FDP_LINEAGE_FILE", str(tmp_path))  # a directory: the file transport cannot append to it
    with disable_run_logger():
        assert emit_lineage.fn(MANIFEST, "mean-release", str(tmp_path)) is False


def test_ledger_entry_id_names_the_ledger_so_two_ledgers_never_collide(tmp_path: Path) -> None:
    from fdpcore.ledger import Ledger

    a, b = (Ledger(f"sqlite:///{tmp_path / n}") for n in ("a.sqlite", "b.sqlite"))
    ids = {release_event(MANIFEST, job_name="mean-release", out_dir=tmp_path, ledger_id=led.ledger_id)
           .run.facets["fdp_privacy"].ledgerEntryId for led in (a, b)}
    assert ids == {f"{a.ledger_id}/elec-2026-11", f"{b.ledger_id}/elec-2026-11"}


def test_start_fail_and_abort_events_carry_run_and_job_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fdpcore.io.lineage import emit_state_event

    monkeypatch.setenv("FDP_LINEAGE_FILE", str(tmp_path / "l.jsonl"))
    for state in ("START", "FAIL", "ABORT"):
        emit_state_event(state, run_id=RUN_ID, job_name="mean-release", release_id="elec-2026-11")
    events = [json.loads(line) for line in (tmp_path / "l.jsonl").read_text().splitlines()]
    assert [(e["eventType"], e["run"]["runId"], e["job"]["name"]) for e in events] == [
        ("START", RUN_ID, "mean-release"), ("FAIL", RUN_ID, "mean-release"), ("ABORT", RUN_ID, "mean-release")]
    assert all(set(e["run"].get("facets", {})) <= {"tags"} for e in events)  # client tags only: no error text, no data


def test_the_shipped_facet_schema_is_what_the_code_generates_in_package_and_manual() -> None:
    """The package copy and the manual's copy are the generated schema byte for byte (a changed facet needs a new version)."""
    from fdpcore.io.lineage import FACET_SCHEMA_FILE, FACET_SITE_PATH, facet_json_schema_text

    repo = Path(__file__).resolve().parents[2]
    assert FACET_SCHEMA_FILE.read_text() == facet_json_schema_text()
    assert (repo / "docs" / FACET_SITE_PATH).read_text() == facet_json_schema_text()


def test_emitted_facets_validate_against_the_shipped_schema_and_point_at_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import jsonschema
    from openlineage.client.serde import Serde

    from fdpcore.io.lineage import FACET_SCHEMA_FILE

    schema = json.loads(FACET_SCHEMA_FILE.read_text())
    commitment = {"ledger_id": "L", "seq": 7, "head": "c" * 64}
    for manifest in (MANIFEST, {**MANIFEST, "audit_commitment": commitment}):
        monkeypatch.delenv("FDP_SCHEMA_BASE_URL", raising=False)
        event = json.loads(Serde.to_json(release_event(manifest, job_name="mean-release", out_dir=tmp_path)))
        jsonschema.validate(event["run"]["facets"], schema)
        url = event["run"]["facets"]["fdp_privacy"]["_schemaURL"]
        assert url == FACET_SCHEMA_FILE.as_uri() + "#/$defs/FdpPrivacyRunFacet"
        assert Path(url.removeprefix("file://").split("#")[0]).is_file()
    bad = {"fdp_privacy": {**event["run"]["facets"]["fdp_privacy"], "epsilon": "one"}}
    with pytest.raises(jsonschema.ValidationError):  # the schema bites: a wrong type is refused
        jsonschema.validate(bad, schema)
    monkeypatch.setenv("FDP_SCHEMA_BASE_URL", "https://stats.example.org/fdp/manual")
    facet = release_event(MANIFEST, job_name="mean-release", out_dir=tmp_path).run.facets["fdp_privacy"]
    assert facet._schemaURL == "https://stats.example.org/fdp/manual/schemas/fdp_privacy/1-0-0.json#/$defs/FdpPrivacyRunFacet"


def test_fdp_schema_prints_the_lineage_facet_schema(capsys: pytest.CaptureFixture[str]) -> None:
    from fdp.flows.cli import main

    from fdpcore.io.lineage import facet_json_schema

    assert main(["schema", "lineage-facet"]) == 0
    assert json.loads(capsys.readouterr().out) == facet_json_schema()
