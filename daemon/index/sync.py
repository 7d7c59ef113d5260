"""An index run (reference §6): prepare outside the lock, publish under it.

    report = await run_index_sync(rt, force=False)

`prepare_index` reads the memory files and transcripts, plans, chunks and embeds — slow
work, done without the workspace lock. `publish_index` takes the lock and publishes in
batched transactions, each file with the pre-publish checks of publish.py, so a purge that
ran meanwhile is never undone: a forgotten session publishes nothing, a changed memory file
is retried on the next run, and a `--force` rebuild prepared before a purge is discarded by
the revision fence. `--force` also removes the rows of forgotten and internal sessions
without reindexing them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import anyio

from daemon.agent_runtime import AgentRuntime
from daemon.errors import OperationFailed
from daemon.index.chunking import chunk_memory_file, chunk_session
from daemon.index.embedder import Embedder, make_embedder, model_name
from daemon.index.plan import REASON_GONE, IndexedSource, Note, SyncPlan, plan_sync
from daemon.index.provenance import ChunkProvenance, least_trusted, memory_file_origin, single_value
from daemon.index.publish import (
    PreparedChunk,
    PreparedFile,
    PublishContext,
    apply_removals,
    publish_files,
)
from daemon.index.report import IndexReport, SourceNote
from daemon.index.sources import MemoryFile, SessionRef, list_session_refs, read_memory_files
from daemon.index.transcript import render_transcript
from daemon.index.vectors import backend_for, to_blob
from daemon.markers import lineage_key, promotion_keys_in
from daemon.sessions.admission import policy_of
from daemon.store.db import Connection
from daemon.store.embedding_cache import cached_embeddings
from daemon.store.erased_senders import ErasedSenders, load_erased_senders
from daemon.store.index_chunks import orphan_chunk_files
from daemon.store.index_sources import all_sources
from daemon.store.index_state import current_revision, read_dirty, record_run
from daemon.store.origins import origins_for_entries
from daemon.store.tombstones import forgotten_ids

ProgressFn = Callable[[str, int, int], None]  # (phase, done, total)
REASON_SYSTEM_ONLY = "system-only transcript"
REASON_SOURCES = "index.sources does not include sessions"
# Files per publication transaction: enough to amortise a commit (and FTS5's per-transaction
# segment), small enough that the lock is released and re-checked rows stay few.
PUBLISH_BATCH_FILES = 256
PUBLISH_BATCH_CHUNKS = 20_000


@dataclass(frozen=True, slots=True)
class PreparedIndex:
    agent_id: str
    force: bool
    provider: str
    provider_key: str
    model: str
    revision: int  # the index revision the run was prepared at (the rebuild fence)
    files: tuple[PreparedFile, ...]
    removals: tuple[Note, ...]
    skipped: tuple[Note, ...]
    scanned: int
    unchanged: int
    embeddings_computed: int
    embeddings_cached: int
    warnings: tuple[str, ...]
    # The session source's revision before it was listed, when every listed transcript is
    # prepared (search then skips comparing them while the source stays at it); else None.
    sessions_revision: str | None = None
    partial: bool = False  # a live sync of some sessions: the others' state is left as it was


@dataclass(frozen=True, slots=True)
class _Snapshot:
    revision: int
    indexed: dict[tuple[str, str], IndexedSource]
    orphans: list[tuple[str, str, str | None]]
    forgotten: set[str]
    erased: ErasedSenders  # senders an erasure removed from shared sessions: their turns are not indexed


def _read_snapshot(conn: Connection, session_ids: list[str], secret: bytes | None, force: bool) -> _Snapshot:
    indexed = {(r.path, r.source): IndexedSource(*r) for r in all_sources(conn)}
    orphans: list[tuple[str, str, str | None]] = []
    if force:  # chunks without a source row (an interrupted older run) are swept by --force
        orphans = [(r[0], r[1], r[2]) for r in orphan_chunk_files(conn)]
    ids = set(session_ids) | {r.session_id for r in indexed.values() if r.session_id}
    ids |= {sid for _, _, sid in orphans if sid}
    return _Snapshot(
        current_revision(conn),
        indexed,
        orphans,
        forgotten_ids(conn, sorted(ids), secret),
        load_erased_senders(conn, secret),
    )


def _memory_chunks(
    f: MemoryFile, tokens: int, overlap: int, origins: dict[str, list[tuple[str, int]]]
) -> PreparedFile:
    path_origin = memory_file_origin(f.rel_path)
    out: list[PreparedChunk] = []
    for chunk in chunk_memory_file(f.rel_path, f.text, tokens, overlap):
        # A promoted entry is as trusted as the least trusted session it came from.
        entry_origins = [o for key in chunk.entry_keys for o in origins.get(key, [])]
        origin = least_trusted(c for c, _ in entry_origins) if entry_origins else path_origin
        supersedes = single_value(lineage_key(line) for line in chunk.text.splitlines())
        out.append(PreparedChunk(chunk, ChunkProvenance(origin, "unknown", int(f.stat.mtime_ms), supersedes)))
    return PreparedFile(
        f.rel_path, "memory", f.hash, f.stat.mtime_ms, f.stat.size, None, tuple(out), f.abs_path
    )


def _session_chunks(
    rt: AgentRuntime, ref: SessionRef, tokens: int, overlap: int, erased: ErasedSenders
) -> PreparedFile | tuple[PreparedFile, str]:
    """The prepared transcript; with the reason its text is not indexed, if it is not."""
    with rt.sessions.open_transcript(ref.target) as lines:
        rendered = render_transcript(lines, int(ref.stat.mtime_ms), erased.test_for(ref.session_id))
    # A system-only transcript is published as a source row without chunks: its old rows go,
    # and the index remembers it saw this version (search does not call it lagging).
    chunks = [] if rendered.system_only else chunk_session(rendered.lines, ref.session_kind, tokens, overlap)
    digest = f"{ref.stat.mtime_ms}:{ref.stat.size}:{len(rendered.lines)}"
    prepared = PreparedFile(
        ref.path,
        "sessions",
        digest,
        ref.stat.mtime_ms,
        ref.stat.size,
        ref.session_id,
        tuple(PreparedChunk(c, p) for c, p in chunks),
    )
    return (prepared, REASON_SYSTEM_ONLY) if rendered.system_only else prepared


def _chunk_all(
    rt: AgentRuntime,
    plan: SyncPlan,
    origins: dict[str, list[tuple[str, int]]],
    progress: ProgressFn | None,
    erased: ErasedSenders,
) -> tuple[list[PreparedFile], list[Note], list[str]]:
    cfg = rt.settings.index
    files: list[PreparedFile] = []
    skipped: list[Note] = []
    warnings: list[str] = []
    total = len(plan.memory) + len(plan.sessions)
    chunks = 0
    for f in plan.memory:
        files.append(_memory_chunks(f, cfg.chunk_tokens, cfg.chunk_overlap, origins))
        if progress:
            chunks += len(files[-1].chunks)
            progress("chunk", len(files), total)
            progress("chunks", chunks, 0)
    for ref in plan.sessions:
        try:
            result = _session_chunks(rt, ref, cfg.chunk_tokens, cfg.chunk_overlap, erased)
        except OperationFailed as exc:
            warnings.append(f"{ref.path}: {exc}; not indexed this run")
            continue
        if isinstance(result, tuple):
            result, reason = result
            skipped.append(Note(ref.path, "sessions", ref.session_id, reason))
        files.append(result)
        if progress:
            chunks += len(result.chunks)
            progress("chunk", len(files), total)
            progress("chunks", chunks, 0)
    return files, skipped, warnings


async def _embed(
    rt: AgentRuntime, embedder: Embedder, files: list[PreparedFile], progress: ProgressFn | None
) -> tuple[list[PreparedFile], int, int]:
    texts: dict[str, str] = {}
    for f in files:
        for item in f.chunks:
            texts.setdefault(item.chunk.hash, item.chunk.search_text)
    hashes = sorted(texts)
    cached = await rt.require_store().read(
        cached_embeddings, embedder.provider, embedder.model, embedder.provider_key, hashes
    )
    missing = [h for h in hashes if h not in cached]
    vectors = dict(cached)
    step = 256
    for start in range(0, len(missing), step):
        batch = missing[start : start + step]
        for h, vector in zip(batch, await embedder.embed([texts[h] for h in batch]), strict=True):
            vectors[h] = to_blob(vector)
        if progress:
            progress("embed", min(start + step, len(missing)), len(missing))
    out = [
        replace(f, chunks=tuple(replace(item, vector=vectors[item.chunk.hash]) for item in f.chunks))
        for f in files
    ]
    return out, len(missing), len(hashes) - len(missing)


async def prepare_index(
    rt: AgentRuntime,
    force: bool = False,
    progress: ProgressFn | None = None,
    consider: frozenset[str] | None = None,
) -> PreparedIndex:
    """Everything but publication; takes no lock and writes nothing. `consider`: the session ids
    whose live transcripts this run looks at (a live sync); None, every session and archive."""
    store = rt.require_store()
    cfg = rt.settings.index
    embedder = make_embedder(cfg.embedding)
    model = model_name(embedder)
    secret = rt.secret()
    memory_files, warnings = await anyio.to_thread.run_sync(read_memory_files, rt.paths.workspace)
    refs: list[SessionRef] = []
    sessions_enabled = "sessions" in cfg.sources
    sessions_revision = rt.sessions.revision() if sessions_enabled else None
    if sessions_enabled:
        refs, errors = await anyio.to_thread.run_sync(
            list_session_refs, rt.sessions, rt.agent_id, policy_of(rt.settings), consider
        )
        warnings += errors
    snap = await store.read(_read_snapshot, [r.session_id for r in refs], secret, force)
    only_paths = None if consider is None else frozenset(f"sessions/{rt.agent_id}/{sid}" for sid in consider)
    if only_paths is not None:
        sessions_revision = None  # not every listed transcript was looked at
    plan = plan_sync(memory_files, refs, snap.indexed, snap.forgotten, model, force, snap.orphans, only_paths)
    removals = [
        n
        if sessions_enabled or n.source != "sessions" or n.reason != REASON_GONE
        else replace(n, reason=REASON_SOURCES)
        for n in plan.removals
    ]
    if progress:
        progress("scan", len(memory_files) + len(refs), len(memory_files) + len(refs))

    entry_keys = sorted({k for f in plan.memory for k in promotion_keys_in(f.text)})
    origin_rows = await store.read(origins_for_entries, rt.agent_id, entry_keys) if entry_keys else []
    origins: dict[str, list[tuple[str, int]]] = {}
    for o in origin_rows:
        origins.setdefault(o.entry_key, []).append((o.origin_class, o.observed_at))
    files, skipped, chunk_warnings = await anyio.to_thread.run_sync(
        _chunk_all, rt, plan, origins, progress, snap.erased
    )

    if sum(f.source == "sessions" for f in files) < len(plan.sessions):
        sessions_revision = None  # a transcript could not be read: it still lags
    computed = cached = 0
    if embedder is not None:
        files, computed, cached = await _embed(rt, embedder, files, progress)
    return PreparedIndex(
        rt.agent_id,
        force,
        embedder.provider if embedder else "none",
        embedder.provider_key if embedder else "",
        model,
        snap.revision,
        tuple(files),
        tuple(removals),
        tuple(plan.skipped) + tuple(skipped),
        len(memory_files) + len(refs),
        plan.unchanged,
        computed,
        cached,
        tuple(warnings + chunk_warnings),
        sessions_revision,
        consider is not None,
    )


def publish_batches(files: tuple[PreparedFile, ...]) -> list[tuple[PreparedFile, ...]]:
    """Consecutive files, at most PUBLISH_BATCH_FILES files or ~PUBLISH_BATCH_CHUNKS chunks each."""
    batches: list[tuple[PreparedFile, ...]] = []
    current: list[PreparedFile] = []
    chunks = 0
    for f in files:
        if current and (len(current) >= PUBLISH_BATCH_FILES or chunks + len(f.chunks) > PUBLISH_BATCH_CHUNKS):
            batches.append(tuple(current))
            current, chunks = [], 0
        current.append(f)
        chunks += len(f.chunks)
    if current:
        batches.append(tuple(current))
    return batches


def _note(n: Note | PreparedFile, reason: str | None = None) -> SourceNote:
    return SourceNote(
        path=n.path,
        source=n.source,
        session_id=n.session_id,
        reason=reason if reason is not None else getattr(n, "reason", ""),
    )


async def publish_index(
    rt: AgentRuntime, prepared: PreparedIndex, progress: ProgressFn | None = None
) -> IndexReport:
    """Publish under the workspace lock, in batched transactions; each file re-checked."""
    store = rt.require_store()
    report = IndexReport(
        agent_id=rt.agent_id,
        force=prepared.force,
        provider=prepared.provider,
        model=prepared.model,
        revision_before=prepared.revision,
        skipped=[_note(n) for n in prepared.skipped],
        warnings=list(prepared.warnings),
        embeddings_computed=prepared.embeddings_computed,
        embeddings_cached=prepared.embeddings_cached,
    )
    report.files.scanned = prepared.scanned
    report.files.unchanged = prepared.unchanged
    report.files.skipped = len(prepared.skipped)
    ctx = PublishContext(
        prepared.model,
        prepared.provider,
        prepared.provider_key,
        rt.secret(),
        int(time.time() * 1000),
        prepared.revision if prepared.force else None,
    )
    needs_rerun: list[str] = []
    async with rt.lock().hold() as lease:
        revision = prepared.revision
        if prepared.removals or prepared.force:
            keys = [(n.path, n.source) for n in prepared.removals]
            counts, revision = await store.write(
                apply_removals, keys, ctx.rebuild_revision, fence=lease.fence
            )
            if counts is None:
                reason = (
                    f"index revision moved from {prepared.revision} to {revision} while the rebuild was "
                    "prepared (a purge ran); rebuild discarded, rerun it"
                )
                report.discarded = [_note(f, reason) for f in prepared.files]
                needs_rerun.append(reason)
                prepared = replace(prepared, files=())
            else:
                report.removed = [_note(n) for n in prepared.removals]
                report.files.removed = counts.sources
                report.chunks_removed += counts.chunks
                if ctx.rebuild_revision is not None:
                    ctx = replace(ctx, rebuild_revision=revision)
        done = 0
        total_chunks = sum(len(f.chunks) for f in prepared.files)
        for batch in publish_batches(prepared.files):
            outcome = await store.write(publish_files, batch, ctx, fence=lease.fence)
            report.chunks_removed += outcome.removed.chunks
            report.chunks_written += outcome.chunks_written
            if ctx.rebuild_revision is not None:
                ctx = replace(ctx, rebuild_revision=outcome.revision)
            for f in outcome.files:
                if f.status == "published":
                    report.files.indexed += 1
                    continue
                report.discarded.append(
                    SourceNote(path=f.path, source=f.source, session_id=f.session_id, reason=f.reason)
                )
                if f.status != "forgotten":
                    needs_rerun.append(f.reason)
            done += sum(len(f.chunks) for f in batch)
            if progress:
                progress("publish", done, total_chunks)
        dirty = f"{len(needs_rerun)} file(s) not indexed: {needs_rerun[0]}" if needs_rerun else None
        if dirty is None and prepared.partial:  # work left undone elsewhere is still undone
            dirty = await store.read(read_dirty)
        await store.write(record_run, dirty, prepared.sessions_revision, fence=lease.fence)
        report.revision_after = await store.read(current_revision)
        report.vector_backend = await store.read(backend_for) if prepared.provider != "none" else None
    report.files.discarded = len(report.discarded)
    report.ok = not report.discarded
    if report.discarded:
        report.warnings.append(
            f"{len(report.discarded)} prepared file(s) were not published (see discarded); "
            f"rerun `memoryd index --agent {rt.agent_id}` to index current data"
        )
    return report


async def run_index_sync(
    rt: AgentRuntime,
    force: bool = False,
    progress: ProgressFn | None = None,
    consider: frozenset[str] | None = None,
) -> IndexReport:
    prepared = await prepare_index(rt, force, progress, None if force else consider)
    return await publish_index(rt, prepared, progress)
