"""Preparing files for publication: read, export, chunk and hash (reference §6.1–§6.2).

    group = prepare_files(work, memory_files, session_refs)

Reads memory files (already in memory) and transcripts (through the session source) and turns
them into `PreparedFile`s. Writes nothing and touches no store, so it runs the same on the
caller's thread or in the preparation worker process (index/prepare_worker.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memoryd.errors import OperationFailed
from memoryd.index.chunking import chunk_memory_file, chunk_session
from memoryd.index.plan import Note
from memoryd.index.provenance import ChunkProvenance, least_trusted, memory_file_origin, single_value
from memoryd.index.publish import PreparedChunk, PreparedFile
from memoryd.index.sources import MemoryFile, SessionRef
from memoryd.index.transcript import render_transcript, without_suppressed
from memoryd.markers import lineage_key
from memoryd.sessions.model import SessionSource
from memoryd.store.erased_senders import ErasedSenders

REASON_SYSTEM_ONLY = "system-only transcript"


@dataclass(frozen=True, slots=True)
class PrepareWork:
    """What preparing any file of one run needs (inherited by the worker process as is)."""

    sessions: SessionSource
    chunk_tokens: int
    chunk_overlap: int
    origins: dict[str, list[tuple[str, int]]]  # promotion entry key -> (origin class, observed_at)
    erased: ErasedSenders  # senders an erasure removed from shared sessions: their turns are not indexed
    # (claim hash, session id) of claims forgotten one by one (forget --entry): those lines are not indexed
    suppressed: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True, slots=True)
class PreparedGroup:
    """Prepared files of consecutive planned files, in plan order."""

    files: tuple[PreparedFile, ...]
    skipped: tuple[Note, ...] = ()
    warnings: tuple[str, ...] = ()
    unreadable: int = 0  # transcripts that could not be read (they still lag)


def memory_chunks(f: MemoryFile, work: PrepareWork) -> PreparedFile:
    path_origin = memory_file_origin(f.rel_path)
    out: list[PreparedChunk] = []
    for chunk in chunk_memory_file(f.rel_path, f.text, work.chunk_tokens, work.chunk_overlap):
        # A promoted entry is as trusted as the least trusted session it came from.
        entry_origins = [o for key in chunk.entry_keys for o in work.origins.get(key, [])]
        origin = least_trusted(c for c, _ in entry_origins) if entry_origins else path_origin
        supersedes = single_value(lineage_key(line) for line in chunk.text.splitlines())
        out.append(PreparedChunk(chunk, ChunkProvenance(origin, "unknown", int(f.stat.mtime_ms), supersedes)))
    return PreparedFile(
        f.rel_path, "memory", f.hash, f.stat.mtime_ms, f.stat.size, None, tuple(out), f.abs_path
    )


def session_chunks(ref: SessionRef, work: PrepareWork) -> tuple[PreparedFile, str | None]:
    """The prepared transcript, and the reason its text is not indexed, if it is not."""
    with work.sessions.open_transcript(ref.target) as lines:
        rendered = render_transcript(lines, int(ref.stat.mtime_ms), work.erased.test_for(ref.session_id))
    if work.suppressed:
        rendered = without_suppressed(rendered, ref.session_id, work.suppressed)
    # A system-only transcript is published as a source row without chunks: its old rows go,
    # and the index remembers it saw this version (search does not call it lagging).
    chunks = (
        []
        if rendered.system_only
        else chunk_session(rendered.lines, ref.session_kind, work.chunk_tokens, work.chunk_overlap)
    )
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
    return prepared, REASON_SYSTEM_ONLY if rendered.system_only else None


FileDone = Callable[[int], None]  # called with each planned file's chunk count (0: unreadable)


def prepare_files(
    work: PrepareWork,
    memory: Sequence[MemoryFile],
    sessions: Sequence[SessionRef],
    on_file: FileDone | None = None,
) -> PreparedGroup:
    files = [memory_chunks(f, work) for f in memory]
    if on_file:
        for f in files:
            on_file(len(f.chunks))
    skipped: list[Note] = []
    warnings: list[str] = []
    unreadable = 0
    with work.sessions.reading():  # one read snapshot for the group's transcripts
        for ref in sessions:
            try:
                prepared, reason = session_chunks(ref, work)
            except OperationFailed as exc:
                warnings.append(f"{ref.path}: {exc}; not indexed this run")
                unreadable += 1
                if on_file:
                    on_file(0)
                continue
            if reason is not None:
                skipped.append(Note(ref.path, "sessions", ref.session_id, reason))
            files.append(prepared)
            if on_file:
                on_file(len(prepared.chunks))
    return PreparedGroup(tuple(files), tuple(skipped), tuple(warnings), unreadable)


def merge_groups(groups: Sequence[PreparedGroup]) -> PreparedGroup:
    """Consecutive groups as one, in order."""
    if len(groups) == 1:
        return groups[0]
    return PreparedGroup(
        tuple(f for g in groups for f in g.files),
        tuple(n for g in groups for n in g.skipped),
        tuple(w for g in groups for w in g.warnings),
        sum(g.unreadable for g in groups),
    )
