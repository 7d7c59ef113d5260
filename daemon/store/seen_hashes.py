"""Seen-message hashes (`ingest_seen_hashes`, reference §4.5): per scope `<agent>:<sessionId>`,
hashes of messages already staged, at most MAX_TRACKED_MESSAGES_PER_SESSION newest kept, so a
rewritten transcript is not re-staged.

Each function runs inside the caller's transaction (`Store.read` / `Store.write`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memoryd.constants import MAX_TRACKED_MESSAGES_PER_SESSION
from memoryd.store.batched import execute_in, select_in
from memoryd.store.engine import Connection


def load_seen(conn: Connection, scopes: Sequence[str]) -> dict[str, set[str]]:
    """Seen hashes of the given scopes (every scope present in the result, possibly empty)."""
    out: dict[str, set[str]] = {scope: set() for scope in scopes}
    for scope, digest in select_in(
        conn, "SELECT scope, hash FROM ingest_seen_hashes WHERE scope IN ({marks})", scopes
    ):
        out[scope].add(digest)
    return out


def seen_among(conn: Connection, pairs: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
    """Which (scope, hash) pairs are seen already (primary-key lookups): lines another sweep
    staged since this one read them. A scope with no hash at all (every session of a first
    sweep) costs one lookup, not one per message."""
    by_scope: dict[str, list[str]] = {}
    for scope, digest in pairs:
        by_scope.setdefault(scope, []).append(digest)
    out: set[tuple[str, str]] = set()
    for scope, digests in by_scope.items():
        if (
            conn.execute("SELECT 1 FROM ingest_seen_hashes WHERE scope = ? LIMIT 1", (scope,)).fetchone()
            is None
        ):
            continue
        for digest in digests:
            if conn.execute(
                "SELECT 1 FROM ingest_seen_hashes WHERE scope = ? AND hash = ?", (scope, digest)
            ).fetchone():
                out.add((scope, digest))
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


def existing_scopes(conn: Connection, scopes: Sequence[str]) -> list[str]:
    """Which of `scopes` have any seen hash (primary-key lookups)."""
    rows = select_in(conn, "SELECT DISTINCT scope FROM ingest_seen_hashes WHERE scope IN ({marks})", scopes)
    return [r[0] for r in rows]


def delete_scopes(conn: Connection, scopes: Sequence[str]) -> int:
    return execute_in(conn, "DELETE FROM ingest_seen_hashes WHERE scope IN ({marks})", scopes)
