"""An insider with write access to the ledger database tries to rewrite history (issue 19).

Every tamper runs on SQLite and PostgreSQL (the ``ledger_url`` fixture; same SQLAlchemy code).
The history: a budget, five published releases, a signed checkpoint after the fourth::

    entry 1          dataset.created ds (epsilon 10)
    entries 2..13    r0..r3: reserved, noised, published   (manifest of r_i commits to entry 3 + 3i)
    entry 14         audit.key_registered (the checkpoint key, first use) -> checkpoint at entry 14
    entries 15..17   r4: reserved, noised, published       (manifest of r4 commits to entry 16)

Each tamper names the first entry it changes. It must be caught by ``check_evidence`` given *any
one* manifest or checkpoint published after that point, naming that entry; plain ``verify``
(no outside evidence) catches only what the database contradicts itself about — the table in
docs/audit.md is the ``PLAIN`` column below.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fdpcore.errors import ConfigError, LedgerError
from fdpcore.ledger import (
    Evidence,
    Ledger,
    LedgerIntegrityError,
    checkpoint_evidence,
    manifest_evidence,
    public_key_hex,
    sign_statement,
)
from fdpcore.ledger._store import _event_fields, _event_hash

KW = dict(dataset_id="ds", delta=0.0, config_sha256="0" * 64, summary="mean", mechanism="iclp_qr",
          sensitivity_formula="s", budget_splits=[], provenance={"git_sha": "abc"}, internal={})
TABLES = ("fdp_meta", "fdp_datasets", "fdp_releases", "fdp_audit")


def _release(led: Ledger, rid: str, epsilon: float = 1.0) -> dict[str, Any]:
    led.reserve(release_id=rid, epsilon=epsilon, **KW)
    led.mark_noised(rid)
    manifest: dict[str, Any] = led.publish(rid, {"manifest": {"release_id": rid, "privacy": {"epsilon": epsilon}}})["manifest"]
    return manifest


def _snapshot(led: Ledger) -> dict[str, list[dict[str, Any]]]:
    """A copy of the whole database (what a backup holds)."""
    with led.engine.begin() as conn:
        return {t: [dict(r) for r in conn.execute(sa.text(f"SELECT * FROM {t}")).mappings()] for t in TABLES}


def _restore(led: Ledger, copy: dict[str, list[dict[str, Any]]]) -> None:
    """Put an older copy back (the same on both back ends: empty every table, insert the copy's rows)."""
    meta = sa.MetaData()
    with led.engine.begin() as conn:
        tables = {t: sa.Table(t, meta, autoload_with=conn) for t in TABLES}
        for t in reversed(TABLES):
            conn.execute(tables[t].delete())
        for t in TABLES:
            if copy[t]:
                conn.execute(tables[t].insert(), copy[t])


def _rehash(led: Ledger, *, head: bool) -> None:
    """Recompute every stored hash from the entries' contents, as an insider who knows the algorithm would."""
    with led.engine.begin() as conn:
        rows = conn.execute(sa.text("SELECT * FROM fdp_audit ORDER BY seq")).mappings().all()
        prev = "0" * 64
        for e in rows:
            digest = _event_hash(prev, _event_fields(e["seq"], e["at"], e["actor"], e["host"], e["event"],
                                                     e["dataset_id"], e["release_id"], e["payload"]))
            conn.execute(sa.text("UPDATE fdp_audit SET prev_hash = :p, hash = :h WHERE seq = :s"),
                         {"p": prev, "h": digest, "s": e["seq"]})
            prev = digest
        if head:
            conn.execute(sa.text("UPDATE fdp_meta SET value = :v WHERE key = 'audit_head'"), {"v": f"{rows[-1]['seq']}:{prev}"})


def _sql(led: Ledger, *statements: str) -> None:
    with led.engine.begin() as conn:
        for s in statements:
            conn.execute(sa.text(s))


def _set_payload(led: Ledger, seq: int, **changes: Any) -> None:
    with led.engine.begin() as conn:
        payload = json.loads(conn.execute(sa.text(f"SELECT payload FROM fdp_audit WHERE seq = {seq}")).scalar_one())
        conn.execute(sa.text("UPDATE fdp_audit SET payload = :p WHERE seq = :s"),
                     {"p": json.dumps({**payload, **changes}, sort_keys=True), "s": seq})


# Each tamper: (first entry it changes, caught by plain verify, the attack).
def _edit(led: Ledger, copies: Any) -> None:
    _set_payload(led, 5, epsilon="0.5")


def _delete_middle(led: Ledger, copies: Any) -> None:
    _sql(led, "DELETE FROM fdp_audit WHERE seq = 5")


def _delete_last(led: Ledger, copies: Any) -> None:
    _sql(led, "DELETE FROM fdp_audit WHERE seq = 17")


def _reorder(led: Ledger, copies: Any) -> None:
    _sql(led, "UPDATE fdp_audit SET seq = -1 WHERE seq = 5", "UPDATE fdp_audit SET seq = 5 WHERE seq = 6",
         "UPDATE fdp_audit SET seq = 6 WHERE seq = -1")


def _append(led: Ledger, copies: Any) -> None:
    """A forged budget.set appended with a correct hash; the head is left alone."""
    with led.engine.begin() as conn:
        last = conn.execute(sa.text("SELECT * FROM fdp_audit ORDER BY seq DESC LIMIT 1")).mappings().one()
        payload = json.dumps({"epsilon_total": "50.0", "delta_total": "0.0", "accounting": "basic", "period": None,
                              "epsilon_per_period": None, "delta_per_period": None}, sort_keys=True)
        fields = _event_fields(last["seq"] + 1, last["at"], last["actor"], last["host"], "budget.set", "ds", None, payload)
        conn.execute(sa.text("INSERT INTO fdp_audit (seq, at, actor, host, event, dataset_id, release_id, payload, "
                             "prev_hash, hash) VALUES (:seq, :at, :actor, :host, :event, :dataset_id, :release_id, "
                             ":payload, :prev, :hash)"),
                     {**fields, "prev": last["hash"], "hash": _event_hash(last["hash"], fields)})


def _forged_rehashed(led: Ledger, copies: Any) -> None:
    _set_payload(led, 5, epsilon="0.5")
    _rehash(led, head=False)


def _forged_rehashed_head_rows(led: Ledger, copies: Any) -> None:
    _set_payload(led, 5, epsilon="0.5")
    _rehash(led, head=True)
    _sql(led, "UPDATE fdp_releases SET epsilon = '0.5' WHERE release_id = 'r1'")


def _whole_chain(led: Ledger, copies: Any) -> None:
    _set_payload(led, 1, epsilon_total="50.0")
    _rehash(led, head=True)
    _sql(led, "UPDATE fdp_datasets SET epsilon_total = '50.0'")


def _rollback(led: Ledger, copies: Any) -> None:
    _restore(led, copies["after r1"])  # r2..r4 and their charges are gone: a "refund"


def _fork(led: Ledger, copies: Any) -> None:
    _restore(led, copies["after r1"])
    _release(led, "r2", epsilon=0.25)  # r2 re-done differently: cheaper
    _release(led, "r3")


TAMPERS: dict[str, tuple[int, bool, Callable[[Ledger, Any], None]]] = {
    "edit": (5, True, _edit),
    "delete middle": (5, True, _delete_middle),
    "delete last": (17, True, _delete_last),
    "reorder": (5, True, _reorder),
    "append": (18, True, _append),
    "forged entry, hash recomputed": (5, True, _forged_rehashed),
    "forged entry, hash + head + rows": (5, False, _forged_rehashed_head_rows),
    "whole-chain rewrite": (1, False, _whole_chain),
    "rollback to an older copy": (8, False, _rollback),
    "fork (release id re-done)": (8, False, _fork),
}


def _history(url: str) -> tuple[Ledger, dict[str, Evidence], dict[str, Any]]:
    led = Ledger(url)
    led.set_budget("ds", 10.0)
    evidence: dict[str, Evidence] = {}
    copies: dict[str, Any] = {}
    for i in range(4):
        m = _release(led, f"r{i}")
        ev = manifest_evidence(f"manifest r{i}", m)
        assert ev is not None and ev.seq == 3 + 3 * i
        evidence[f"manifest r{i}"] = ev
        if i == 1:
            copies["after r1"] = _snapshot(led)
    doc = json.loads(json.dumps(led.checkpoint(Ed25519PrivateKey.generate())))  # as written to and read from a file
    evidence["checkpoint"] = checkpoint_evidence("checkpoint", doc)
    assert evidence["checkpoint"].seq == 14
    m = _release(led, "r4")
    evidence["manifest r4"] = manifest_evidence("manifest r4", m)  # type: ignore[assignment]
    assert led.verify() == [] and led.check_evidence(list(evidence.values())) == []
    return led, evidence, copies


@pytest.mark.parametrize("tamper", list(TAMPERS))
def test_each_tamper_is_caught_by_any_one_later_manifest_or_checkpoint(ledger_url: str, tamper: str) -> None:
    first, plain_catches, attack = TAMPERS[tamper]
    led, evidence, copies = _history(ledger_url)
    attack(led, copies)
    assert bool(led.verify()) is plain_catches, led.verify()
    later = {name: ev for name, ev in evidence.items() if ev.seq + (1 if ev.release_id else 0) >= first}
    if tamper == "append":
        assert later == {}  # nothing published after an appended entry can contradict it: plain verify's job
    for name, ev in later.items():
        problems = led.check_evidence([ev])
        assert problems, f"{tamper}: not caught by {name}"
        assert problems[0].startswith(f"audit: the first entry that differs from the published evidence is entry {first}"), (
            name, problems)
    for name, ev in evidence.items():
        if name not in later:
            assert led.check_evidence([ev]) == [], name  # evidence from before the change still holds


def test_the_whole_chain_rewrite_changed_the_budget_and_only_outside_evidence_shows_it(ledger_url: str) -> None:
    led, evidence, copies = _history(ledger_url)
    _whole_chain(led, copies)
    assert led.verify() == [] and led.budgets("ds")[0].total[0] == 50.0
    problems = led.check_evidence([evidence["manifest r0"]])
    assert problems[0].startswith("audit: the first entry that differs from the published evidence is entry 1 "
                                  "(today: dataset.created of 'ds' at ")
    assert problems[0].endswith("(no evidence matches; manifest r0 differs at entry 1)")


def test_a_manifest_edited_after_publication_or_from_another_ledger_is_reported(ledger_url: str) -> None:
    led, evidence, _ = _history(ledger_url)
    m = led.get("r2").public["manifest"]  # type: ignore[union-attr]
    edited = manifest_evidence("edited r2", {**m, "privacy": {"epsilon": 0.1}})
    assert edited is not None
    assert any("records a different manifest for 'r2'" in p for p in led.check_evidence([edited]))
    other = manifest_evidence("other", {**m, "audit_commitment": {**m["audit_commitment"], "ledger_id": "x"}})
    assert other is not None
    assert "commits to ledger x, not this ledger" in led.check_evidence([other])[0]


def test_a_checkpoint_with_a_bad_signature_or_an_unknown_key_is_refused(ledger_url: str) -> None:
    led = Ledger(ledger_url)
    led.set_budget("ds", 1.0)
    key = Ed25519PrivateKey.generate()
    doc = led.checkpoint(key)
    assert led.registered_keys("checkpoint") == [public_key_hex(key)]
    assert [e["event"] for e in led.audit_events()][-1] == "audit.key_registered"  # recorded at first use
    led.checkpoint(key)
    assert led.registered_keys("checkpoint") == [public_key_hex(key)]  # once
    altered = {**doc, "statement": {**doc["statement"], "at": "2020-01-01T00:00:00+00:00"}}
    assert "signature does not verify" in led.check_evidence([checkpoint_evidence("c", altered)])[0]
    stranger = checkpoint_evidence("c", doc, pinned_keys={"00" * 32})
    assert "not an accepted checkpoint key" in led.check_evidence([stranger])[0]
    _sql(led, "UPDATE fdp_datasets SET epsilon_total = '9.0'")
    with pytest.raises(LedgerError, match="no checkpoint written: the ledger does not verify"):
        led.checkpoint(key)


def _signed(led: Ledger, key: Ed25519PrivateKey, dataset: str, epsilon: float, action: str = "budget.set") -> dict[str, Any]:
    statement = led.policy_statement(action, dataset, epsilon)
    return {"statement": statement, "public_key": public_key_hex(key), "signature": sign_statement(key, statement)}


def test_signed_budget_policy_allows_the_officer_and_refuses_the_operator(ledger_url: str) -> None:
    led = Ledger(ledger_url)
    officer, operator = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    led.set_budget("ds", 1.0)  # before the requirement: unsigned is fine
    pub = public_key_hex(officer)
    assert led.register_key(pub, "budget-policy", sign_statement(officer, led.key_statement(pub, "budget-policy")))
    assert led.policy_key() == pub
    with pytest.raises(ConfigError, match="must be signed by the privacy officer's key"):
        led.set_budget("ds", 5.0)  # the release operator alone
    with pytest.raises(ConfigError, match="the signature is not the privacy officer's key"):
        led.set_budget("ds", 5.0, signed=_signed(led, operator, "ds", 5.0))
    with pytest.raises(ConfigError, match="does not describe this budget.set"):
        led.set_budget("ds", 50.0, signed=_signed(led, officer, "ds", 5.0))  # signed 5, asks 50
    with pytest.raises(ConfigError, match="a config's budget proposal cannot create one"):
        led.reserve(release_id="r", epsilon=0.1, proposal={"epsilon": 100.0, "delta": 0.0},
                    **{**KW, "dataset_id": "new"})
    assert led.budgets("ds")[0].total[0] == 1.0 and led.budgets("new") == []
    signed = _signed(led, officer, "ds", 5.0)
    assert led.set_budget("ds", 5.0, signed=signed).total[0] == 5.0  # the officer's signed change
    with pytest.raises(ConfigError, match="already used"):
        led.set_budget("ds", 5.0, signed=signed)  # replayed
    led.set_budget("ds", 5.0, period="month", epsilon_per_period=1.0, signed={
        "statement": (st := led.policy_statement("budget.set", "ds", 5.0, period="month", epsilon_per_period=1.0)),
        "public_key": pub, "signature": sign_statement(officer, st)})
    with pytest.raises(ConfigError, match="budget.grant of dataset 'ds' must be signed"):
        led.grant("ds", "2026-11", 0.5)
    grant = led.policy_statement("budget.grant", "ds", 0.5, period="2026-11")
    with pytest.raises(ConfigError, match="not the privacy officer's key"):
        led.grant("ds", "2026-11", 0.5, signed={"statement": grant, "public_key": public_key_hex(operator),
                                                "signature": sign_statement(operator, grant)})
    led.grant("ds", "2026-11", 0.5, signed={"statement": grant, "public_key": pub, "signature": sign_statement(officer, grant)})
    assert [e["event"] for e in led.audit_events()][-1] == "budget.granted"
    assert led.verify() == []
    # an insider appends a budget.set with a correct hash, moves the head and fixes the row: the signature is missing
    _append(led, None)
    seq = led.audit_events()[-1]["seq"]
    _rehash(led, head=True)
    _sql(led, "UPDATE fdp_datasets SET epsilon_total = '50.0', period = NULL, epsilon_per_period = NULL, "
              "delta_per_period = NULL")
    assert led.verify() == [f"audit entry {seq}: budget.set of 'ds' is not signed by the privacy officer's key "
                            f"({pub[:16]}…), which this ledger requires (forged or made out of band)"]


def test_a_forged_key_registration_is_reported(ledger_url: str) -> None:
    led = Ledger(ledger_url)
    key = Ed25519PrivateKey.generate()
    pub = public_key_hex(key)
    with pytest.raises(ConfigError, match="does not verify"):
        led.register_key(pub, "budget-policy", "00" * 64)
    led.register_key(pub, "budget-policy", sign_statement(key, led.key_statement(pub, "budget-policy")))
    _set_payload(led, 1, public_key="11" * 32)
    _rehash(led, head=True)
    assert led.verify() == ["audit entry 1: key registration is not signed by its key for this ledger (forged)"]


def test_a_payload_or_row_that_is_no_longer_json_is_named_not_a_crash(ledger_url: str) -> None:
    """Trial U, M1: one flipped byte inside an audit payload made `audit verify` and `audit list` end in "unexpected
    JSONDecodeError ... a bug in fdp". The entry is now named (hash mismatch) and listed as damaged; a release row whose
    stored JSON is damaged is refused with the release named."""
    led = Ledger(ledger_url)
    led.set_budget("ds", 10.0)
    _release(led, "r1")
    _sql(led, "UPDATE fdp_audit SET payload = '{\"epsilon\": ' WHERE seq = 3")
    assert any(p.startswith("audit entry 3: content does not match its hash") for p in led.verify())
    assert led.check_evidence([]) == []
    damaged = [e for e in led.audit_events() if e["seq"] == 3]
    assert damaged[0]["payload"] == {"damaged": "the stored payload is not valid JSON; `fdp audit verify` names the entry"}
    _sql(led, "UPDATE fdp_releases SET budget_splits = '[' WHERE release_id = 'r1'")
    with pytest.raises(LedgerError, match="release 'r1': its ledger row is damaged .*restore the ledger from its backup"):
        led.releases()


@pytest.mark.parametrize("damage", [
    "UPDATE fdp_audit SET payload = '{\"epsilon\": ' WHERE seq = 3",  # a flipped byte in a payload
    "UPDATE fdp_releases SET epsilon = '0.5' WHERE release_id = 'r1'",  # spending rewritten in the row
    "DELETE FROM fdp_audit WHERE seq = 4",  # an entry removed
])
def test_a_new_charge_on_a_ledger_whose_trail_does_not_verify_is_refused_and_charges_nothing(
        ledger_url: str, damage: str) -> None:
    """Trial U, M1: `fdp release` charged, drew noise and published on ledgers whose chain failed `audit verify`,
    appending to a broken chain. A new charge now runs the same check first (chain locked) and is refused, naming the
    first problem; the ledger is left exactly as it was. A re-run of the published id still charges nothing."""
    led = Ledger(ledger_url)
    led.set_budget("ds", 10.0)
    _release(led, "r1")
    assert led.verify() == []
    _sql(led, damage)
    problems = led.verify()
    assert problems
    before = _snapshot(led)
    with pytest.raises(LedgerIntegrityError, match=r"audit trail does not verify \(\d+ problems?; the first: "
                                                   + re.escape(problems[0]) + r"\).*nothing was charged"):
        led.reserve(release_id="r2", epsilon=1.0, **KW)
    assert _snapshot(led) == before
    assert led.reserve(release_id="r1", epsilon=1.0, **KW).published  # nothing new is charged: not refused
