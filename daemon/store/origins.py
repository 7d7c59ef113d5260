"""Entry origins (`memory_entry_origins`, reference §5.4, §5.7): which sessions each tracked
entry key came from — the lineage that forget and erasure follow.

Each function runs inside the caller's transaction; lookups go by the primary key (entry key)
or the session index, never a scan of every origin.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from memoryd.store.batched import execute_in, select_in
from memoryd.store.engine import Connection

ORIGIN_CLASSES = ("owner", "agent", "untrusted", "system")


@dataclass(frozen=True, slots=True)
class EntryOrigin:
    entry_key: str
    agent_id: str
    session_id: str
    session_key: str | None
    origin_class: str
    observed_at: int


_COLUMNS = "entry_key, agent_id, session_id, session_key, origin_class, observed_at"


def record_origins(conn: Connection, agent_id: str, origins: Iterable[EntryOrigin]) -> list[EntryOrigin]:
    """Insert-or-ignore origin rows; return the rows actually added.

    Rejects rows of another agent: selection and forgotten records are per agent.
    """
    added: list[EntryOrigin] = []
    for origin in origins:
        if origin.agent_id != agent_id:
            raise ValueError(f"memory entry origin belongs to another agent: {origin.agent_id!r}")
        cur = conn.execute(
            f"INSERT INTO memory_entry_origins({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(entry_key, agent_id, session_id) DO NOTHING",
            (
                origin.entry_key,
                origin.agent_id,
                origin.session_id,
                origin.session_key,
                origin.origin_class,
                origin.observed_at,
            ),
        )
        if cur.rowcount:
            added.append(origin)
    return added


def origins_for_sessions(conn: Connection, agent_id: str, session_ids: Sequence[str]) -> list[EntryOrigin]:
    """Origins of the given sessions, by index (never a scan of all origins)."""
    if not session_ids:
        return []
    rows = select_in(
        conn,
        f"SELECT {_COLUMNS} FROM memory_entry_origins WHERE session_id IN ({{marks}}) AND agent_id = ?",
        session_ids,
        (agent_id,),
    )
    return sorted((EntryOrigin(*r) for r in rows), key=lambda o: (o.entry_key, o.session_id))


def origins_for_entries(conn: Connection, agent_id: str, entry_keys: Sequence[str]) -> list[EntryOrigin]:
    if not entry_keys:
        return []
    rows = select_in(
        conn,
        f"SELECT {_COLUMNS} FROM memory_entry_origins WHERE entry_key IN ({{marks}}) AND agent_id = ?",
        entry_keys,
        (agent_id,),
    )
    return sorted((EntryOrigin(*r) for r in rows), key=lambda o: (o.entry_key, o.session_id))


def existing_entry_keys(conn: Connection, agent_id: str, entry_keys: Sequence[str]) -> set[str]:
    return {o.entry_key for o in origins_for_entries(conn, agent_id, entry_keys)}


def delete_origins_for_entries(conn: Connection, agent_id: str, entry_keys: Sequence[str]) -> int:
    return execute_in(
        conn,
        "DELETE FROM memory_entry_origins WHERE agent_id = ? AND entry_key IN ({marks})",
        entry_keys,
        (agent_id,),
    )


def insert_origins(conn: Connection, rows: Iterable[tuple[str, str, str, str | None, str, int]]) -> None:
    """Insert-or-ignore (entry_key, agent_id, session_id, session_key, origin_class, observed_at)
    rows in one statement, for a writer that need not know which were new (staging)."""
    conn.executemany(
        f"INSERT INTO memory_entry_origins ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?) "
        "ON CONFLICT(entry_key, agent_id, session_id) DO NOTHING",
        rows,
    )


def entry_keys_of_sessions(conn: Connection, agent_id: str, session_ids: Sequence[str]) -> set[str]:
    """Entry keys any of these sessions contributed to (session index)."""
    rows = select_in(
        conn,
        "SELECT entry_key FROM memory_entry_origins WHERE session_id IN ({marks}) AND agent_id = ?",
        session_ids,
        (agent_id,),
    )
    return {k for (k,) in rows}


def origin_pairs(conn: Connection, agent_id: str, entry_keys: Sequence[str]) -> list[tuple[str, str]]:
    """(entry_key, session_id) of every origin of these entry keys (primary key)."""
    rows = select_in(
        conn,
        "SELECT entry_key, session_id FROM memory_entry_origins WHERE entry_key IN ({marks}) AND agent_id = ?",
        entry_keys,
        (agent_id,),
    )
    return [(k, s) for k, s in rows]


def keys_with_origins(conn: Connection, agent_id: str, entry_keys: Collection[str]) -> frozenset[str]:
    """Which of `entry_keys` have at least one origin row for this agent (primary-key lookups)."""
    if not entry_keys:
        return frozenset()
    rows = select_in(
        conn,
        "SELECT DISTINCT entry_key FROM memory_entry_origins WHERE entry_key IN ({marks}) AND agent_id = ?",
        sorted(set(entry_keys)),
        (agent_id,),
    )
    return frozenset(k for (k,) in rows)


def delete_origin_rows(conn: Connection, agent_id: str, pairs: Iterable[tuple[str, str]]) -> int:
    """Delete exactly these (entry_key, session_id) rows; how many there were."""
    before = conn.total_changes
    conn.executemany(
        "DELETE FROM memory_entry_origins WHERE entry_key = ? AND agent_id = ? AND session_id = ?",
        [(key, agent_id, sid) for key, sid in pairs],
    )
    return conn.total_changes - before


def recorded_session_keys(
    conn: Connection, agent_id: str, session_ids: Sequence[str], session_keys: Sequence[str]
) -> list[tuple[str, str | None]]:
    """Distinct (session id, session key) of the origins of these ids or keys (each by its
    index): the sessions entries were derived from, also once the session store has lost them."""
    rows = select_in(
        conn,
        "SELECT DISTINCT session_id, session_key FROM memory_entry_origins"
        " WHERE session_id IN ({marks}) AND agent_id = ?",
        session_ids,
        (agent_id,),
    )
    rows += select_in(
        conn,
        "SELECT DISTINCT session_id, session_key FROM memory_entry_origins"
        " WHERE session_key IN ({marks}) AND agent_id = ?",
        session_keys,
        (agent_id,),
    )
    return [(r[0], r[1]) for r in rows]
