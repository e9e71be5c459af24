"""External evidence of the audit chain: commitments in manifests, signed checkpoints, signatures.

The audit chain (:mod:`fdpcore.ledger._store`) catches edits made without recomputing hashes.
Someone who can write the database can recompute them, move the head and fix the table rows,
so the ledger alone cannot prove its history. This module makes copies of the chain's state
*outside* the database that such a rewrite cannot reach:

* a **commitment** ``{ledger_id, seq, head, prefixes}`` in every published manifest (taken in the
  transaction that publishes the release: ``seq`` is the entry just before the release's own
  ``release.published`` entry, ``head`` its hash, ``prefixes`` the first
  :data:`PREFIX_HEX` hex digits of the hash of every entry 1..seq, concatenated — 8 bytes per
  entry — so the first entry that differs is named, not only detected; detection rests on the
  full ``head``);
* a **checkpoint**: a statement ``{ledger_id, seq, head, at, hashes}`` (``hashes``: every entry's
  hash up to ``seq``, so the first entry that differs is named exactly) signed with an Ed25519
  key kept outside the database;
* **signed budget-policy changes** (opt-in): the privacy officer's signature over the change,
  stored in its audit entry and checked on every ``verify``.

Given the hashes that today's chain recomputes from its entries' contents,
:func:`check_evidence` says whether each piece of evidence is a prefix of today's chain
and, over all the evidence given, which entry is the first that differs (a hash at a position
says *whether* some entry up to it changed, so a difference is located between the last
position that matches and the first that does not). A hash prefix of 32 bits matches a
different entry by chance with probability 2^-32; the full head still decides detection.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from fdpcore.errors import ConfigError

__all__ = [
    "CHECKPOINT_FORMAT",
    "PREFIX_HEX",
    "Evidence",
    "canonical_json",
    "check_evidence",
    "checkpoint_evidence",
    "load_private_key",
    "manifest_evidence",
    "public_key_hex",
    "hash_prefixes",
    "sign_statement",
    "verify_signature",
    "write_private_key",
]

#: Hex digits of each entry's hash that a manifest commitment keeps (32 bits).
PREFIX_HEX = 8
#: Format tag of a checkpoint file.
CHECKPOINT_FORMAT = "fdp-audit-checkpoint/1"


def canonical_json(obj: Any) -> bytes:
    """The canonical bytes that are hashed or signed: JSON with sorted keys and no spaces.

    >>> canonical_json({"seq": 2, "head": "ab"})
    b'{"head":"ab","seq":2}'
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def hash_prefixes(hashes: list[str]) -> str:
    """The first :data:`PREFIX_HEX` hex digits of each hash, concatenated (a manifest's ``prefixes``).

    >>> hash_prefixes(["0123456789" + "0" * 54, "abcdef0123" + "0" * 54])
    '01234567abcdef01'
    """
    return "".join(h[:PREFIX_HEX] for h in hashes)


# --------------------------------------------------------------------------- keys and signatures


def load_private_key(path: str | Path) -> Ed25519PrivateKey:
    """Read an Ed25519 private key (PEM, PKCS#8, unencrypted; ``fdp audit keygen`` or openssl makes one)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"--key ({str(p)!r}) cannot be read ({exc.strerror})") from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise ConfigError(f"--key ({str(p)!r}) is not an unencrypted PEM private key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigError(f"--key ({str(p)!r}) must be an Ed25519 key (it is {type(key).__name__})")
    return key


def write_private_key(path: str | Path) -> str:
    """Make a new Ed25519 key, write it (PEM, mode 0600, never over an existing file); return its public key."""
    p = Path(path)
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    try:
        p.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IRUSR | stat.S_IWUSR)
    except FileExistsError:
        raise ConfigError(f"--out ({str(p)!r}) exists; a key is never overwritten") from None
    except OSError as exc:
        raise ConfigError(f"--out ({str(p)!r}) cannot be written ({exc.strerror})") from None
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    return public_key_hex(key)


def public_key_hex(key: Ed25519PrivateKey) -> str:
    """The raw 32-byte public key, hex (how the ledger, checkpoints and the manual name a key)."""
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()


def sign_statement(key: Ed25519PrivateKey, statement: dict[str, Any]) -> str:
    """Ed25519 signature (hex) over :func:`canonical_json` of ``statement``."""
    return key.sign(canonical_json(statement)).hex()


def verify_signature(public_key: str, statement: dict[str, Any], signature: str) -> bool:
    """True when ``signature`` (hex) is ``public_key``'s (hex) signature of ``statement``.

    >>> key = Ed25519PrivateKey.generate()
    >>> sig = sign_statement(key, {"seq": 1})
    >>> verify_signature(public_key_hex(key), {"seq": 1}, sig), verify_signature(public_key_hex(key), {"seq": 2}, sig)
    (True, False)
    """
    try:
        pub = Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_key))
        pub.verify(bytes.fromhex(signature), canonical_json(statement))
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


# --------------------------------------------------------------------------- evidence


@dataclass(frozen=True)
class Evidence:
    """Hashes (or hash prefixes) of the chain at some positions, from a document kept outside the database.

    ``problems`` holds what is wrong with the document itself (bad signature, wrong ledger,
    manifest not the one the chain records); its hashes are then not used.
    """

    source: str
    ledger_id: str
    seq: int
    head: str
    points: dict[int, str]
    release_id: str | None = None
    manifest_sha256: str | None = None
    public_key: str | None = None
    problems: tuple[str, ...] = field(default=())


def manifest_evidence(source: str, manifest: dict[str, Any]) -> Evidence | None:
    """The commitment of a published manifest, or None when it carries none (published before fdp had them)."""
    c = manifest.get("audit_commitment")
    if not isinstance(c, dict):
        return None
    try:
        seq, head, prefixes = int(c["seq"]), str(c["head"]), str(c["prefixes"])
        ledger_id = str(c["ledger_id"])
    except (KeyError, TypeError, ValueError):
        return Evidence(source, "", 0, "", {}, problems=(f"{source}: audit_commitment is malformed",))
    if len(prefixes) != PREFIX_HEX * seq:
        return Evidence(source, "", 0, "", {}, problems=(f"{source}: audit_commitment.prefixes must hold "
                                                         f"{PREFIX_HEX} hex digits for each of its {seq} entries",))
    points = {i + 1: prefixes[PREFIX_HEX * i:PREFIX_HEX * (i + 1)] for i in range(seq)}
    points[seq] = head
    body = {k: v for k, v in manifest.items() if k != "audit_commitment"}
    return Evidence(source, ledger_id, seq, head, points, release_id=str(manifest.get("release_id")),
                    manifest_sha256=hashlib.sha256(canonical_json(body)).hexdigest())


def checkpoint_evidence(source: str, doc: dict[str, Any], pinned_keys: set[str] | None = None) -> Evidence:
    """A checkpoint file's evidence, its signature checked (and its key, when keys are pinned)."""
    try:
        statement, key, sig = doc["statement"], str(doc["public_key"]), str(doc["signature"])
        seq, head, ledger_id = int(statement["seq"]), str(statement["head"]), str(statement["ledger_id"])
        hashes = [str(h) for h in statement["hashes"]]
    except (KeyError, TypeError, ValueError):
        return Evidence(source, "", 0, "", {}, problems=(f"{source}: not an fdp audit checkpoint",))
    problems: list[str] = []
    if doc.get("format") != CHECKPOINT_FORMAT:
        problems.append(f"{source}: format ({doc.get('format')!r}) must be {CHECKPOINT_FORMAT!r}")
    if not verify_signature(key, statement, sig):
        problems.append(f"{source}: signature does not verify (the checkpoint was altered or not signed by {key[:16]}…)")
    if pinned_keys is not None and key not in pinned_keys:
        problems.append(f"{source}: signed by key {key[:16]}…, which is not an accepted checkpoint key")
    if len(hashes) != seq or (hashes and hashes[-1] != head):
        problems.append(f"{source}: its hash list does not end at entry {seq} with its head")
    points = {i + 1: h for i, h in enumerate(hashes)}
    return Evidence(source, ledger_id, seq, head, points, public_key=key, problems=tuple(problems))


def check_evidence(ledger_id: str, hashes: list[str], evidence: list[Evidence],
                   events: list[dict[str, Any]] | None = None) -> list[str]:
    """Check that every piece of evidence is a prefix of today's chain; name the first entry that differs.

    Args:
        ledger_id: today's ledger id.
        hashes: the hash of entry i + 1 as recomputed from the entries' contents (in ``seq`` order).
        evidence: manifests' commitments and checkpoints.
        events: today's audit entries (``seq`` order), to check that a manifest's own publication is
            the entry after its commitment and records that very manifest.

    Returns:
        The problems, the first differing entry first (empty: all evidence is a prefix).

    >>> h = ["a" * 64, "b" * 64, "c" * 64]
    >>> ev = Evidence("m.json", "L", 3, h[2], {1: "aaaaaaaa", 2: "bbbbbbbb", 3: h[2]})
    >>> check_evidence("L", h, [ev])
    []
    >>> check_evidence("L", [h[0], "x" * 64, "y" * 64], [ev])[0]
    'audit: the first entry that differs from the published evidence is entry 2 (evidence matches the chain through entry 1; m.json differs at entry 2)'
    """
    problems: list[str] = []
    matched: list[tuple[int, str]] = []
    differing: list[tuple[int, str]] = []
    for ev in evidence:
        if ev.problems:
            problems.extend(ev.problems)
            continue
        if ev.ledger_id != ledger_id:
            problems.append(f"{ev.source}: commits to ledger {ev.ledger_id}, not this ledger ({ledger_id}): "
                            "the ledger was replaced or this evidence belongs to another ledger")
            continue
        for pos, h in sorted(ev.points.items()):
            (matched if pos <= len(hashes) and hashes[pos - 1].startswith(h) else differing).append((pos, ev.source))
        if ev.seq > len(hashes):
            problems.append(f"{ev.source}: commits to entry {ev.seq}, but the chain ends at entry {len(hashes)} "
                            "(rolled back or truncated)")
        elif ev.seq >= 1 and hashes[ev.seq - 1] != ev.head:
            problems.append(f"{ev.source}: entry {ev.seq} recomputes to {hashes[ev.seq - 1][:16]}…, "
                            f"not the committed {ev.head[:16]}… (history up to entry {ev.seq} was rewritten)")
        elif events is not None and ev.release_id is not None:
            own = _check_own_publication(ev, events)
            if own:
                problems.extend(own)
                differing.append((ev.seq + 1, ev.source))
    if differing:
        first_bad, bad_source = min(differing)
        good = [(p, s) for p, s in matched if p < first_bad]
        last_good = max(good)[0] if good else 0
        upper = min(first_bad, len(hashes) + 1)
        if upper == last_good + 1:
            where = f"entry {upper}" + (" (missing)" if upper > len(hashes) else "")
            if events is not None and upper <= len(events):
                e = events[upper - 1]
                where += f" (today: {e['event']}" + (f" of {e['release_id']!r}" if e["release_id"] else
                                                      f" of {e['dataset_id']!r}") + f" at {e['at'][:19]})"
        else:
            where = f"one of entries {last_good + 1}..{upper}"
        basis = f"evidence matches the chain through entry {last_good}" if last_good else "no evidence matches"
        problems.insert(0, f"audit: the first entry that differs from the published evidence is {where} "
                           f"({basis}; {bad_source} differs at entry {first_bad})")
        late_good = [(p, s) for p, s in matched if p > first_bad]
        if late_good:
            problems.append(f"audit: {late_good[0][1]} matches entry {late_good[0][0]} although {bad_source} differs "
                            f"at entry {first_bad}: the evidence comes from diverging histories (a fork)")
    return problems


def _check_own_publication(ev: Evidence, events: list[dict[str, Any]]) -> list[str]:
    """The entry after a manifest's commitment must be its release's publication, recording that manifest."""
    nxt = ev.seq + 1
    if nxt > len(events):
        return [f"{ev.source}: entry {nxt} (the publication of {ev.release_id!r}) is missing (rolled back or truncated)"]
    e = events[nxt - 1]
    payload = e["payload"] if isinstance(e["payload"], dict) else json.loads(e["payload"])
    if e["event"] != "release.published" or e["release_id"] != ev.release_id:
        return [f"{ev.source}: entry {nxt} should publish release {ev.release_id!r} but is "
                f"{e['event']} of {e['release_id']!r} (history rewritten)"]
    if payload.get("manifest_sha256") != ev.manifest_sha256:
        return [f"{ev.source}: entry {nxt} records a different manifest for {ev.release_id!r} "
                "(the manifest was edited after publication, or the publication was rewritten)"]
    return []
