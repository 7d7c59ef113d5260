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

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

import orjson

from memoryd.constants import ERASURE_JOURNAL_DIR, RETENTION_KEY_NAME
from memoryd.derivations import journal_ref
from memoryd.failpoints import failpoint
from memoryd.retention.needles import VerifySubject
from memoryd.retention.plan import SessionTarget
from memoryd.retention.seal import seal, unseal
from memoryd.settings import Settings
from memoryd.store import retention as repo
from memoryd.store.db import Connection, FenceToken, Store
from memoryd.store.tombstones import load_or_create_secret


@dataclass(frozen=True, slots=True)
class PendingErasure:
    journal_id: str
    subject: VerifySubject
    sessions: tuple[SessionTarget, ...]
    # The entry's key file was gone when a run adopted it: the needles journaled before the
    # crash are lost, and every later run of the entry says so in its receipt.
    needles_lost: bool = False


def _dir(settings: Settings) -> Path:
    return settings.state_dir / ERASURE_JOURNAL_DIR


def _key_path(settings: Settings, journal_id: str) -> Path:
    return _dir(settings) / f"{journal_id}.key"


def target_ref(settings: Settings, target: str) -> str:
    """A keyed hash of the scope: finds its entry, and confirms nothing without the host key."""
    key = load_or_create_secret(settings.state_dir / RETENTION_KEY_NAME)
    return journal_ref(key, target)


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
            "needles_lost": pending.needles_lost,
        }
    )


def _decode(journal_id: str, data: bytes) -> PendingErasure:
    raw = orjson.loads(data)
    subject = VerifySubject(tuple(raw["ids"]), tuple(raw["contents"]), tuple(raw["times"]))
    sessions = tuple(
        SessionTarget(a, s, scope, tuple(held), bool(shared), bool(separable))
        for a, s, scope, held, shared, separable in raw["sessions"]
    )
    return PendingErasure(journal_id, subject, sessions, bool(raw.get("needles_lost", False)))


def _open(settings: Settings, journal_id: str, sealed: bytes) -> PendingErasure:
    """An entry's needles. Its key file may be gone (lost with a disk, or, before the orphan
    sweep ran under the fence, swept by a run stopped past its lease): the entry is still
    adopted, by its id, with no needles and marked `needles_lost`; the run verifies with what it
    finds now, its receipt says the earlier needles were lost, and deletes the row."""
    try:
        key = _key_path(settings, journal_id).read_bytes()
    except FileNotFoundError:
        return PendingErasure(journal_id, VerifySubject(), (), needles_lost=True)
    return _decode(journal_id, unseal(key, sealed))


async def load(settings: Settings, store: Store, target: str) -> PendingErasure | None:
    """The pending erasure of `target`, or None."""
    found = await store.read(repo.journal_entry, target_ref(settings, target))
    return _open(settings, *found) if found is not None else None


async def save(
    settings: Settings,
    store: Store,
    target: str,
    subject: VerifySubject,
    sessions: tuple[SessionTarget, ...],
    fence: FenceToken,
) -> PendingErasure:
    """Journal (or re-journal, merged) the needles before anything is deleted, in one fenced
    write transaction that reads the target's entry again: a run stopped past its lease may
    have written one since this run's `load`, and a second row for the target would break the
    entry's uniqueness. The key file is written under the same write lock, before the row, so
    a row never exists without its key and no orphan sweep (`drop_orphan_keys`) runs between."""
    ref = target_ref(settings, target)

    def write(conn: Connection) -> PendingErasure:
        found = repo.journal_entry(conn, ref)
        earlier = _open(settings, *found) if found is not None else None
        journal_id = earlier.journal_id if earlier else secrets.token_hex(16)
        merged = PendingErasure(
            journal_id,
            _merge(earlier.subject, subject) if earlier else subject,
            _union(earlier, sessions),
            earlier.needles_lost if earlier else False,
        )
        key = load_or_create_secret(_key_path(settings, journal_id))
        repo.put_journal(conn, journal_id, ref, seal(key, _encode(merged)))
        return merged

    failpoint("erase.journal")
    return await store.write(write, fence=fence)


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


async def drop_orphan_keys(settings: Settings, store: Store, fence: FenceToken) -> None:
    """Key files whose entry is gone (a crash between the receipt and the unlink, or inside a
    `save`). Swept under the fenced write lock, like `save`'s key and row: a run stopped past
    its lease cannot read the entries, stop, and then unlink the key of one a newer run wrote."""
    folder = _dir(settings)
    if not folder.is_dir():
        return

    def sweep(conn: Connection) -> None:
        live = repo.journal_ids(conn)
        for path in folder.glob("*.key"):
            if path.stem not in live:
                drop_key(settings, path.stem)

    await store.write(sweep, fence=fence)
