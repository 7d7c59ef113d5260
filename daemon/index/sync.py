"""An index run (reference §6): prepare outside the lock, publish under it.

    report = await run_index_sync(rt, force=False)

`prepare_index` reads the memory files and transcripts, plans, chunks and embeds — slow
work, done without the workspace lock. `publish_index` takes the lock and publishes in
batched transactions, each file with the pre-publish checks of publish.py, so a purge that
ran meanwhile is never undone: a forgotten session publishes nothing, a changed memory file
is retried on the next run, and a `--force` rebuild prepared before a purge is discarded by
the revision fence. `--force` also removes the rows of forgotten and internal sessions
without reindexing them.

`run_index_sync` streams: it plans, then publishes each group of files as soon as it is
prepared. A run of more than a group's worth of transcript prepares in a worker process
(prepare_worker.py), so the lock, taken once planning is done, is held while the later groups
are still prepared; the pre-publish checks run per file as before, so what is published is
what the lock allows. FTS only, the groups are small and share a transaction (streaming.py);
with an embedder, which reads the embedding cache between groups, each group commits alone.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field, replace

import anyio

from memoryd.agent_runtime import AgentRuntime
from memoryd.index.embedder import Embedder, make_embedder, model_name
from memoryd.index.plan import REASON_GONE, IndexedSource, Note, plan_sync
from memoryd.index.prepare import FileDone, PreparedGroup, PrepareWork
from memoryd.index.prepare_worker import (
    GROUP_BYTES,
    STREAMED_GROUP_BYTES,
    Group,
    WorkerOutcome,
    plan_groups,
    prepared_groups,
    worth_a_worker,
)
from memoryd.index.publish import (
    BatchOutcome,
    PreparedFile,
    PublishContext,
    StreamOutcome,
    apply_removals,
    publish_files,
)
from memoryd.index.report import IndexReport, SourceNote
from memoryd.index.sources import MemoryFile, SessionRef, list_session_refs, read_memory_files
from memoryd.index.streaming import publish_streamed
from memoryd.index.vectors import backend_for, to_blob
from memoryd.markers import promotion_keys_in
from memoryd.sessions.admission import policy_of
from memoryd.store.db import Connection
from memoryd.store.embedding_cache import cached_embeddings
from memoryd.store.erased_senders import ErasedSenders, load_erased_senders
from memoryd.store.exclusions import exclusion_generation
from memoryd.store.index_chunks import orphan_chunk_files
from memoryd.store.index_sources import all_sources
from memoryd.store.index_state import current_revision, read_dirty, record_run
from memoryd.store.origins import origins_for_entries
from memoryd.store.suppressions import any_suppression, suppressions_of_sessions
from memoryd.store.tombstones import forgotten_ids

ProgressFn = Callable[[str, int, int], None]  # (phase, done, total)
REASON_SOURCES = "index.sources does not include sessions"
# Files per publication transaction: enough to amortise a commit (and FTS5's per-transaction
# segment), small enough that the lock is released and re-checked rows stay few.
PUBLISH_BATCH_FILES = 256
PUBLISH_BATCH_CHUNKS = 20_000
# Chunks per transaction of groups that share one (streaming.py): past a few FTS5 flushes'
# worth, another commit costs little, and the WAL, which an open transaction cannot
# checkpoint, stays near 25 MB.
STREAM_TXN_CHUNKS = 5_000


@dataclass(frozen=True, slots=True)
class PreparedIndex:
    agent_id: str
    force: bool
    provider: str
    provider_key: str
    model: str
    revision: int  # the index revision the run was prepared at (the rebuild fence)
    exclusions: int  # the exclusion set's generation it was prepared under (store/exclusions.py)
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
    exclusions: int
    indexed: dict[tuple[str, str], IndexedSource]
    orphans: list[tuple[str, str, str | None]]
    forgotten: set[str]
    erased: ErasedSenders  # senders an erasure removed from shared sessions: their turns are not indexed
    suppressed: frozenset[tuple[str, str]]  # (claim hash, session id) forgotten one by one: not indexed


def _read_snapshot(conn: Connection, session_ids: list[str], secret: bytes | None, force: bool) -> _Snapshot:
    indexed = {(r.path, r.source): IndexedSource(*r) for r in all_sources(conn)}
    orphans: list[tuple[str, str, str | None]] = []
    if force:  # chunks without a source row (an interrupted older run) are swept by --force
        orphans = [(r[0], r[1], r[2]) for r in orphan_chunk_files(conn)]
    ids = set(session_ids) | {r.session_id for r in indexed.values() if r.session_id}
    ids |= {sid for _, _, sid in orphans if sid}
    return _Snapshot(
        current_revision(conn),
        exclusion_generation(conn),  # read before the set itself: a later purge moves it
        indexed,
        orphans,
        forgotten_ids(conn, sorted(ids), secret),
        load_erased_senders(conn, secret),
        frozenset(suppressions_of_sessions(conn, sorted(ids)) if any_suppression(conn) else ()),
    )


async def _embed(
    rt: AgentRuntime,
    embedder: Embedder,
    files: list[PreparedFile],
    progress: ProgressFn | None,
    counted: set[str],
) -> tuple[list[PreparedFile], int, int]:
    """The files with their vectors; (computed, cached) counts texts not in `counted` (the
    run's earlier groups), which it then joins."""
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
        f._replace(chunks=tuple(item._replace(vector=vectors[item.chunk.hash]) for item in f.chunks))
        for f in files
    ]
    computed = sum(h not in counted for h in missing)
    cached_new = sum(h not in counted for h in hashes) - computed
    counted.update(hashes)
    return out, computed, cached_new


@dataclass(frozen=True, slots=True)
class _Planned:
    """An index run decided before any file is prepared."""

    agent_id: str
    force: bool
    embedder: Embedder | None
    model: str
    revision: int
    exclusions: int
    memory: tuple[MemoryFile, ...]
    sessions: tuple[SessionRef, ...]
    removals: tuple[Note, ...]
    skipped: tuple[Note, ...]
    scanned: int
    unchanged: int
    warnings: tuple[str, ...]
    sessions_revision: str | None
    work: PrepareWork
    partial: bool  # a live sync of some sessions: the others' state is left as it was

    @property
    def provider(self) -> str:
        return self.embedder.provider if self.embedder else "none"

    @property
    def provider_key(self) -> str:
        return self.embedder.provider_key if self.embedder else ""


async def _plan(
    rt: AgentRuntime, force: bool, progress: ProgressFn | None, consider: frozenset[str] | None
) -> _Planned:
    """`consider`: the session ids whose live transcripts this run looks at (a live sync); None,
    every session and archive."""
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
    return _Planned(
        rt.agent_id,
        force,
        embedder,
        model,
        snap.revision,
        snap.exclusions,
        plan.memory,
        plan.sessions,
        tuple(removals),
        plan.skipped,
        len(memory_files) + len(refs),
        plan.unchanged,
        tuple(warnings),
        sessions_revision,
        PrepareWork(rt.sessions, cfg.chunk_tokens, cfg.chunk_overlap, origins, snap.erased, snap.suppressed),
        consider is not None,
    )


def _file_progress(progress: ProgressFn | None, planned: _Planned) -> FileDone | None:
    """Progress per file prepared in this process (a worker's files count when they arrive)."""
    if progress is None:
        return None
    total = len(planned.memory) + len(planned.sessions)
    counts = [0, 0]

    def on_file(chunks: int) -> None:
        counts[0] += 1
        counts[1] += chunks
        progress("chunk", counts[0], total)
        progress("chunks", counts[1], 0)

    return on_file


@dataclass(slots=True)
class _Stream:
    """What preparing the groups told the run, as they were prepared."""

    skipped: list[Note] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    unreadable: int = 0
    computed: int = 0
    cached: int = 0
    embedded: set[str] = field(default_factory=set)  # chunk hashes counted above
    files: int = 0
    chunks: int = 0


async def _prepared(
    rt: AgentRuntime,
    planned: _Planned,
    groups: AsyncIterator[PreparedGroup],
    stream: _Stream,
    progress: ProgressFn | None,
) -> AsyncGenerator[tuple[PreparedFile, ...], None]:
    """The prepared files in publication batches, embedded; `stream` collects the notes."""
    total = len(planned.memory) + len(planned.sessions)
    if progress:  # a first sample, so a rate shows from the first group on
        progress("chunk", 0, total)
        progress("chunks", 0, 0)
    async for group in groups:
        stream.skipped += group.skipped
        stream.warnings += group.warnings
        stream.unreadable += group.unreadable
        files = list(group.files)
        stream.files += len(files) + group.unreadable
        stream.chunks += sum(len(f.chunks) for f in files)
        if progress:
            progress("chunk", stream.files, total)
            progress("chunks", stream.chunks, 0)
        if planned.embedder is not None:
            files, computed, cached = await _embed(rt, planned.embedder, files, progress, stream.embedded)
            stream.computed += computed
            stream.cached += cached
        for batch in publish_batches(tuple(files)):
            yield batch


async def prepare_index(
    rt: AgentRuntime,
    force: bool = False,
    progress: ProgressFn | None = None,
    consider: frozenset[str] | None = None,
) -> PreparedIndex:
    """Everything but publication; takes no lock and writes nothing. `consider`: see `_plan`."""
    planned = await _plan(rt, force, progress, consider)
    stream = _Stream()
    groups = [Group(planned.memory, planned.sessions)]
    files: list[PreparedFile] = []
    async with (
        prepared_groups(
            planned.work, groups, use_worker=False, on_file=_file_progress(progress, planned)
        ) as results,
        aclosing(_prepared(rt, planned, results, stream, progress)) as batches,
    ):
        async for batch in batches:
            files += batch
    return PreparedIndex(
        rt.agent_id,
        force,
        planned.provider,
        planned.provider_key,
        planned.model,
        planned.revision,
        planned.exclusions,
        tuple(files),
        planned.removals,
        planned.skipped + tuple(stream.skipped),
        planned.scanned,
        planned.unchanged,
        stream.computed,
        stream.cached,
        planned.warnings + tuple(stream.warnings),
        planned.sessions_revision if not stream.unreadable else None,
        planned.partial,
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

    async def batches() -> AsyncGenerator[tuple[PreparedFile, ...], None]:
        for batch in publish_batches(prepared.files):
            yield batch

    head = _Head(
        prepared.force,
        prepared.provider,
        prepared.provider_key,
        prepared.model,
        prepared.revision,
        prepared.exclusions,
        prepared.removals,
        prepared.scanned,
        prepared.unchanged,
        prepared.partial,
    )
    report = _report(rt, head, prepared.skipped, prepared.warnings)
    report.embeddings_computed = prepared.embeddings_computed
    report.embeddings_cached = prepared.embeddings_cached
    async with aclosing(batches()) as stream:
        await _publish(rt, head, report, stream, lambda: prepared.sessions_revision, progress, streamed=True)
    return _finish(rt, report)


@dataclass(frozen=True, slots=True)
class _Head:
    """What publication needs of a run besides its files."""

    force: bool
    provider: str
    provider_key: str
    model: str
    revision: int
    exclusions: int
    removals: tuple[Note, ...]
    scanned: int
    unchanged: int
    partial: bool  # a live sync of some sessions: the others' state is left as it was


def _report(rt: AgentRuntime, head: _Head, skipped: Sequence[Note], warnings: Sequence[str]) -> IndexReport:
    report = IndexReport(
        agent_id=rt.agent_id,
        force=head.force,
        provider=head.provider,
        model=head.model,
        revision_before=head.revision,
        skipped=[_note(n) for n in skipped],
        warnings=list(warnings),
    )
    report.files.scanned = head.scanned
    report.files.unchanged = head.unchanged
    report.files.skipped = len(skipped)
    return report


async def _publish(
    rt: AgentRuntime,
    head: _Head,
    report: IndexReport,
    batches: AsyncIterator[tuple[PreparedFile, ...]],
    sessions_revision: Callable[[], str | None],
    progress: ProgressFn | None,
    streamed: bool,
) -> None:
    """Publish the batches as they come, under the workspace lock; `sessions_revision` is read
    once every batch is in (preparation decides whether every transcript was read).
    `streamed`: the batches never use the store, so they share transactions (streaming.py)."""
    store = rt.require_store()
    ctx = PublishContext(
        head.model,
        head.provider,
        head.provider_key,
        rt.secret(),
        int(time.time() * 1000),
        head.exclusions,
        head.revision if head.force else None,
    )
    tally = _Tally(report, progress)
    async with rt.lock().hold() as lease:
        revision = head.revision
        discard = ""
        if head.removals or head.force:
            keys = [(n.path, n.source) for n in head.removals]
            counts, revision = await store.write(
                apply_removals, keys, ctx.rebuild_revision, fence=lease.fence
            )
            if counts is None:
                discard = (
                    f"index revision moved from {head.revision} to {revision} while the rebuild was "
                    "prepared (a purge ran); rebuild discarded, rerun it"
                )
                tally.needs_rerun.append(discard)
            else:
                report.removed = [_note(n) for n in head.removals]
                report.files.removed = counts.sources
                report.chunks_removed += counts.chunks
                if ctx.rebuild_revision is not None:
                    ctx = replace(ctx, rebuild_revision=revision)
        if progress:
            progress("publish", 0, 0)
        if discard:
            async for batch in batches:
                report.discarded += [_note(f, discard) for f in batch]
        elif streamed:
            async with aclosing(_counted(batches, tally)) as counted:
                await publish_streamed(store, counted, ctx, lease.fence, STREAM_TXN_CHUNKS, tally.committed)
        else:
            async for batch in batches:
                outcome = await store.write(publish_files, batch, ctx, fence=lease.fence)
                if ctx.rebuild_revision is not None:
                    ctx = replace(ctx, rebuild_revision=outcome.revision)
                tally.published(outcome, sum(len(f.chunks) for f in batch))
        needs_rerun = tally.needs_rerun
        dirty = f"{len(needs_rerun)} file(s) not indexed: {needs_rerun[0]}" if needs_rerun else None
        if dirty is None and head.partial:  # work left undone elsewhere is still undone
            dirty = await store.read(read_dirty)
        await store.write(record_run, dirty, sessions_revision(), fence=lease.fence)
        report.revision_after = await store.read(current_revision)
        report.vector_backend = await store.read(backend_for) if head.provider != "none" else None


@dataclass(slots=True)
class _Tally:
    """What the published batches tell the report, and publication progress."""

    report: IndexReport
    progress: ProgressFn | None
    needs_rerun: list[str] = field(default_factory=list)
    done: int = 0  # chunks of the batches published
    handed: list[int] = field(default_factory=list)  # chunks of each streamed batch not yet committed

    def published(self, outcome: BatchOutcome, chunks: int) -> None:
        report = self.report
        report.chunks_removed += outcome.removed.chunks
        report.chunks_written += outcome.chunks_written
        for f in outcome.files:
            if f.status == "published":
                report.files.indexed += 1
                continue
            report.discarded.append(
                SourceNote(path=f.path, source=f.source, session_id=f.session_id, reason=f.reason)
            )
            if f.status != "forgotten":
                self.needs_rerun.append(f.reason)
        self.done += chunks
        if self.progress:
            self.progress("publish", self.done, 0)

    def committed(self, result: StreamOutcome) -> None:
        for outcome in result.batches:
            self.published(outcome, self.handed.pop(0))


async def _counted(
    batches: AsyncIterator[tuple[PreparedFile, ...]], tally: _Tally
) -> AsyncGenerator[tuple[PreparedFile, ...], None]:
    """The batches, each one's chunks noted for progress once its transaction commits."""
    async for batch in batches:
        tally.handed.append(sum(len(f.chunks) for f in batch))
        yield batch


def _finish(rt: AgentRuntime, report: IndexReport) -> IndexReport:
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
    """Plan, then publish each group of files as soon as it is prepared: a large run prepares
    in a worker process (index/prepare_worker.py) while earlier groups publish."""
    planned = await _plan(rt, force, progress, None if force else consider)
    head = _Head(
        force,
        planned.provider,
        planned.provider_key,
        planned.model,
        planned.revision,
        planned.exclusions,
        planned.removals,
        planned.scanned,
        planned.unchanged,
        planned.partial,
    )
    report = _report(rt, head, planned.skipped, planned.warnings)
    stream = _Stream()
    worker = WorkerOutcome()
    # An embedder reads the embedding cache between batches: they publish one by one, then.
    streamed = planned.embedder is None
    groups = plan_groups(planned.memory, planned.sessions, STREAMED_GROUP_BYTES if streamed else GROUP_BYTES)
    use_worker = worth_a_worker(groups, GROUP_BYTES)
    async with (
        prepared_groups(
            planned.work,
            groups,
            use_worker=use_worker,
            outcome=worker,
            on_file=_file_progress(progress, planned),
        ) as results,
        aclosing(_prepared(rt, planned, results, stream, progress)) as batches,
    ):
        await _publish(
            rt,
            head,
            report,
            batches,
            lambda: planned.sessions_revision if not stream.unreadable else None,
            progress,
            streamed,
        )
    report.skipped += [_note(n) for n in stream.skipped]
    report.files.skipped += len(stream.skipped)
    report.warnings += stream.warnings + worker.lost
    report.embeddings_computed = stream.computed
    report.embeddings_cached = stream.cached
    return _finish(rt, report)
