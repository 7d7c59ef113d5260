"""Removing index rows, set-based (perf-limits §5–6: one statement per table, never per row).

`purge_chunks(conn, chunk_ids)` is what forget, erasure and the index's own republication
call, inside the caller's transaction. It deletes, for the given chunk ids: the FTS rows (by
chunk rowid; contentless_delete + secure-delete leaves no tokens behind), the vectors, the
provenance and recall-metadata rows, then the chunks; and bumps the index revision so any
rebuild prepared before the purge is fenced off and cached vector matrices are reloaded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from daemon.store.db import Connection
from daemon.store.tombstones import bump_revision

_IDS = "temp.memory_index_purge_ids"
SELECT_BATCH = 500  # bound variables per IN (...) query


@dataclass(frozen=True, slots=True)
class PurgeCounts:
    chunks: int = 0
    fts_rows: int = 0
    vector_rows: int = 0
    provenance_rows: int = 0
    recall_rows: int = 0
    sources: int = 0

    def __add__(self, other: PurgeCounts) -> PurgeCounts:
        return PurgeCounts(
            self.chunks + other.chunks,
            self.fts_rows + other.fts_rows,
            self.vector_rows + other.vector_rows,
            self.provenance_rows + other.provenance_rows,
            self.recall_rows + other.recall_rows,
            self.sources + other.sources,
        )


def _load_ids(conn: Connection, chunk_ids: Iterable[str]) -> int:
    conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {_IDS.split('.')[1]} (id TEXT PRIMARY KEY) WITHOUT ROWID")
    conn.execute(f"DELETE FROM {_IDS}")
    conn.executemany(f"INSERT OR IGNORE INTO {_IDS}(id) VALUES (?)", ((cid,) for cid in chunk_ids))
    return int(conn.execute(f"SELECT count(*) FROM {_IDS}").fetchone()[0])


def purge_chunks(conn: Connection, chunk_ids: Iterable[str]) -> PurgeCounts:
    """Delete the chunks `chunk_ids` and every row derived from them. Call inside a write txn."""
    if not _load_ids(conn, chunk_ids):
        return PurgeCounts()
    rowids = f"SELECT c.rowid FROM memory_index_chunks c JOIN {_IDS} p ON p.id = c.id"
    fts = conn.execute(f"DELETE FROM memory_index_chunks_fts WHERE rowid IN ({rowids})").rowcount
    vectors = conn.execute(f"DELETE FROM memory_index_vectors WHERE chunk_rowid IN ({rowids})").rowcount
    provenance = conn.execute(
        f"DELETE FROM memory_index_chunk_provenance WHERE chunk_id IN (SELECT id FROM {_IDS})"
    ).rowcount
    recall = conn.execute(
        f"DELETE FROM memory_index_chunk_recall_metadata WHERE chunk_id IN (SELECT id FROM {_IDS})"
    ).rowcount
    chunks = conn.execute(f"DELETE FROM memory_index_chunks WHERE id IN (SELECT id FROM {_IDS})").rowcount
    conn.execute(f"DELETE FROM {_IDS}")
    if chunks:
        bump_revision(conn)
    return PurgeCounts(chunks, fts, vectors, provenance, recall)


def chunk_ids_of_sources(conn: Connection, keys: Iterable[tuple[str, str]]) -> list[str]:
    """Chunk ids of the given (path, source) pairs (by the (path, source) index).

    One `path IN (...)` query per source and SELECT_BATCH paths: a publication batch of 256
    files asked once per file before.
    """
    by_source: dict[str, list[str]] = {}
    for path, source in dict.fromkeys(keys):
        by_source.setdefault(source, []).append(path)
    ids: list[str] = []
    for source, paths in by_source.items():
        for start in range(0, len(paths), SELECT_BATCH):
            batch = paths[start : start + SELECT_BATCH]
            ids += [
                r[0]
                for r in conn.execute(
                    f"SELECT id FROM memory_index_chunks WHERE source = ? AND path IN ({','.join('?' * len(batch))})",
                    [source, *batch],
                )
            ]
    return ids


def remove_sources(conn: Connection, keys: Iterable[tuple[str, str]]) -> PurgeCounts:
    """Drop whole indexed files: their chunks (as purge_chunks) and their source rows."""
    pairs = list(dict.fromkeys(keys))
    counts = purge_chunks(conn, chunk_ids_of_sources(conn, pairs))
    removed = 0
    for path, source in pairs:
        removed += conn.execute(
            "DELETE FROM memory_index_sources WHERE path = ? AND source = ?", (path, source)
        ).rowcount
    return counts + PurgeCounts(sources=removed)


def clear_embedding_cache(conn: Connection) -> int:
    """The whole agent cache (recomputable), as the reference's newest forget does (§7.6)."""
    return int(conn.execute("DELETE FROM memory_embedding_cache").rowcount)
