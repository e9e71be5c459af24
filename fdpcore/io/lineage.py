"""OpenLineage run events for published releases (openlineage-python).

Each release run emits ``START`` when it begins and, when it ends, ``COMPLETE`` (published) or
``FAIL`` (failed) / ``ABORT`` (crashed; :func:`emit_state_event`, no error text). The ``COMPLETE`` event: job = the Prefect flow, run = its flow run id,
input = the dataset's *identity* (its id and privacy unit — never a content fingerprint), outputs
= the published files, and a custom run facet ``fdp_privacy`` with the guarantee, mechanism,
sensitivity formula id and ledger entry id ``<ledger id>/<release id>`` (unique across ledgers:
:attr:`fdpcore.ledger.Ledger.ledger_id`). Everything in the event is public (it is built from
the public manifest).

Where events go:

* ``FDP_LINEAGE=off``: nowhere;
* ``OPENLINEAGE_URL`` or ``OPENLINEAGE_CONFIG`` set: OpenLineage's own configuration (HTTP, Kafka,
  console, file, ...);
* otherwise a JSON-lines file: ``$FDP_LINEAGE_FILE``, else ``<fdp state dir>/lineage.jsonl``.

The ``fdp_privacy`` facet's JSON Schema (:func:`facet_json_schema`) ships in the package
(``fdpcore/io/schemas/fdp_privacy-<version>.json``) and in the manual (``docs/schemas/fdp_privacy/<version>.json``,
served by the built site); ``fdp schema lineage-facet`` prints it. The facet's ``_schemaURL``
(:func:`facet_schema_url`) is ``$FDP_SCHEMA_BASE_URL/schemas/fdp_privacy/<version>.json#/$defs/FdpPrivacyRunFacet``
when the organisation publishes the manual at ``$FDP_SCHEMA_BASE_URL``, else the ``file:`` URI of the shipped
copy. A version's file never changes: a change of the facet's fields is a new version.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attr
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import RunFacet
from openlineage.client.transport.file import FileConfig, FileTransport

from fdpcore import __version__
from fdpcore.ledger import state_dir

__all__ = ["FACET_SCHEMA_FILE", "FACET_SITE_PATH", "FACET_VERSION", "NAMESPACE", "PRODUCER", "FdpPrivacyRunFacet", "emit_release_event",
           "emit_state_event", "facet_json_schema", "facet_json_schema_text", "facet_schema_url", "lineage_client", "release_event"]

#: OpenLineage namespace of fdp's jobs and input datasets.
NAMESPACE = "fdp"
#: The producer URI written into every event.
PRODUCER = f"urn:fdp:release-system:{__version__}"
#: Version of the ``fdp_privacy`` facet's schema (OpenLineage's ``major-minor-patch`` file naming).
FACET_VERSION = "1-0-0"
#: The shipped JSON Schema of the ``fdp_privacy`` facet (package data).
FACET_SCHEMA_FILE = Path(__file__).resolve().parent / "schemas" / f"fdp_privacy-{FACET_VERSION}.json"
#: Path of the schema under the manual's site root (``docs/`` in the repository).
FACET_SITE_PATH = f"schemas/fdp_privacy/{FACET_VERSION}.json"


def facet_schema_url() -> str:
    """The facet's ``_schemaURL``: the manual's copy under ``$FDP_SCHEMA_BASE_URL``, else the shipped file's URI.

    >>> import os; os.environ["FDP_SCHEMA_BASE_URL"] = "https://stats.example.org/fdp/"
    >>> facet_schema_url()
    'https://stats.example.org/fdp/schemas/fdp_privacy/1-0-0.json#/$defs/FdpPrivacyRunFacet'
    >>> del os.environ["FDP_SCHEMA_BASE_URL"]
    """
    base = os.environ.get("FDP_SCHEMA_BASE_URL", "").strip()
    url = f"{base.rstrip('/')}/{FACET_SITE_PATH}" if base else FACET_SCHEMA_FILE.as_uri()
    return f"{url}#/$defs/FdpPrivacyRunFacet"


@attr.define
class FdpPrivacyRunFacet(RunFacet):
    """The privacy facts of a release run (all public: they come from the manifest)."""

    releaseId: str  # noqa: N815 - OpenLineage facets use camelCase
    ledgerEntryId: str  # noqa: N815
    datasetId: str  # noqa: N815
    summary: str
    mechanism: str
    guarantee: str
    epsilon: float
    delta: float
    adjacency: str
    privacyUnit: str  # noqa: N815
    sensitivityFormula: str  # noqa: N815
    sensitivity: float
    budgetSplits: list[dict[str, Any]]  # noqa: N815
    #: the manifest's audit-chain commitment ``{ledgerId, seq, head}`` (docs/audit.md); None before it existed
    auditCommitment: dict[str, Any] | None = None  # noqa: N815

    @staticmethod
    def _get_schema() -> str:
        return facet_schema_url()


_JSON_TYPES: dict[str, dict[str, Any]] = {  # the facet's field annotations (strings: postponed evaluation)
    "str": {"type": "string"}, "float": {"type": "number"},
    "list[dict[str, Any]]": {"type": "array", "items": {"type": "object"}},
    "dict[str, Any] | None": {"type": ["object", "null"]},
}


def facet_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the ``fdp_privacy`` run facet, generated from :class:`FdpPrivacyRunFacet`.

    Self-contained (no remote ``$ref``): the base facet's ``_producer`` and ``_schemaURL`` are spelled out.
    """
    properties: dict[str, Any] = {"_producer": {"type": "string", "format": "uri"},
                                  "_schemaURL": {"type": "string", "format": "uri"}}
    required = ["_producer", "_schemaURL"]
    for field in attr.fields(FdpPrivacyRunFacet):
        if field.name.startswith("_"):
            continue
        properties[field.name] = dict(_JSON_TYPES[str(field.type)])
        if field.default is attr.NOTHING:
            required.append(field.name)
    facet = {"type": "object", "description": "The privacy facts of an fdp release run (all public: from the manifest).",
             "properties": properties, "required": required, "additionalProperties": False}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$defs": {"FdpPrivacyRunFacet": facet},
            "type": "object", "properties": {"fdp_privacy": {"$ref": "#/$defs/FdpPrivacyRunFacet"}}}


def facet_json_schema_text() -> str:
    """:func:`facet_json_schema` as the shipped files hold it (sorted keys, 2-space indent, final newline)."""
    return json.dumps(facet_json_schema(), indent=2, sort_keys=True) + "\n"


def lineage_client() -> OpenLineageClient | None:
    """The configured client, or None when lineage is switched off (see the module docstring)."""
    if os.environ.get("FDP_LINEAGE", "").lower() in {"off", "0", "false", "no"}:
        return None
    if os.environ.get("OPENLINEAGE_URL") or os.environ.get("OPENLINEAGE_CONFIG"):
        return OpenLineageClient()
    path = Path(os.environ.get("FDP_LINEAGE_FILE") or state_dir() / "lineage.jsonl")
    path.parent.mkdir(parents=True, exist_ok=True)
    return OpenLineageClient(transport=FileTransport(FileConfig(log_file_path=str(path), append=True)))


def _commitment(manifest: dict[str, Any]) -> dict[str, Any] | None:
    c = manifest.get("audit_commitment")
    return None if not isinstance(c, dict) else {"ledgerId": c["ledger_id"], "seq": c["seq"], "head": c["head"]}


def release_event(manifest: dict[str, Any], *, job_name: str, out_dir: str | Path,
                  ledger_id: str | None = None) -> RunEvent:
    """The ``COMPLETE`` run event of a published release, built from its public manifest.

    ``ledgerEntryId`` is ``<ledger id>/<release id>``: ``ledger_id``, else the manifest's audit commitment's
    ledger id (the release id alone when neither is known).
    """
    commitment = manifest.get("audit_commitment")
    if ledger_id is None and isinstance(commitment, dict):
        ledger_id = commitment.get("ledger_id")
    privacy, sens = manifest["privacy"], manifest.get("sensitivity", {})
    run_id = manifest.get("provenance", {}).get("flow_run_id") or str(uuid.uuid4())
    entry = manifest["release_id"] if ledger_id is None else f"{ledger_id}/{manifest['release_id']}"
    facet = FdpPrivacyRunFacet(
        releaseId=manifest["release_id"], ledgerEntryId=entry, datasetId=manifest["dataset_id"],
        summary=manifest["summary"], mechanism=manifest["mechanism"], guarantee=privacy["guarantee"],
        epsilon=privacy["epsilon"], delta=privacy["delta"], adjacency=privacy["adjacency"],
        privacyUnit=privacy["privacy_unit"], sensitivityFormula=sens.get("bound", ""),
        sensitivity=sens.get("value", 0.0), budgetSplits=manifest["budget_splits"], producer=PRODUCER,
        auditCommitment=_commitment(manifest),
    )
    out = Path(out_dir).resolve()
    files = [o["path"] for o in manifest["outputs"]] + ["manifest.json"]
    return RunEvent(
        eventType=RunState.COMPLETE,
        eventTime=datetime.now(UTC).isoformat(),
        producer=PRODUCER,
        run=Run(runId=run_id, facets={"fdp_privacy": facet}),
        job=Job(namespace=NAMESPACE, name=job_name),
        inputs=[InputDataset(namespace=NAMESPACE, name=manifest["dataset_id"])],
        outputs=[OutputDataset(namespace=f"file://{socket.gethostname()}", name=str(out / f)) for f in files],
    )


def emit_release_event(manifest: dict[str, Any], *, job_name: str, out_dir: str | Path,
                       ledger_id: str | None = None) -> RunEvent | None:
    """Emit the release's lineage event through the configured client; returns it (None when off)."""
    client = lineage_client()
    if client is None:
        return None
    event = release_event(manifest, job_name=job_name, out_dir=out_dir, ledger_id=ledger_id)
    client.emit(event)
    return event


def emit_state_event(state: str, *, run_id: str, job_name: str, release_id: str) -> RunEvent | None:
    """Emit a ``START``, ``FAIL`` or ``ABORT`` event of a release run (no facets, no error text); None when off."""
    client = lineage_client()
    if client is None:
        return None
    event = RunEvent(
        eventType=RunState[state], eventTime=datetime.now(UTC).isoformat(), producer=PRODUCER,
        run=Run(runId=run_id), job=Job(namespace=NAMESPACE, name=job_name),
    )
    client.emit(event)
    return event
