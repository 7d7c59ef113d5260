"""Removing index rows: what a purge of chunks, or of whole indexed files, means.

`purge_chunks(conn, chunk_ids)` is what forget, erasure and the index's own republication
call, inside the caller's transaction. It deletes, for the given chunk ids, the chunks and
every row derived from them (store/index_chunks.py: FTS rows, vectors, provenance, recall
metadata), and bumps the index revision so any rebuild prepared before the purge is fenced off
and cached vector matrices are reloaded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from memoryd.store.embedding_cache import clear_cache
from memoryd.store.engine import Connection
from memoryd.store.index_chunks import FtsShape, chunk_ids_of_sources, delete_chunks
from memoryd.store.index_sources import delete_sources
from memoryd.store.index_state import bump_revision


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


# Indexed rows a whole-index rebuild rewrites in the time a secure delete takes for one purged
# row in one segment (each of its terms has a page rewritten in every segment that holds it):
# ~0.9 ms against ~0.035 ms on the peer bench's 1,500-session agent (7 segments, 7,690 rows:
# the two cost the same at ~40 purged rows).
REBUILD_ROWS_PER_ROW_SEGMENT = 25


def rebuild_is_cheaper(shape: FtsShape, purged: int) -> bool:
    """Whether purging `purged` FTS rows costs less as a merge of the whole index into one
    segment than as secure deletes. Either leaves none of their terms; a small purge of a large
    index stays at a cost that follows the purge. Pure."""
    return purged > 0 and purged * max(shape.segments, 1) * REBUILD_ROWS_PER_ROW_SEGMENT >= shape.rows


def purge_chunks(
    conn: Connection, chunk_ids: Iterable[str], *, rebuild_segments: bool = False
) -> PurgeCounts:
    """Delete the chunks `chunk_ids` and every row derived from them. Call inside a write txn.
    `rebuild_segments`: their terms leave the full-text index by one merge of all of it
    (store/index_chunks.py), when rebuild_is_cheaper says so."""
    removed = delete_chunks(conn, chunk_ids, rebuild_segments=rebuild_segments)
    if removed.chunks:
        bump_revision(conn)
    return PurgeCounts(*removed)


def remove_sources(conn: Connection, keys: Iterable[tuple[str, str]]) -> PurgeCounts:
    """Drop whole indexed files: their chunks (as purge_chunks) and their source rows."""
    pairs = list(dict.fromkeys(keys))
    counts = purge_chunks(conn, chunk_ids_of_sources(conn, pairs))
    return counts + PurgeCounts(sources=delete_sources(conn, pairs))


def clear_embedding_cache(conn: Connection) -> int:
    """The whole agent cache (recomputable), as the reference's newest forget does (§7.6)."""
    return clear_cache(conn)
