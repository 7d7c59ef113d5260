"""Indexed files (`memory_index_sources`, reference §6): one row per (path, source) with the
hash, stat and model it was indexed at. Its triggers bump the index revision on every change.

Each function runs inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from memoryd.store.batched import execute_in, select_in
from memoryd.store.engine import Connection


class SourceRecord(NamedTuple):
    path: str
    source: str  # "memory" | "sessions"
    hash: str
    mtime: float
    size: int
    session_id: str | None
    model: str


class SourceKey(NamedTuple):
    """A source row's id and what forget needs to know of it."""

    id: int
    path: str
    source: str
    session_id: str | None


def all_sources(conn: Connection) -> list[SourceRecord]:
    rows = conn.execute("SELECT path, source, hash, mtime, size, session_id, model FROM memory_index_sources")
    return [SourceRecord(*r) for r in rows]


def index_models(conn: Connection) -> set[str]:
    return {str(r[0]) for r in conn.execute("SELECT DISTINCT model FROM memory_index_sources")}


def sources_of(conn: Connection, source: str) -> list[SourceRecord]:
    rows = conn.execute(
        "SELECT path, source, hash, mtime, size, session_id, model FROM memory_index_sources WHERE source = ?",
        (source,),
    )
    return [SourceRecord(*r) for r in rows]


def upsert_sources(conn: Connection, rows: Sequence[SourceRecord]) -> None:
    conn.executemany(
        "INSERT INTO memory_index_sources(path, source, hash, mtime, size, session_id, model) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(path, source) DO UPDATE SET hash = excluded.hash, "
        "mtime = excluded.mtime, size = excluded.size, session_id = excluded.session_id, model = excluded.model",
        rows,
    )


def delete_sources(conn: Connection, keys: Iterable[tuple[str, str]]) -> int:
    """Delete the rows of these (path, source) pairs; rows removed."""
    removed = 0
    for path, source in keys:
        removed += conn.execute(
            "DELETE FROM memory_index_sources WHERE path = ? AND source = ?", (path, source)
        ).rowcount
    return removed


def delete_sources_by_id(conn: Connection, ids: Sequence[int]) -> int:
    return execute_in(conn, "DELETE FROM memory_index_sources WHERE id IN ({marks})", ids)


def sources_at_paths(conn: Connection, paths: Sequence[str]) -> list[SourceKey]:
    rows = select_in(
        conn, "SELECT id, path, source, session_id FROM memory_index_sources WHERE path IN ({marks})", paths
    )
    return [SourceKey(*r) for r in rows]


def session_sources(conn: Connection, session_ids: Sequence[str]) -> list[SourceKey]:
    """Transcript sources of these sessions (by the session index)."""
    rows = select_in(
        conn,
        "SELECT id, path, source, session_id FROM memory_index_sources "
        "WHERE source = 'sessions' AND session_id IN ({marks})",
        session_ids,
    )
    return [SourceKey(*r) for r in rows]
