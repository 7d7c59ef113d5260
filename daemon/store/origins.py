"""Entry origins: which sessions each tracked entry key came from (reference §5.4, §5.7)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from daemon.store.batched import execute_in, select_in
from daemon.store.db import Connection

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
