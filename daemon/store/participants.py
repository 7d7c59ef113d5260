"""Recorded session participants (`session_participants`): who took part in each ingested
session, from its metadata and its messages' senders. Erasure finds a user's sessions here
when the session source no longer lists them (archives, removed metadata).

Each function runs inside the caller's transaction; lookups go by the primary key (session id)
or the actor index.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memoryd.store.batched import execute_in, select_in
from memoryd.store.engine import Connection


@dataclass(frozen=True, slots=True)
class ParticipantRow:
    session_id: str
    actor_id: str
    namespace: str  # JSON object: the identity minus `id`


def record_participants(conn: Connection, rows: Iterable[ParticipantRow]) -> None:
    """Insert what is new; a known (session, actor) keeps its first namespace."""
    conn.executemany(
        "INSERT OR IGNORE INTO session_participants(session_id, actor_id, namespace) VALUES (?, ?, ?)",
        [(r.session_id, r.actor_id, r.namespace) for r in rows],
    )


def sessions_of_actors(conn: Connection, actor_ids: Sequence[str]) -> list[str]:
    """Session ids in which any of `actor_ids` took part, by the actor index."""
    rows = select_in(
        conn, "SELECT DISTINCT session_id FROM session_participants WHERE actor_id IN ({marks})", actor_ids
    )
    return sorted({r[0] for r in rows})


def participants_of_sessions(conn: Connection, session_ids: Sequence[str]) -> list[ParticipantRow]:
    rows = select_in(
        conn,
        "SELECT session_id, actor_id, namespace FROM session_participants WHERE session_id IN ({marks}) "
        "ORDER BY session_id, actor_id",
        session_ids,
    )
    return [ParticipantRow(*r) for r in rows]


def all_recorded_sessions(conn: Connection) -> list[str]:
    """Every session with recorded participants (a tenant's erasure covers them all)."""
    return [r[0] for r in conn.execute("SELECT DISTINCT session_id FROM session_participants ORDER BY 1")]


def delete_participants_of_sessions(conn: Connection, session_ids: Sequence[str]) -> int:
    return execute_in(conn, "DELETE FROM session_participants WHERE session_id IN ({marks})", session_ids)


def delete_participants_named(conn: Connection, actor_ids: Sequence[str]) -> int:
    """Every row of these actors, whichever session (an erased subject's rows)."""
    return execute_in(conn, "DELETE FROM session_participants WHERE actor_id IN ({marks})", actor_ids)
