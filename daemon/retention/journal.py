"""The pending-erasure journal: what an erasure's verifier needs, kept until the receipt.

An erasure deletes the very content its verifier must look for. So before its first delete it
journals the subject (ids, content, times: the needles) and the sessions it reaches, sealed
(retention/seal.py) with a key of its own in `state_dir/erasure-journal/<id>.key`. A rerun
of the same scope after a crash at any step finds the entry (by a keyed hash of the scope,
never the scope itself), merges it with what it computes now, and verifies against the same
needles — so residue a crash left is found, though its source is gone. The entry is deleted
in the transaction that stores the receipt, then its key file: from then on the sealed bytes
are unreadable wherever a copy survives.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

import orjson

from daemon.constants import ERASURE_JOURNAL_DIR, RETENTION_KEY_NAME
from daemon.retention.needles import VerifySubject
from daemon.retention.plan import SessionTarget
from daemon.retention.seal import seal, unseal
from daemon.settings import Settings
from daemon.store import retention as repo
from daemon.store.db import FenceToken, Store
from daemon.store.tombstones import load_or_create_secret


@dataclass(frozen=True, slots=True)
class PendingErasure:
    journal_id: str
    subject: VerifySubject
    sessions: tuple[SessionTarget, ...]


def _dir(settings: Settings) -> Path:
    return settings.state_dir / ERASURE_JOURNAL_DIR


def _key_path(settings: Settings, journal_id: str) -> Path:
    return _dir(settings) / f"{journal_id}.key"


def target_ref(settings: Settings, target: str) -> str:
    """A keyed hash of the scope: finds its entry, and confirms nothing without the host key."""
    key = load_or_create_secret(settings.state_dir / RETENTION_KEY_NAME)
    return "hmac:" + hmac.new(key, target.encode(), hashlib.sha256).hexdigest()


def _encode(pending: PendingErasure) -> bytes:
    s = pending.subject
    return orjson.dumps(
        {
            "ids": list(s.ids),
            "contents": list(s.contents),
            "times": list(s.times_ms),
            "sessions": [
                [t.agent_id, t.session_id, t.scope, list(t.hold_scopes), t.shared, t.separable]
                for t in pending.sessions
            ],
        }
    )


def _decode(journal_id: str, data: bytes) -> PendingErasure:
    raw = orjson.loads(data)
    subject = VerifySubject(tuple(raw["ids"]), tuple(raw["contents"]), tuple(raw["times"]))
    sessions = tuple(
        SessionTarget(a, s, scope, tuple(held), bool(shared), bool(separable))
        for a, s, scope, held, shared, separable in raw["sessions"]
    )
    return PendingErasure(journal_id, subject, sessions)


async def load(settings: Settings, store: Store, target: str) -> PendingErasure | None:
    """The pending erasure of `target`, or None. An entry whose key file is gone cannot be read:
    it is dropped (its needles are lost, and the rerun verifies with what it finds now)."""
    found = await store.read(repo.journal_entry, target_ref(settings, target))
    if found is None:
        return None
    journal_id, sealed = found
    try:
        key = _key_path(settings, journal_id).read_bytes()
    except FileNotFoundError:
        return None
    return _decode(journal_id, unseal(key, sealed))


async def save(
    settings: Settings,
    store: Store,
    target: str,
    pending: PendingErasure | None,
    subject: VerifySubject,
    sessions: tuple[SessionTarget, ...],
    fence: FenceToken,
) -> PendingErasure:
    """Journal (or re-journal, merged) the needles before anything is deleted. The key file is
    written and synced before the row, so a row never exists without its key."""
    journal_id = pending.journal_id if pending else secrets.token_hex(16)
    merged = PendingErasure(
        journal_id, _merge(pending.subject, subject) if pending else subject, _union(pending, sessions)
    )
    key = load_or_create_secret(_key_path(settings, journal_id))
    await store.write(
        repo.put_journal, journal_id, target_ref(settings, target), seal(key, _encode(merged)), fence=fence
    )
    return merged


def _merge(a: VerifySubject, b: VerifySubject) -> VerifySubject:
    return VerifySubject(
        tuple(dict.fromkeys(a.ids + b.ids)),
        tuple(dict.fromkeys(a.contents + b.contents)),
        tuple(dict.fromkeys(a.times_ms + b.times_ms)),
    )


def _union(pending: PendingErasure | None, sessions: tuple[SessionTarget, ...]) -> tuple[SessionTarget, ...]:
    known = {(s.agent_id, s.session_id): s for s in (pending.sessions if pending else ())}
    for s in sessions:
        known.setdefault((s.agent_id, s.session_id), s)
    return tuple(known[k] for k in sorted(known))


def drop_key(settings: Settings, journal_id: str) -> None:
    """After the entry's row is gone (the receipt's transaction): its key goes too."""
    try:
        os.unlink(_key_path(settings, journal_id))
    except FileNotFoundError:
        pass


async def drop_orphan_keys(settings: Settings, store: Store) -> None:
    """Key files whose entry is gone (a crash between the receipt and the unlink)."""
    folder = _dir(settings)
    if not folder.is_dir():
        return
    live = await store.read(repo.journal_ids)
    for path in folder.glob("*.key"):
        if path.stem not in live:
            drop_key(settings, path.stem)
