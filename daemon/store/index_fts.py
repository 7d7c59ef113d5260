"""Full-text queries over `memory_index_chunks_fts` (FTS5, reference §6): the unranked and
bm25-ranked matches search builds its candidates from (perf-limits §7). The MATCH expression is
the caller's (index/search.py quotes every word).

Each function runs inside the caller's transaction.
"""

from __future__ import annotations

from memoryd.store.engine import Connection

_MATCH = "SELECT rowid{cols} FROM memory_index_chunks_fts WHERE memory_index_chunks_fts MATCH ?"


def count_matches(conn: Connection, match: str, limit: int) -> int:
    """Documents matching, counted up to `limit` (cheap at any size)."""
    return int(
        conn.execute(f"SELECT count(*) FROM ({_MATCH.format(cols='')} LIMIT ?)", (match, limit)).fetchone()[0]
    )


def ranked_newest(conn: Connection, match: str, limit: int) -> list[tuple[int, float]]:
    """(rowid, bm25) of the newest `limit` matches."""
    return conn.execute(
        f"{_MATCH.format(cols=', bm25(memory_index_chunks_fts)')} ORDER BY rowid DESC LIMIT ?", (match, limit)
    ).fetchall()


def unranked_newest(conn: Connection, match: str, limit: int) -> list[tuple[int, float]]:
    """(rowid, 0.0) of the newest `limit` matches: no bm25, which counts every document of
    every word first."""
    return conn.execute(
        f"{_MATCH.format(cols=', 0.0')} ORDER BY rowid DESC LIMIT ?", (match, limit)
    ).fetchall()


def matches_from(conn: Connection, match: str, low_rowid: int) -> set[int]:
    """Rowids from `low_rowid` up that match."""
    return {r[0] for r in conn.execute(f"{_MATCH.format(cols='')} AND rowid >= ?", (match, low_rowid))}
