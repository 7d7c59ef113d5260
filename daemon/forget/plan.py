"""Planning a purge (reference §7.4): a snapshot of everything forget reads goes in, a plan of
every write comes out. Pure and identical for preview and apply, so a preview followed by an
apply on unchanged state reports the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass

from memoryd.fileio import sha256_hex
from memoryd.forget.curated import CuratedWrite
from memoryd.forget.entries import NO_ENTRIES, EntrySelection
from memoryd.forget.index_plan import ChunkRow, IndexPlan, SourceRow, plan_index
from memoryd.forget.lineage import Lineage
from memoryd.forget.refs import references_session
from memoryd.forget.scrub import (
    Selection,
    has_history_highlights,
    promotion_keys_on_lines,
    scrub_corpus,
    scrub_corpus_claims,
    scrub_memory,
)
from memoryd.forget.select import SessionSelection


@dataclass(frozen=True, slots=True)
class FileSnapshot:
    relative_path: str  # workspace-relative, "/"-separated
    text: str
    sha256: str  # of the bytes read: the expected hash at commit


@dataclass(frozen=True, slots=True)
class ShortTermRow:
    entry_key: str
    path: str
    snippet: str


@dataclass(frozen=True, slots=True)
class BackupRow:
    id: int
    relative_path: str
    content: str
    content_hash: str


@dataclass(frozen=True, slots=True)
class ForgetSnapshot:
    """What a plan depends on. Rows are candidates read through indexes; the plan filters."""

    agent_id: str
    selection: SessionSelection
    lineage: Lineage
    keys_with_origins: frozenset[str]  # marker keys found in files that have origin rows
    excluded_session_ids: frozenset[str]  # internal sessions (cron, heartbeat, narrative)
    corpus_files: tuple[FileSnapshot, ...]
    memory_files: tuple[FileSnapshot, ...]
    refusals: tuple[str, ...]  # files that could not be scanned, named
    short_term: tuple[ShortTermRow, ...]
    checkpoint_keys: tuple[tuple[str, str], ...]  # (state_key, session_id)
    seen_scopes: tuple[str, ...]
    backups: tuple[BackupRow, ...]
    curated_writes: tuple[CuratedWrite, ...]
    chunks: tuple[ChunkRow, ...]
    sources: tuple[SourceRow, ...]
    embedding_cache_rows: int
    entries: EntrySelection = NO_ENTRIES  # forget --entry / --match: the chosen facts


@dataclass(frozen=True, slots=True)
class FileRewrite:
    relative_path: str
    content: str | None  # None: remove the file
    expected_hash: str


@dataclass(frozen=True, slots=True)
class BackupRewrite:
    id: int
    content: str
    content_hash: str
    expected_hash: str


@dataclass(frozen=True, slots=True)
class ForgetPlan:
    agent_id: str
    selection: SessionSelection
    lineage: Lineage
    untargetable_keys: frozenset[str]
    refusals: tuple[str, ...]
    corpus_rewrites: tuple[FileRewrite, ...]
    corpus_lines: int
    memory_rewrites: tuple[FileRewrite, ...]
    memory_entries: int
    memory_lines: int
    short_term_keys: tuple[str, ...]
    phase_signal_keys: tuple[str, ...]
    checkpoint_keys: tuple[str, ...]
    seen_scopes: tuple[str, ...]
    backup_rewrites: tuple[BackupRewrite, ...]
    curated_writes: tuple[CuratedWrite, ...]
    index: IndexPlan
    entries: EntrySelection = NO_ENTRIES
    # (claim hash, session id) recorded as suppressed: each origin of each chosen fact.
    suppressions: tuple[tuple[str, str], ...] = ()

    @property
    def session_ids(self) -> frozenset[str]:
        return self.selection.session_ids

    @property
    def selects_anything(self) -> bool:
        """Sessions to record as forgotten, or entries to remove."""
        return bool(self.session_ids or self.lineage.entry_keys or self.suppressions)


def plan_forget(snap: ForgetSnapshot) -> ForgetPlan:
    agent = snap.agent_id
    sids = snap.selection.session_ids
    keys = snap.lineage.entry_keys

    # 1. Corpus: drop lines of the selected sessions; their quoted snippets feed the scrub.
    corpus_rewrites: list[FileRewrite] = []
    corpus_lines = 0
    snippets: dict[str, None] = {}
    suppressions = snap.entries.suppressions
    for f in snap.corpus_files:
        if snap.entries.entries:
            corpus = scrub_corpus_claims(f.text, agent, suppressions)
        else:
            corpus = scrub_corpus(f.text, agent, sids)
        if not corpus.removed_lines:
            continue
        corpus_lines += corpus.removed_lines
        snippets.update(dict.fromkeys(corpus.snippets))
        corpus_rewrites.append(
            FileRewrite(f.relative_path, None if corpus.remove_file else corpus.content, f.sha256)
        )
    # A chosen fact's own text goes wherever a line quotes it, as a removed corpus line's does.
    snippets.update(dict.fromkeys(snap.entries.snippets))
    sel = Selection(agent, sids, keys, tuple(snippets))

    # 2. Memory files and diaries.
    all_origin_keys = keys | snap.keys_with_origins
    untargetable: set[str] = set()
    refusals = list(snap.refusals)
    memory_rewrites: list[FileRewrite] = []
    memory_entries = memory_lines = 0
    for f in snap.memory_files:
        untargetable.update(k for k in promotion_keys_on_lines(f.text) if k not in all_origin_keys)
        result = scrub_memory(f.text, sel)
        if has_history_highlights(result.content):
            refusals.append(
                f"Cannot trace historical consolidation highlights in {f.relative_path}; "
                "review them manually."
            )
        if result.content != f.text:
            memory_entries += result.removed_entries
            memory_lines += result.removed_lines
            memory_rewrites.append(FileRewrite(f.relative_path, result.content, f.sha256))

    # 5. Short-term entries and their phase signals.
    short_term = [
        r.entry_key
        for r in snap.short_term
        if r.entry_key in keys or references_session(f"{r.path}\n{r.snippet}", agent, sids)
    ]
    phase_signals = sorted(keys | set(short_term))

    # 6. Ingestion state: checkpoints and seen-hash scopes that reference a selected session.
    checkpoints = [k for k, sid in snap.checkpoint_keys if sid in sids or references_session(k, agent, sids)]
    scopes = [s for s in snap.seen_scopes if references_session(s, agent, sids)]

    # 7. Rewrite preimages are scrubbed in place, never deleted.
    backups = []
    for b in snap.backups:
        scrubbed = scrub_memory(b.content, sel).content
        if scrubbed != b.content:
            backups.append(BackupRewrite(b.id, scrubbed, sha256_hex(scrubbed), b.content_hash))

    # 9. Index.
    changed = {w.relative_path for w in corpus_rewrites} | {w.relative_path for w in memory_rewrites}
    removed = {w.relative_path for w in corpus_rewrites if w.content is None}
    index = plan_index(
        snap.chunks,
        snap.sources,
        sel=sel,
        changed_paths=changed,
        removed_paths=removed,
        excluded_session_ids=snap.excluded_session_ids,
        embedding_cache_rows=snap.embedding_cache_rows,
        purge_cache=bool(sids or keys),
        reindexed_sessions=snap.entries.origin_session_ids,
    )

    return ForgetPlan(
        agent_id=agent,
        selection=snap.selection,
        lineage=snap.lineage,
        untargetable_keys=frozenset(untargetable - all_origin_keys),
        refusals=tuple(refusals),
        corpus_rewrites=tuple(corpus_rewrites),
        corpus_lines=corpus_lines,
        memory_rewrites=tuple(memory_rewrites),
        memory_entries=memory_entries,
        memory_lines=memory_lines,
        short_term_keys=tuple(sorted(set(short_term))),
        phase_signal_keys=tuple(phase_signals),
        checkpoint_keys=tuple(sorted(set(checkpoints))),
        seen_scopes=tuple(sorted(set(scopes))),
        backup_rewrites=tuple(backups),
        curated_writes=snap.curated_writes,
        index=index,
        entries=snap.entries,
        suppressions=suppressions,
    )
