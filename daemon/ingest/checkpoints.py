"""Ingestion checkpoints and seen-message hashes: the store side (reference §4.5).

* `ingest_checkpoints`, one row per session, keyed `<agent>:<sessionPath>`: the fingerprint the
  last scan saw, how far it got (lines consumed, their hash, the provenance carry) and, for a
  session kept out, the reason with an empty hash so that lifting the rule forces a rescan.
* `ingest_seen_hashes`, per scope `<agent>:<sessionId>`: hashes of messages already staged, at
  most MAX_TRACKED_MESSAGES_PER_SESSION newest kept, so a rewritten transcript is not re-staged.

Plain SQL; each function runs inside the caller's transaction (`Store.read` / `Store.write`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from operator import itemgetter
from typing import NamedTuple

from daemon.constants import MAX_TRACKED_MESSAGES_PER_SESSION, SQL_IN_BATCH
from daemon.ingest.plan import settled_fingerprint
from daemon.store.batched import execute_in, select_in
from daemon.store.db import Connection


def state_key(agent_id: str, session_path: str) -> str:
    return f"{agent_id}:{session_path}"


def seen_scope(agent_id: str, session_id: str) -> str:
    return f"{agent_id}:{session_id}"


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


class StampSet(NamedTuple):
    """Every checkpoint stamp of one agent, and the fingerprint under which each settled session
    (fully scanned, not excluded, nothing left unread) counts as unchanged: a quiet re-sweep
    decides a session with one dict lookup and a tuple comparison, both in C."""

    stamps: Mapping[str, CheckpointStamp]
    settled: Mapping[str, tuple[int, int]]  # state_key -> (mtime_ms, size)


def stamp_set(stamps: Mapping[str, CheckpointStamp]) -> StampSet:
    settled = {key: fp for key, stamp in stamps.items() if (fp := settled_fingerprint(stamp)) is not None}
    return StampSet(stamps, settled)


# (database path, agent) -> (checkpoint token, stamps read at that token). The token changes
# with every write to ingest_checkpoints (a trigger, migration 2), so equal tokens mean equal
# stamps and a quiet re-sweep skips reading ~10k rows. Shared between the stores' threads:
# each entry is replaced whole, and a pair is always read in one transaction.
_stamp_cache: dict[tuple[str, str], tuple[int, StampSet]] = {}


def load_stamp_set(conn: Connection, db_path: str, agent_id: str) -> StampSet:
    """The agent's stamps, reusing the last ones read from this database while its checkpoint
    token holds. The mappings are shared: callers only read them."""
    token = conn.execute("SELECT token FROM ingest_checkpoint_token WHERE id = 1").fetchone()[0]
    key = (db_path, agent_id)
    cached = _stamp_cache.get(key)
    if cached is not None and cached[0] == token:
        return cached[1]
    stamps = stamp_set(load_stamps(conn, agent_id))
    _stamp_cache[key] = (token, stamps)
    return stamps


def load_checkpoints_by_key(conn: Connection, state_keys: Sequence[str]) -> dict[str, Checkpoint]:
    out: dict[str, Checkpoint] = {}
    for row in select_in(
        conn, f"SELECT {_COLUMNS} FROM ingest_checkpoints WHERE state_key IN ({{marks}})", state_keys
    ):
        cp = Checkpoint._make(row)
        out[cp.state_key] = cp._replace(at_end=bool(cp.at_end))
    return out


def load_checkpoints(conn: Connection, agent_id: str) -> dict[str, Checkpoint]:
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM ingest_checkpoints WHERE agent_id = ? ORDER BY state_key", (agent_id,)
    ).fetchall()
    out = {}
    for row in rows:
        cp = Checkpoint._make(row)
        out[cp.state_key] = cp._replace(at_end=bool(cp.at_end))
    return out


def upsert_checkpoints(conn: Connection, checkpoints: Iterable[Checkpoint]) -> None:
    conn.executemany(
        f"INSERT OR REPLACE INTO ingest_checkpoints ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        [(*cp[:10], int(cp.at_end), *cp[11:]) for cp in checkpoints],
    )


def delete_checkpoints(conn: Connection, state_keys: Sequence[str]) -> int:
    return execute_in(conn, "DELETE FROM ingest_checkpoints WHERE state_key IN ({marks})", state_keys)


def load_seen(conn: Connection, scopes: Sequence[str]) -> dict[str, set[str]]:
    """Seen hashes of the given scopes (every scope present in the result, possibly empty)."""
    out: dict[str, set[str]] = {scope: set() for scope in scopes}
    for start in range(0, len(scopes), SQL_IN_BATCH):
        batch = list(scopes[start : start + SQL_IN_BATCH])
        marks = ",".join("?" * len(batch))
        for scope, digest in conn.execute(
            f"SELECT scope, hash FROM ingest_seen_hashes WHERE scope IN ({marks})", batch
        ):
            out[scope].add(digest)
    return out


def add_seen(
    conn: Connection, new_hashes: Mapping[str, Sequence[str]], keep: int = MAX_TRACKED_MESSAGES_PER_SESSION
) -> None:
    """Record newly staged hashes per scope (in staging order) and keep only the newest `keep`."""
    rows: list[tuple[str, str, int]] = []
    trims: list[tuple[str, int]] = []
    for scope, hashes in new_hashes.items():
        if not hashes:
            continue
        count, top = conn.execute(
            "SELECT COUNT(*), COALESCE(MAX(seq), 0) FROM ingest_seen_hashes WHERE scope = ?", (scope,)
        ).fetchone()
        tail = list(hashes)[-keep:]  # older ones would be trimmed right away
        rows.extend((scope, digest, top + i + 1) for i, digest in enumerate(tail))
        newest = top + len(tail)
        if count + len(tail) > keep:
            trims.append((scope, newest - keep))
    conn.executemany(
        "INSERT INTO ingest_seen_hashes (scope, hash, seq) VALUES (?, ?, ?) "
        "ON CONFLICT(scope, hash) DO UPDATE SET seq = excluded.seq",
        rows,
    )
    conn.executemany("DELETE FROM ingest_seen_hashes WHERE scope = ? AND seq <= ?", trims)
