"""Ingestion checkpoints (`ingest_checkpoints`, reference §4.5) and the checkpoint token.

One row per session, keyed `<agent>:<sessionPath>`: the fingerprint the last scan saw, how far
it got (lines consumed, their hash, the provenance carry) and, for a session kept out, the
reason with an empty hash so that lifting the rule forces a rescan. The token
(`ingest_checkpoint_token`, migration 2) changes with every write to the table.

Each function runs inside the caller's transaction (`Store.read` / `Store.write`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import partial
from operator import itemgetter
from typing import Any, NamedTuple

from memoryd.store.batched import execute_in, select_in
from memoryd.store.engine import Connection


class Checkpoint(NamedTuple):
    """One session's checkpoint. (A NamedTuple: a sweep loads one per session, and fast.)"""

    state_key: str
    agent_id: str
    session_id: str
    session_key: str | None
    session_path: str
    mtime_ms: int
    size: int
    content_hash: str  # sha256 of the consumed lines; "" for an excluded (or never scanned) session
    line_count: int  # transcript lines consumed
    last_content_line: int  # exported message lines produced from them
    at_end: bool  # only an unfinished last line (or nothing) was left unread
    carry: str  # transcript.Carry at the cursor
    excluded_reason: str | None
    updated_at: int


_COLUMNS = (
    "state_key, agent_id, session_id, session_key, session_path, mtime_ms, size, content_hash, "
    "line_count, last_content_line, at_end, carry, excluded_reason, updated_at"
)


class CheckpointStamp(NamedTuple):
    """The part of a checkpoint that decides "unchanged" and "exclusion already recorded"; the
    same field names as Checkpoint. A sweep reads one per session; the full row only for the
    few sessions whose stat moved."""

    mtime_ms: int
    size: int
    at_end: int  # 0/1 as stored
    content_hash: str  # as loaded by load_stamps, only its first character: "" still means empty
    excluded_reason: str | None


class CheckpointSummary(NamedTuple):
    """What `memoryd status` reads of a checkpoint."""

    session_id: str
    mtime_ms: int
    size: int
    excluded_reason: str | None
    updated_at: int


def load_stamps(conn: Connection, agent_id: str) -> dict[str, CheckpointStamp]:
    """state_key -> stamp of every checkpoint of `agent_id` (storage order: the caller keys by
    state_key and needs no sort).

    A quiet re-sweep reads one stamp per session, so this stays in C: of the hash only its first
    character is selected (the decisions test it for emptiness alone), and the tuples are built
    by `tuple.__new__` over plain rows instead of a Python-level constructor call per row."""
    rows = conn.execute(
        "SELECT state_key, mtime_ms, size, at_end, substr(content_hash, 1, 1), excluded_reason "
        "FROM ingest_checkpoints WHERE agent_id = ?",
        (agent_id,),
    ).fetchall()
    return dict(
        zip(map(itemgetter(0), rows), map(_new_stamp, map(itemgetter(slice(1, None)), rows)), strict=True)
    )


_new_stamp = partial(tuple.__new__, CheckpointStamp)


def checkpoint_token(conn: Connection) -> int:
    """The value every write to ingest_checkpoints replaces: equal tokens, equal checkpoints."""
    return int(conn.execute("SELECT token FROM ingest_checkpoint_token WHERE id = 1").fetchone()[0])


def _checkpoint(row: Sequence[Any]) -> Checkpoint:
    cp = Checkpoint._make(row)
    return cp._replace(at_end=bool(cp.at_end))


def load_checkpoints_by_key(conn: Connection, state_keys: Sequence[str]) -> dict[str, Checkpoint]:
    rows = select_in(
        conn, f"SELECT {_COLUMNS} FROM ingest_checkpoints WHERE state_key IN ({{marks}})", state_keys
    )
    return {cp.state_key: cp for cp in map(_checkpoint, rows)}


def load_checkpoints(conn: Connection, agent_id: str) -> dict[str, Checkpoint]:
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM ingest_checkpoints WHERE agent_id = ? ORDER BY state_key", (agent_id,)
    ).fetchall()
    return {cp.state_key: cp for cp in map(_checkpoint, rows)}


def checkpoint_summaries(conn: Connection) -> list[CheckpointSummary]:
    rows = conn.execute(
        "SELECT session_id, mtime_ms, size, excluded_reason, updated_at FROM ingest_checkpoints"
    ).fetchall()
    return [CheckpointSummary(*r) for r in rows]


def checkpoint_keys_of_sessions(conn: Connection, session_ids: Sequence[str]) -> list[tuple[str, str]]:
    """(state_key, session_id) of every checkpoint of these sessions (by the session index)."""
    rows = select_in(
        conn,
        "SELECT state_key, session_id FROM ingest_checkpoints WHERE session_id IN ({marks})",
        session_ids,
    )
    return [(r[0], r[1]) for r in rows]


def upsert_checkpoints(conn: Connection, checkpoints: Iterable[Checkpoint]) -> None:
    conn.executemany(
        f"INSERT OR REPLACE INTO ingest_checkpoints ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        [(*cp[:10], int(cp.at_end), *cp[11:]) for cp in checkpoints],
    )


def delete_checkpoints(conn: Connection, state_keys: Sequence[str]) -> int:
    return execute_in(conn, "DELETE FROM ingest_checkpoints WHERE state_key IN ({marks})", state_keys)


def recorded_session_keys(
    conn: Connection, session_ids: Sequence[str], session_keys: Sequence[str]
) -> list[tuple[str, str | None]]:
    """(session id, session key) of the checkpoints of these ids or keys (each by its index):
    what ingestion recorded of a session, also once the session store has lost it."""
    rows = select_in(
        conn,
        "SELECT session_id, session_key FROM ingest_checkpoints WHERE session_id IN ({marks})",
        session_ids,
    )
    rows += select_in(
        conn,
        "SELECT session_id, session_key FROM ingest_checkpoints WHERE session_key IN ({marks})",
        session_keys,
    )
    return [(r[0], r[1]) for r in rows]
