"""Observed writes of memory files by sessions (`curated_writes`): reported by forget, never
edited; an erasure removes the rows of the sessions it erased.

Each function runs inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence

from memoryd.store.batched import execute_in, select_in
from memoryd.store.engine import Connection


def writes_of_sessions(conn: Connection, session_ids: Sequence[str]) -> list[tuple[str, int]]:
    """(relative_path, observed_at) of the writes observed in these sessions."""
    return select_in(
        conn,
        "SELECT relative_path, observed_at FROM curated_writes WHERE session_id IN ({marks}) ORDER BY relative_path",
        session_ids,
    )


def writes_of_session_keys(conn: Connection, session_keys: Sequence[str]) -> list[tuple[str, int]]:
    """(relative_path, observed_at) of writes recorded with a session key and no session id."""
    return select_in(
        conn,
        "SELECT relative_path, observed_at FROM curated_writes WHERE session_id IS NULL "
        "AND session_key IN ({marks}) ORDER BY relative_path",
        session_keys,
    )


def delete_writes_of_sessions(conn: Connection, session_ids: Sequence[str]) -> int:
    return execute_in(conn, "DELETE FROM curated_writes WHERE session_id IN ({marks})", session_ids)
