"""SQLAlchemy implementation of the budget ledger.

States of a release row (a release id is unique)::

    reserved  --mark_noised-->  noised  --publish-->  published
        |
        +--cancel--> cancelled          (only before any noise exists)

``reserved``, ``noised`` and ``published`` rows count as spent. A reservation is
made atomically: the dataset row is updated first (taking a write lock on SQLite,
a row lock on PostgreSQL), then the spent total is read and compared, then the
reservation is inserted, all in one transaction. Costs are summed exactly
(:mod:`fdpcore.accounting`), so rounding can neither refuse a fitting charge nor
let an overspend through. No noise, seed or pre-noise statistic is ever stored:
the ``public_json`` column holds only what was published.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from fdpcore.accounting import compose_pure, exact
from fdpcore.errors import BudgetExceededError, LedgerError, ReleaseConflictError

__all__ = ["RELEASE_STATES", "DatasetBudget", "Ledger", "ReleaseRecord", "ReserveOutcome", "default_ledger_url"]

SCHEMA_VERSION = 1
RELEASE_STATES = ("reserved", "noised", "published", "cancelled")
_SPENT_STATES = ("reserved", "noised", "published")

_metadata = sa.MetaData()
_meta = sa.Table(
    "fdp_meta", _metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.String(256), nullable=False),
)
_datasets = sa.Table(
    "fdp_datasets", _metadata,
    sa.Column("dataset_id", sa.String(200), primary_key=True),
    sa.Column("epsilon_total", sa.String(40), nullable=False),
    sa.Column("delta_total", sa.String(40), nullable=False),
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("updated_at", sa.String(40), nullable=False),
    sa.Column("lock_counter", sa.Integer, nullable=False, default=0),
)
_releases = sa.Table(
    "fdp_releases", _metadata,
    sa.Column("release_id", sa.String(200), primary_key=True),
    sa.Column("dataset_id", sa.String(200), sa.ForeignKey("fdp_datasets.dataset_id"), nullable=False, index=True),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("epsilon", sa.String(40), nullable=False),
    sa.Column("delta", sa.String(40), nullable=False),
    sa.Column("config_sha256", sa.String(64), nullable=False),
    sa.Column("summary", sa.String(40), nullable=False),
    sa.Column("mechanism", sa.String(40), nullable=False),
    sa.Column("sensitivity_formula", sa.String(120), nullable=False),
    sa.Column("budget_splits", sa.Text, nullable=False),
    sa.Column("provenance", sa.Text, nullable=False),
    sa.Column("internal", sa.Text, nullable=False),
    sa.Column("public_json", sa.Text, nullable=True),
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("updated_at", sa.String(40), nullable=False),
)


_audit = sa.Table(
    "fdp_audit", _metadata,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("at", sa.String(40), nullable=False),
    sa.Column("actor", sa.String(200), nullable=False),
    sa.Column("host", sa.String(200), nullable=False),
    sa.Column("event", sa.String(40), nullable=False),
    sa.Column("dataset_id", sa.String(200), nullable=False),
    sa.Column("release_id", sa.String(200), nullable=True),
    sa.Column("payload", sa.Text, nullable=False),
    sa.Column("prev_hash", sa.String(64), nullable=False),
    sa.Column("hash", sa.String(64), nullable=False),
)
GENESIS = "0" * 64


def default_ledger_url() -> str:
    """``$FDP_LEDGER_URL``, else a SQLite file in the state directory.

    The state directory is ``$FDP_STATE_DIR``, else ``$XDG_STATE_HOME/fdp``, else
    ``~/.local/state/fdp``.
    """
    url = os.environ.get("FDP_LEDGER_URL")
    if url:
        return url
    state = os.environ.get("FDP_STATE_DIR")
    if state:
        base = Path(state)
    else:
        xdg = os.environ.get("XDG_STATE_HOME")
        base = (Path(xdg) if xdg else Path.home() / ".local" / "state") / "fdp"
    return f"sqlite:///{base / 'ledger.sqlite'}"


@dataclass(frozen=True)
class DatasetBudget:
    """Total, spent and remaining budget of one dataset."""

    dataset_id: str
    total: tuple[float, float]
    spent: tuple[float, float]
    remaining: tuple[float, float]
    n_releases: int

    def as_dict(self) -> dict[str, Any]:
        """JSON form: keys ``total``, ``spent``, ``remaining`` with ``epsilon``/``delta``."""

        def pair(p: tuple[float, float]) -> dict[str, float]:
            return {"epsilon": p[0], "delta": p[1]}

        return {
            "dataset_id": self.dataset_id,
            "total": pair(self.total),
            "spent": pair(self.spent),
            "remaining": pair(self.remaining),
            "releases": self.n_releases,
        }


@dataclass(frozen=True)
class ReleaseRecord:
    """One row of the ledger (internal fields included; never publish it whole)."""

    release_id: str
    dataset_id: str
    state: str
    epsilon: float
    delta: float
    config_sha256: str
    summary: str
    mechanism: str
    sensitivity_formula: str
    budget_splits: list[dict[str, Any]]
    provenance: dict[str, Any]
    internal: dict[str, Any]
    public: dict[str, Any] | None
    created_at: str
    updated_at: str


@dataclass(frozen=True)
class ReserveOutcome:
    """Result of :meth:`Ledger.reserve`: a fresh or resumed reservation, or an already published release."""

    record: ReleaseRecord
    charged: bool  # True when this call charged budget
    published: bool  # True when the release was already published (nothing to do)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


class Ledger:
    """The budget ledger at ``url`` (SQLAlchemy URL; ``sqlite:///...`` or ``postgresql://...``)."""

    def __init__(self, url: str | None = None) -> None:
        self.url = url or default_ledger_url()
        self.engine = _engine(self.url)
        try:
            with self.engine.begin() as conn:
                _metadata.create_all(conn)
                row = conn.execute(sa.select(_meta.c.value).where(_meta.c.key == "schema_version")).first()
                if row is None:
                    conn.execute(sa.insert(_meta).values(key="schema_version", value=str(SCHEMA_VERSION)))
                elif int(row[0]) > SCHEMA_VERSION:
                    raise LedgerError(
                        f"ledger {self._safe_url()} has schema version {row[0]}, newer than this fdp ({SCHEMA_VERSION}); upgrade fdp"
                    )
                if conn.execute(sa.select(_meta.c.key).where(_meta.c.key == "audit_head")).first() is None:
                    conn.execute(sa.insert(_meta).values(key="audit_head", value=f"0:{GENESIS}"))
        except sa.exc.OperationalError as exc:
            raise LedgerError(f"ledger {self._safe_url()} cannot be opened ({_first_line(exc)}); check --ledger / FDP_LEDGER_URL") from None

    def _safe_url(self) -> str:
        return sa.engine.make_url(self.url).render_as_string(hide_password=True)

    @contextmanager
    def _tx(self) -> Iterator[Connection]:
        try:
            with self.engine.begin() as conn:
                yield conn
        except sa.exc.OperationalError as exc:
            raise LedgerError(f"ledger {self._safe_url()} is unavailable ({_first_line(exc)}); nothing was changed") from None

    # ----------------------------------------------------------------- datasets

    def ensure_dataset(self, dataset_id: str, epsilon: float, delta: float = 0.0) -> bool:
        """Create the dataset's budget if it does not exist. Returns True when created.

        Once a dataset exists, its ledger budget is authoritative: a config's budget
        is only a proposal for the initial value.
        """
        with self._tx() as conn:
            exists = conn.execute(sa.select(_datasets.c.dataset_id).where(_datasets.c.dataset_id == dataset_id)).first()
            if exists:
                return False
            try:
                _insert_dataset(conn, dataset_id, epsilon, delta, "config proposal")
            except sa.exc.IntegrityError:
                return False
        return True

    def set_budget(self, dataset_id: str, epsilon: float, delta: float = 0.0) -> DatasetBudget:
        """The privacy officer's act: set a dataset's total budget (created if new).

        Raises:
            BudgetExceededError: the new total is below what is already spent (nothing changes).
        """
        now = _now()
        with self._tx() as conn:
            updated = _lock_dataset(conn, dataset_id)
            if updated == 0:
                _insert_dataset(conn, dataset_id, epsilon, delta, "budget set")
            else:
                (spent_eps, spent_delta), _ = self._spent(conn, dataset_id)
                if exact(epsilon) < spent_eps or exact(delta) < spent_delta:
                    raise BudgetExceededError(
                        dataset_id, (float(spent_eps), float(spent_delta)), (float(epsilon), float(delta))
                    )
                conn.execute(
                    sa.update(_datasets)
                    .where(_datasets.c.dataset_id == dataset_id)
                    .values(epsilon_total=repr(float(epsilon)), delta_total=repr(float(delta)), updated_at=now)
                )
                _append(conn, "budget.set", dataset_id, None,
                        {"epsilon_total": repr(float(epsilon)), "delta_total": repr(float(delta))})
        return self.budgets(dataset_id)[0]

    def budgets(self, dataset_id: str | None = None) -> list[DatasetBudget]:
        """Budget summaries of every dataset (or one)."""
        with self._tx() as conn:
            q = sa.select(_datasets)
            if dataset_id is not None:
                q = q.where(_datasets.c.dataset_id == dataset_id)
            rows = conn.execute(q.order_by(_datasets.c.dataset_id)).mappings().all()
            out = []
            for r in rows:
                spent, count = self._spent(conn, r["dataset_id"])
                total = (Fraction(r["epsilon_total"]), Fraction(r["delta_total"]))
                out.append(
                    DatasetBudget(
                        r["dataset_id"],
                        (float(total[0]), float(total[1])),
                        (float(spent[0]), float(spent[1])),
                        (float(total[0] - spent[0]), float(total[1] - spent[1])),
                        count,
                    )
                )
        return out

    @staticmethod
    def _spent(conn: Connection, dataset_id: str) -> tuple[tuple[Fraction, Fraction], int]:
        rows = conn.execute(
            sa.select(_releases.c.epsilon, _releases.c.delta).where(
                _releases.c.dataset_id == dataset_id, _releases.c.state.in_(_SPENT_STATES)
            )
        ).all()
        eps, delta = compose_pure((float(e), float(d)) for e, d in rows)
        return (eps, delta), len(rows)

    # ----------------------------------------------------------------- releases

    def reserve(
        self,
        *,
        release_id: str,
        dataset_id: str,
        epsilon: float,
        delta: float,
        config_sha256: str,
        summary: str,
        mechanism: str,
        sensitivity_formula: str,
        budget_splits: list[dict[str, Any]],
        provenance: dict[str, Any],
        internal: dict[str, Any],
        period: str | None = None,
        rho: float | None = None,
    ) -> ReserveOutcome:
        """Charge a release's full cost atomically, before any noise exists.

        * A new release id is charged if the dataset's remaining budget covers it,
          else :class:`BudgetExceededError` (nothing is spent).
        * A published release id with the same config returns the stored release
          (nothing is charged); a reserved one is resumed (nothing is charged).
        * A release id reused with a different config, or one whose noise was drawn
          but never published, raises :class:`ReleaseConflictError`.
        """
        now = _now()
        with self._tx() as conn:
            locked = _lock_dataset(conn, dataset_id)
            if locked != 1:
                raise LedgerError(f"dataset {dataset_id!r} has no budget in the ledger; set one with `fdp budget set`")
            existing = conn.execute(sa.select(_releases).where(_releases.c.release_id == release_id)).mappings().first()
            if existing is not None:
                record = _record(existing)
                if record.config_sha256 != config_sha256 or record.dataset_id != dataset_id:
                    raise ReleaseConflictError(
                        f"release id {release_id!r} was already used with a different config "
                        f"(sha256 {record.config_sha256[:12]}...); choose a new --release-id"
                    )
                if record.state == "published":
                    return ReserveOutcome(record, charged=False, published=True)
                if record.state == "reserved":
                    return ReserveOutcome(record, charged=False, published=False)
                if record.state == "noised":
                    raise ReleaseConflictError(
                        f"release {release_id!r} drew its noise but was not published; its budget is spent and "
                        "the noise is not kept, so it cannot be resumed. Run again with a new --release-id"
                    )
            total_row = conn.execute(
                sa.select(_datasets.c.epsilon_total, _datasets.c.delta_total).where(_datasets.c.dataset_id == dataset_id)
            ).one()
            total = (Fraction(total_row[0]), Fraction(total_row[1]))
            (spent_eps, spent_delta), _ = self._spent(conn, dataset_id)
            req = (exact(epsilon), exact(delta))
            if spent_eps + req[0] > total[0] or spent_delta + req[1] > total[1]:
                raise BudgetExceededError(
                    dataset_id,
                    (float(req[0]), float(req[1])),
                    (float(total[0] - spent_eps), float(total[1] - spent_delta)),
                )
            values = dict(
                dataset_id=dataset_id, state="reserved", epsilon=repr(float(epsilon)), delta=repr(float(delta)),
                config_sha256=config_sha256, summary=summary, mechanism=mechanism,
                sensitivity_formula=sensitivity_formula, budget_splits=json.dumps(budget_splits),
                provenance=json.dumps(provenance), internal=json.dumps(internal), public_json=None, updated_at=now,
            )
            if existing is not None:  # a cancelled reservation of the same config is charged afresh
                conn.execute(sa.update(_releases).where(_releases.c.release_id == release_id).values(**values))
            else:
                conn.execute(sa.insert(_releases).values(release_id=release_id, created_at=now, **values))
            _append(conn, "release.reserved", dataset_id, release_id, {
                "epsilon": values["epsilon"], "delta": values["delta"], "config_sha256": config_sha256,
                "summary": summary, "mechanism": mechanism, "sensitivity_formula": sensitivity_formula,
                "budget_splits": budget_splits, "provenance": provenance,
            })
            row = conn.execute(sa.select(_releases).where(_releases.c.release_id == release_id)).mappings().one()
            return ReserveOutcome(_record(row), charged=True, published=False)

    def _transition(self, release_id: str, src: str, dst: str, **extra: Any) -> None:
        with self._tx() as conn:
            n = conn.execute(
                sa.update(_releases)
                .where(_releases.c.release_id == release_id, _releases.c.state == src)
                .values(state=dst, updated_at=_now(), **extra)
            ).rowcount
            if n == 1:
                dataset_id = conn.execute(
                    sa.select(_releases.c.dataset_id).where(_releases.c.release_id == release_id)
                ).scalar_one()
                payload: dict[str, Any] = {"from": src, "to": dst}
                if "public_json" in extra:
                    payload["public_sha256"] = hashlib.sha256(extra["public_json"].encode()).hexdigest()
                _append(conn, f"release.{dst}", dataset_id, release_id, payload)
        if n != 1:
            current = self.get(release_id)
            state = current.state if current else "missing"
            raise LedgerError(f"release {release_id!r} cannot go from {src!r} to {dst!r}: it is {state!r}")

    def mark_noised(self, release_id: str) -> None:
        """Record that noise is about to be drawn: from now on the charge is never refunded."""
        self._transition(release_id, "reserved", "noised")

    def cancel(self, release_id: str) -> None:
        """Release a reservation that failed before any noise was drawn."""
        self._transition(release_id, "reserved", "cancelled")

    def publish(self, release_id: str, public: dict[str, Any]) -> None:
        """Store the published (public) outputs and close the release."""
        self._transition(release_id, "noised", "published", public_json=json.dumps(public))

    def update_internal(self, release_id: str, internal: dict[str, Any]) -> None:
        """Merge internal (auditor-only) facts into a release row."""
        with self._tx() as conn:
            row = conn.execute(sa.select(_releases.c.internal).where(_releases.c.release_id == release_id)).first()
            if row is None:
                raise LedgerError(f"release {release_id!r} is not in the ledger")
            merged = {**json.loads(row[0]), **internal}
            conn.execute(sa.update(_releases).where(_releases.c.release_id == release_id).values(internal=json.dumps(merged)))

    def audit_events(self, release_id: str | None = None) -> list[dict[str, Any]]:
        """The audit trail (oldest first), optionally for one release."""
        with self._tx() as conn:
            q = sa.select(_audit).order_by(_audit.c.seq)
            if release_id is not None:
                q = q.where(_audit.c.release_id == release_id)
            rows = conn.execute(q).mappings().all()
        return [{**dict(r), "payload": json.loads(r["payload"])} for r in rows]

    def verify(self) -> list[str]:
        """Recompute the hash chain and replay it against the current tables.

        Returns the problems found, the first bad entry first (empty: the ledger is intact).
        Detects edited, deleted, reordered, inserted and truncated audit entries, and
        release or dataset rows changed outside fdp.
        """
        with self._tx() as conn:
            events = conn.execute(sa.select(_audit).order_by(_audit.c.seq)).mappings().all()
            head = conn.execute(sa.select(_meta.c.value).where(_meta.c.key == "audit_head")).scalar_one()
            releases = {r["release_id"]: r for r in conn.execute(sa.select(_releases)).mappings().all()}
            datasets = {r["dataset_id"]: r for r in conn.execute(sa.select(_datasets)).mappings().all()}
        problems: list[str] = []
        prev, expected_seq = GENESIS, 1
        state: dict[str, dict[str, Any]] = {}
        totals: dict[str, tuple[str, str]] = {}
        for e in events:
            fields = _event_fields(e["seq"], e["at"], e["actor"], e["host"], e["event"], e["dataset_id"],
                                   e["release_id"], e["payload"])
            if e["seq"] != expected_seq:
                problems.append(f"audit entry {e['seq']}: expected entry {expected_seq} (entries deleted or reordered)")
            if e["prev_hash"] != prev:
                problems.append(f"audit entry {e['seq']}: does not follow the previous entry (chain broken)")
            if _event_hash(e["prev_hash"], fields) != e["hash"]:
                problems.append(f"audit entry {e['seq']}: content does not match its hash (edited)")
            prev, expected_seq = e["hash"], e["seq"] + 1
            try:
                payload = json.loads(e["payload"])
            except json.JSONDecodeError:
                payload = {}
            if e["event"] in ("dataset.created", "budget.set"):
                totals[e["dataset_id"]] = (payload.get("epsilon_total"), payload.get("delta_total"))
            elif e["event"] == "release.reserved":
                state[e["release_id"]] = {"state": "reserved", "epsilon": payload.get("epsilon"),
                                          "delta": payload.get("delta"), "config_sha256": payload.get("config_sha256"),
                                          "dataset_id": e["dataset_id"]}
            elif e["event"].startswith("release.") and e["release_id"] in state:
                state[e["release_id"]]["state"] = payload.get("to")
                if "public_sha256" in payload:
                    state[e["release_id"]]["public_sha256"] = payload["public_sha256"]
        if head != f"{expected_seq - 1}:{prev}":
            problems.append(f"audit head says {head.split(':')[0]} entries but the trail ends at {expected_seq - 1} (truncated or appended out of band)")
        for rid, row in releases.items():
            want = state.get(rid)
            if want is None:
                problems.append(f"release {rid!r}: row has no audit entry (inserted out of band)")
                continue
            got = {"state": row["state"], "epsilon": row["epsilon"], "delta": row["delta"],
                   "config_sha256": row["config_sha256"], "dataset_id": row["dataset_id"]}
            if any(got[k] != want[k] for k in got):
                problems.append(f"release {rid!r}: row differs from its audit trail (edited out of band)")
            if "public_sha256" in want and hashlib.sha256((row["public_json"] or "").encode()).hexdigest() != want["public_sha256"]:
                problems.append(f"release {rid!r}: published outputs differ from the audited ones (edited)")
        for rid in state.keys() - releases.keys():
            problems.append(f"release {rid!r}: audited but its row is missing (deleted)")
        for did, row in datasets.items():
            if totals.get(did) != (row["epsilon_total"], row["delta_total"]):
                problems.append(f"dataset {did!r}: budget differs from its audit trail (edited out of band)")
        return problems

    def get(self, release_id: str) -> ReleaseRecord | None:
        """The ledger row of a release, or None."""
        with self._tx() as conn:
            row = conn.execute(sa.select(_releases).where(_releases.c.release_id == release_id)).mappings().first()
        return _record(row) if row is not None else None

    def releases(self, dataset_id: str | None = None) -> list[ReleaseRecord]:
        """All release rows, oldest first."""
        with self._tx() as conn:
            q = sa.select(_releases)
            if dataset_id is not None:
                q = q.where(_releases.c.dataset_id == dataset_id)
            rows = conn.execute(q.order_by(_releases.c.created_at, _releases.c.release_id)).mappings().all()
        return [_record(r) for r in rows]


def _event_hash(prev_hash: str, fields: dict[str, Any]) -> str:
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256((prev_hash + canonical).encode()).hexdigest()


def _event_fields(seq: int, at: str, actor: str, host: str, event: str, dataset_id: str,
                  release_id: str | None, payload: str) -> dict[str, Any]:
    return {"seq": seq, "at": at, "actor": actor, "host": host, "event": event, "dataset_id": dataset_id,
            "release_id": release_id, "payload": payload}


def _append(conn: Connection, event: str, dataset_id: str, release_id: str | None, payload: dict[str, Any]) -> None:
    """Append one event to the hash chain, in the caller's transaction.

    The chain head lives in ``fdp_meta`` and is updated first, which serialises
    appenders on every back end (so two datasets can never fork the chain).
    """
    conn.execute(sa.update(_meta).where(_meta.c.key == "audit_head").values(value=_meta.c.value))
    head = conn.execute(sa.select(_meta.c.value).where(_meta.c.key == "audit_head")).scalar_one()
    last_seq, prev_hash = head.split(":")
    seq = int(last_seq) + 1
    try:
        actor = getpass.getuser()
    except (KeyError, OSError):
        actor = "unknown"
    fields = _event_fields(seq, _now(), actor, socket.gethostname(), event, dataset_id, release_id,
                           json.dumps(payload, sort_keys=True))
    digest = _event_hash(prev_hash, fields)
    conn.execute(sa.insert(_audit).values(prev_hash=prev_hash, hash=digest, **fields))
    conn.execute(sa.update(_meta).where(_meta.c.key == "audit_head").values(value=f"{seq}:{digest}"))


def _insert_dataset(conn: Connection, dataset_id: str, epsilon: float, delta: float, source: str) -> None:
    now = _now()
    totals = {"epsilon_total": repr(float(epsilon)), "delta_total": repr(float(delta))}
    conn.execute(sa.insert(_datasets).values(dataset_id=dataset_id, created_at=now, updated_at=now, lock_counter=0, **totals))
    _append(conn, "dataset.created", dataset_id, None, {**totals, "source": source})


def _lock_dataset(conn: Connection, dataset_id: str) -> int:
    """Take the dataset's write lock (SQLite: the database write lock; PostgreSQL: the row lock).

    Writing first makes every later read in the transaction consistent with concurrent
    charges, on both back ends, with one code path. Returns the number of rows (0 or 1).
    """
    return int(
        conn.execute(
            sa.update(_datasets).where(_datasets.c.dataset_id == dataset_id).values(lock_counter=_datasets.c.lock_counter + 1)
        ).rowcount
    )


def _record(row: Any) -> ReleaseRecord:
    return ReleaseRecord(
        release_id=row["release_id"], dataset_id=row["dataset_id"], state=row["state"],
        epsilon=float(row["epsilon"]), delta=float(row["delta"]), config_sha256=row["config_sha256"],
        summary=row["summary"], mechanism=row["mechanism"], sensitivity_formula=row["sensitivity_formula"],
        budget_splits=json.loads(row["budget_splits"]), provenance=json.loads(row["provenance"]),
        internal=json.loads(row["internal"]), public=json.loads(row["public_json"]) if row["public_json"] else None,
        created_at=row["created_at"], updated_at=row["updated_at"],
    )


def _engine(url: str) -> Engine:
    try:
        parsed = sa.engine.make_url(url)
    except sa.exc.ArgumentError:
        raise LedgerError(f"ledger URL ({url!r}) is not a valid database URL (e.g. sqlite:///path or postgresql://...)") from None
    if parsed.get_backend_name() == "sqlite":
        db = parsed.database
        if db and db != ":memory:":
            try:
                Path(db).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise LedgerError(f"ledger directory for {db!r} cannot be created ({exc.strerror})") from None
        return sa.create_engine(url, connect_args={"timeout": 60})
    try:
        return sa.create_engine(url, pool_pre_ping=True)
    except (sa.exc.ArgumentError, ModuleNotFoundError) as exc:
        raise LedgerError(f"ledger URL ({parsed.render_as_string(hide_password=True)!r}) cannot be used: {exc}") from None


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:200]
