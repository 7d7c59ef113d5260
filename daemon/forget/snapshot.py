"""Reading what a forget plan depends on: session metadata, workspace files, store rows.

The I/O edge of planning. Store rows are read in one read transaction (a consistent
snapshot) and only through indexes where an index can answer: origins by session and by
entry key, checkpoints by session id, seen-hash scopes by scope, chunks by session id or
path. Corpus files are read only where the store records a selected session's lines
(`corpus_session_files`), unless some selected session has no record (see
`corpus_files_to_scan`). Two reads are proportional to the workspace instead: the memory
files (no index says which lines quote a session) and memory-file chunks (their indexed
text is scrubbed to find stale snapshots of a shared file).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import anyio

from memoryd.agent_runtime import AgentRuntime
from memoryd.constants import MEMORY_MARKDOWN_MAX_BYTES
from memoryd.errors import MemorydError
from memoryd.fileio import read_bytes_nofollow, sha256_hex
from memoryd.forget.curated import CuratedWrite, merge_curated, transcript_writes
from memoryd.forget.entries import (
    NO_ENTRIES,
    EntryFacts,
    EntryOriginRef,
    EntrySelection,
    derived_keys,
    entry_claim,
    match_claim_keys,
    match_forms,
    promoted_texts,
    select_entries,
)
from memoryd.forget.index_plan import ChunkRow, SourceRow
from memoryd.forget.lineage import Lineage, read_lineage
from memoryd.forget.plan import BackupRow, FileSnapshot, ForgetSnapshot, ShortTermRow
from memoryd.forget.scrub import promotion_keys_on_lines
from memoryd.forget.select import Selectors, SessionSelection
from memoryd.index.provenance import INTERNAL_SESSION_KINDS
from memoryd.sessions.model import ArchiveInfo, SessionInfo
from memoryd.store.checkpoints import checkpoint_keys_of_sessions
from memoryd.store.checkpoints import recorded_session_keys as recorded_checkpoint_keys
from memoryd.store.corpus_files import corpus_files_by_session
from memoryd.store.curated_writes import writes_of_session_keys, writes_of_sessions
from memoryd.store.db import Connection
from memoryd.store.embedding_cache import cached_count
from memoryd.store.index_chunks import (
    ChunkFacts,
    memory_chunk_facts,
    path_chunk_facts,
    session_chunk_facts,
    session_chunk_facts_with_text,
    stale_internal_chunk_facts,
)
from memoryd.store.index_sources import session_sources, sources_at_paths
from memoryd.store.origins import keys_with_origins, origins_for_entries
from memoryd.store.origins import recorded_session_keys as recorded_origin_keys
from memoryd.store.preimages import preimage_rows
from memoryd.store.seen_hashes import existing_scopes
from memoryd.store.short_term import texts_by_key, texts_by_path, texts_outside
from memoryd.store.suppressions import suppressions_of_claims

CORPUS_SUFFIXES = (".txt", ".md")
# memory/.dreams/ and everything under it, as a key range ("0" sorts right after "/").
CORPUS_TREE = "memory/.dreams/"
CORPUS_TREE_END = "memory/.dreams0"
DIARY_FILES = ("DREAMS.md", "dreams.md")
ROOT_MEMORY_FILES = ("MEMORY.md", "memory.md")
# Above this many selected sessions the per-file byte prefilter costs more than it saves.
MAX_PREFILTER_IDS = 256


@dataclass(frozen=True, slots=True)
class SessionCatalog:
    """The agent's sessions a forget can reach, as the source lists them, read once per forget
    (`read_catalog`): the selectable windows, every internal window, every archive."""

    sessions: tuple[SessionInfo, ...]
    archives: tuple[ArchiveInfo, ...]
    # (session id, session key or None) that memoryd recorded for the session selectors, by id
    # or by key: checkpoints, entry origins (`read_recorded`).
    recorded: tuple[tuple[str, str | None], ...] = ()

    @property
    def excluded_session_ids(self) -> frozenset[str]:
        """Internal sessions whose transcripts are never indexed (stale chunks are purged)."""
        return frozenset(
            s.session_id
            for s in self.sessions
            if s.generated_by_narrative or s.session_kind in INTERNAL_SESSION_KINDS
        )


async def read_catalog(rt: AgentRuntime, selectors: Selectors) -> SessionCatalog:
    """The sessions `selectors` can reach and the internal ones, not every session: the source
    narrows its listing where it can (an indexed read of the selected ids, keys, participants),
    and selection applies the exact rules to what it lists."""

    def read() -> SessionCatalog:
        listing = rt.sessions.list_selectable(
            selectors.sessions, selectors.participants, selectors.hook_sources
        )
        return SessionCatalog(listing.sessions, tuple(rt.sessions.list_archives()))

    catalog = await anyio.to_thread.run_sync(read)
    if rt.store is None or not selectors.sessions:
        return catalog
    recorded = await rt.store.read(read_recorded, rt.agent_id, selectors.sessions)
    return replace(catalog, recorded=recorded)


def read_recorded(conn: Connection, agent_id: str, refs: Sequence[str]) -> tuple[tuple[str, str | None], ...]:
    """What memoryd itself recorded of the sessions `refs` name (each read by an index): the
    id and key of a checkpoint or an entry origin whose id or key is a ref. A session the source
    no longer lists (an archive whose entry is gone, a history a reset deleted) is still found
    this way. (A forgotten record is not a record of the session: a rerun of a forget reports
    the same resolutions as the first run, as the reference's.)"""
    refs = list(dict.fromkeys(refs))
    found = recorded_checkpoint_keys(conn, refs, refs) + recorded_origin_keys(conn, agent_id, refs, refs)
    return tuple(dict.fromkeys(sorted(found, key=lambda r: (r[0], r[1] is None, r[1] or ""))))


# --- entries (forget --entry, --match) ----------------------------------------------------------


def read_entry_facts(
    conn: Connection, agent_id: str, keys: Sequence[str]
) -> tuple[dict[str, str], dict[str, tuple[EntryOriginRef, ...]], dict[str, tuple[str, ...]]]:
    """(staged snippet by key, origins by key, suppressed sessions by claim hash) of `keys`,
    each by its primary key."""
    keys = sorted(set(keys))
    staged = {t.entry_key: t.snippet for t in texts_by_key(conn, keys)}
    origins: dict[str, list[EntryOriginRef]] = {}
    for o in origins_for_entries(conn, agent_id, keys):
        origins.setdefault(o.entry_key, []).append(EntryOriginRef(o.session_id, o.session_key))
    claims = sorted({c for k in keys if (c := entry_claim(k)) is not None})
    suppressed: dict[str, list[str]] = {}
    for claim, sid in suppressions_of_claims(conn, claims):
        suppressed.setdefault(claim, []).append(sid)
    return (
        staged,
        {k: tuple(v) for k, v in origins.items()},
        {c: tuple(v) for c, v in suppressed.items()},
    )


def _memory_texts(workspace: Path, corpus_dir: Path) -> list[FileSnapshot]:
    refusals: list[str] = []  # an unreadable file is named by the plan's own read of it
    return [
        f
        for p in list_memory_files(workspace, corpus_dir)
        if (f := _snapshot(p, workspace, refusals)) is not None
    ]


async def read_entry_selection(rt: AgentRuntime, selectors: Selectors) -> EntrySelection:
    """The entries `--entry` and `--match` choose (daemon/forget/entries.py), read by key: the
    staged claims the text can be, the promoted entries of the memory files."""
    if not selectors.by_entry:
        return NO_ENTRIES
    files = await anyio.to_thread.run_sync(_memory_texts, rt.paths.workspace, rt.paths.corpus_dir)
    # Promoted entries are MEMORY.md's; a diary line is derived (and found as such), not matched.
    promoted = promoted_texts(f.text for f in files if f.relative_path in ROOT_MEMORY_FILES)
    marked = frozenset(k for f in files for k in promotion_keys_on_lines(f.text))
    keys = list(selectors.entries)
    if selectors.match is not None:
        forms = set(match_forms(selectors.match))
        keys += match_claim_keys(selectors.match)
        keys += [k for k, text in promoted.items() if text in forms]
    staged: dict[str, str] = {}
    origins: dict[str, tuple[EntryOriginRef, ...]] = {}
    suppressed: dict[str, tuple[str, ...]] = {}
    if rt.store is not None:
        staged, origins, suppressed = await rt.store.read(read_entry_facts, rt.agent_id, keys)
    facts = EntryFacts(staged, promoted, marked, origins, suppressed)
    return select_entries(rt.agent_id, selectors.entries, selectors.match, facts)


# --- workspace files -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WorkspaceFiles:
    corpus: tuple[FileSnapshot, ...]
    memory: tuple[FileSnapshot, ...]
    refusals: tuple[str, ...]


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)  # lstat: symlinks are skipped, never followed
    except FileNotFoundError:
        return False


def _is_real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def list_corpus_files(corpus_dir: Path) -> list[Path]:
    if not _is_real_dir(corpus_dir):
        return []
    return sorted(
        p for p in corpus_dir.iterdir() if p.name.lower().endswith(CORPUS_SUFFIXES) and _is_regular(p)
    )


def corpus_files_to_scan(
    workspace: Path,
    corpus_dir: Path,
    session_ids: Collection[str],
    recorded: Mapping[str, Collection[str]] | None,
) -> list[Path]:
    """The corpus files that can hold a line of the selected sessions.

    Ingest and backfill record each file before appending a session's lines to it, so a
    session with records has lines in those files only. A selected session with no record at
    all (an unresolved id, lines written before the store tracked them, or no store at all:
    `recorded` None) may have lines anywhere: then every corpus file is scanned, as the
    reference does, so nothing can survive the forget.
    """
    if not session_ids:
        return []
    if recorded is None or any(sid not in recorded for sid in session_ids):
        return list_corpus_files(corpus_dir)
    if not _is_real_dir(corpus_dir):
        return []
    paths = {workspace / rel for sid in session_ids for rel in recorded[sid]}
    # Only files directly in the corpus directory are corpus files (as the full listing).
    return sorted(
        p
        for p in paths
        if p.parent == corpus_dir and p.name.lower().endswith(CORPUS_SUFFIXES) and _is_regular(p)
    )


def _without_subdirs(path: Path) -> bool:
    """True only when the link count proves `path` has no subdirectory (2 = "." and the entry in
    its parent). File systems that do not count subdirectories report other values: then False."""
    try:
        return os.lstat(path).st_nlink == 2
    except FileNotFoundError:
        return True


def list_memory_files(workspace: Path, corpus_dir: Path) -> list[Path]:
    """MEMORY.md, memory.md, memory/**/*.md and the diaries; corpus files are left to the corpus
    scan (corpus evidence must survive until every dependent artifact is clean)."""
    found = [workspace / n for n in ROOT_MEMORY_FILES if _is_regular(workspace / n)]
    memory_dir = workspace / "memory"
    if _is_real_dir(memory_dir):
        for root, dirs, files in os.walk(memory_dir, followlinks=False):
            dirs.sort()
            here = Path(root)
            # The corpus directory holds a file per day: it is not even listed unless it has a
            # subdirectory, whose .md files are memory files (see _without_subdirs).
            dirs[:] = [d for d in dirs if not (here / d == corpus_dir and _without_subdirs(corpus_dir))]
            if here == corpus_dir:
                continue
            found += [here / f for f in sorted(files) if f.endswith(".md") and _is_regular(here / f)]
    found += [workspace / n for n in DIARY_FILES if _is_regular(workspace / n)]
    unique: dict[tuple[int, int], Path] = {}
    for p in found:  # one file under two names (a case-insensitive file system) is scanned once
        st = os.lstat(p)
        unique.setdefault((st.st_dev, st.st_ino), p)
    return list(unique.values())


def _snapshot(
    path: Path, workspace: Path, refusals: list[str], needles: Sequence[bytes] | None = None
) -> FileSnapshot | None:
    """The file as text, or None (absent, unreadable — named in `refusals` — or, with
    `needles`, a file that contains none of them)."""
    rel = path.relative_to(workspace).as_posix()
    try:
        data = read_bytes_nofollow(path)
    except MemorydError as exc:
        refusals.append(f"Cannot scan {rel}: {exc}; review it manually.")
        return None
    if data is None:
        return None
    if needles is not None and not any(n in data for n in needles):
        return None
    if len(data) > MEMORY_MARKDOWN_MAX_BYTES:
        refusals.append(
            f"Cannot scan {rel}: larger than {MEMORY_MARKDOWN_MAX_BYTES} bytes; review it manually."
        )
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        # Invalid UTF-8 is never rewritten: re-encoding would change bytes nobody selected.
        refusals.append(f"Cannot scan {rel}: not valid UTF-8; review it manually.")
        return None
    return FileSnapshot(rel, text, sha256_hex(data))


def read_workspace_files(
    workspace: Path,
    corpus_dir: Path,
    session_ids: Collection[str],
    recorded: Mapping[str, Collection[str]] | None = None,
) -> WorkspaceFiles:
    refusals: list[str] = []
    corpus: list[FileSnapshot | None] = []
    if session_ids:  # nothing selected: no corpus line can go
        # Every reference grammar contains the session id itself, so a corpus file without any
        # selected id's bytes is skipped before it is decoded or split (a superset filter).
        ids = sorted(session_ids)
        needles = [sid.encode("utf-8") for sid in ids] if len(ids) <= MAX_PREFILTER_IDS else None
        corpus = [
            _snapshot(p, workspace, refusals, needles)
            for p in corpus_files_to_scan(workspace, corpus_dir, session_ids, recorded)
        ]
    memory = [_snapshot(p, workspace, refusals) for p in list_memory_files(workspace, corpus_dir)]
    return WorkspaceFiles(tuple(f for f in corpus if f), tuple(f for f in memory if f), tuple(refusals))


# --- transcripts of the selected sessions (curated writes) -----------------------------------


def read_transcript_writes(
    rt: AgentRuntime, catalog: SessionCatalog, selection: SessionSelection
) -> list[CuratedWrite]:
    live = {s.session_id: s for s in catalog.sessions}
    archives: dict[str, list[ArchiveInfo]] = {}
    for a in catalog.archives:
        archives.setdefault(a.session_id, []).append(a)
    workspace = os.path.abspath(rt.paths.workspace)
    # Which selected live sessions have a transcript, in one read (not one per session).
    with_transcript = rt.sessions.fingerprints(
        [live[t.session_id] for t in selection.targets if t.session_id in live]
    )
    sources: list[SessionInfo | ArchiveInfo] = []
    for target in selection.targets:
        if target.session_id in with_transcript:
            sources.append(live[target.session_id])
        sources += archives.get(target.session_id, [])
    out: list[CuratedWrite] = []
    with rt.sessions.reading():  # a database source reads them all from one snapshot
        for source in sources:
            try:
                with rt.sessions.open_transcript(source) as lines:
                    out += transcript_writes(lines, workspace)
            except MemorydError:
                continue  # an unreadable transcript only hides curated-write hints, never data
    return out


# --- store rows ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoreRows:
    lineage: Lineage
    keys_with_origins: frozenset[str]
    short_term: tuple[ShortTermRow, ...]
    checkpoint_keys: tuple[tuple[str, str], ...]
    seen_scopes: tuple[str, ...]
    backups: tuple[BackupRow, ...]
    observed_writes: tuple[CuratedWrite, ...]
    chunks: tuple[ChunkRow, ...]
    sources: tuple[SourceRow, ...]
    embedding_cache_rows: int


def empty_store_rows(carried_keys: Collection[str]) -> StoreRows:
    """A missing store reads as an empty one (a dry run never creates it)."""
    return StoreRows(
        Lineage((), frozenset(carried_keys), frozenset()), frozenset(), (), (), (), (), (), (), (), 0
    )


def session_path_candidates(
    agent_id: str, session_ids: Iterable[str], archives: Iterable[ArchiveInfo]
) -> set[str]:
    """Index paths a transcript of these sessions may have been indexed under."""
    ids = set(session_ids)
    paths = {p for sid in ids for p in (f"sessions/{agent_id}/{sid}", f"sessions/{agent_id}/{sid}.jsonl")}
    paths |= {f"sessions/{agent_id}/{a.name}" for a in archives if a.session_id in ids and a.name}
    return paths


def _chunk_rows(
    conn: Connection,
    agent_id: str,
    session_ids: Sequence[str],
    excluded: Sequence[str],
    paths: Sequence[str],
    orphans: Sequence[str],
    reindexed: Sequence[str] = (),
) -> list[ChunkRow]:
    rows: dict[int, ChunkFacts] = {c.rowid: c for c in memory_chunk_facts(conn)}
    # A forgotten fact's sessions: their transcript chunks go, to be indexed again without it.
    for c in session_chunk_facts(conn, sorted(reindexed)) if reindexed else ():
        rows.setdefault(c.rowid, c)
    if session_ids:
        # An orphan archive's chunks come with their text: the plan removes those that quote a
        # selected snippet. Only orphans that memoryd has no record of either are read.
        known = {sid for sid, key in recorded_checkpoint_keys(conn, orphans, ()) if key}
        known |= {sid for sid, key in recorded_origin_keys(conn, agent_id, orphans, ()) if key}
        found = session_chunk_facts_with_text(conn, sorted(set(orphans) - known - set(session_ids)))
        found += session_chunk_facts(conn, sorted(set(session_ids) | set(excluded)))
        found += path_chunk_facts(conn, sorted(paths))
        found += stale_internal_chunk_facts(conn)
        for c in found:
            rows.setdefault(c.rowid, c)
    return [ChunkRow(*rows[rowid]) for rowid in sorted(rows)]


def orphan_archive_ids(catalog: SessionCatalog) -> list[str]:
    """Archives no session names: no key in the source and no live window of their id."""
    live = {s.session_id for s in catalog.sessions}
    return sorted(
        {a.session_id for a in catalog.archives if a.session_key is None and a.session_id not in live}
    )


def read_store_rows(
    conn: Connection,
    agent_id: str,
    selection: SessionSelection,
    carried_keys: Collection[str],
    marker_keys: Collection[str],
    corpus_paths: Sequence[str],
    excluded: Collection[str],
    archives: Sequence[ArchiveInfo],
    orphans: Sequence[str] = (),
    reindexed: Sequence[str] = (),
) -> StoreRows:
    sids = sorted(selection.session_ids)
    lineage = read_lineage(conn, agent_id, sids, carried_keys, by_entry=bool(reindexed))
    with_origins = keys_with_origins(conn, agent_id, marker_keys)

    short_term: dict[str, ShortTermRow] = {}
    for text in texts_by_key(conn, sorted(lineage.entry_keys)):
        short_term[text.entry_key] = ShortTermRow(*text)
    if sids:
        # Entries whose text may name a selected session, by the path index: entries staged
        # from a corpus file that mentions one (their snippet is that file's line), and entries
        # staged from memory files (daily notes; never store-sized). The plan applies the
        # exact reference check to these candidates.
        for text in texts_by_path(conn, sorted(corpus_paths)):
            short_term.setdefault(text.entry_key, ShortTermRow(*text))
        for text in texts_outside(conn, CORPUS_TREE, CORPUS_TREE_END):
            short_term.setdefault(text.entry_key, ShortTermRow(*text))

    checkpoints = checkpoint_keys_of_sessions(conn, sids)
    scope_candidates = sorted(
        {
            s
            for sid in sids
            for s in (
                f"{agent_id}:{sid}",
                f"{agent_id}:sessions/{agent_id}/{sid}",
                f"{agent_id}:sessions/{agent_id}/{sid}.jsonl",
            )
        }
    )
    scopes = existing_scopes(conn, scope_candidates)
    backups = preimage_rows(conn)

    observed = writes_of_sessions(conn, sids)
    observed += writes_of_session_keys(conn, sorted(selection.session_keys))

    paths = session_path_candidates(agent_id, sids, archives)
    chunks = _chunk_rows(conn, agent_id, sids, sorted(excluded), sorted(paths), orphans, reindexed)
    source_paths = sorted(set(corpus_paths) | paths | {c.path for c in chunks if c.source == "sessions"})
    sources = {r.id: r for r in sources_at_paths(conn, source_paths)}
    for r in session_sources(conn, sorted(set(sids) | set(reindexed))):
        sources.setdefault(r.id, r)
    cache_rows = cached_count(conn) if sids or lineage.entry_keys else 0

    return StoreRows(
        lineage=lineage,
        keys_with_origins=with_origins,
        short_term=tuple(short_term[k] for k in sorted(short_term)),
        checkpoint_keys=tuple(sorted(checkpoints)),
        seen_scopes=tuple(sorted(scopes)),
        backups=tuple(BackupRow(*r) for r in backups),
        observed_writes=tuple(CuratedWrite(r[0], r[1]) for r in observed),
        chunks=tuple(chunks),
        sources=tuple(SourceRow(*sources[i]) for i in sorted(sources)),
        embedding_cache_rows=int(cache_rows),
    )


# --- the whole snapshot --------------------------------------------------------------------------


async def read_snapshot(
    rt: AgentRuntime,
    catalog: SessionCatalog,
    selection: SessionSelection,
    carried_keys: Collection[str] = (),
    entries: EntrySelection = NO_ENTRIES,
) -> ForgetSnapshot:
    paths = rt.paths
    # A fact's corpus lines are among its origin sessions' lines.
    corpus_sessions = selection.session_ids | entries.origin_session_ids
    recorded = None
    if rt.store is not None and corpus_sessions:
        recorded = await rt.store.read(corpus_files_by_session, corpus_sessions)
    files = await anyio.to_thread.run_sync(
        read_workspace_files, paths.workspace, paths.corpus_dir, corpus_sessions, recorded
    )
    marker_keys = sorted({k for f in files.memory for k in promotion_keys_on_lines(f.text)})
    if entries.entries:
        derived = derived_keys((f.text for f in files.memory), entries)
        carried_keys = frozenset(carried_keys) | entries.keys | derived
    corpus_paths = [f.relative_path for f in files.corpus]
    excluded = catalog.excluded_session_ids
    if rt.store is None:
        rows = empty_store_rows(carried_keys)
    else:
        rows = await rt.store.read(
            read_store_rows,
            rt.agent_id,
            selection,
            carried_keys,
            marker_keys,
            corpus_paths,
            excluded,
            catalog.archives,
            orphan_archive_ids(catalog),
            sorted(entries.origin_session_ids),
        )
    from_transcripts = await anyio.to_thread.run_sync(read_transcript_writes, rt, catalog, selection)
    return ForgetSnapshot(
        agent_id=rt.agent_id,
        selection=selection,
        lineage=rows.lineage,
        keys_with_origins=rows.keys_with_origins,
        excluded_session_ids=excluded,
        corpus_files=files.corpus,
        memory_files=files.memory,
        refusals=files.refusals,
        short_term=rows.short_term,
        checkpoint_keys=rows.checkpoint_keys,
        seen_scopes=rows.seen_scopes,
        backups=rows.backups,
        curated_writes=tuple(merge_curated(rows.observed_writes, from_transcripts)),
        chunks=rows.chunks,
        sources=rows.sources,
        embedding_cache_rows=rows.embedding_cache_rows,
        entries=entries,
    )
