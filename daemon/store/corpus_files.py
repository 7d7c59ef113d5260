"""Corpus files per session: which session-corpus files a session's lines were appended to.

Writers (ingest, backfill) reserve the rows before appending, in a transaction of their own;
forget reads them to scan only those files and deletes them with the origin rows, last.

Pending appends (`corpus_appends`): an ingest records each day file's size before its append
with the reservation and clears it in the batch commit; a row left behind is an append whose
writer died before committing, which the next writer cuts off.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from memoryd.store.batched import execute_in, select_in
from memoryd.store.db import Connection

TABLE = "corpus_session_files"


def record_corpus_files(conn: Connection, pairs: Iterable[tuple[str, str]]) -> int:
    """Insert-or-ignore (session_id, workspace-relative corpus path) pairs; rows added."""
    rows = sorted(set(pairs))
    if not rows:
        return 0
    before = conn.total_changes
    conn.executemany(
        f"INSERT INTO {TABLE} (session_id, relative_path) VALUES (?, ?) "
        "ON CONFLICT(session_id, relative_path) DO NOTHING",
        rows,
    )
    return conn.total_changes - before


def corpus_files_by_session(conn: Connection, session_ids: Collection[str]) -> dict[str, frozenset[str]]:
    """Recorded corpus files of each session that has any (primary-key lookups)."""
    found: dict[str, set[str]] = {}
    for sid, path in select_in(
        conn,
        f"SELECT session_id, relative_path FROM {TABLE} WHERE session_id IN ({{marks}})",
        sorted(set(session_ids)),
    ):
        found.setdefault(sid, set()).add(path)
    return {sid: frozenset(paths) for sid, paths in found.items()}


def delete_corpus_files(conn: Connection, session_ids: Collection[str]) -> int:
    """Remove the rows of these sessions; rows removed."""
    if not session_ids:
        return 0
    return execute_in(conn, f"DELETE FROM {TABLE} WHERE session_id IN ({{marks}})", sorted(set(session_ids)))


APPENDS = "corpus_appends"


def record_pending_appends(conn: Connection, extents: Iterable[tuple[str, int, int]]) -> None:
    """(relative path, inode, size before) of the appends about to happen."""
    conn.executemany(
        f"INSERT INTO {APPENDS} (relative_path, inode, size_before) VALUES (?, ?, ?) "
        "ON CONFLICT(relative_path) DO UPDATE SET inode = excluded.inode, size_before = excluded.size_before",
        sorted(set(extents)),
    )


def pending_appends(conn: Connection) -> list[tuple[str, int, int]]:
    """Appends recorded and never committed: (relative path, inode, size before)."""
    return [
        (str(p), int(i), int(n))
        for p, i, n in conn.execute(f"SELECT relative_path, inode, size_before FROM {APPENDS}")
    ]


def clear_pending_appends(conn: Connection, paths: Collection[str] | None = None) -> None:
    """Forget the pending rows of these paths (all of them when None)."""
    if paths is None:
        conn.execute(f"DELETE FROM {APPENDS}")
    elif paths:
        execute_in(conn, f"DELETE FROM {APPENDS} WHERE relative_path IN ({{marks}})", sorted(set(paths)))
