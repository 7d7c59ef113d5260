"""Publishing prepared files: write transactions, called under the workspace lock.

For each file, inside the transaction and before anything of it is written (reference §6.3):
1. rebuild fence: a `--force` rebuild carries the index revision it was prepared at; if a
   purge (or anything else) moved it, the rebuild is discarded;
2. `memory` files are re-hashed from disk; a different hash means the prepared chunks are a
   stale snapshot ("source changed while indexing"): nothing is written, retried later;
3. `sessions` are re-checked against the forgotten-session records of the live store; a
   session forgotten while it was being prepared publishes nothing (and any rows it still
   has are removed).
Then, for the files that pass: clear their old rows, write chunks, provenance, recall
metadata, FTS rows, vectors and embedding-cache rows, upsert the source rows and bump the
revision — in the same transaction, so all of it or none of it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, NamedTuple

from memoryd import derivations
from memoryd.index.chunking import Chunk
from memoryd.index.provenance import ChunkProvenance
from memoryd.index.purge import PurgeCounts, purge_chunks, remove_sources
from memoryd.index.sources import file_hash
from memoryd.store.db import Connection
from memoryd.store.embedding_cache import CacheValues, cache_embeddings
from memoryd.store.exclusions import exclusion_generation
from memoryd.store.index_chunks import (
    ChunkValues,
    ProvenanceValues,
    RecallValues,
    VectorValues,
    chunks_of_sources,
    insert_chunks,
    next_chunk_rowid,
    refresh_kept,
)
from memoryd.store.index_sources import SourceRecord, upsert_sources
from memoryd.store.index_state import bump_revision, current_revision
from memoryd.store.tombstones import forgotten_ids


# Tuples: a large run's prepared files cross the preparation worker's pipe (prepare_worker.py).
class PreparedChunk(NamedTuple):
    chunk: Chunk
    provenance: ChunkProvenance
    vector: bytes | None = None  # little-endian float32


class PreparedFile(NamedTuple):
    path: str
    source: str  # "memory" | "sessions"
    hash: str
    mtime: float  # Unix ms
    size: int
    session_id: str | None
    chunks: tuple[PreparedChunk, ...]
    abs_path: Path | None = None  # memory files: re-hashed before publication


@dataclass(frozen=True, slots=True)
class PublishContext:
    model: str
    provider: str
    provider_key: str
    secret: bytes | None
    now_ms: int
    exclusions: int  # the exclusion set's generation the files were prepared under
    rebuild_revision: int | None = None  # set for --force: the revision it was prepared at


Status = Literal["published", "changed", "forgotten", "fenced"]


@dataclass(frozen=True, slots=True)
class FileOutcome:
    path: str
    source: str
    session_id: str | None
    status: Status
    reason: str = ""


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    revision: int  # after the transaction
    files: tuple[FileOutcome, ...]
    chunks_written: int = 0
    removed: PurgeCounts = field(default_factory=PurgeCounts)
    cache_rows: int = 0


REASON_CHANGED = "memory source changed while indexing; retried on the next run"
REASON_EXCLUSIONS = "a purge committed while this transcript was indexed; retried on the next run"


def chunk_id(source: str, path: str, chunk: Chunk, model: str) -> str:
    return derivations.chunk_id(f"{source}:{path}:{chunk.start_line}:{chunk.end_line}:{chunk.hash}:{model}")


def publish_files(conn: Connection, batch: Sequence[PreparedFile], ctx: PublishContext) -> BatchOutcome:
    """Publish a batch of prepared files in the caller's transaction.

    Each file is checked on its own and is written whole or not at all; the batch shares one
    transaction because FTS5 writes a new index segment per transaction, and a commit per
    small transcript made publication ~10x slower than the FTS insert itself.
    """
    outcome, sources = _publish_batch(conn, batch, ctx)
    return replace(outcome, revision=_record_sources(conn, sources))


@dataclass(frozen=True, slots=True)
class StreamOutcome:
    batches: tuple[BatchOutcome, ...]
    revision: int  # after the transaction
    ended: bool  # the stream had no batch left


def publish_stream(
    conn: Connection,
    next_batch: Callable[[], Sequence[PreparedFile] | None],
    ctx: PublishContext,
    max_chunks: int,
) -> StreamOutcome:
    """Publish the batches `next_batch` returns (it blocks until one is ready; None: the stream
    ended) in the caller's transaction, until the batches taken hold `max_chunks` chunks.

    Each batch is checked and written as by publish_files. One transaction for batches that
    arrive one by one: a commit per batch, and FTS5's segment per commit, cost more than the
    insert itself once a run has more than a few (FTS5 then merges the segments it just
    wrote); the source rows, whose revision triggers make FTS5 flush, are written once at the
    end for every batch.
    """
    batches: list[BatchOutcome] = []
    sources: list[SourceRecord] = []
    chunks = 0
    ended = False
    while chunks < max_chunks:
        batch = next_batch()
        if batch is None:
            ended = True
            break
        outcome, records = _publish_batch(conn, batch, ctx)
        if ctx.rebuild_revision is not None:  # the next batch is fenced against this one's writes
            ctx = replace(ctx, rebuild_revision=outcome.revision)
        batches.append(outcome)
        sources += records
        chunks += sum(len(f.chunks) for f in batch)
    return StreamOutcome(tuple(batches), _record_sources(conn, sources), ended)


def _record_sources(conn: Connection, sources: Sequence[SourceRecord]) -> int:
    """Upsert the published files' source rows and bump the revision; the revision after."""
    if not sources:
        return current_revision(conn)
    # Source rows last: their revision triggers open a statement savepoint, which makes FTS5
    # flush its pending rows; one flush for the transaction instead of one per file.
    upsert_sources(conn, sources)
    return bump_revision(conn)


def _publish_batch(
    conn: Connection, batch: Sequence[PreparedFile], ctx: PublishContext
) -> tuple[BatchOutcome, list[SourceRecord]]:
    """Check and write a batch, all but its source rows; the outcome (revision: the current
    one) and the source rows of the files published."""
    revision = current_revision(conn)
    if ctx.rebuild_revision is not None and revision != ctx.rebuild_revision:
        reason = (
            f"index revision moved from {ctx.rebuild_revision} to {revision} while the rebuild was "
            "prepared (a purge ran); rebuild discarded, rerun it"
        )
        fenced = tuple(FileOutcome(f.path, f.source, f.session_id, "fenced", reason) for f in batch)
        return BatchOutcome(revision, fenced), []
    forgotten = forgotten_ids(
        conn, [f.session_id for f in batch if f.source == "sessions" and f.session_id], ctx.secret
    )
    # Transcripts were read under an exclusion set a purge has changed since (an erased sender's
    # turns may be in them): none is published; the next run reads them under the new set.
    excluded_since = exclusion_generation(conn) != ctx.exclusions
    outcomes: list[FileOutcome] = []
    accepted: list[PreparedFile] = []
    stale_keys: list[tuple[str, str]] = []
    for f in batch:
        if f.source == "memory" and (f.abs_path is None or file_hash(f.abs_path) != f.hash):
            outcomes.append(FileOutcome(f.path, f.source, f.session_id, "changed", REASON_CHANGED))
        elif f.source == "sessions" and (f.session_id is None or f.session_id in forgotten):
            stale_keys.append((f.path, f.source))  # whatever it still has goes too
            outcomes.append(
                FileOutcome(
                    f.path,
                    f.source,
                    f.session_id,
                    "forgotten",
                    f"session {f.session_id} was forgotten while indexing; nothing of it was published",
                )
            )
        elif f.source == "sessions" and excluded_since:
            outcomes.append(FileOutcome(f.path, f.source, f.session_id, "changed", REASON_EXCLUSIONS))
        else:
            accepted.append(f)
            outcomes.append(FileOutcome(f.path, f.source, f.session_id, "published"))
    removed = remove_sources(conn, stale_keys) if stale_keys else PurgeCounts()
    # A chunk whose id is indexed already (same file, lines, text and model) keeps its rows: a
    # rebuild or a grown transcript rewrites only what changed, instead of purging every old
    # chunk (each FTS delete with secure-delete rewrites the pages of all its terms) and
    # inserting it again.
    old = chunks_of_sources(conn, [(f.path, f.source) for f in accepted])
    keep = _kept(accepted, old, ctx.model)
    stale = [cid for cid in old if cid not in keep]
    if stale:  # a first index run has nothing to clear
        removed += purge_chunks(conn, stale)
    written, cache_rows = _write_chunks(conn, accepted, ctx, keep)
    sources = [
        SourceRecord(f.path, f.source, f.hash, f.mtime, f.size, f.session_id, ctx.model) for f in accepted
    ]
    outcome = BatchOutcome(current_revision(conn), tuple(outcomes), written, removed, cache_rows)
    return outcome, sources


def _kept(
    files: Sequence[PreparedFile], old: dict[str, tuple[int, str | None]], model: str
) -> dict[str, int]:
    """Chunk id -> rowid of the prepared chunks already indexed, for the same session."""
    keep: dict[str, int] = {}
    if not old:
        return keep
    for prepared in files:
        for item in prepared.chunks:
            cid = chunk_id(prepared.source, prepared.path, item.chunk, model)
            found = old.get(cid)
            if found is not None and found[1] == prepared.session_id:
                keep[cid] = found[0]
    return keep


def _write_chunks(
    conn: Connection, files: Sequence[PreparedFile], ctx: PublishContext, keep: dict[str, int]
) -> tuple[int, int]:
    """Insert the chunks not in `keep` with their rows; refresh the derived rows of those in it."""
    next_rowid = next_chunk_rowid(conn)
    chunks: list[ChunkValues] = []
    provenance: list[ProvenanceValues] = []
    recall: list[RecallValues] = []
    vectors: list[VectorValues] = []
    cache: list[CacheValues] = []
    kept_provenance: list[ProvenanceValues] = []
    kept_recall: list[RecallValues] = []
    kept_vectors: list[VectorValues] = []
    for prepared in files:
        seen: set[str] = set()
        for item in prepared.chunks:
            c = item.chunk
            cid = chunk_id(prepared.source, prepared.path, c, ctx.model)
            if cid in seen:  # identical pieces of one over-long line: one row is enough
                continue
            seen.add(cid)
            p = item.provenance
            kept_rowid = keep.get(cid)
            if kept_rowid is not None:
                a = c.annotations
                kept_provenance.append((cid, p.origin_class, p.session_kind, p.observed_at, p.supersedes_key))
                kept_recall.append(
                    (cid, a.importance, json.dumps(list(a.triggers)) if a.triggers else None, a.project_key)
                )
                if item.vector is not None:
                    dims = len(item.vector) // 4
                    kept_vectors.append((kept_rowid, ctx.model, dims, item.vector))
                    cache.append(
                        (ctx.provider, ctx.model, ctx.provider_key, c.hash, item.vector, dims, ctx.now_ms)
                    )
                continue
            rowid = next_rowid
            next_rowid += 1
            chunks.append(
                (
                    rowid,
                    cid,
                    prepared.path,
                    prepared.source,
                    c.start_line,
                    c.end_line,
                    c.hash,
                    ctx.model,
                    c.text,
                    c.search_text if c.search_text != c.text else None,
                    prepared.session_id,
                    ctx.now_ms,
                )
            )
            provenance.append((cid, p.origin_class, p.session_kind, p.observed_at, p.supersedes_key))
            if not c.annotations.empty:
                a = c.annotations
                recall.append(
                    (cid, a.importance, json.dumps(list(a.triggers)) if a.triggers else None, a.project_key)
                )
            if item.vector is not None:
                dims = len(item.vector) // 4
                vectors.append((rowid, ctx.model, dims, item.vector))
                cache.append(
                    (ctx.provider, ctx.model, ctx.provider_key, c.hash, item.vector, dims, ctx.now_ms)
                )
    insert_chunks(conn, chunks, provenance, recall, vectors)
    if kept_provenance:
        refresh_kept(conn, kept_provenance, kept_recall, kept_vectors)
    # Written in the same transaction as the chunks: a prepared batch that is refused above
    # cannot leave cached embeddings of purged text behind (reference §6.3 point 4).
    cache_embeddings(conn, cache)
    return len(chunks), len(cache)


def apply_removals(
    conn: Connection, keys: list[tuple[str, str]], rebuild_revision: int | None
) -> tuple[PurgeCounts | None, int]:
    """Remove unwanted sources in one transaction; (None, revision) if the rebuild fence moved."""
    revision = current_revision(conn)
    if rebuild_revision is not None and revision != rebuild_revision:
        return None, revision
    counts = remove_sources(conn, keys)
    return counts, current_revision(conn)
