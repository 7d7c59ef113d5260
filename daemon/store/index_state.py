"""The index's state (`memory_index_state`, `memory_index_meta`, reference §2.2, §6.3): the
revision that fences index rebuilds prepared before a purge, and why the last index run left
work undone ("dirty"; search then reports the index stale).

Each function runs inside the caller's transaction.
"""

from __future__ import annotations

from daemon.store.engine import Connection

META_DIRTY = "dirty"


def bump_revision(conn: Connection) -> int:
    conn.execute("UPDATE memory_index_state SET revision = revision + 1 WHERE id = 1")
    return current_revision(conn)


def current_revision(conn: Connection) -> int:
    row = conn.execute("SELECT revision FROM memory_index_state WHERE id = 1").fetchone()
    return int(row[0]) if row else 0


def set_dirty(conn: Connection, reason: str | None) -> None:
    if reason is None:
        conn.execute("DELETE FROM memory_index_meta WHERE key = ?", (META_DIRTY,))
    else:
        conn.execute(
            "INSERT INTO memory_index_meta(key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (META_DIRTY, reason),
        )


def read_dirty(conn: Connection) -> str | None:
    row = conn.execute("SELECT value FROM memory_index_meta WHERE key = ?", (META_DIRTY,)).fetchone()
    return None if row is None else str(row[0])
