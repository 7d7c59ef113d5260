"""Suppressed claims (`suppressed_claims`): a claim forgotten from one session (`forget --entry`,
`--match`) that ingestion, backfill and dreaming never stage or promote again from it.

A row is (claim hash, session id); the claim hash is `derivations.claim_hash` of the staged
snippet, the one a staged entry key carries (`memory:claim:<hash>`). Recording rows changes the
exclusion set (store/exclusions.py), so a producer that read before publishes nothing it read.
The rows of a session go when that session is forgotten or erased.

Each function runs inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import orjson

from memoryd.constants import DAY_MS
from memoryd.store.batched import execute_in, select_in
from memoryd.store.engine import Connection
from memoryd.store.exclusions import bump_exclusions

Pair = tuple[str, str]  # (claim hash, session id)


def record_suppressions(conn: Connection, pairs: Iterable[Pair], now_ms: int) -> int:
    """Insert the pairs (ignoring ones that exist); rows added. Only the day is kept."""
    rows = sorted(set(pairs))
    if not rows:
        return 0
    day = now_ms - now_ms % DAY_MS
    before = conn.total_changes
    conn.executemany(
        "INSERT INTO suppressed_claims(claim_hash, session_id, created_at) VALUES (?, ?, ?) "
        "ON CONFLICT(claim_hash, session_id) DO NOTHING",
        [(claim, sid, day) for claim, sid in rows],
    )
    added = conn.total_changes - before
    if added:
        bump_exclusions(conn)
    return added


def any_suppression(conn: Connection) -> bool:
    """Whether the store has any suppressed claim (most have none: one probe, then no lookups)."""
    return conn.execute("SELECT 1 FROM suppressed_claims LIMIT 1").fetchone() is not None


def suppressed_among(conn: Connection, pairs: Iterable[Pair]) -> set[Pair]:
    """Which of `pairs` are suppressed (one statement, by the primary key)."""
    wanted = sorted(set(pairs))
    if not wanted or not any_suppression(conn):
        return set()
    rows = conn.execute(
        "SELECT s.claim_hash, s.session_id FROM json_each(?) j JOIN suppressed_claims s "
        "ON s.claim_hash = j.value ->> 0 AND s.session_id = j.value ->> 1",
        (orjson.dumps(wanted).decode(),),
    ).fetchall()
    return {(claim, sid) for claim, sid in rows}


def suppressions_of_sessions(conn: Connection, session_ids: Sequence[str]) -> list[Pair]:
    """The suppressed pairs of these sessions, by the session index."""
    rows = select_in(
        conn,
        "SELECT claim_hash, session_id FROM suppressed_claims WHERE session_id IN ({marks}) "
        "ORDER BY session_id, claim_hash",
        sorted(set(session_ids)),
    )
    return [(claim, sid) for claim, sid in rows]


def delete_suppressions_of_sessions(conn: Connection, session_ids: Sequence[str]) -> int:
    """Remove the rows of these sessions (forgotten or erased: their records take over); rows removed."""
    removed = execute_in(
        conn, "DELETE FROM suppressed_claims WHERE session_id IN ({marks})", sorted(set(session_ids))
    )
    if removed:
        bump_exclusions(conn)
    return removed


def suppressions_of_claims(conn: Connection, claims: Sequence[str]) -> list[Pair]:
    """The suppressed pairs of these claim hashes, by the primary key."""
    rows = select_in(
        conn,
        "SELECT claim_hash, session_id FROM suppressed_claims WHERE claim_hash IN ({marks}) "
        "ORDER BY claim_hash, session_id",
        sorted(set(claims)),
    )
    return [(claim, sid) for claim, sid in rows]
