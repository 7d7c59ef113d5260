"""Which index rows a purge removes (reference §7.6). Pure: chunk snapshots in, plan out.

Selected chunks:
* every chunk of a memory or corpus file the purge rewrites (the whole file is re-indexed);
* memory chunks whose indexed text the scrub would still change: another agent sharing the
  workspace may have scrubbed the file already, yet this agent's snapshot holds the evidence;
* transcript chunks of the selected sessions (by path reference or recorded session id);
* when anything is selected, stale transcript chunks that should never have been indexed:
  system-only provenance, cron/heartbeat sessions, dreaming-narrative sessions; and the chunks
  of an orphan archive (one no session names and memoryd has no record of, such as a narrative
  run's) that quote a selected corpus snippet: nothing else can attribute them.
Sources removed: corpus files that disappear, and the transcripts whose chunks go.
Memory-file source rows stay: the changed file hash makes the indexer rebuild them.
The embedding cache is cleared whole (agent-wide and recomputable; it carries no attribution).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from memoryd.constants import CORPUS_SNIPPET_MIN_CHARS
from memoryd.forget.refs import references_session
from memoryd.forget.scrub import Selection, scrub_memory
from memoryd.index.provenance import INTERNAL_SESSION_KINDS
from memoryd.utf16 import utf16_len

_ROLES = ("User", "Assistant")  # the role prefix of an exported message line


@dataclass(frozen=True, slots=True)
class ChunkRow:
    rowid: int
    id: str
    path: str
    source: str  # "memory" | "sessions"
    text: str  # "" for transcript chunks, except an orphan archive's (read for forgotten quotes)
    session_id: str | None
    origin_class: str | None
    session_kind: str | None
    has_fts: bool
    has_vector: bool


@dataclass(frozen=True, slots=True)
class SourceRow:
    id: int
    path: str
    source: str
    session_id: str | None


@dataclass(frozen=True, slots=True)
class IndexPlan:
    chunk_ids: tuple[str, ...]
    chunk_rowids: tuple[int, ...]
    source_ids: tuple[int, ...]
    fts_rows: int
    vector_rows: int
    embedding_cache_rows: int
    clear_embedding_cache: bool

    @property
    def empty(self) -> bool:
        return not (self.chunk_ids or self.source_ids or self.clear_embedding_cache)


def plan_index(
    chunks: Iterable[ChunkRow],
    sources: Iterable[SourceRow],
    *,
    sel: Selection,
    changed_paths: Collection[str],
    removed_paths: Collection[str],
    excluded_session_ids: Collection[str],
    embedding_cache_rows: int,
    purge_cache: bool | None = None,
    reindexed_sessions: Collection[str] = (),
) -> IndexPlan:
    """`purge_cache`: whether anything is removed (default: any session selected); the embedding
    cache is cleared whole when it is. `reindexed_sessions`: sessions whose transcript chunks and
    sources go so the next sync indexes them again (a fact forgotten from them is left out)."""
    reindexed = set(reindexed_sessions)
    chunk_list = list(chunks)
    changed = set(changed_paths)
    for c in chunk_list:
        if c.source == "memory" and c.path not in changed and scrub_memory(c.text, sel).content != c.text:
            changed.add(c.path)
    any_selected = bool(sel.session_ids)
    clear = any_selected if purge_cache is None else purge_cache
    selected = [
        c
        for c in chunk_list
        if c.path in changed
        or _selects_transcript(c, sel, any_selected, excluded_session_ids)
        or (c.source == "sessions" and c.session_id in reindexed)
    ]
    removed_session_paths = {c.path for c in selected if c.source == "sessions"}
    gone = set(removed_paths)
    chosen_sources = [
        s
        for s in sources
        if s.path in gone
        or (
            s.source == "sessions"
            and (
                s.path in removed_session_paths
                or s.session_id in sel.session_ids
                or s.session_id in reindexed
            )
        )
    ]
    return IndexPlan(
        chunk_ids=tuple(sorted(c.id for c in selected)),
        chunk_rowids=tuple(sorted(c.rowid for c in selected)),
        source_ids=tuple(sorted({s.id for s in chosen_sources})),
        fts_rows=sum(1 for c in selected if c.has_fts),
        vector_rows=sum(1 for c in selected if c.has_vector),
        embedding_cache_rows=embedding_cache_rows if clear else 0,
        clear_embedding_cache=clear and embedding_cache_rows > 0,
    )


def _selects_transcript(c: ChunkRow, sel: Selection, any_selected: bool, excluded: Collection[str]) -> bool:
    if references_session(c.path, sel.agent_id, sel.session_ids):
        return True
    if c.source != "sessions" or not any_selected:
        return False
    return (
        c.session_id in sel.session_ids
        or c.origin_class == "system"
        or (c.session_kind or "unknown") in INTERNAL_SESSION_KINDS
        or c.session_id in excluded
        or references_session(c.path, sel.agent_id, excluded)
        or (bool(c.text) and _quotes(c.text, sel.corpus_snippets))
    )


def _quotes(text: str, snippets: Iterable[str]) -> bool:
    """Whether a transcript chunk quotes a selected corpus snippet (its text, without the role
    prefix the corpus line gives it), whitespace collapsed on both sides."""
    flat = " ".join(text.split())
    for snippet in snippets:
        _, sep, body = snippet.partition(": ")
        said = body if sep and snippet.split(":", 1)[0] in _ROLES else snippet
        if utf16_len(said) >= CORPUS_SNIPPET_MIN_CHARS and " ".join(said.split()) in flat:
            return True
    return False
