"""The index's state (`memory_index_state`, `memory_index_meta`, reference §2.2, §6.3): the
revision that fences index rebuilds prepared before a purge, and why the last index run left
work undone ("dirty"; search then reports the index stale).

Each function runs inside the caller's transaction.
"""

from __future__ import annotations

from memoryd.store.engine import Connection

META_DIRTY = "dirty"
# "<index revision>|<session source revision>" of the last complete index run: while both are
# unchanged, every listed transcript is indexed at the stat it has (see index/freshness.py).
META_SESSIONS_SEEN = "sessions_seen"


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


def record_run(conn: Connection, dirty: str | None, source_revision: str | None) -> None:
    """The end of an index run: its dirty reason, and (for a complete run) the session source's
    revision it read, bound to the index revision after its writes."""
    set_dirty(conn, dirty)
    conn.execute("DELETE FROM memory_index_meta WHERE key = ?", (META_SESSIONS_SEEN,))
    if dirty is None and source_revision is not None:
        conn.execute(
            "INSERT INTO memory_index_meta(key, value) VALUES (?, ?)",
            (META_SESSIONS_SEEN, f"{current_revision(conn)}|{source_revision}"),
        )


def sessions_seen(conn: Connection) -> str | None:
    """The session source revision the index holds, if no index row changed since it was read."""
    row = conn.execute("SELECT value FROM memory_index_meta WHERE key = ?", (META_SESSIONS_SEEN,)).fetchone()
    if row is None:
        return None
    revision, _, source_revision = str(row[0]).partition("|")
    return source_revision if revision == str(current_revision(conn)) else None
