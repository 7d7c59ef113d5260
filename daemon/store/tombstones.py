"""Forgotten-session records (tombstones): written by a real purge, read by every admission path.

A record holds either the plain session id (forget) or `hmac:<hex>` of it (erasure), keyed by
a per-agent secret stored beside the database, never in it. `is_forgotten` checks both forms.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from memoryd import derivations
from memoryd.constants import FILE_MODE, TOMBSTONE_BATCH
from memoryd.fileio import atomic_temp, make_private_dirs, remove_leftover_temps
from memoryd.store.batched import execute_in, select_in
from memoryd.store.engine import Connection
from memoryd.store.exclusions import bump_exclusions
from memoryd.store.index_state import bump_revision

REASON_FORGOTTEN = "forgotten"
HASHED_PREFIX = derivations.HASHED_PREFIX


@dataclass(frozen=True, slots=True)
class Tombstone:
    session_id: str
    agent_id: str
    reason: str
    created_at: int


def load_or_create_secret(path: Path) -> bytes:
    """The per-agent key for hashed tombstones: 32 random bytes, mode 0600, created once."""
    try:
        data = path.read_bytes()
        if len(data) >= 32:
            return data
    except FileNotFoundError:
        pass
    make_private_dirs(path.parent)
    key = secrets.token_bytes(32)
    remove_leftover_temps(path.parent, of=path.name)
    with atomic_temp(path) as tmp:
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, FILE_MODE)
        try:
            os.write(fd, key)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # never replace a key another process created first
        except FileExistsError:
            pass
    return path.read_bytes()


hashed_session_ref = derivations.hashed_session_ref  # declared with every other derivation


def forgotten_ids(conn: Connection, session_ids: Iterable[str], secret: bytes | None = None) -> set[str]:
    """Which of `session_ids` are forgotten (plain or hashed record). One query per 500 ids."""
    ids = list(dict.fromkeys(session_ids))
    if not ids:
        return set()
    wanted: dict[str, str] = {sid: sid for sid in ids}
    if secret is not None:
        wanted.update({hashed_session_ref(secret, sid): sid for sid in ids})
    rows = select_in(
        conn, "SELECT session_id FROM memory_session_tombstones WHERE session_id IN ({marks})", list(wanted)
    )
    return {wanted[ref] for (ref,) in rows}


def is_forgotten(conn: Connection, session_id: str, secret: bytes | None = None) -> bool:
    return bool(forgotten_ids(conn, [session_id], secret))


def list_tombstones(conn: Connection) -> list[Tombstone]:
    rows = conn.execute(
        "SELECT session_id, agent_id, reason, created_at FROM memory_session_tombstones ORDER BY session_id"
    ).fetchall()
    return [Tombstone(*row) for row in rows]


def record_tombstones(
    conn: Connection, agent_id: str, session_refs: Iterable[str], now_ms: int, reason: str = REASON_FORGOTTEN
) -> int:
    """Insert records (ignoring ones that exist) and bump the index revision either way.

    The bump fences any index rebuild prepared before this purge, even on a repeated purge
    that inserts nothing (reference §6.3).
    """
    refs = list(dict.fromkeys(session_refs))
    inserted = 0
    for start in range(0, len(refs), TOMBSTONE_BATCH):
        batch = refs[start : start + TOMBSTONE_BATCH]
        before = conn.total_changes
        conn.executemany(
            "INSERT INTO memory_session_tombstones(session_id, agent_id, reason, created_at) "
            "VALUES (?, ?, ?, ?) ON CONFLICT(session_id) DO NOTHING",
            [(ref, agent_id, reason, now_ms) for ref in batch],
        )
        inserted += conn.total_changes - before
    bump_revision(conn)
    if inserted:
        bump_exclusions(conn)
    return inserted


def any_tombstone(conn: Connection) -> bool:
    """Whether the store has any forgotten-session record (most have none)."""
    return conn.execute("SELECT 1 FROM memory_session_tombstones LIMIT 1").fetchone() is not None


def delete_tombstones(conn: Connection, session_refs: Sequence[str]) -> int:
    """Remove these records (plain ids or `hmac:` refs); rows removed."""
    removed = execute_in(
        conn, "DELETE FROM memory_session_tombstones WHERE session_id IN ({marks})", session_refs
    )
    if removed:
        bump_exclusions(conn)
    return removed


def count_tombstones(conn: Connection, session_refs: Sequence[str]) -> int:
    """How many of these records exist."""
    rows = select_in(
        conn, "SELECT count(*) FROM memory_session_tombstones WHERE session_id IN ({marks})", session_refs
    )
    return sum(int(r[0]) for r in rows)
