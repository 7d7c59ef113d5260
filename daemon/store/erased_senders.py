"""Erased senders (`erased_senders`): who an erasure removed from a shared session that stays,
as keyed hashes. `ErasedSenders` is the table as one agent's readers need it: for a session,
a test of a message's sender (None when the session lost nobody).

Each function runs inside the caller's transaction.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from daemon.store.engine import Connection
from daemon.store.tombstones import HASHED_PREFIX

SenderTest = Callable[[str], bool]  # True: this sender's turns are skipped


def session_ref(secret: bytes, session_id: str) -> str:
    return (
        HASHED_PREFIX
        + hmac.new(secret, b"erased-senders\0" + session_id.encode(), hashlib.sha256).hexdigest()
    )


def sender_ref(secret: bytes, session_id: str, sender: str) -> str:
    message = f"{session_id}\0{sender}".encode()
    return HASHED_PREFIX + hmac.new(secret, b"erased-sender\0" + message, hashlib.sha256).hexdigest()


def record_erased_senders(
    conn: Connection, secret: bytes, pairs: Iterable[tuple[str, str]], day_ms: int
) -> int:
    """Record (session id, sender id) pairs; the number newly recorded."""
    rows = [(session_ref(secret, s), sender_ref(secret, s, a), day_ms) for s, a in pairs]
    before = conn.total_changes
    conn.executemany(
        "INSERT OR IGNORE INTO erased_senders(session_ref, sender_ref, created_at) VALUES (?, ?, ?)", rows
    )
    return conn.total_changes - before


@dataclass(frozen=True, slots=True)
class ErasedSenders:
    secret: bytes | None
    by_session: dict[str, frozenset[str]] = field(default_factory=dict)  # session ref -> sender refs

    def test_for(self, session_id: str) -> SenderTest | None:
        if not self.by_session or self.secret is None:
            return None
        refs = self.by_session.get(session_ref(self.secret, session_id))
        if not refs:
            return None
        secret = self.secret
        known: dict[str, bool] = {}

        def skips(sender: str) -> bool:
            found = known.get(sender)
            if found is None:
                found = known[sender] = sender_ref(secret, session_id, sender) in refs
            return found

        return skips


def load_erased_senders(conn: Connection, secret: bytes | None) -> ErasedSenders:
    """The whole table (a few rows per erasure of a group member), for one reader's run."""
    by_session: dict[str, set[str]] = {}
    for s_ref, a_ref in conn.execute("SELECT session_ref, sender_ref FROM erased_senders"):
        by_session.setdefault(s_ref, set()).add(a_ref)
    return ErasedSenders(secret, {k: frozenset(v) for k, v in by_session.items()})
