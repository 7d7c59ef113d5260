"""Erased senders (`erased_senders`), as keyed hashes: who an erasure removed from the agent.

Two kinds of row:
* per session: the subject was separated from this shared session (its other participants'
  turns are read again); a rerun of the erasure knows the session is done;
* agent-wide (`session_ref` = AGENT_WIDE): the subject's turns are skipped in every session of
  the agent, read or not yet read — an unread backlog, a tail written later, an archive found
  later. An erased subject's later turns are never admitted again by this agent.

`ErasedSenders` is the table as one agent's readers need it: for a session, a test of a
message's sender (None when nobody is erased from it). Writing either kind bumps the
exclusion generation (store/exclusions.py), which every producer re-checks before it publishes.

Each function runs inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from memoryd import derivations
from memoryd.store.engine import Connection
from memoryd.store.exclusions import bump_exclusions

SenderTest = Callable[[str], bool]  # True: this sender's turns are skipped


# Keyed hashes, declared with every other derivation (daemon/derivations.py).
session_ref = derivations.erased_session_ref
sender_ref = derivations.erased_sender_ref


# The session_ref of an agent-wide row: no session's keyed hash has this form.
AGENT_WIDE = "*"


subject_ref = derivations.erased_subject_ref


def record_erased_subject(conn: Connection, secret: bytes, sender: str, day_ms: int) -> int:
    """Record `sender` as erased agent-wide; 1 if newly recorded."""
    before = conn.total_changes
    conn.execute(
        "INSERT OR IGNORE INTO erased_senders(session_ref, sender_ref, created_at) VALUES (?, ?, ?)",
        (AGENT_WIDE, subject_ref(secret, sender), day_ms),
    )
    added = conn.total_changes - before
    if added:
        bump_exclusions(conn)
    return added


def record_erased_senders(
    conn: Connection, secret: bytes, pairs: Iterable[tuple[str, str]], day_ms: int
) -> int:
    """Record (session id, sender id) pairs; the number newly recorded."""
    rows = [(session_ref(secret, s), sender_ref(secret, s, a), day_ms) for s, a in pairs]
    before = conn.total_changes
    conn.executemany(
        "INSERT OR IGNORE INTO erased_senders(session_ref, sender_ref, created_at) VALUES (?, ?, ?)", rows
    )
    added = conn.total_changes - before
    if added:
        bump_exclusions(conn)
    return added


@dataclass(frozen=True, slots=True)
class ErasedSenders:
    secret: bytes | None
    by_session: dict[str, frozenset[str]] = field(default_factory=dict)  # session ref -> sender refs
    agent_wide: frozenset[str] = frozenset()  # subject refs

    def test_for(self, session_id: str) -> SenderTest | None:
        """The test of a sender of this session: erased from it, or from the whole agent."""
        if self.secret is None or not (self.by_session or self.agent_wide):
            return None
        refs = self.by_session.get(session_ref(self.secret, session_id)) if self.by_session else None
        subjects = self.agent_wide
        if not refs and not subjects:
            return None
        secret = self.secret
        known: dict[str, bool] = {}

        def skips(sender: str) -> bool:
            found = known.get(sender)
            if found is None:
                found = known[sender] = bool(
                    (subjects and subject_ref(secret, sender) in subjects)
                    or (refs and sender_ref(secret, session_id, sender) in refs)
                )
            return found

        return skips

    def separated(self, session_id: str, sender: str) -> bool:
        """Whether an erasure already separated `sender` from this one session."""
        if self.secret is None or not self.by_session:
            return False
        refs = self.by_session.get(session_ref(self.secret, session_id), frozenset())
        return sender_ref(self.secret, session_id, sender) in refs


def load_erased_senders(conn: Connection, secret: bytes | None) -> ErasedSenders:
    """The whole table (a row per erased subject, a few per separated session), for one reader's run."""
    by_session: dict[str, set[str]] = {}
    for s_ref, a_ref in conn.execute("SELECT session_ref, sender_ref FROM erased_senders"):
        by_session.setdefault(s_ref, set()).add(a_ref)
    subjects = frozenset(by_session.pop(AGENT_WIDE, ()))
    return ErasedSenders(secret, {k: frozenset(v) for k, v in by_session.items()}, subjects)
