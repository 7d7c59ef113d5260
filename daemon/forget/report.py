"""The forget report (reference §7.8), built from a plan: what a forget selects and removes.

Plain data (daemon/plain_report.py), so a dry run from the CLI builds and prints it without
loading pydantic. These dataclasses are the report's one declaration: a job's result is read
back through them (a TypeAdapter), its stored form blanks their `Content` fields, and the JSON
Schema is read from them; the class names are the schema's definition names. The JSON form is
`to_json`: camelCase keys in field order, with `sessionKey`, `unmatchedSelectors`,
`forgottenEntries`, `counts.suppressedClaims` and `verification` left out where they do not
apply.

Lists are sorted in UTF-16 code-unit order (JavaScript's default `toSorted()`); the fields
the reference sorts with `localeCompare` (sessionResolutions by sessionId, curatedWrites by
relativePath) use `locale_key`, the root locale's order computed here, so output does not
depend on the host's locale.
The report describes the plan and is computed before any write; a purge returns it only once
the plan is applied. `counts` repeats, as numbers, what the lists hold: a job's stored result
empties the lists (they name sessions, people and content hashes) and keeps the counts, so a
caller can tell "matched nothing" from "matched sessions with no memory".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal

import memoryd.retention
from memoryd.plain_report import OMIT_EMPTY, OMIT_NONE, PlainReport
from memoryd.stored_form import Content
from memoryd.utf16 import locale_key, utf16_key

if TYPE_CHECKING:
    import memoryd.retention.receipts
    from memoryd.forget.plan import ForgetPlan


class _Report(PlainReport):
    __slots__ = ()
    # As the models this report replaces: a result with a key the report does not know is
    # another report, not this one with a field dropped.
    __pydantic_config__ = {**PlainReport.__pydantic_config__, "extra": "forbid"}


@dataclass(slots=True, kw_only=True)
class ParticipantMatchModel(_Report):
    actor_id: str
    identities: list[dict[str, Any]]


@dataclass(slots=True, kw_only=True)
class SessionResolution(_Report):
    session_id: str
    session_key: str | None = field(default=None, metadata=OMIT_NONE)
    source: Literal["live", "archived", "recorded", "unresolved"]


@dataclass(slots=True, kw_only=True)
class UnmatchedSelectorModel(_Report):
    selector: Literal["session", "participant", "hookSource", "match"]
    value: str
    close_matches: list[str]  # the known values closest to it, most alike first


@dataclass(slots=True, kw_only=True)
class EntryOriginModel(_Report):
    session_id: str
    session_key: str | None = field(default=None, metadata=OMIT_NONE)


@dataclass(slots=True, kw_only=True)
class ForgottenEntry(_Report):
    """A fact chosen by `entries` or `match`, with the sessions it came from."""

    entry_key: str
    text: str  # the staged snippet or the promoted line ("" when neither is left: a rerun)
    origins: list[EntryOriginModel]


@dataclass(slots=True, kw_only=True)
class CuratedWriteModel(_Report):
    relative_path: str
    observed_at: int  # Unix ms


@dataclass(slots=True, kw_only=True)
class Artifacts(_Report):
    memory_files: int = 0  # memory and diary files changed
    memory_entries: int = 0  # marked entries and session-reference sections removed
    memory_lines: int = 0  # extra whole lines removed for exact corpus snippets
    session_corpus_files: int = 0  # corpus files changed (removed ones included)
    session_corpus_lines: int = 0
    index_chunks: int = 0
    index_sources: int = 0
    fts_rows: int = 0
    vector_rows: int = 0
    embedding_cache_rows: int = 0
    short_term_entries: int = 0
    seen_hash_scopes: int = 0
    backups: int = 0  # rewrite preimages scrubbed (rewritten, not deleted)
    origin_rows: int = 0  # origin rows of the selected keys, every session


@dataclass(slots=True, kw_only=True)
class Counts(_Report):
    """What the report's lists hold, as numbers: kept in a stored result, which empties the lists."""

    sessions_matched: int  # sessions the selectors resolved to (live, archived or unresolved)
    sessions_recorded_forgotten: int  # forgotten-session records written (0 for a dry run)
    entries_removed: int  # memory entries deleted (a dry run: that it would delete)
    mixed_lineage_entries_removed: int
    untargetable_entries: int
    curated_writes_retained: int
    participants_matched: int
    refusals: int
    # A forget of single facts only: (claim, session) pairs suppressed (a dry run: to suppress).
    suppressed_claims: int | None = field(default=None, metadata=OMIT_NONE)


@dataclass(slots=True, kw_only=True)
class ForgetReport(_Report):
    agent_id: str
    dry_run: bool
    # In a stored result (Redis) these lists are empty: they name sessions, people, content
    # hashes and files (daemon/stored_form.py); `artifacts` keeps the counts.
    session_ids: Annotated[list[str], Content]
    participant_matches: Annotated[list[ParticipantMatchModel], Content]
    session_resolutions: Annotated[list[SessionResolution], Content]
    entry_keys: Annotated[list[str], Content]
    mixed_lineage_entry_keys: Annotated[list[str], Content]
    untargetable_entry_keys: Annotated[list[str], Content]
    curated_writes: Annotated[list[CuratedWriteModel], Content]
    artifacts: Artifacts
    refusals: Annotated[list[str], Content]
    counts: Counts  # memoryd's: the reference's fields above, then these numbers
    # Beyond the reference, and only when there is one: selectors that matched nothing, so a
    # typo is not silent.
    unmatched_selectors: Annotated[list[UnmatchedSelectorModel], Content] = field(
        default_factory=list, metadata=OMIT_EMPTY
    )
    # A forget of single facts (`entries`, `match`) only: each chosen entry with its origins.
    forgotten_entries: Annotated[list[ForgottenEntry] | None, Content] = field(
        default=None, metadata=OMIT_NONE
    )
    # A purge with `verify` only: the retention verifier's run over the forgotten sessions'
    # content. Its stored form (Redis) names the kind of a workspace file, never its path. A
    # pydantic model, named through its package (whose `receipts` loads on first use): only
    # pydantic and the stored form evaluate this annotation, never a dry run, which has none.
    verification: memoryd.retention.receipts.Verification | None = field(default=None, metadata=OMIT_NONE)


def _sorted(values: Iterable[str]) -> list[str]:
    return sorted(set(values), key=utf16_key)


def _unmatched(plan: ForgetPlan) -> list[UnmatchedSelectorModel]:
    unmatched = [
        UnmatchedSelectorModel(selector=u.selector, value=u.value, close_matches=list(u.close_matches))
        for u in plan.selection.unmatched
    ]
    if plan.entries.unmatched_match is not None:
        unmatched.append(
            UnmatchedSelectorModel(selector="match", value=plan.entries.unmatched_match, close_matches=[])
        )
    return unmatched


def _forgotten(plan: ForgetPlan) -> list[ForgottenEntry]:
    return [
        ForgottenEntry(
            entry_key=e.entry_key,
            text=e.text,
            origins=[EntryOriginModel(session_id=o.session_id, session_key=o.session_key) for o in e.origins],
        )
        for e in plan.entries.entries
    ]


def build_report(plan: ForgetPlan, *, dry_run: bool) -> ForgetReport:
    """The report of `plan` (a dry run's, or a purge's before it is applied)."""
    selection, idx, lineage = plan.selection, plan.index, plan.lineage
    targets = selection.targets
    by_entry = plan.entries.requested  # forget --entry / --match: the facts chosen, with their origins
    return ForgetReport(
        agent_id=plan.agent_id,
        dry_run=dry_run,
        session_ids=_sorted(t.session_id for t in targets),
        participant_matches=[
            ParticipantMatchModel(actor_id=m.actor_id, identities=list(m.identities))
            for m in selection.participant_matches
        ],
        session_resolutions=[
            SessionResolution(session_id=t.session_id, session_key=t.session_key, source=t.resolution)
            for t in sorted(targets, key=lambda t: locale_key(t.session_id))
        ],
        entry_keys=_sorted(lineage.entry_keys),
        mixed_lineage_entry_keys=_sorted(lineage.mixed_entry_keys),
        untargetable_entry_keys=_sorted(plan.untargetable_keys),
        curated_writes=[
            CuratedWriteModel(relative_path=w.relative_path, observed_at=w.observed_at)
            for w in sorted(plan.curated_writes, key=lambda w: locale_key(w.relative_path))
        ],
        artifacts=Artifacts(
            memory_files=len(plan.memory_rewrites),
            memory_entries=plan.memory_entries,
            memory_lines=plan.memory_lines,
            session_corpus_files=len(plan.corpus_rewrites),
            session_corpus_lines=plan.corpus_lines,
            index_chunks=len(idx.chunk_ids),
            index_sources=len(idx.source_ids),
            fts_rows=idx.fts_rows,
            vector_rows=idx.vector_rows,
            embedding_cache_rows=idx.embedding_cache_rows,
            short_term_entries=len(plan.short_term_keys),
            seen_hash_scopes=len(plan.seen_scopes),
            backups=len(plan.backup_rewrites),
            origin_rows=lineage.origin_rows,
        ),
        refusals=list(plan.refusals),
        counts=Counts(
            sessions_matched=len(targets),
            # Written in the purge's first transaction; a report is returned only once it is complete.
            sessions_recorded_forgotten=0 if dry_run else len(plan.session_ids),
            entries_removed=len(lineage.entry_keys),
            mixed_lineage_entries_removed=len(lineage.mixed_entry_keys),
            untargetable_entries=len(plan.untargetable_keys),
            curated_writes_retained=len(plan.curated_writes),
            participants_matched=len(selection.participant_matches),
            refusals=len(plan.refusals),
            suppressed_claims=len(plan.suppressions) if by_entry else None,
        ),
        unmatched_selectors=_unmatched(plan),
        forgotten_entries=_forgotten(plan) if by_entry else None,
    )
