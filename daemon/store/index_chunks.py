"""Indexed chunks and the rows derived from each (reference §2.2, §6): `memory_index_chunks`,
their provenance and recall metadata, their FTS5 rows and their vectors. Written and purged
together, set-based (perf-limits §5–6: one statement per table, never per row).

The FTS5 table reads its content from the chunks (migration 8): the view
`memory_index_chunks_search` gives each chunk's searched text, the chunk's without marker lines,
kept in `search_text` when it differs from `text`. It has secure-delete on, so a deleted row's
terms leave the index segments (a contentless table could only tombstone them: migration 6);
FTS5 reads those terms from the view, so a chunk's FTS row is deleted before the chunk. It is
keyed by the chunk's rowid, as are the vectors (store/index_vectors.py).

Each function runs inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from memoryd.store.batched import select_in
from memoryd.store.engine import Connection
from memoryd.store.pages import rows_sharing_pages

# Session kinds whose transcripts are never indexed, as the partial index
# idx_memory_index_chunk_provenance_internal (migration 1) names them; index/provenance.py's
# INTERNAL_SESSION_KINDS is the same set (a test holds them equal).
INTERNAL_KINDS = ("cron", "heartbeat")

# Row values as the INSERTs below bind them (plain tuples: one of each per chunk, built fast).
ChunkValues = tuple[int, str, str, str, int, int, str, str, str, str | None, str | None, int]
# rowid, id, path, source, start_line, end_line, hash, model, text, search_text (None: the same
# as text), session_id, updated_at
ProvenanceValues = tuple[str, str, str, int, str | None]
# chunk_id, origin_class, session_kind, observed_at, supersedes_key
RecallValues = tuple[str, int | None, str | None, str | None]
# chunk_id, importance, triggers (JSON), project_key
VectorValues = tuple[int, str, int, bytes]  # chunk rowid, model, dims, little-endian float32


class ChunkFacts(NamedTuple):
    """What forget plans with: a chunk, its provenance and whether its FTS row and vector exist."""

    rowid: int
    id: str
    path: str
    source: str
    text: str  # "" for transcript chunks: their text is never needed, so never copied
    session_id: str | None
    origin_class: str | None
    session_kind: str | None
    has_fts: bool
    has_vector: bool


class HitRow(NamedTuple):
    """A search candidate as the result shows it."""

    rowid: int
    path: str
    source: str
    start_line: int
    end_line: int
    text: str
    session_id: str | None
    origin_class: str | None
    session_kind: str | None
    observed_at: int | None
    chunk_id: str


class ChunksRemoved(NamedTuple):
    chunks: int = 0
    fts_rows: int = 0
    vector_rows: int = 0
    provenance_rows: int = 0
    recall_rows: int = 0


# --- writes ---------------------------------------------------------------------------------------


def next_chunk_rowid(conn: Connection) -> int:
    return int(conn.execute("SELECT coalesce(max(rowid), 0) + 1 FROM memory_index_chunks").fetchone()[0])


def insert_chunks(
    conn: Connection,
    chunks: Sequence[ChunkValues],
    provenance: Sequence[ProvenanceValues],
    recall: Sequence[RecallValues],
    vectors: Sequence[VectorValues],
) -> None:
    """Chunks first, then the rows that reference them: one statement per table. Each FTS row
    must be the text the view gives for its chunk (coalesce(search_text, text)): FTS5 reads
    that text back to delete the row's terms."""
    conn.executemany(
        "INSERT INTO memory_index_chunks(rowid, id, path, source, start_line, end_line, hash, model, text, "
        "search_text, session_id, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        chunks,
    )
    conn.executemany(
        "INSERT INTO memory_index_chunk_provenance(chunk_id, origin_class, session_kind, observed_at, "
        "supersedes_key) VALUES (?, ?, ?, ?, ?)",
        provenance,
    )
    conn.executemany(
        "INSERT INTO memory_index_chunk_recall_metadata(chunk_id, importance, triggers, project_key) "
        "VALUES (?, ?, ?, ?)",
        recall,
    )
    # Row by row, not INSERT … SELECT from the view: a statement of several rows opens a
    # statement savepoint, at which FTS5 flushes its pending terms into a segment of their own
    # (one per batch, then merged: 25% more time for a first sync).
    conn.executemany(
        "INSERT INTO memory_index_chunks_fts(rowid, text) VALUES (?, ?)",
        ((c[0], c[9] if c[9] is not None else c[8]) for c in chunks),
    )
    conn.executemany(
        "INSERT INTO memory_index_vectors(chunk_rowid, model, dims, embedding) VALUES (?, ?, ?, ?)", vectors
    )


def refresh_kept(
    conn: Connection,
    provenance: Sequence[ProvenanceValues],
    recall: Sequence[RecallValues],
    vectors: Sequence[VectorValues],
) -> int:
    """Bring the rows derived from chunks that a republication keeps (same id: same file, lines,
    text and model) up to date: provenance, recall metadata and vectors are recomputed by every
    run, and only the ones that differ are written. `recall` lists every kept chunk: those with
    no metadata as (id, None, None, None). Rows changed."""
    ids = [p[0] for p in provenance]
    old_provenance = {
        r[0]: tuple(r)
        for r in select_in(
            conn,
            "SELECT chunk_id, origin_class, session_kind, observed_at, supersedes_key "
            "FROM memory_index_chunk_provenance WHERE chunk_id IN ({marks})",
            ids,
        )
    }
    changed = [p for p in provenance if old_provenance.get(p[0]) != tuple(p)]
    conn.executemany(
        "INSERT INTO memory_index_chunk_provenance(chunk_id, origin_class, session_kind, observed_at, "
        "supersedes_key) VALUES (?, ?, ?, ?, ?) ON CONFLICT(chunk_id) DO UPDATE SET "
        "origin_class = excluded.origin_class, session_kind = excluded.session_kind, "
        "observed_at = excluded.observed_at, supersedes_key = excluded.supersedes_key",
        changed,
    )
    old_recall = {
        r[0]: tuple(r)
        for r in select_in(
            conn,
            "SELECT chunk_id, importance, triggers, project_key FROM memory_index_chunk_recall_metadata "
            "WHERE chunk_id IN ({marks})",
            [r[0] for r in recall],
        )
    }
    stale = [r for r in recall if old_recall.get(r[0], (r[0], None, None, None)) != tuple(r)]
    conn.executemany(
        "DELETE FROM memory_index_chunk_recall_metadata WHERE chunk_id = ?", ((r[0],) for r in stale)
    )
    conn.executemany(
        "INSERT INTO memory_index_chunk_recall_metadata(chunk_id, importance, triggers, project_key) "
        "VALUES (?, ?, ?, ?)",
        [r for r in stale if r[1:] != (None, None, None)],
    )
    vector_rows = conn.executemany(
        "INSERT INTO memory_index_vectors(chunk_rowid, model, dims, embedding) VALUES (?, ?, ?, ?) "
        "ON CONFLICT(chunk_rowid) DO UPDATE SET model = excluded.model, dims = excluded.dims, "
        "embedding = excluded.embedding WHERE embedding IS NOT excluded.embedding",
        vectors,
    ).rowcount
    return len(changed) + len(stale) + max(vector_rows, 0)


_IDS = "temp.memory_index_purge_ids"
_FTS = "memory_index_chunks_fts"


def _load_ids(conn: Connection, chunk_ids: Iterable[str]) -> int:
    conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {_IDS.split('.')[1]} (id TEXT PRIMARY KEY) WITHOUT ROWID")
    conn.execute(f"DELETE FROM {_IDS}")
    conn.executemany(f"INSERT OR IGNORE INTO {_IDS}(id) VALUES (?)", ((cid,) for cid in chunk_ids))
    return int(conn.execute(f"SELECT count(*) FROM {_IDS}").fetchone()[0])


def delete_chunks(
    conn: Connection, chunk_ids: Iterable[str], *, rebuild_segments: bool = False
) -> ChunksRemoved:
    """Delete these chunks and every row derived from them: the FTS rows first (by chunk rowid;
    FTS5 reads their terms from the chunks, and with secure-delete on the terms leave the
    segments: migrations 6 and 8), then vectors, provenance and recall rows, then the chunks.
    The ids go through a temporary table: one statement per table.
    With `rebuild_segments`, the terms leave the segments by a merge of the whole index
    instead (_delete_fts_rebuilding)."""
    if not _load_ids(conn, chunk_ids):
        return ChunksRemoved()
    rowids = f"SELECT c.rowid FROM memory_index_chunks c JOIN {_IDS} p ON p.id = c.id"
    if rebuild_segments:
        fts = _delete_fts_rebuilding(conn, rowids)
    else:
        fts = conn.execute(f"DELETE FROM {_FTS} WHERE rowid IN ({rowids})").rowcount
    vectors = conn.execute(f"DELETE FROM memory_index_vectors WHERE chunk_rowid IN ({rowids})").rowcount
    provenance = conn.execute(
        f"DELETE FROM memory_index_chunk_provenance WHERE chunk_id IN (SELECT id FROM {_IDS})"
    ).rowcount
    recall = conn.execute(
        f"DELETE FROM memory_index_chunk_recall_metadata WHERE chunk_id IN (SELECT id FROM {_IDS})"
    ).rowcount
    chunks = conn.execute(f"DELETE FROM memory_index_chunks WHERE id IN (SELECT id FROM {_IDS})").rowcount
    conn.execute(f"DELETE FROM {_IDS}")
    return ChunksRemoved(chunks, fts, vectors, provenance, recall)


def _delete_fts_rebuilding(conn: Connection, rowids: str) -> int:
    """Delete the FTS rows `rowids` (an SQL query) with secure-delete off, then merge every
    segment into one. Off, a delete writes its terms as delete markers instead of rewriting a
    page of each term in every segment; the merge applies the markers, so the purged rows'
    entries are written into no new segment, and the old segments' blocks are deleted (zeroed
    by the secure_delete pragma). Secure-delete is on again before the caller's transaction
    ends, whatever happens (a failure rolls back all of it)."""
    conn.execute(f"INSERT INTO {_FTS}({_FTS}, rank) VALUES ('secure-delete', 0)")
    try:
        deleted = int(conn.execute(f"DELETE FROM {_FTS} WHERE rowid IN ({rowids})").rowcount)
        conn.execute(f"INSERT INTO {_FTS}({_FTS}) VALUES ('optimize')")
    finally:
        conn.execute(f"INSERT INTO {_FTS}({_FTS}, rank) VALUES ('secure-delete', 1)")
    return deleted


class FtsShape(NamedTuple):
    """What a purge of FTS rows costs either way (daemon/index/purge.py)."""

    rows: int
    segments: int


def fts_shape(conn: Connection) -> FtsShape:
    """Rows of the full-text index and its segments (each has at least one leaf in `_idx`); both
    read from small tables, not the segment blocks."""
    rows = conn.execute(f"SELECT count(*) FROM {_FTS}_docsize").fetchone()[0]
    segments = conn.execute(f"SELECT count(DISTINCT segid) FROM {_FTS}_idx").fetchone()[0]
    return FtsShape(int(rows), int(segments))


# A chunk's stored text (a lower bound of its cell size; daemon/store/pages.py).
_CHUNK_BYTES = (
    "length(id) + length(path) + length(source) + length(hash) + length(model) + length(text) "
    "+ coalesce(length(search_text), 0)"
)
# Copies of the rewritten chunks and of every row derived from them, in the same column order
# (temp_store is memory: they never reach a file).
_COPIES = {
    "memory_index_chunks": "SELECT * FROM memory_index_chunks WHERE rowid IN ({rowids})",
    "memory_index_chunk_provenance": "SELECT * FROM memory_index_chunk_provenance WHERE chunk_id IN "
    "(SELECT id FROM memory_index_chunks WHERE rowid IN ({rowids}))",
    "memory_index_chunk_recall_metadata": "SELECT * FROM memory_index_chunk_recall_metadata WHERE chunk_id IN "
    "(SELECT id FROM memory_index_chunks WHERE rowid IN ({rowids}))",
    "memory_index_vectors": "SELECT * FROM memory_index_vectors WHERE chunk_rowid IN ({rowids})",
}
_REWRITE_IDS = "temp.memory_index_rewrite_rowids"


def rowids_of_chunks(conn: Connection, chunk_ids: Sequence[str]) -> list[int]:
    return [
        r[0]
        for r in select_in(conn, "SELECT rowid FROM memory_index_chunks WHERE id IN ({marks})", chunk_ids)
    ]


def rewrite_chunk_pages(conn: Connection, purged: Sequence[int]) -> int:
    """Delete and reinsert, unchanged, the chunks that shared the purged chunks' pages, with
    every row derived from them, so no older copy of a purged chunk stays in a page's free gap
    (daemon/store/pages.py). The full-text table keeps no copy of the text (migration 8), and
    its index does not change: the rewritten chunks come back with the same rowid and text.
    The number of chunks rewritten; the cost follows the purged chunks, not the index."""
    around = rows_sharing_pages(conn, "memory_index_chunks", _CHUNK_BYTES, purged)
    if not around:
        return 0
    _set_rewrite_ids(conn, around)
    rowids = f"SELECT rid FROM {_REWRITE_IDS}"
    for table, select in _COPIES.items():
        copy = f"temp.rewrite_{table}"
        conn.execute(f"DROP TABLE IF EXISTS {copy}")
        conn.execute(f"CREATE TEMP TABLE rewrite_{table} AS {select.format(rowids=rowids)}")
    # The derived rows go with their chunk (ON DELETE CASCADE), and come back from their copies.
    conn.execute(f"DELETE FROM memory_index_chunks WHERE rowid IN ({rowids})")
    for table in _COPIES:
        conn.execute(f"INSERT INTO {table} SELECT * FROM temp.rewrite_{table}")
        conn.execute(f"DROP TABLE temp.rewrite_{table}")
    conn.execute(f"DELETE FROM {_REWRITE_IDS}")
    return len(around)


def _set_rewrite_ids(conn: Connection, rowids: Sequence[int]) -> None:
    conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {_REWRITE_IDS.split('.')[1]} (rid INTEGER PRIMARY KEY)")
    conn.execute(f"DELETE FROM {_REWRITE_IDS}")
    conn.executemany(f"INSERT INTO {_REWRITE_IDS}(rid) VALUES (?)", ((r,) for r in rowids))


# --- reads ----------------------------------------------------------------------------------------


def chunk_ids_of_sources(conn: Connection, keys: Iterable[tuple[str, str]]) -> list[str]:
    """Chunk ids of the given (path, source) pairs (by the (path, source) index): one
    `path IN (...)` query per source and batch of paths, not one per file."""
    by_source: dict[str, list[str]] = {}
    for path, source in dict.fromkeys(keys):
        by_source.setdefault(source, []).append(path)
    ids: list[str] = []
    for source, paths in by_source.items():
        ids += [
            r[0]
            for r in select_in(
                conn,
                "SELECT id FROM memory_index_chunks WHERE source = ? AND path IN ({marks})",
                paths,
                before=(source,),
            )
        ]
    return ids


def chunks_of_sources(conn: Connection, keys: Iterable[tuple[str, str]]) -> dict[str, tuple[int, str | None]]:
    """Chunk id -> (rowid, session_id) of the given (path, source) pairs, as chunk_ids_of_sources."""
    by_source: dict[str, list[str]] = {}
    for path, source in dict.fromkeys(keys):
        by_source.setdefault(source, []).append(path)
    found: dict[str, tuple[int, str | None]] = {}
    for source, paths in by_source.items():
        for cid, rowid, session_id in select_in(
            conn,
            "SELECT id, rowid, session_id FROM memory_index_chunks WHERE source = ? AND path IN ({marks})",
            paths,
            before=(source,),
        ):
            found[cid] = (rowid, session_id)
    return found


def orphan_chunk_files(conn: Connection) -> list[tuple[str, str, str | None]]:
    """(path, source, session_id) of chunks without a source row (an interrupted older run)."""
    return conn.execute(
        "SELECT DISTINCT c.path, c.source, c.session_id FROM memory_index_chunks c "
        "WHERE NOT EXISTS (SELECT 1 FROM memory_index_sources s WHERE s.path = c.path AND s.source = c.source)"
    ).fetchall()


def hit_rows(conn: Connection, rowids: Sequence[int]) -> dict[int, HitRow]:
    """The chunks among `rowids` (gone ones are absent), with their provenance."""
    rows = select_in(
        conn,
        "SELECT c.rowid, c.path, c.source, c.start_line, c.end_line, c.text, c.session_id, "
        "p.origin_class, p.session_kind, p.observed_at, c.id FROM memory_index_chunks c "
        "LEFT JOIN memory_index_chunk_provenance p ON p.chunk_id = c.id WHERE c.rowid IN ({marks})",
        rowids,
    )
    return {r[0]: HitRow(*r) for r in rows}


def rowids_in_file_containing(conn: Connection, path: str, needle: str) -> list[int]:
    """Rowids of one memory file's chunks whose text contains `needle` (the path's index: a
    scan of that file's chunks only)."""
    rows = conn.execute(
        "SELECT rowid FROM memory_index_chunks WHERE path = ? AND source = 'memory' AND instr(text, ?) > 0",
        (path, needle),
    ).fetchall()
    return sorted(r[0] for r in rows)


def rowids_of_chunk_ids(conn: Connection, chunk_ids: Sequence[str]) -> list[int]:
    """Rowids of the chunks with these ids (the id's unique index)."""
    rows = select_in(conn, "SELECT rowid FROM memory_index_chunks WHERE id IN ({marks})", chunk_ids)
    return sorted(r[0] for r in rows)


_FACTS = """c.rowid, c.id, c.path, c.source, {text}, c.session_id, p.origin_class, p.session_kind,
  EXISTS (SELECT 1 FROM memory_index_chunks_fts_docsize f WHERE f.id = c.rowid),
  EXISTS (SELECT 1 FROM memory_index_vectors v WHERE v.chunk_rowid = c.rowid)"""
_FACTS_FROM = """SELECT {facts}
FROM memory_index_chunks c LEFT JOIN memory_index_chunk_provenance p ON p.chunk_id = c.id"""
_WITH_TEXT = _FACTS_FROM.format(facts=_FACTS.format(text="c.text"))
_WITHOUT_TEXT = _FACTS_FROM.format(facts=_FACTS.format(text="''"))
# Chunks of internal sessions, driven by the partial index of the same WHERE: the cost follows
# those chunks, not every session chunk. The terms are literals so the planner can prove the
# index applies.
_INTERNAL_PROVENANCE = " OR ".join(
    ["p.origin_class = 'system'"] + [f"p.session_kind = '{k}'" for k in INTERNAL_KINDS]
)
STALE_CHUNKS_SQL = f"""SELECT {_FACTS.format(text="''")}
FROM memory_index_chunk_provenance p CROSS JOIN memory_index_chunks c ON c.id = p.chunk_id
WHERE ({_INTERNAL_PROVENANCE}) AND c.source = 'sessions'"""


def _facts(rows: Iterable[Sequence[Any]]) -> list[ChunkFacts]:
    return [ChunkFacts(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], bool(r[8]), bool(r[9])) for r in rows]


def memory_chunk_facts(conn: Connection) -> list[ChunkFacts]:
    """Every chunk of a memory file, with its text."""
    return _facts(conn.execute(f"{_WITH_TEXT} WHERE c.source = 'memory'"))


def session_chunk_facts(conn: Connection, session_ids: Sequence[str]) -> list[ChunkFacts]:
    """Chunks of these sessions (by the session index), without their text."""
    return _facts(select_in(conn, _WITHOUT_TEXT + " WHERE c.session_id IN ({marks})", session_ids))


def session_chunk_facts_with_text(conn: Connection, session_ids: Sequence[str]) -> list[ChunkFacts]:
    """Transcript chunks of these sessions (by the session index), with their text."""
    return _facts(
        select_in(
            conn, _WITH_TEXT + " WHERE c.session_id IN ({marks}) AND c.source = 'sessions'", session_ids
        )
    )


def path_chunk_facts(conn: Connection, paths: Sequence[str]) -> list[ChunkFacts]:
    """Chunks indexed under these paths, without their text."""
    return _facts(select_in(conn, _WITHOUT_TEXT + " WHERE c.path IN ({marks})", paths))


def stale_internal_chunk_facts(conn: Connection) -> list[ChunkFacts]:
    """Transcript chunks of internal sessions (never indexable), without their text."""
    return _facts(conn.execute(STALE_CHUNKS_SQL))
