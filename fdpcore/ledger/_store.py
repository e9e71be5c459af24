"""SQLAlchemy implementation of the budget ledger.

States of a release row (a release id is unique)::

    reserved  --mark_noised-->  noised  --publish-->  published
        |
        +--cancel--> cancelled          (only before any noise exists)

``reserved``, ``noised`` and ``published`` rows count as spent. A reservation is
made atomically: the dataset row is updated first (taking a write lock on SQLite,
a row lock on PostgreSQL), then the spent totals are read and compared, then the
reservation is inserted, all in one transaction. Costs are summed exactly
(:mod:`fdpcore.privacy.accounting`), so rounding can neither refuse a fitting charge nor
let an overspend through. No noise, seed or pre-noise statistic is ever stored:
the ``public_json`` column holds only what was published.

Each dataset has a policy: a total (epsilon, delta), optionally an allowance per
calendar month, and an accounting mode — ``basic`` (sequential composition: epsilon
and delta add) or ``zcdp`` (rho adds, a pure release counts as epsilon^2/2, and the
sum converts to (epsilon, delta) at the policy's delta through OpenDP; MATH.md §12.1).
Every release is charged to a period (default: the current calendar month, UTC).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import re
import sqlite3
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy.engine import Connection, Engine

from fdpcore.errors import (
    BudgetExceededError,
    ConcurrentRunError,
    ConfigError,
    InternalError,
    LedgerError,
    NotResumableError,
    ReleaseConflictError,
)
from fdpcore.io.provenance import operator_host
from fdpcore.ledger._evidence import (
    CHECKPOINT_FORMAT,
    Evidence,
    canonical_json,
    check_evidence,
    hash_prefixes,
    public_key_hex,
    sign_statement,
    verify_signature,
)
from fdpcore.ledger._schema import GENESIS, MIGRATIONS, SCHEMA_VERSION
from fdpcore.ledger._schema import audit as _audit
from fdpcore.ledger._schema import datasets as _datasets
from fdpcore.ledger._schema import meta as _meta
from fdpcore.ledger._schema import metadata as _metadata
from fdpcore.ledger._schema import releases as _releases
from fdpcore.limits import check_id
from fdpcore.privacy.accounting import compose_pure, exact, pure_to_zcdp, zcdp_to_epsilon

__all__ = [
    "ACCOUNTING_MODES",
    "CHARGE_KINDS",
    "DEFAULT_MAX_LATE_PERIODS",
    "KEY_PURPOSES",
    "RELEASE_STATES",
    "DatasetBudget",
    "Ledger",
    "PeriodUsage",
    "ReleaseRecord",
    "OldLedgerError",
    "ReserveOutcome",
    "check_period",
    "current_period",
    "default_ledger_url",
    "state_dir",
]

RELEASE_STATES = ("reserved", "noised", "published", "cancelled")
#: What a release's charge means: ``dp`` (its epsilon/delta is a differential-privacy guarantee) or
#: ``non_private`` (e.g. PCV tuning, MATH.md §5.2: the nominal epsilon of the noise is charged, so the
#: budget still shrinks, but it guarantees nothing and the release may never feed a private one).
CHARGE_KINDS = ("dp", "non_private")
_SPENT_STATES = ("reserved", "noised", "published")
#: How a dataset's releases compose (MATH.md §12.1): basic (eps and delta add) or zCDP (rho adds).
ACCOUNTING_MODES = ("basic", "zcdp")
#: Allowance periods.
PERIOD_KINDS = ("month",)
#: What a key recorded in the audit chain is for.
KEY_PURPOSES = ("checkpoint", "budget-policy")
#: How many periods before the current one a late run may be charged to, unless the policy says otherwise.
DEFAULT_MAX_LATE_PERIODS = 1


def state_dir() -> Path:
    """Fdp's state directory: ``$FDP_STATE_DIR``, else ``$XDG_STATE_HOME/fdp``, else ``~/.local/state/fdp``."""
    state = os.environ.get("FDP_STATE_DIR")
    if state:
        return Path(state)
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "state") / "fdp"


def default_ledger_url() -> str:
    """``$FDP_LEDGER_URL``, else the SQLite file ``ledger.sqlite`` in :func:`state_dir`."""
    url = os.environ.get("FDP_LEDGER_URL")
    if url:
        return url
    return f"sqlite:///{state_dir() / 'ledger.sqlite'}"


def current_period(now: datetime | None = None) -> str:
    """The budget period (calendar month ``YYYY-MM``, UTC) of ``now``."""
    return f"{now or datetime.now(UTC):%Y-%m}"


def check_period(label: str, now: datetime | None = None) -> str:
    """Validate a period label: a calendar month ``YYYY-MM`` not after the current one.

    A release may be charged to the current or an earlier period (a delayed scheduled run),
    never to a later one: allowances cannot be borrowed from the future.
    """
    if not isinstance(label, str) or not re.fullmatch(r"\d{4}-(0[1-9]|1[0-2])", label):
        raise ConfigError(f"period ({label!r}) must be a calendar month written YYYY-MM")
    now_label = current_period(now)
    if label > now_label:
        raise ConfigError(f"period ({label!r}) must not be after the current period ({now_label!r})")
    return label


def _pair(p: tuple[float, float] | None) -> dict[str, float] | None:
    return None if p is None else {"epsilon": p[0], "delta": p[1]}


@dataclass(frozen=True)
class PeriodUsage:
    """Spending in one budget period, and the period's allowance if the dataset has one."""

    period: str
    spent: tuple[float, float]
    rho: float
    n_releases: int
    allowance: tuple[float, float] | None  # the policy's allowance plus the period's grant
    remaining: tuple[float, float] | None
    granted: tuple[float, float] | None = None  # one-month grants of this period (``Ledger.grant``)

    def as_dict(self) -> dict[str, Any]:
        """JSON form (``PeriodBudget`` schema when an allowance exists)."""
        return {"period": self.period, "allowance": _pair(self.allowance), "spent": _pair(self.spent),
                "remaining": _pair(self.remaining), "rho_spent": self.rho, "releases": self.n_releases,
                "granted": _pair(self.granted)}


@dataclass(frozen=True)
class DatasetBudget:
    """Total, spent and remaining budget of one dataset, overall and per period.

    On a zCDP-accounted dataset ``spent`` is the (epsilon, delta) that the summed ``rho_spent``
    converts to at the dataset's total delta (OpenDP's conversion), so ``remaining`` is what
    is left of the total in that sense.
    """

    dataset_id: str
    accounting: str
    total: tuple[float, float]
    spent: tuple[float, float]
    remaining: tuple[float, float]
    rho_spent: float
    n_releases: int
    period: str | None
    per_period: tuple[float, float] | None
    periods: tuple[PeriodUsage, ...]
    current: PeriodUsage | None
    n_non_private: int = 0
    max_late_periods: int = DEFAULT_MAX_LATE_PERIODS
    policy_since: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON form (the ``PrivacyBudget`` schema): keys ``total``, ``spent``, ``remaining`` with ``epsilon``/``delta``."""
        return {
            "dataset_id": self.dataset_id,
            "accounting": self.accounting,
            "total": _pair(self.total),
            "spent": _pair(self.spent),
            "remaining": _pair(self.remaining),
            "rho_spent": self.rho_spent,
            "releases": self.n_releases,
            "period": self.period,
            "current_period": self.current.as_dict() if self.current is not None else None,
            "periods": [p.as_dict() for p in self.periods],
            "non_private_releases": self.n_non_private,
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
    period: str = ""
    rho: float | None = None
    charge_kind: str = "dp"

    @property
    def non_private(self) -> bool:
        """True when this release carries no differential-privacy guarantee (see :data:`CHARGE_KINDS`)."""
        return self.charge_kind != "dp"


@dataclass(frozen=True)
class ReserveOutcome:
    """Result of :meth:`Ledger.reserve`: a fresh or resumed reservation, or an already published release."""

    record: ReleaseRecord
    charged: bool  # True when this call charged budget
    published: bool  # True when the release was already published (nothing to do)


@dataclass(frozen=True)
class _Policy:
    """A dataset's budget policy as stored (exact fractions)."""

    accounting: str
    epsilon: Fraction
    delta: Fraction
    period: str | None
    epsilon_per_period: Fraction | None
    delta_per_period: Fraction | None
    max_late_periods: int | None = None  # None: DEFAULT_MAX_LATE_PERIODS

    def payload(self) -> dict[str, Any]:
        return {
            "epsilon_total": _s(self.epsilon), "delta_total": _s(self.delta), "accounting": self.accounting,
            "period": self.period, "epsilon_per_period": _s(self.epsilon_per_period),
            "delta_per_period": _s(self.delta_per_period), "max_late_periods": self.max_late_periods,
        }

    @property
    def late(self) -> int:
        """How many periods before the current one a release may be charged to."""
        return DEFAULT_MAX_LATE_PERIODS if self.max_late_periods is None else self.max_late_periods


@dataclass(frozen=True)
class _Usage:
    """Exact sums over releases; ``rho`` is None when some release has no zCDP form."""

    epsilon: Fraction
    delta: Fraction
    rho: Fraction | None
    count: int

    def plus(self, other: _Usage) -> _Usage:
        rho = None if self.rho is None or other.rho is None else self.rho + other.rho
        return _Usage(self.epsilon + other.epsilon, self.delta + other.delta, rho, self.count + other.count)


def _s(value: Fraction | None) -> str | None:
    """Storage form of an exact amount: the shortest decimal of its float (round-trips through :func:`exact`)."""
    return None if value is None else repr(float(value))


def _usage(rows: Iterable[tuple[str, str, str | None]]) -> _Usage:
    rows = list(rows)
    eps, delta = compose_pure((float(e), float(d)) for e, d, _ in rows)
    rho: Fraction | None = Fraction(0)
    for e, d, r in rows:
        if r is not None:
            rho = None if rho is None else rho + exact(float(r))
        elif float(d) == 0.0 and float(e) > 0:
            rho = None if rho is None else rho + exact(pure_to_zcdp(float(e)))
        elif float(e) > 0 or float(d) > 0:
            rho = None  # an (epsilon, delta) release without a zCDP form
    return _Usage(eps, delta, rho, len(rows))


def _rho_capacity(epsilon: Fraction, delta: Fraction) -> float:
    """The largest rho whose (epsilon, delta) conversion stays within ``epsilon`` (bisection on OpenDP's map)."""
    lo, hi = 0.0, float(epsilon)  # the conversion never gives less than rho, so rho <= epsilon
    for _ in range(80):
        mid = (lo + hi) / 2
        if zcdp_to_epsilon(mid, float(delta)) <= float(epsilon):
            lo = mid
        else:
            hi = mid
    return lo


def wait_seconds() -> float:
    """How long a run waits for another live run of the same release id (``$FDP_WAIT_SECONDS``, default 600)."""
    return float(os.environ.get("FDP_WAIT_SECONDS", "600"))


def this_process() -> dict[str, Any]:
    """The host and process id of this run, as recorded in a release's internal part (``reserved_by``, ``noised_by``)."""
    return {"host": operator_host()[1], "pid": os.getpid()}


def owner_may_be_running(owner: object) -> bool:
    """Whether the process recorded as ``owner`` (``reserved_by`` / ``noised_by``) may still be running.

    False for this very process, for a process of this host that is gone, and for a record written by an
    fdp that did not record its owner; True for a live process of this host, and for any process of another
    host (only a wait limit can tell).
    """
    if not isinstance(owner, dict):
        return False
    if owner.get("host") != operator_host()[1]:
        return True
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def release_owner(record: ReleaseRecord) -> object:
    """The process recorded as working on ``record``: who reserved it (reserved) or drew its noise (noised, published)."""
    return record.internal.get("reserved_by" if record.state == "reserved" else "noised_by")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


class Ledger:
    """The budget ledger at ``url`` (SQLAlchemy URL; ``sqlite:///...`` or ``postgresql://...``).

    Opening a ledger creates it at the current schema version, or migrates an older one
    (see :mod:`fdpcore.ledger._schema`).
    """

    def __init__(self, url: str | None = None, *, read_only: bool = False) -> None:
        self.url = url or default_ledger_url()
        self.read_only = read_only
        self.engine = _engine(self.url, read_only=read_only)
        try:
            self._open()  # a new ledger's schema is created by one opener while the others wait (_create_if_new)
        except (sa.exc.IntegrityError, sa.exc.ProgrammingError) as exc:
            raise LedgerError(f"ledger {self._safe_url()} could not be opened or created ({_first_line(exc)}); check "
                              "--ledger / FDP_LEDGER_URL and the database user's rights") from None
        except sa.exc.OperationalError as exc:
            if "not a database" in str(exc) or "malformed" in str(exc):
                raise self._not_a_ledger("its file is not an SQLite database") from None
            if "readonly database" in str(exc) or _sqlite_not_writable(self.url):  # mode bits, chattr +i, directory
                raise self._not_writable() from None
            if re.search(r'database ".*" does not exist', str(exc)):  # PostgreSQL: a typo, as a missing SQLite folder
                raise LedgerURLError(
                    f"ledger {self._safe_url()}: the database does not exist on the server; check --ledger / "
                    "FDP_LEDGER_URL for a typo (fdp never creates a database: create it first if a new ledger is meant)"
                ) from None
            raise LedgerError(
                f"ledger {self._safe_url()} cannot be opened ({_first_line(exc)}); check --ledger / FDP_LEDGER_URL"
            ) from None
        except sa.exc.DatabaseError as exc:  # e.g. random bytes or text where the SQLite file should be
            raise self._not_a_ledger(f"{_first_line(exc.orig if exc.orig is not None else exc)}") from None

    def _not_writable(self) -> LedgerError:
        journal = _hot_journal(self.url) if self.read_only else None
        if journal is not None:  # trial U, L4: an interrupted write's journal, not a permissions problem
            return LedgerError(
                f"ledger {self._safe_url()}: a write was interrupted (its process stopped mid-transaction) and left its "
                f"rollback journal {journal.name!r} beside it; this command opens the ledger read-only, so SQLite cannot "
                "roll that write back. Nothing was read or changed. The next command that writes the ledger (e.g. "
                "`fdp release`) rolls it back first; to do only that: python3 -c \"import sqlite3; "
                f"sqlite3.connect({str(journal.with_name(journal.name.removesuffix('-journal')))!r})"
                ".execute('PRAGMA quick_check').fetchall()\" (docs/operations.md)")
        return LedgerError(f"ledger {self._safe_url()} is read-only for this process (file or directory permissions, or "
                           "an immutable file): nothing was written or charged; make it writable or point --ledger at a writable "
                           "ledger")

    def _not_a_ledger(self, why: str) -> LedgerError:
        return LedgerError(f"ledger {self._safe_url()} cannot be opened: not an fdp ledger ({why}); check --ledger / "
                           "FDP_LEDGER_URL, or restore the ledger from its backup")

    def _empty_file(self) -> LedgerError:
        return EmptyLedgerFileError(
            f"ledger {self._safe_url()} is an empty file (0 bytes): fdp creates a ledger whole, in one step, so this is "
            "not one it wrote — it was emptied (a `>` redirect, a failed copy or restore) or made by another program. "
            "Restore the ledger from its backup: a release on it would start a new budget and forget every charge. If "
            "the file never held a ledger, delete it and run again; nothing was written or charged")

    def _open(self) -> None:
        path = sqlite_ledger_file(self.url)
        if path is not None and path.is_file() and path.stat().st_size == 0 \
                and _hot_journal(self.url) is None:  # (a hot journal: SQLite rolls it back)
            raise self._empty_file()  # trial U, H1: it was taken for "no ledger yet" and a release reset the budget
        if self.read_only:
            self._check_readable()
            return
        if path is not None and not path.exists():
            self._create_sqlite_file(path)
        if self._create_if_new():
            return
        with self.engine.begin() as conn:
            # serialise concurrent openers of an old database before reading its version
            conn.execute(sa.update(_meta).where(_meta.c.key == "schema_version").values(value=_meta.c.value))
            row = conn.execute(sa.select(_meta.c.value).where(_meta.c.key == "schema_version")).first()
            version = _version(row, self._not_a_ledger)
            if version > SCHEMA_VERSION:
                raise LedgerError(
                    f"ledger {self._safe_url()} has schema version {version}, newer than this fdp ({SCHEMA_VERSION}); upgrade fdp"
                )
            if conn.execute(sa.select(_meta.c.key).where(_meta.c.key == "audit_head")).first() is None:
                conn.execute(sa.insert(_meta).values(key="audit_head", value=f"0:{GENESIS}"))
            if conn.execute(sa.select(_meta.c.key).where(_meta.c.key == "ledger_id")).first() is None:
                conn.execute(sa.insert(_meta).values(key="ledger_id", value=str(uuid.uuid4())))
        self._migrate(version)

    def _create_sqlite_file(self, path: Path) -> None:
        """Create a new SQLite ledger whole: its schema in a hidden file beside ``path``, then linked in at ``path``.

        ``path`` then never holds an empty or half-made file, so an empty file there is not fdp's (:meth:`_empty_file`).
        Of several processes creating it at once one link succeeds; the others find the ledger and open it. Where the
        filesystem has no hard links the schema is created in place, as before (:meth:`_create_if_new`).
        """
        temp = path.with_name(f".{path.name}.fdp-new-{uuid.uuid4().hex}")
        engine = _transactional_ddl_engine(sa.create_engine(f"sqlite:///{temp}"))
        try:
            with engine.begin() as conn:  # NullPool: the connection is closed when the transaction ends
                _create_schema(conn)
            try:
                os.link(temp, path)
            except FileExistsError:
                pass  # another process created it meanwhile: open theirs
            except OSError:
                return  # no hard links here: _create_if_new creates the schema in place
        finally:
            engine.dispose()
            for leftover in (temp, temp.with_name(temp.name + "-journal")):
                leftover.unlink(missing_ok=True)

    def _create_if_new(self) -> bool:
        """Create the schema of an empty database in one transaction that excludes other openers; False if it exists.

        PostgreSQL's DDL is transactional: an advisory lock serialises the openers. SQLite's Python driver runs each
        ``CREATE TABLE`` in a transaction of its own, so a process opening the file meanwhile saw ``fdp_meta`` without
        its version row (CI at f4936ea: "not an fdp ledger") and two creators could both create; here SQLite's
        creation runs inside ``BEGIN IMMEDIATE`` (the write lock, waited for up to the driver's timeout of 60 s) on
        an engine whose driver leaves the transactions to it (SQLAlchemy's documented pysqlite recipe).
        """
        with self.engine.connect() as conn:  # the usual case: created already (and atomically, so wholly)
            if sa.inspect(conn).has_table(_meta.name):
                return False
        sqlite = self.engine.dialect.name == "sqlite"
        # (an engine made by a connection factory, a test's read-only file, keeps the driver's transactions)
        engine = _transactional_ddl_engine(self.engine) if sqlite and self.engine.url.database else self.engine
        try:
            with engine.begin() as conn:
                if not sqlite:
                    conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _OPEN_LOCK_KEY})
                if sa.inspect(conn).has_table(_meta.name):
                    return False
                if sa.inspect(conn).get_table_names():
                    raise self._not_a_ledger("the database has other tables but no fdp_meta")
                _create_schema(conn)
                return True
        finally:
            if engine is not self.engine:
                engine.dispose()

    def _check_readable(self) -> None:
        """A read-only open: the ledger must exist and be at this code's schema version; nothing is written."""
        with self.engine.connect() as conn:
            if not sa.inspect(conn).has_table(_meta.name):
                raise self._not_a_ledger("it has no fdp_meta table")
            version = _version(conn.execute(sa.select(_meta.c.value).where(_meta.c.key == "schema_version")).first(),
                               self._not_a_ledger)
        if version > SCHEMA_VERSION:
            raise LedgerError(f"ledger {self._safe_url()} has schema version {version}, newer than this fdp "
                              f"({SCHEMA_VERSION}); upgrade fdp")
        if version < SCHEMA_VERSION:
            raise OldLedgerError(
                f"ledger {self._safe_url()} has schema version {version}, older than this fdp's ({SCHEMA_VERSION}), and "
                "a read-only opening does not migrate it: run a command that writes (e.g. `fdp budget set`) once, on a "
                "writable copy")

    def _migrate(self, version: int) -> None:
        for target in range(version + 1, SCHEMA_VERSION + 1):
            with self.engine.begin() as conn:
                conn.execute(sa.update(_meta).where(_meta.c.key == "schema_version").values(value=_meta.c.value))
                now = int(conn.execute(sa.select(_meta.c.value).where(_meta.c.key == "schema_version")).scalar_one())
                if now >= target:
                    continue  # another process migrated it meanwhile
                payload = MIGRATIONS[target](conn)
                conn.execute(sa.update(_meta).where(_meta.c.key == "schema_version").values(value=str(target)))
                _append(conn, "ledger.migrated", "*", None, {"from": target - 1, "to": target, **payload})

    @property
    def ledger_id(self) -> str:
        """This ledger's identity: a random UUID made when the ledger was created (or first opened by a version of fdp that knew of it), never changed afterwards. It tells releases of two ledgers apart.

        (lineage ``ledgerEntryId``, audit checkpoints).
        """
        with self._tx() as conn:
            return str(conn.execute(sa.select(_meta.c.value).where(_meta.c.key == "ledger_id")).scalar_one())

    def _safe_url(self) -> str:
        return sa.engine.make_url(self.url).render_as_string(hide_password=True)

    @contextmanager
    def _tx(self) -> Iterator[Connection]:
        try:
            with (self.engine.connect() if self.read_only else self.engine.begin()) as conn:
                yield conn
        except sa.exc.DatabaseError as exc:
            if "not a database" in str(exc) or "malformed" in str(exc):  # damaged after it was opened
                raise self._not_a_ledger(_first_line(exc.orig if exc.orig is not None else exc)) from None
            if not isinstance(exc, sa.exc.OperationalError):
                raise  # e.g. IntegrityError, which callers handle
            if self.read_only and "readonly" in str(exc):
                raise LedgerError(f"ledger {self._safe_url()} was opened read-only; this command cannot change it") from None
            if "readonly database" in str(exc) or _sqlite_not_writable(self.url):  # e.g. its directory: no journal
                raise self._not_writable() from None
            if "could not decode to utf-8" in str(exc).lower():  # a damaged stored text (trial U, L4): no raw text quoted
                raise self._not_a_ledger("a stored text is not valid UTF-8: the file is damaged") from None
            if "database or disk is full" in str(exc):  # trial U, M2: "nothing was changed" read as "nothing charged"
                raise LedgerError(f"ledger {self._safe_url()}: its disk is full; this write was rolled back (what earlier "
                                  "steps recorded stays); free space where the ledger lives, then run again") from None
            raise LedgerError(f"ledger {self._safe_url()} is unavailable ({_first_line(exc)}); this write was rolled back "
                              "(what earlier steps recorded stays)") from None

    # ----------------------------------------------------------------- datasets

    def ensure_dataset(self, dataset_id: str, epsilon: float, delta: float = 0.0, **policy: Any) -> bool:
        """Create the dataset's budget if it does not exist. Returns True when created.

        ``policy`` takes the keyword arguments of :meth:`set_budget` (accounting, period,
        per-period allowance). Once a dataset exists, its ledger budget is authoritative: a
        config's budget is only a proposal for the initial value.
        """
        check_id("dataset id", dataset_id)
        new = _policy(epsilon, delta, **policy)
        with self._tx() as conn:
            exists = conn.execute(sa.select(_datasets.c.dataset_id).where(_datasets.c.dataset_id == dataset_id)).first()
            if exists:
                return False
            try:
                _insert_dataset(conn, dataset_id, new, "config proposal")
            except sa.exc.IntegrityError:
                return False
        return True

    def set_budget(
        self,
        dataset_id: str,
        epsilon: float,
        delta: float = 0.0,
        *,
        accounting: str = "basic",
        period: str | None = None,
        epsilon_per_period: float | None = None,
        delta_per_period: float | None = None,
        signed: dict[str, Any] | None = None,
        max_late_periods: int | None = None,
    ) -> DatasetBudget:
        """The privacy officer's act: set a dataset's total budget and policy (created if new).

        Args:
            dataset_id: the dataset.
            epsilon: the total budget's epsilon.
            delta: the total budget's delta.
            accounting: ``"basic"`` (epsilon and delta add) or ``"zcdp"`` (rho adds and converts to
                (epsilon, delta) at ``delta`` through OpenDP; needs ``delta > 0``).
            period: ``"month"`` to add a per-calendar-month allowance, else None.
            epsilon_per_period: the epsilon allowance of each period.
            delta_per_period: the delta allowance of each period.
            signed: ``{"statement", "public_key", "signature"}``: the privacy officer's signature of
                :meth:`policy_statement` (``"budget.set"``); required once a ``budget-policy`` key is
                registered (:meth:`register_key`), else ignored.
            max_late_periods: how many periods before the current one a late run may be charged to
                (None: :data:`DEFAULT_MAX_LATE_PERIODS`). No run is ever charged to a period before
                the month this policy was set.

        Raises:
            BudgetExceededError: the new total is below what is already spent (nothing changes).
            ConfigError: an inconsistent policy (nothing changes).
        """
        check_id("dataset id", dataset_id)
        new = _policy(epsilon, delta, accounting=accounting, period=period, epsilon_per_period=epsilon_per_period,
                      delta_per_period=delta_per_period, max_late_periods=max_late_periods)
        now = _now()
        with self._tx() as conn:
            if _lock_dataset(conn, dataset_id) == 0:
                _insert_dataset(conn, dataset_id, new, "budget set", signed)
            else:
                used = _usage_rows(conn, dataset_id)
                if new.accounting == "zcdp":
                    if used.rho is None:
                        raise ConfigError(
                            f"accounting ('zcdp') cannot be set for dataset {dataset_id!r}: it has (epsilon, delta) "
                            "releases without a zCDP form; keep 'basic'"
                        )
                    if zcdp_to_epsilon(float(used.rho), float(new.delta)) > float(new.epsilon):
                        raise BudgetExceededError(dataset_id, (float(used.rho),), (_rho_capacity(new.epsilon, new.delta),),
                                                  scope="new total budget", measures=("rho",))
                elif used.epsilon > new.epsilon or used.delta > new.delta:
                    raise BudgetExceededError(dataset_id, (float(used.epsilon), float(used.delta)),
                                              (float(new.epsilon), float(new.delta)), scope="new total budget")
                _check_allowance_covers_spending(conn, dataset_id, new)
                values = new.payload()
                proof = _check_signed(conn, "budget.set", dataset_id, values, signed)
                conn.execute(sa.update(_datasets).where(_datasets.c.dataset_id == dataset_id).values(
                    epsilon_total=values["epsilon_total"], delta_total=values["delta_total"],
                    accounting=new.accounting, period=new.period, epsilon_per_period=values["epsilon_per_period"],
                    delta_per_period=values["delta_per_period"], max_late_periods=new.max_late_periods, updated_at=now,
                ))
                _append(conn, "budget.set", dataset_id, None, {**values, **({"signed": proof} if proof else {})})
        return self.budgets(dataset_id)[0]

    def budgets(self, dataset_id: str | None = None) -> list[DatasetBudget]:
        """Budget summaries of every dataset (or one), with per-period spending."""
        with self._tx() as conn:
            q = sa.select(_datasets)
            if dataset_id is not None:
                q = q.where(_datasets.c.dataset_id == dataset_id)
            rows = conn.execute(q.order_by(_datasets.c.dataset_id)).mappings().all()
            spent_rows = {
                r["dataset_id"]: _spent_rows(conn, r["dataset_id"]) for r in rows
            }
            non_private = {r["dataset_id"]: _non_private_count(conn, r["dataset_id"]) for r in rows}
            grants = {r["dataset_id"]: _grants(conn, r["dataset_id"]) for r in rows}
        return [replace(_summary(r, spent_rows[r["dataset_id"]], grants[r["dataset_id"]]),
                        n_non_private=non_private[r["dataset_id"]])
                for r in rows]

    def grant(self, dataset_id: str, period: str, epsilon: float, delta: float = 0.0, *,
              signed: dict[str, Any] | None = None) -> DatasetBudget:
        """The privacy officer's one-month grant: add (epsilon, delta) to the allowance of ``period`` only.

        The grant is an entry of the audit chain (event ``budget.granted``), which is where the ledger
        reads it back from, so it is verified with the chain and cannot be edited unseen. The dataset's
        total still caps every charge.

        Raises:
            ConfigError: ``period`` is not ``YYYY-MM``, the amounts are not finite and >= 0 (not both 0),
                or the dataset has no per-period allowance (nothing changes).
            LedgerError: the dataset is not in the ledger (nothing changes).

        ``signed`` is the privacy officer's signature of :meth:`policy_statement` (``"budget.grant"``),
        required once a ``budget-policy`` key is registered (as for :meth:`set_budget`).
        """
        if not isinstance(period, str) or not re.fullmatch(r"\d{4}-(0[1-9]|1[0-2])", period):
            raise ConfigError(f"period ({period!r}) must be a calendar month written YYYY-MM")
        for name, value in (("epsilon", epsilon), ("delta", delta)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ConfigError(f"grant {name} ({value!r}) must be a finite number >= 0")
        if epsilon == 0 and delta == 0:
            raise ConfigError("grant epsilon and delta (0, 0) must not both be 0")
        if delta >= 1:
            raise ConfigError(f"grant delta ({delta!r}) must be < 1")
        with self._tx() as conn:
            if _lock_dataset(conn, dataset_id) == 0:
                raise LedgerError(f"dataset {dataset_id!r} is not in the ledger; set its budget with `fdp budget set`")
            policy = _policy_of(conn.execute(sa.select(_datasets).where(_datasets.c.dataset_id == dataset_id)).mappings().one())
            if policy.period is None:
                raise ConfigError(
                    f"dataset {dataset_id!r} has no per-period allowance, so there is nothing to grant to; its total "
                    "budget is the only limit (`fdp budget set`)")
            values = _grant_values(period, epsilon, delta)
            proof = _check_signed(conn, "budget.grant", dataset_id, values, signed)
            _append(conn, "budget.granted", dataset_id, None, {**values, **({"signed": proof} if proof else {})})
        return self.budgets(dataset_id)[0]

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
        proposal: dict[str, Any] | None = None,
        non_private: bool = False,
    ) -> ReserveOutcome:
        """Charge a release's full cost atomically, before any noise exists.

        ``proposal`` (keyword arguments of :meth:`set_budget`, with ``epsilon`` and ``delta``) creates
        the dataset's budget in the same transaction when the ledger does not know the dataset yet —
        so a release that fails before its charge leaves nothing in the ledger.

        * A new release id is charged to ``period`` (default: the current calendar month) if
          the dataset's remaining total budget and the period's allowance cover it, else
          :class:`BudgetExceededError` (nothing is spent).
        * A published release id with the same config returns the stored release
          (nothing is charged); a reserved one is resumed (nothing is charged).
        * A release id reused with a different config, or one whose noise was drawn
          but never published, raises :class:`ReleaseConflictError`.
        * ``non_private=True`` records the charge as kind ``non_private`` (:data:`CHARGE_KINDS`):
          its epsilon is charged but is no guarantee; a zCDP-accounted dataset refuses it.
        """
        check_id("release id", release_id)
        check_id("dataset id", dataset_id)
        label = check_period(period) if period is not None else current_period()
        new = None if proposal is None else _policy(**proposal)
        for attempt in range(2):
            try:
                return self._reserve(release_id, dataset_id, epsilon, delta, config_sha256, summary, mechanism,
                                     sensitivity_formula, budget_splits, provenance, internal, label, rho, new,
                                     "non_private" if non_private else "dp")
            except sa.exc.IntegrityError:  # another run created the dataset first: its row now exists
                if attempt == 1:
                    raise LedgerError(f"dataset {dataset_id!r} could not be created in the ledger; try again") from None
        raise InternalError("unreachable")  # pragma: no cover

    def precheck(self, *, release_id: str, dataset_id: str, epsilon: float, delta: float, config_sha256: str,
                 period: str | None = None, proposal: dict[str, Any] | None = None) -> bool:
        """Read-only check, before any work, that :meth:`reserve` would accept this charge; writes nothing.

        Returns False when the release id is already published or reserved with this config (its re-run
        charges nothing), else True. The period must be one a late run may still be charged to (as :meth:`reserve`
        checks). On a zCDP-accounted dataset only the release id and the period are checked (the rho of a release
        is known after its plan). The atomic :meth:`reserve` still decides.

        Raises:
            BudgetExceededError: the charge does not fit the total or the period's allowance (with its grant).
            ConfigError: the period is before the policy, or further back than a late run may be charged to.
            ReleaseConflictError: the id was used with another config, or drew noise and was not published.
        """
        label = check_period(period) if period is not None else current_period()
        with self._tx() as conn:
            record = _same_release(conn, release_id, dataset_id, config_sha256)
            if record is not None:
                if record.state in ("published", "reserved"):
                    return False
                if record.state == "noised":
                    raise NotResumableError(
                        f"release {release_id!r} drew its noise but was not published; its budget is spent. Unless "
                        "another run of it is publishing it right now, the noise is lost (it is never kept) and the "
                        "id cannot be resumed: run again with a new --release-id")
            row = conn.execute(sa.select(_datasets).where(_datasets.c.dataset_id == dataset_id)).mappings().first()
            if row is None:
                if proposal is None:
                    return True
                policy = _policy(**proposal)
                rows: list[tuple[str, str, str | None, str]] = []
                grant = None
            else:
                policy = _policy_of(row)
                _check_late(dataset_id, policy, label, since=str(row["updated_at"])[:7])  # as reserve does
                rows = _spent_rows(conn, dataset_id)
                grant = _grants(conn, dataset_id).get(label)
        if policy.accounting != "basic":
            return True  # zCDP: the rho of a release is known after its plan; the charge decides
        request = _usage([(repr(float(epsilon)), repr(float(delta)), None)])
        _check_fits(dataset_id, policy, _usage((e, d, r) for e, d, r, _ in rows),
                    _usage((e, d, r) for e, d, r, p in rows if p == label), request, label, grant)
        return True

    def _reserve(
        self, release_id: str, dataset_id: str, epsilon: float, delta: float, config_sha256: str, summary: str,
        mechanism: str, sensitivity_formula: str, budget_splits: list[dict[str, Any]], provenance: dict[str, Any],
        internal: dict[str, Any], label: str, rho: float | None, proposal: _Policy | None, charge_kind: str = "dp",
    ) -> ReserveOutcome:
        now = _now()
        with self._tx() as conn:
            locked = _lock_dataset(conn, dataset_id)
            if locked == 0 and proposal is not None:
                _insert_dataset(conn, dataset_id, proposal, "config proposal")
                locked = _lock_dataset(conn, dataset_id)
            if locked != 1:
                raise LedgerError(f"dataset {dataset_id!r} has no budget in the ledger; set one with `fdp budget set`")
            record = _same_release(conn, release_id, dataset_id, config_sha256)
            if record is not None:
                if record.state == "published":
                    return ReserveOutcome(record, charged=False, published=True)
                if record.state == "reserved":
                    return ReserveOutcome(record, charged=False, published=False)
                if record.state == "noised":
                    raise NotResumableError(
                        f"release {release_id!r} drew its noise but was not published; its budget is spent. Unless "
                        "another run of it is publishing it right now, the noise is lost (it is never kept) and the "
                        "id cannot be resumed: run again with a new --release-id"
                    )
            self._require_intact(conn)  # trial U, M1: no charge on a ledger whose trail does not verify
            dataset_row = conn.execute(sa.select(_datasets).where(_datasets.c.dataset_id == dataset_id)).mappings().one()
            policy = _policy_of(dataset_row)
            _check_late(dataset_id, policy, label, since=str(dataset_row["updated_at"])[:7])
            if charge_kind != "dp" and policy.accounting != "basic":
                raise ConfigError(
                    f"a non-private release cannot be charged to dataset {dataset_id!r}, which is accounted in zCDP "
                    "(it has no privacy loss to count); use a private tuning rule"
                )
            rows = _spent_rows(conn, dataset_id)
            request = _usage([(repr(float(epsilon)), repr(float(delta)), None if rho is None else repr(float(rho)))])
            _check_fits(dataset_id, policy, _usage((e, d, r) for e, d, r, _ in rows),
                        _usage((e, d, r) for e, d, r, p in rows if p == label), request, label,
                        _grants(conn, dataset_id).get(label))
            values = dict(
                dataset_id=dataset_id, state="reserved", epsilon=repr(float(epsilon)), delta=repr(float(delta)),
                config_sha256=config_sha256, summary=summary, mechanism=mechanism,
                sensitivity_formula=sensitivity_formula, budget_splits=json.dumps(budget_splits),
                provenance=json.dumps(provenance), internal=json.dumps({**internal, "reserved_by": this_process()}),
                public_json=None, updated_at=now,
                period=label, rho=None if rho is None else repr(float(rho)), charge_kind=charge_kind,
            )
            if record is not None:  # a cancelled reservation of the same config is charged afresh
                conn.execute(sa.update(_releases).where(_releases.c.release_id == release_id).values(**values))
            else:
                conn.execute(sa.insert(_releases).values(release_id=release_id, created_at=now, **values))
            _append(conn, "release.reserved", dataset_id, release_id, {
                "epsilon": values["epsilon"], "delta": values["delta"], "config_sha256": config_sha256,
                "summary": summary, "mechanism": mechanism, "sensitivity_formula": sensitivity_formula,
                "budget_splits": budget_splits, "provenance": provenance, "period": label, "rho": values["rho"],
                "charge_kind": charge_kind,
            })
            row = conn.execute(sa.select(_releases).where(_releases.c.release_id == release_id)).mappings().one()
            return ReserveOutcome(_record(row), charged=True, published=False)

    def _transition(self, release_id: str, src: str, dst: str, public: dict[str, Any] | None = None,
                    internal: str | None = None) -> dict[str, Any] | None:
        with self._tx() as conn:
            n = conn.execute(
                sa.update(_releases)
                .where(_releases.c.release_id == release_id, _releases.c.state == src)
                .values(state=dst, updated_at=_now(), **({} if internal is None else {"internal": internal}))
            ).rowcount
            if n == 1:
                dataset_id, period = conn.execute(
                    sa.select(_releases.c.dataset_id, _releases.c.period).where(_releases.c.release_id == release_id)
                ).one()
                payload: dict[str, Any] = {"from": src, "to": dst}
                if public is not None:
                    public = _with_commitment(conn, public, period)
                    public_json = json.dumps(public)
                    conn.execute(sa.update(_releases).where(_releases.c.release_id == release_id)
                                 .values(public_json=public_json))
                    payload["public_sha256"] = hashlib.sha256(public_json.encode()).hexdigest()
                    if isinstance(public.get("manifest"), dict):
                        body = {k: v for k, v in public["manifest"].items() if k != "audit_commitment"}
                        payload["manifest_sha256"] = hashlib.sha256(canonical_json(body)).hexdigest()
                _append(conn, f"release.{dst}", dataset_id, release_id, payload)
        if n != 1:
            current = self.get(release_id)
            if current is None:
                raise LedgerError(f"release {release_id!r} cannot go from {src!r} to {dst!r}: it is not in the ledger")
            raise ConcurrentRunError(f"release {release_id!r} cannot go from {src!r} to {dst!r}: it is {current.state!r}, "
                                     "moved there by another run of the same release id")
        return public

    def mark_noised(self, release_id: str) -> None:
        """Record that noise is about to be drawn: from now on the charge is never refunded.

        The row's internal part records which process draws it (host, pid), so that another run of the
        same id can tell a live run that is about to publish from one that stopped.
        """
        with self._tx() as conn:
            row = conn.execute(sa.select(_releases.c.internal).where(_releases.c.release_id == release_id)).first()
        internal = json.loads(row[0]) if row is not None else {}
        internal["noised_by"] = this_process()
        self._transition(release_id, "reserved", "noised", internal=json.dumps(internal))

    def take_over(self, release_id: str) -> bool:
        """Make this process the owner of a reserved release whose owner stopped; True when it now owns it.

        A compare-and-set on the row: of several runs that find the same abandoned reservation, exactly
        one takes it over (the others then see a live owner and wait for it, see :func:`owner_may_be_running`).
        """
        with self._tx() as conn:
            row = conn.execute(sa.select(_releases.c.state, _releases.c.internal)
                               .where(_releases.c.release_id == release_id)).first()
            if row is None or row[0] != "reserved":
                return False
            internal = {**json.loads(row[1]), "reserved_by": this_process()}
            n = conn.execute(sa.update(_releases).where(
                _releases.c.release_id == release_id, _releases.c.state == "reserved", _releases.c.internal == row[1],
            ).values(internal=json.dumps(internal))).rowcount
        return n == 1

    def cancel(self, release_id: str) -> None:
        """Release a reservation that failed before any noise was drawn.

        Safe even while the release's own run is alive: its later :meth:`mark_noised` then
        fails, so no noise is ever drawn for a cancelled reservation.
        """
        self._transition(release_id, "reserved", "cancelled")

    def publish(self, release_id: str, public: dict[str, Any]) -> dict[str, Any]:
        """Store the published (public) outputs and close the release; return them as stored.

        In the same transaction, ``public["manifest"]`` (when present) gets the audit chain's
        commitment ``audit_commitment = {ledger_id, seq, head, prefixes}``: ``seq`` and ``head`` are
        the chain's last entry before this release's own ``release.published`` entry (which is
        entry ``seq + 1`` and records the manifest's SHA-256 without the commitment), and
        ``prefixes`` the first 8 hex digits of each entry's hash up to ``seq``. Write the
        returned manifest, not the one passed in: ``fdp audit verify --against`` checks it.
        """
        stored = self._transition(release_id, "noised", "published", public=public)
        if stored is None:  # pragma: no cover - _transition raises instead
            raise InternalError("publish stored nothing")
        return stored

    def record_flow_run(self, release_id: str, flow_run_id: str) -> bool:
        """Record that the orchestrator run ``flow_run_id`` worked on ``release_id`` (an audit-chain entry, ``flowrun.recorded``), once per run. Returns True when it was new.

        The run that reserved the release is in its ``provenance``; every later one (a resumed reservation,
        a re-run that re-writes published files) is recorded here, so :meth:`flow_runs` lists every run
        that touched the release (the manifest names the one that published it).
        """
        if flow_run_id in self.flow_runs(release_id):
            return False
        with self._tx() as conn:
            dataset_id = conn.execute(sa.select(_releases.c.dataset_id).where(_releases.c.release_id == release_id)).scalar()
            if dataset_id is None:
                raise LedgerError(f"release {release_id!r} is not in the ledger")
            _lock_dataset(conn, dataset_id)
            _append(conn, "flowrun.recorded", dataset_id, release_id, {"flow_run_id": flow_run_id})
        return True

    def flow_runs(self, release_id: str) -> list[str]:
        """Every orchestrator flow run recorded for a release, oldest first (the reserving run first)."""
        ids: list[str] = []
        for e in self.audit_events(release_id):
            p = e["payload"]
            run = (p.get("provenance") or {}).get("flow_run_id") if e["event"] == "release.reserved" else (
                p.get("flow_run_id") if e["event"] == "flowrun.recorded" else None)
            if run and run not in ids:
                ids.append(run)
        return ids

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
        return [{**dict(r), "payload": _payload(r["payload"])} for r in rows]

    def check_integrity(self) -> None:
        """Raise :class:`LedgerIntegrityError` unless the audit trail verifies: :meth:`reserve`'s own check, early.

        Run with the chain locked (a consistent view while other runs write), so that ``fdp release`` can refuse a
        damaged ledger before it reads the data or starts Prefect (trial Y). Writes nothing.
        """
        with self._tx() as conn:
            self._require_intact(conn)

    def _require_intact(self, conn: Connection) -> None:
        """Lock the chain (every appender waits: one consistent view) and raise unless :meth:`verify`'s check passes."""
        _lock_head(conn)
        problems = _chain_problems(conn)
        if problems:
            raise LedgerIntegrityError(
                f"ledger {self._safe_url()}: its audit trail does not verify ({len(problems)} problem"
                f"{'s' if len(problems) > 1 else ''}; the first: {problems[0]}), so what it says was spent cannot be "
                "trusted: nothing was charged. Run `fdp audit verify` for the list and restore the ledger from its "
                "backup (docs/operations.md, \"Backing up the ledger\")")

    def verify(self) -> list[str]:
        """Recompute the hash chain and replay it against the current tables.

        Returns the problems found, the first bad entry first (empty: the ledger is intact).
        Detects edited, deleted, reordered, inserted and truncated audit entries, and
        release or dataset rows changed outside fdp (budgets and policies, release states,
        costs, periods, config hashes, published outputs). :meth:`reserve` runs the same check
        before every new charge, with the chain locked.
        """
        with self._tx() as conn:
            return _chain_problems(conn)

    # ----------------------------------------------------------------- external evidence

    def chain_hashes(self) -> list[str]:
        """Each audit entry's hash as recomputed from its content (``seq`` order), ignoring the stored hashes.

        Entry i's hash is ``sha256(hash of entry i-1 ‖ canonical entry i)`` with the genesis hash
        before entry 1, so two chains agree on entry i's hash exactly when entries 1..i agree.
        """
        with self._tx() as conn:
            rows = conn.execute(sa.select(_audit).order_by(_audit.c.seq)).mappings().all()
        out: list[str] = []
        prev = GENESIS
        for e in rows:
            prev = _event_hash(prev, _event_fields(e["seq"], e["at"], e["actor"], e["host"], e["event"], e["dataset_id"],
                                                   e["release_id"], e["payload"]))
            out.append(prev)
        return out

    def head(self) -> tuple[int, str]:
        """The audit chain's head as stored: ``(seq, hash)`` of its last entry (``(0, GENESIS)`` when empty)."""
        with self._tx() as conn:
            value = conn.execute(sa.select(_meta.c.value).where(_meta.c.key == "audit_head")).scalar_one()
        seq, digest = value.split(":")
        return int(seq), digest

    def registered_keys(self, purpose: str | None = None) -> list[str]:
        """Public keys (hex) recorded in the audit chain by :meth:`register_key`, oldest first."""
        keys: list[str] = []
        for e in self.audit_events():
            if e["event"] == "audit.key_registered" and (purpose is None or e["payload"].get("purpose") == purpose):
                keys.append(e["payload"]["public_key"])
        return keys

    def key_statement(self, public_key: str, purpose: str) -> dict[str, Any]:
        """The statement a key signs to be recorded in this ledger (proof that its holder registers it)."""
        if purpose not in KEY_PURPOSES:
            raise ConfigError(f"purpose ({purpose!r}) must be one of {list(KEY_PURPOSES)}")
        return {"ledger_id": self.ledger_id, "action": "audit.key_registered", "public_key": public_key,
                "purpose": purpose}

    def register_key(self, public_key: str, purpose: str, signature: str) -> bool:
        """Record a public key in the audit chain (once per key and purpose); True when newly recorded.

        ``purpose`` is ``checkpoint`` (it signs audit checkpoints) or ``budget-policy`` (from then on every
        budget-policy change must carry this key's signature; the key of the latest such entry counts).
        ``signature`` is the key's signature of :meth:`key_statement`.
        """
        statement = self.key_statement(public_key, purpose)
        if not verify_signature(public_key, statement, signature):
            raise ConfigError("the key's signature of its registration does not verify; nothing was recorded")
        with self._tx() as conn:
            _lock_head(conn)
            for (payload,) in conn.execute(sa.select(_audit.c.payload).where(_audit.c.event == "audit.key_registered")):
                p = json.loads(payload)
                if p.get("public_key") == public_key and p.get("purpose") == purpose:
                    return False
            if purpose == "budget-policy":
                current = _policy_key(conn)
                if current is not None and current != public_key:
                    raise ConfigError("budget-policy changes already require another key's signature; "
                                      "that key's holder must sign the change (set_budget with the old key first)")
            _append(conn, "audit.key_registered", "*", None, {**statement, "signature": signature})
        return True

    def checkpoint(self, key: Ed25519PrivateKey) -> dict[str, Any]:
        """A signed checkpoint of the chain as it is now (docs/audit.md; keep it outside the database).

        The key is recorded in the chain at first use (``audit.key_registered``, purpose ``checkpoint``),
        before the head is read, so the checkpoint covers its own key. Refused when :meth:`verify`
        finds a problem: a checkpoint must never vouch for a damaged chain.

        Returns the checkpoint document ``{format, statement: {ledger_id, seq, head, at, hashes},
        public_key, signature}``.
        """
        problems = self.verify()
        if problems:
            raise LedgerError(f"no checkpoint written: the ledger does not verify ({problems[0]})")
        public = public_key_hex(key)
        self.register_key(public, "checkpoint", sign_statement(key, self.key_statement(public, "checkpoint")))
        hashes = self.chain_hashes()
        statement = {"ledger_id": self.ledger_id, "seq": len(hashes), "head": hashes[-1],
                     "at": datetime.now(UTC).isoformat(timespec="seconds"), "hashes": hashes}
        return {"format": CHECKPOINT_FORMAT, "statement": statement, "public_key": public,
                "signature": sign_statement(key, statement)}

    def check_evidence(self, evidence: list[Evidence]) -> list[str]:
        """Each manifest commitment and checkpoint must be a prefix of today's chain (:func:`check_evidence`)."""
        return check_evidence(self.ledger_id, self.chain_hashes(), evidence, self.audit_events())

    def policy_key(self) -> str | None:
        """The privacy officer's key that must sign budget-policy changes, or None (not required)."""
        with self._tx() as conn:
            return _policy_key(conn)

    def policy_statement(self, action: str, dataset_id: str, epsilon: float, delta: float = 0.0,
                         **policy: Any) -> dict[str, Any]:
        """The statement the privacy officer signs to allow one budget-policy change (a fresh nonce each time)."""
        if action == "budget.grant":
            values = _grant_values(str(policy.get("period")), epsilon, delta)
        else:
            values = _policy(epsilon, delta, **policy).payload()
        return {"ledger_id": self.ledger_id, "action": action, "dataset_id": dataset_id, "policy": values,
                "nonce": uuid.uuid4().hex}

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


# --------------------------------------------------------------------------- budget policy and checks


def _policy(
    epsilon: float,
    delta: float,
    *,
    accounting: str = "basic",
    period: str | None = None,
    epsilon_per_period: float | None = None,
    delta_per_period: float | None = None,
    max_late_periods: int | None = None,
) -> _Policy:
    """Validate a budget policy (messages name the option)."""
    if max_late_periods is not None and (isinstance(max_late_periods, bool) or not isinstance(max_late_periods, int)
                                         or not 0 <= max_late_periods <= 1200):
        raise ConfigError(f"max late periods ({max_late_periods!r}) must be an integer from 0 to 1200")
    for name, v in (("epsilon", epsilon), ("delta", delta), ("epsilon per period", epsilon_per_period),
                    ("delta per period", delta_per_period)):
        if v is not None and not (isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and v >= 0
                                  and v != float("inf")):
            raise ConfigError(f"{name} ({v!r}) must be a finite number >= 0")
    if not epsilon > 0:
        raise ConfigError(f"epsilon ({epsilon!r}) must be > 0")
    if not delta < 1:
        raise ConfigError(f"delta ({delta!r}) must be < 1")
    if accounting not in ACCOUNTING_MODES:
        raise ConfigError(f"accounting ({accounting!r}) must be one of {list(ACCOUNTING_MODES)}")
    if accounting == "zcdp" and not delta > 0:
        raise ConfigError("delta (0) must be > 0 for zcdp accounting: zCDP converts to (epsilon, delta)-DP")
    if period is None:
        if epsilon_per_period is not None or delta_per_period is not None:
            raise ConfigError("a per-period allowance needs --period (e.g. month)")
        return _Policy(accounting, exact(epsilon), exact(delta), None, None, None, max_late_periods)
    if period not in PERIOD_KINDS:
        raise ConfigError(f"period ({period!r}) must be one of {list(PERIOD_KINDS)}")
    if epsilon_per_period is None or not epsilon_per_period > 0:
        raise ConfigError(f"epsilon per period ({epsilon_per_period!r}) must be given and > 0 with a period")
    dpp = 0.0 if delta_per_period is None else delta_per_period
    if epsilon_per_period > epsilon or dpp > delta:
        raise ConfigError(
            f"the allowance per period (epsilon={epsilon_per_period!r}, delta={dpp!r}) must not exceed the total "
            f"(epsilon={epsilon!r}, delta={delta!r})"
        )
    if accounting == "zcdp" and not dpp > 0:
        raise ConfigError("delta per period (0) must be > 0 for zcdp accounting")
    return _Policy(accounting, exact(epsilon), exact(delta), period, exact(epsilon_per_period), exact(dpp),
                   max_late_periods)


def _months(label: str) -> int:
    year, month = label.split("-")
    return int(year) * 12 + int(month) - 1


def _check_late(dataset_id: str, policy: _Policy, label: str, since: str) -> None:
    """Refuse a period before the month the dataset's policy was set, or more than ``policy.late`` periods before the current one: a past period's allowance cannot be spent after the fact."""
    now = current_period()
    if label < since:
        if since > now:  # trial U, M4: a clock that ran ahead dated the policy in the future; now nothing could run
            raise ConfigError(
                f"the budget policy of dataset {dataset_id!r} is dated {since}, after the current period {now} by this "
                "machine's clock: it was set while a clock ran ahead (or this clock was set back since). No period can "
                f"be charged until {since}; once the clock is right, `fdp budget set {dataset_id} …` with the current "
                "values starts a policy in force now (`fdp audit list` shows the future-dated entries)")
        raise ConfigError(
            f"period ({label!r}) is before the budget policy of dataset {dataset_id!r}, in force since {since}; "
            f"a release can be charged to {since} or later")
    if _months(now) - _months(label) > policy.late:
        raise ConfigError(
            f"period ({label!r}) is {_months(now) - _months(label)} periods before the current one ({now}); the budget "
            f"policy of dataset {dataset_id!r} lets a late run go back at most {policy.late} (the privacy officer sets "
            "it: `fdp budget set … --max-late-periods N`)")


def _policy_of(row: Any) -> _Policy:
    def fr(v: str | None) -> Fraction | None:
        return None if v is None else exact(float(v))

    total_eps, total_delta = fr(row["epsilon_total"]), fr(row["delta_total"])
    if total_eps is None or total_delta is None:  # pragma: no cover - NOT NULL columns
        raise InternalError("dataset row without a total budget")
    return _Policy(row["accounting"], total_eps, total_delta, row["period"], fr(row["epsilon_per_period"]),
                   fr(row["delta_per_period"]), row["max_late_periods"])


def _spent_rows(conn: Connection, dataset_id: str) -> list[tuple[str, str, str | None, str]]:
    rows = conn.execute(
        sa.select(_releases.c.epsilon, _releases.c.delta, _releases.c.rho, _releases.c.period).where(
            _releases.c.dataset_id == dataset_id, _releases.c.state.in_(_SPENT_STATES)
        )
    ).all()
    return [(e, d, r, p) for e, d, r, p in rows]


def _non_private_count(conn: Connection, dataset_id: str) -> int:
    return int(conn.execute(
        sa.select(sa.func.count()).select_from(_releases).where(
            _releases.c.dataset_id == dataset_id, _releases.c.state.in_(_SPENT_STATES), _releases.c.charge_kind != "dp")
    ).scalar_one())


def _grants(conn: Connection, dataset_id: str) -> dict[str, tuple[Fraction, Fraction]]:
    """One-month grants of a dataset, summed per period, read from the audit chain (``budget.granted``)."""
    rows = conn.execute(sa.select(_audit.c.payload).where(
        _audit.c.dataset_id == dataset_id, _audit.c.event == "budget.granted").order_by(_audit.c.seq)).all()
    out: dict[str, tuple[Fraction, Fraction]] = {}
    for (payload,) in rows:
        p = json.loads(payload)
        eps, delta = out.get(p["period"], (Fraction(0), Fraction(0)))
        out[p["period"]] = (eps + exact(float(p["epsilon"])), delta + exact(float(p["delta"])))
    return out


def _period_cap(policy: _Policy, grant: tuple[Fraction, Fraction] | None) -> tuple[Fraction, Fraction]:
    """A period's (epsilon, delta) cap: the policy's allowance plus the period's grant, if any."""
    if policy.epsilon_per_period is None or policy.delta_per_period is None:  # pragma: no cover - callers check
        raise InternalError("a period cap of a dataset without an allowance")
    g_eps, g_delta = grant if grant is not None else (Fraction(0), Fraction(0))
    return policy.epsilon_per_period + g_eps, policy.delta_per_period + g_delta


def _check_allowance_covers_spending(conn: Connection, dataset_id: str, new: _Policy) -> None:
    """Refuse a per-period allowance below what some period has already spent (with that period's grant)."""
    if new.period is None:
        return
    rows = _spent_rows(conn, dataset_id)
    grants = _grants(conn, dataset_id)
    for label in sorted({p for *_, p in rows}):
        cap = _period_cap(new, grants.get(label))
        pu = _usage((e, d, r) for e, d, r, p in rows if p == label)
        spent = _as_spent(new, pu, cap[1])
        if exact(spent[0]) > cap[0] or exact(spent[1]) > cap[1]:
            granted = grants.get(label)
            extra = "" if granted is None else f" including its grant of epsilon {float(granted[0]):g}"
            raise ConfigError(
                f"allowance per {new.period} (epsilon {float(new.epsilon_per_period or 0):g}, delta "
                f"{float(new.delta_per_period or 0):g}) must be at least what period {label} has spent (epsilon "
                f"{spent[0]:.6g}, delta {spent[1]:.6g}){extra}; nothing changed. To allow more in one month only, "
                f"use `fdp budget grant {dataset_id} --period YYYY-MM --epsilon E`")


def _usage_rows(conn: Connection, dataset_id: str) -> _Usage:
    return _usage((e, d, r) for e, d, r, _ in _spent_rows(conn, dataset_id))


def _as_spent(policy: _Policy, used: _Usage, delta_budget: Fraction | None) -> tuple[float, float]:
    """(epsilon, delta) spent: the exact sums (basic), or the OpenDP conversion of rho at the budget's delta (zcdp)."""
    if policy.accounting == "basic":
        return float(used.epsilon), float(used.delta)
    if used.rho is None or delta_budget is None:  # pragma: no cover - refused when zcdp is set
        raise InternalError("a zcdp-accounted dataset holds a release without a zCDP form")
    if used.rho == 0:
        return 0.0, 0.0
    return zcdp_to_epsilon(float(used.rho), float(delta_budget)), float(delta_budget)


def _check_fits(dataset_id: str, policy: _Policy, total: _Usage, in_period: _Usage, request: _Usage, label: str,
                grant: tuple[Fraction, Fraction] | None = None) -> None:
    """Raise :class:`BudgetExceededError` unless ``request`` fits the total and the period's allowance (plus its grant)."""
    scopes: list[tuple[str, str | None, _Usage, Fraction, Fraction]] = [
        ("total budget", None, total, policy.epsilon, policy.delta)]
    if policy.period is not None and policy.epsilon_per_period is not None and policy.delta_per_period is not None:
        eps_cap, delta_cap = _period_cap(policy, grant)
        scope = f"allowance of period {label}" + (" (with its grant)" if grant is not None else "")
        scopes.append((scope, label, in_period, eps_cap, delta_cap))
    for scope, period, used, eps_cap, delta_cap in scopes:
        if policy.accounting == "basic":
            if used.epsilon + request.epsilon > eps_cap or used.delta + request.delta > delta_cap:
                raise BudgetExceededError(
                    dataset_id, (float(request.epsilon), float(request.delta)),
                    (float(eps_cap - used.epsilon), float(delta_cap - used.delta)), scope=scope, period=period,
                )
            continue
        if request.rho is None:
            raise ConfigError(
                f"a release costing (epsilon={float(request.epsilon):g}, delta={float(request.delta):g}) has no zCDP form "
                f"and cannot be charged to dataset {dataset_id!r}, which is accounted in zCDP"
            )
        if used.rho is None:  # pragma: no cover - refused when zcdp is set
            raise InternalError("a zcdp-accounted dataset holds a release without a zCDP form")
        if zcdp_to_epsilon(float(used.rho + request.rho), float(delta_cap)) > float(eps_cap):
            raise BudgetExceededError(
                dataset_id, (float(request.rho),), (max(0.0, _rho_capacity(eps_cap, delta_cap) - float(used.rho)),),
                scope=scope, measures=("rho",), period=period,
            )


def _summary(row: Any, rows: list[tuple[str, str, str | None, str]],
             grants: dict[str, tuple[Fraction, Fraction]] | None = None) -> DatasetBudget:
    policy = _policy_of(row)
    grants = grants or {}
    used = _usage((e, d, r) for e, d, r, _ in rows)
    spent = _as_spent(policy, used, policy.delta)
    total = (float(policy.epsilon), float(policy.delta))
    allowance = None
    if policy.epsilon_per_period is not None and policy.delta_per_period is not None:
        allowance = (float(policy.epsilon_per_period), float(policy.delta_per_period))
    periods = []
    labels = {p for *_, p in rows} | ({current_period(), *grants} if policy.period else set())
    for label in sorted(labels):
        pu = _usage((e, d, r) for e, d, r, p in rows if p == label)
        cap = _period_cap(policy, grants.get(label)) if allowance is not None else None
        p_spent = _as_spent(policy, pu, cap[1] if cap is not None else policy.delta)
        p_allowance = None if cap is None else (float(cap[0]), float(cap[1]))
        remaining = None if cap is None else (float(cap[0]) - p_spent[0], float(cap[1]) - p_spent[1])
        granted = grants.get(label)
        periods.append(PeriodUsage(label, p_spent, float(pu.rho or 0), pu.count, p_allowance, remaining,
                                   None if granted is None else (float(granted[0]), float(granted[1]))))
    current = next((p for p in periods if p.period == current_period()), None) if policy.period else None
    return DatasetBudget(
        row["dataset_id"], policy.accounting, total, spent, (total[0] - spent[0], total[1] - spent[1]),
        float(used.rho or 0), used.count, policy.period, allowance, tuple(periods), current,
        max_late_periods=policy.late, policy_since=str(row["updated_at"])[:7],
    )


def _replay(event: str, dataset_id: str, release_id: str | None, payload: dict[str, Any],
            state: dict[str, dict[str, Any]], policies: dict[str, dict[str, Any]]) -> None:
    """Apply one audit event to the replayed state (events of schema version 1 lack the newer keys)."""
    if event in ("dataset.created", "budget.set"):
        policies[dataset_id] = {
            "epsilon_total": payload.get("epsilon_total"), "delta_total": payload.get("delta_total"),
            "accounting": payload.get("accounting", "basic"), "period": payload.get("period"),
            "epsilon_per_period": payload.get("epsilon_per_period"), "delta_per_period": payload.get("delta_per_period"),
            "max_late_periods": payload.get("max_late_periods"),
        }
    elif event == "ledger.migrated":
        for rid, label in payload.get("release_periods", {}).items():
            if rid in state:
                state[rid]["period"] = label
        for rid in payload.get("non_private_releases", []):
            if rid in state:
                state[rid]["charge_kind"] = "non_private"
    elif event == "release.reserved" and release_id is not None:
        state[release_id] = {"state": "reserved", "epsilon": payload.get("epsilon"), "delta": payload.get("delta"),
                             "config_sha256": payload.get("config_sha256"), "dataset_id": dataset_id,
                             "period": payload.get("period", ""), "rho": payload.get("rho"),
                             "charge_kind": payload.get("charge_kind", "dp")}
    elif event.startswith("release.") and release_id in state:
        state[release_id]["state"] = payload.get("to")
        if "public_sha256" in payload:
            state[release_id]["public_sha256"] = payload["public_sha256"]


def _check_entry_signature(seq: int, event: str, dataset_id: str, payload: dict[str, Any], officer_key: str | None,
                           ledger_id: str, problems: list[str]) -> str | None:
    """Check a key registration's or a signed budget-policy change's signature; return the officer's key after it."""
    if event == "audit.key_registered":
        statement = {k: v for k, v in payload.items() if k != "signature"}
        if statement.get("ledger_id") != ledger_id or not verify_signature(
                str(payload.get("public_key", "")), statement, str(payload.get("signature", ""))):
            problems.append(f"audit entry {seq}: key registration is not signed by its key for this ledger (forged)")
        elif payload.get("purpose") == "budget-policy":
            return str(payload["public_key"])
        return officer_key
    if officer_key is None or event not in ("dataset.created", "budget.set", "budget.granted"):
        return officer_key
    signed = payload.get("signed")
    values = {k: v for k, v in payload.items() if k not in ("signed", "source")}
    statement = signed.get("statement", {}) if isinstance(signed, dict) else {}
    if (not isinstance(signed, dict) or signed.get("public_key") != officer_key
            or statement.get("policy") != values or statement.get("dataset_id") != dataset_id
            or statement.get("ledger_id") != ledger_id
            or not verify_signature(officer_key, statement, str(signed.get("signature", "")))):
        problems.append(f"audit entry {seq}: {event} of {dataset_id!r} is not signed by the privacy officer's key "
                        f"({officer_key[:16]}…), which this ledger requires (forged or made out of band)")
    return officer_key


# --------------------------------------------------------------------------- audit chain and rows


def _event_hash(prev_hash: str, fields: dict[str, Any]) -> str:
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256((prev_hash + canonical).encode()).hexdigest()


def _event_fields(seq: int, at: str, actor: str, host: str, event: str, dataset_id: str,
                  release_id: str | None, payload: str) -> dict[str, Any]:
    return {"seq": seq, "at": at, "actor": actor, "host": host, "event": event, "dataset_id": dataset_id,
            "release_id": release_id, "payload": payload}


def _chain_problems(conn: Connection) -> list[str]:
    """:meth:`Ledger.verify`'s check, in the caller's transaction (the first problem first; empty: intact)."""
    events = conn.execute(sa.select(_audit).order_by(_audit.c.seq)).mappings().all()
    head = conn.execute(sa.select(_meta.c.value).where(_meta.c.key == "audit_head")).scalar_one()
    releases = {r["release_id"]: r for r in conn.execute(sa.select(_releases)).mappings().all()}
    datasets = {r["dataset_id"]: r for r in conn.execute(sa.select(_datasets)).mappings().all()}
    ledger_id = conn.execute(sa.select(_meta.c.value).where(_meta.c.key == "ledger_id")).scalar_one()
    problems: list[str] = []
    officer_key: str | None = None
    prev, expected_seq = GENESIS, 1
    state: dict[str, dict[str, Any]] = {}
    policies: dict[str, dict[str, Any]] = {}
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
        _replay(e["event"], e["dataset_id"], e["release_id"], payload, state, policies)
        officer_key = _check_entry_signature(e["seq"], e["event"], e["dataset_id"], payload, officer_key, ledger_id,
                                             problems)
    if head.split(":")[0] == str(expected_seq - 1) and head != f"{expected_seq - 1}:{prev}":
        problems.append(f"audit head's hash is not that of entry {expected_seq - 1}: entries were rewritten after it "
                        "was recorded (hashes recomputed out of band)")
    elif head != f"{expected_seq - 1}:{prev}":
        problems.append(f"audit head says {head.split(':')[0]} entries but the trail ends at {expected_seq - 1} (truncated or appended out of band)")
    for rid, row in releases.items():
        want = state.get(rid)
        if want is None:
            problems.append(f"release {rid!r}: row has no audit entry (inserted out of band)")
            continue
        got = {k: row[k] for k in ("state", "epsilon", "delta", "config_sha256", "dataset_id", "period", "rho",
                                   "charge_kind")}
        if any(got[k] != want.get(k) for k in got):
            problems.append(f"release {rid!r}: row differs from its audit trail (edited out of band)")
        if "public_sha256" in want and hashlib.sha256((row["public_json"] or "").encode()).hexdigest() != want["public_sha256"]:
            problems.append(f"release {rid!r}: published outputs differ from the audited ones (edited)")
    for rid in state.keys() - releases.keys():
        problems.append(f"release {rid!r}: audited but its row is missing (deleted)")
    for did, row in datasets.items():
        got = {"epsilon_total": row["epsilon_total"], "delta_total": row["delta_total"], "accounting": row["accounting"],
               "period": row["period"], "epsilon_per_period": row["epsilon_per_period"],
               "delta_per_period": row["delta_per_period"], "max_late_periods": row["max_late_periods"]}
        if policies.get(did) != got:
            problems.append(f"dataset {did!r}: budget differs from its audit trail (edited out of band)")
    for did in policies.keys() - datasets.keys():
        problems.append(f"dataset {did!r}: audited but its row is missing (deleted)")
    return problems


def _lock_head(conn: Connection) -> tuple[int, str]:
    """Take the chain's write lock (an idempotent update of its head) and return the head ``(seq, hash)``."""
    conn.execute(sa.update(_meta).where(_meta.c.key == "audit_head").values(value=_meta.c.value))
    head = conn.execute(sa.select(_meta.c.value).where(_meta.c.key == "audit_head")).scalar_one()
    last_seq, digest = head.split(":")
    return int(last_seq), digest


def _with_commitment(conn: Connection, public: dict[str, Any], period: str | None = None) -> dict[str, Any]:
    """``public`` with the chain's commitment in its manifest (chain locked: no entry can come in between).

    The manifest also gets ``charged_period``, the budget period the ledger charged the release to (trial U, L5: a run
    started in one month can be charged to the next; ``provenance.created_at`` does not say which).
    """
    manifest = public.get("manifest")
    if not isinstance(manifest, dict):
        return public
    if period is not None:
        manifest = {**manifest, "charged_period": period}
    seq, head = _lock_head(conn)
    hashes = list(conn.execute(sa.select(_audit.c.hash).order_by(_audit.c.seq)).scalars())
    ledger_id = conn.execute(sa.select(_meta.c.value).where(_meta.c.key == "ledger_id")).scalar_one()
    commitment = {"ledger_id": ledger_id, "seq": seq, "head": head, "prefixes": hash_prefixes(hashes)}
    return {**public, "manifest": {**manifest, "audit_commitment": commitment}}


def _append(conn: Connection, event: str, dataset_id: str, release_id: str | None, payload: dict[str, Any]) -> None:
    """Append one event to the hash chain, in the caller's transaction.

    The chain head lives in ``fdp_meta`` and is updated first, which serialises
    appenders on every back end (so two datasets can never fork the chain).
    """
    last_seq, prev_hash = _lock_head(conn)
    seq = last_seq + 1
    actor, host = operator_host()
    fields = _event_fields(seq, _now(), actor, host, event, dataset_id, release_id, json.dumps(payload, sort_keys=True))
    digest = _event_hash(prev_hash, fields)
    conn.execute(sa.insert(_audit).values(prev_hash=prev_hash, hash=digest, **fields))
    conn.execute(sa.update(_meta).where(_meta.c.key == "audit_head").values(value=f"{seq}:{digest}"))


def _grant_values(period: str, epsilon: float, delta: float) -> dict[str, Any]:
    """What a one-month grant's audit entry (and its signed statement) records."""
    return {"period": period, "epsilon": repr(float(epsilon)), "delta": repr(float(delta))}


def _policy_key(conn: Connection) -> str | None:
    rows = conn.execute(sa.select(_audit.c.payload).where(_audit.c.event == "audit.key_registered")
                        .order_by(_audit.c.seq.desc())).all()
    for (payload,) in rows:
        p = json.loads(payload)
        if p.get("purpose") == "budget-policy":
            return str(p["public_key"])
    return None


def _check_signed(conn: Connection, action: str, dataset_id: str, values: dict[str, Any],
                  signed: dict[str, Any] | None) -> dict[str, Any] | None:
    """Refuse a budget-policy change without the privacy officer's signature when one is required.

    Returns what to store in the change's audit entry (None when signatures are not required).
    The signed statement must name this ledger, the action, the dataset and exactly the new
    policy, carry a nonce never used before on this dataset, and verify under the officer's key.
    """
    key = _policy_key(conn)
    if key is None:
        return None
    if signed is None:
        raise ConfigError(f"{action} of dataset {dataset_id!r} must be signed by the privacy officer's key "
                          f"({key[:16]}…): budget-policy changes require it in this ledger; nothing changed")
    statement = signed.get("statement", {})
    ledger_id = conn.execute(sa.select(_meta.c.value).where(_meta.c.key == "ledger_id")).scalar_one()
    want = {"ledger_id": ledger_id, "action": action, "dataset_id": dataset_id, "policy": values}
    if {k: statement.get(k) for k in want} != want or not isinstance(statement.get("nonce"), str):
        raise ConfigError(f"the signed statement does not describe this {action} of {dataset_id!r} in this ledger; "
                          "nothing changed")
    if signed.get("public_key") != key or not verify_signature(key, statement, str(signed.get("signature", ""))):
        raise ConfigError(f"{action} of dataset {dataset_id!r}: the signature is not the privacy officer's key "
                          f"({key[:16]}…); nothing changed")
    for (payload,) in conn.execute(sa.select(_audit.c.payload).where(_audit.c.dataset_id == dataset_id)):
        if json.loads(payload).get("signed", {}).get("statement", {}).get("nonce") == statement["nonce"]:
            raise ConfigError(f"{action} of dataset {dataset_id!r}: this signed statement was already used; "
                              "nothing changed")
    return {"statement": statement, "public_key": key, "signature": signed["signature"]}


def _insert_dataset(conn: Connection, dataset_id: str, policy: _Policy, source: str,
                    signed: dict[str, Any] | None = None) -> None:
    now = _now()
    values = policy.payload()
    if source == "config proposal" and _policy_key(conn) is not None:
        raise ConfigError(f"dataset {dataset_id!r} has no budget in the ledger, and a config's budget proposal cannot "
                          "create one here: budget-policy changes require the privacy officer's signature "
                          "(`fdp budget set ... --sign-key`); nothing was charged")
    proof = _check_signed(conn, "budget.set", dataset_id, values, signed)
    conn.execute(sa.insert(_datasets).values(
        dataset_id=dataset_id, created_at=now, updated_at=now, lock_counter=0, epsilon_total=values["epsilon_total"],
        delta_total=values["delta_total"], accounting=policy.accounting, period=policy.period,
        epsilon_per_period=values["epsilon_per_period"], delta_per_period=values["delta_per_period"],
        max_late_periods=policy.max_late_periods,
    ))
    _append(conn, "dataset.created", dataset_id, None,
            {**values, "source": source, **({"signed": proof} if proof is not None else {})})


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



def _same_release(conn: Connection, release_id: str, dataset_id: str, config_sha256: str) -> ReleaseRecord | None:
    """The ledger's record of ``release_id``, or None; refuse an id already used with another config or dataset."""
    existing = conn.execute(sa.select(_releases).where(_releases.c.release_id == release_id)).mappings().first()
    if existing is None:
        return None
    record = _record(existing)
    if record.config_sha256 != config_sha256 or record.dataset_id != dataset_id:
        raise ReleaseConflictError(
            f"release id {release_id!r} was already used with a different config (the ledger's entry has config "
            f"sha256 {record.config_sha256[:12]}..., this one {config_sha256[:12]}...; `fdp audit show {release_id}` "
            "shows the entry, `fdp audit config-hash CONFIG` a config's hash); choose a new --release-id")
    return record

def _payload(text: str) -> dict[str, Any]:
    """An audit entry's payload; a damaged one (not JSON: trial U, M1) is marked, for `audit verify` names the entry."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return {"damaged": "the stored payload is not valid JSON; `fdp audit verify` names the entry"}
    return value if isinstance(value, dict) else {"damaged": "the stored payload is not a JSON object"}


def _record(row: Any) -> ReleaseRecord:
    try:
        return _decoded_record(row)
    except json.JSONDecodeError:
        raise LedgerError(f"release {row['release_id']!r}: its ledger row is damaged (a stored field is not valid "
                          "JSON); run `fdp audit verify`, and restore the ledger from its backup") from None


def _decoded_record(row: Any) -> ReleaseRecord:
    return ReleaseRecord(
        release_id=row["release_id"], dataset_id=row["dataset_id"], state=row["state"],
        epsilon=float(row["epsilon"]), delta=float(row["delta"]), config_sha256=row["config_sha256"],
        summary=row["summary"], mechanism=row["mechanism"], sensitivity_formula=row["sensitivity_formula"],
        budget_splits=json.loads(row["budget_splits"]), provenance=json.loads(row["provenance"]),
        internal=json.loads(row["internal"]), public=json.loads(row["public_json"]) if row["public_json"] else None,
        created_at=row["created_at"], updated_at=row["updated_at"], period=row["period"],
        rho=None if row["rho"] is None else float(row["rho"]), charge_kind=row["charge_kind"],
    )


class OldLedgerError(LedgerError):
    """A read-only opening found an older schema version (a writing opening would migrate it)."""


def _version(row: Any, not_a_ledger: Any) -> int:
    """The schema version stored in ``fdp_meta`` (a missing or non-numeric one: not an fdp ledger)."""
    if row is None:
        raise not_a_ledger("it has no schema version")
    try:
        return int(row[0])
    except (TypeError, ValueError):
        raise not_a_ledger("its schema version is not a number") from None


#: The PostgreSQL advisory lock key that serialises openers creating a ledger's schema ("fdpl").
_OPEN_LOCK_KEY = 0x6664706C


def _create_schema(conn: Connection) -> None:
    """A new ledger's tables and its ``fdp_meta`` rows (schema version, audit head, ledger id), in ``conn``'s transaction."""
    _metadata.create_all(conn)
    conn.execute(sa.insert(_meta).values(key="schema_version", value=str(SCHEMA_VERSION)))
    conn.execute(sa.insert(_meta).values(key="audit_head", value=f"0:{GENESIS}"))
    conn.execute(sa.insert(_meta).values(key="ledger_id", value=str(uuid.uuid4())))


def _transactional_ddl_engine(engine: Engine) -> Engine:
    """A second engine on ``engine``'s SQLite file whose transactions are ``BEGIN IMMEDIATE`` … ``COMMIT``, DDL included.

    Python's sqlite3 driver commits before DDL and begins only before DML; with its own transaction handling switched
    off and SQLAlchemy emitting ``BEGIN IMMEDIATE``, a transaction holds the write lock from its start and its
    ``CREATE TABLE`` statements commit or roll back with it.
    """
    ddl = sa.create_engine(engine.url, connect_args={"timeout": 60}, poolclass=sa.pool.NullPool)

    @sa.event.listens_for(ddl, "connect")
    def _no_driver_transactions(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None

    @sa.event.listens_for(ddl, "begin")
    def _begin_immediate(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return ddl


def _engine(url: str, *, read_only: bool = False) -> Engine:
    try:
        parsed = sa.engine.make_url(url)
    except sa.exc.ArgumentError:
        raise LedgerError(f"ledger URL ({url!r}) is not a valid database URL (e.g. sqlite:///path or postgresql://...)") from None
    if parsed.get_backend_name() not in LEDGER_BACKENDS:
        raise LedgerURLError(
            f"ledger URL ({parsed.render_as_string(hide_password=True)!r}) names a {parsed.get_backend_name()} "
            "database: a ledger lives in SQLite (sqlite:///path/to/ledger.sqlite) or PostgreSQL "
            "(postgresql://user@host/db)")
    if parsed.get_backend_name() == "sqlite":
        db = parsed.database
        if not db or db == ":memory:" or db.startswith("file::memory:") or "mode=memory" in str(parsed.query):
            raise LedgerError(
                f"ledger URL ({url!r}) is an in-memory database, which forgets every charge when fdp exits (and each "
                "step of a release would see a new, empty ledger); give a file, e.g. sqlite:///path/to/ledger.sqlite")
        if read_only and parsed.query.get("uri") == "true":
            return sa.create_engine(url, connect_args={"timeout": 60})  # already a URI (e.g. file:…?mode=ro)
        if read_only:
            return _read_only_sqlite(db)
        _sqlite_directory(db)
        return sa.create_engine(url, connect_args={"timeout": 60})
    if read_only:
        parsed = parsed.update_query_dict({"options": "-c default_transaction_read_only=on"}) \
            if parsed.get_backend_name() == "postgresql" else parsed
    if parsed.drivername == "postgresql" and importlib.util.find_spec("psycopg2") is None \
            and importlib.util.find_spec("psycopg") is not None:
        parsed = parsed.set(drivername="postgresql+psycopg")  # a plain postgresql:// URL with psycopg 3
    try:
        return sa.create_engine(parsed, pool_pre_ping=True)
    except (sa.exc.ArgumentError, ModuleNotFoundError) as exc:
        raise LedgerError(f"ledger URL ({parsed.render_as_string(hide_password=True)!r}) cannot be used: {exc}") from None


class LedgerIntegrityError(LedgerError):
    """A new charge refused because the ledger's audit trail does not verify (:meth:`Ledger.verify`): nothing charged."""


class EmptyLedgerFileError(LedgerError):
    """A SQLite ledger path holding an empty file, which fdp never leaves (it creates a ledger whole): refused by all."""


class LedgerURLError(LedgerError):
    """A ledger URL that cannot be meant: a missing SQLite directory (a typo) or another database than SQLite/PostgreSQL."""

#: The databases a ledger can live in (the same SQLAlchemy code path).
LEDGER_BACKENDS = ("sqlite", "postgresql")


def check_ledger_directory(db: str) -> None:
    """Refuse a SQLite ledger file whose directory does not exist and is not fdp's state directory (creates nothing).

    What a writing command (:func:`_sqlite_directory`) refuses, read-only commands (``fdp budget show``) refuse too:
    "no ledger yet" would promise a first ``fdp budget set`` that fails.

    Raises:
        LedgerURLError: the directory does not exist (a typo in ``--ledger`` / ``FDP_LEDGER_URL``).
    """
    parent = Path(db).expanduser().parent
    if parent.is_dir() or is_state_dir(parent):
        return
    raise LedgerURLError(
        f"ledger directory {str(parent)!r} does not exist (ledger URL sqlite:///{db}): check --ledger / "
        "FDP_LEDGER_URL for a typo; fdp creates a new ledger file in an existing directory, never the directory "
        "(except its own state directory for the default ledger)")


def _sqlite_directory(db: str) -> None:
    """Make sure a writable SQLite ledger's directory exists: created only for fdp's own state directory.

    A mistyped ``--ledger`` or ``$FDP_LEDGER_URL`` would otherwise open a new, empty ledger in a new directory and
    take the dataset's budget from the config's proposal, bypassing the policy set in the real ledger. The default
    ledger's directory (:func:`state_dir`) is fdp's own and is created on first use.
    """
    parent = Path(db).expanduser().parent
    if parent.is_dir():
        return
    check_ledger_directory(db)
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LedgerError(f"ledger directory for {db!r} cannot be created ({exc.strerror})") from None


def is_state_dir(path: Path) -> bool:
    """``path`` is fdp's own state directory (:func:`state_dir`): the one directory fdp creates for a ledger."""
    return path.expanduser().resolve() == state_dir().expanduser().resolve()


def sqlite_ledger_file(url: str) -> Path | None:
    """The file of a SQLite ledger URL (``None`` for another database or an unparsable URL): what may not exist yet."""
    try:
        parsed = sa.engine.make_url(url)
    except sa.exc.ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.query.get("uri") == "true":
        return None
    return Path(parsed.database).expanduser()


def backup_sqlite_ledger(url: str, out: str | Path) -> Path:
    """Copy a SQLite ledger to ``out`` with SQLite's online backup: a consistent copy even while releases write.

    The copy is written beside ``out`` under a hidden name, made owner-only (mode 0600: the ledger's curator-only
    ``internal`` fields travel with it) and hard-linked to ``out``, which is never overwritten. Returns ``out``.

    Raises:
        LedgerURLError: not a SQLite ledger (PostgreSQL: use ``pg_dump``).
        LedgerError: the ledger file is missing or cannot be read.
        ConfigError: ``out`` exists, or its directory does not.
    """
    path = sqlite_ledger_file(url)
    if path is None:
        raise LedgerURLError(f"ledger {sa.engine.make_url(url).render_as_string(hide_password=True)!r} is not a SQLite "
                             "file: back a PostgreSQL ledger up with its own tools, e.g. pg_dump --format=custom "
                             "--file=ledger.dump URL (restore with pg_restore)")
    if not path.is_file():
        raise LedgerError(f"ledger {str(path)!r} does not exist; check --ledger / FDP_LEDGER_URL")
    target = Path(out)
    exists = f"{str(target)!r} exists: a backup never overwrites a file; choose a new name"
    if target.exists():
        raise ConfigError(exists)
    if not target.parent.is_dir():
        raise ConfigError(f"the directory of {str(target)!r} does not exist")
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    source = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=60)
    try:
        copy = sqlite3.connect(temp)
        try:
            source.backup(copy)
        finally:
            copy.close()
        os.chmod(temp, 0o600)
        os.link(temp, target)
    except FileExistsError:  # made meanwhile
        raise ConfigError(exists) from None
    except sqlite3.Error as exc:
        raise LedgerError(f"ledger {str(path)!r} could not be copied ({_first_line(exc)})") from None
    finally:
        source.close()
        temp.unlink(missing_ok=True)
    return target


def database_has_ledger(url: str) -> bool | None:
    """Whether a non-SQLite ledger URL's database already holds an fdp ledger (its ``fdp_meta`` table).

    ``None`` when it cannot be asked (no such database, server down, a SQLite or unparsable URL): opening the ledger
    says why next.

    A new database gets a ledger with the config's budget proposal on the first release (trial P, M2), as a new SQLite
    file does; the CLI says so before the charge.
    """
    try:
        parsed = sa.engine.make_url(url)
        if parsed.get_backend_name() == "sqlite":
            return None
        engine = _engine(url, read_only=True)
        try:
            return bool(sa.inspect(engine).has_table(_meta.name))
        finally:
            engine.dispose()
    except (sa.exc.SQLAlchemyError, ImportError, ValueError, LedgerError):
        return None


def _sqlite_not_writable(url: str) -> bool:
    """A SQLite ledger whose file or directory this process cannot write.

    SQLite says "attempt to write a readonly database" for a read-only file, but "unable to open database
    file" when it cannot create its journal beside it; ``os.access`` also sees an immutable file or
    directory (``chattr +i``) as not writable, even for root.
    """
    path = sqlite_ledger_file(url)
    if path is None or not path.parent.is_dir():
        return False
    return not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK))


def _hot_journal(url: str) -> Path | None:
    """A non-empty rollback journal beside a SQLite ledger (left by a writer that stopped mid-transaction), or None."""
    path = sqlite_ledger_file(url)
    if path is None:
        return None
    journal = path.with_name(path.name + "-journal")
    try:
        return journal if journal.stat().st_size > 0 else None
    except OSError:
        return None


def _read_only_sqlite(db: str) -> Engine:
    """An engine that opens the SQLite file read-only (``mode=ro``; ``immutable=1`` when its directory is read-only, so SQLite needs no lock file), and never creates it."""
    path = Path(db)
    if not path.is_file():
        raise LedgerError(f"ledger {db!r} does not exist (a read-only command does not create one); check --ledger / "
                          "FDP_LEDGER_URL")
    writable_dir = os.access(path.parent, os.W_OK)
    uri = f"{path.resolve().as_uri()}?mode=ro" + ("" if writable_dir else "&immutable=1")
    return sa.create_engine("sqlite://", creator=lambda: sqlite3.connect(uri, uri=True, timeout=60))


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:200]
