"""Executing a forget plan (reference §7.9), under the workspace lock the caller holds.

Order, and why:
1. forgotten records (or, for a forget of single facts, the suppressed claims), in their own
   transaction (revision and fence bumped even when every record existed): durable before any
   artifact is touched, so a crash anywhere later leaves the sessions (the facts) excluded from
   every admission path;
2. the index purge (chunks, FTS rows, vectors, sources, embedding cache);
3. derived state: phase signals first (they are derived from staged entries), staged
   entries, checkpoints, seen hashes, backfill journal rows, then rewrite preimages;
4. memory files and diaries;
5. corpus files, and the leftover temp files of crashed atomic writes anywhere in the workspace
   (daemon/fileio.py), then origin rows, corpus-file records, recorded participants and the
   forgotten sessions' suppressed claims (their forgotten records exclude more) last: while
   they remain they still identify the remaining work, so a rerun after any failure finds it.

Every transaction re-reads the lineage first; if another writer changed it, nothing in that
transaction is applied and the caller re-plans under the same lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

from memoryd.errors import MemorydError, OperationFailed
from memoryd.failpoints import failpoint
from memoryd.fileio import commit_file, remove_leftover_temps_under
from memoryd.forget.lineage import read_lineage
from memoryd.forget.plan import FileRewrite, ForgetPlan
from memoryd.forget.refs import references_session
from memoryd.forget.scrub import corpus_line_claim
from memoryd.index.purge import clear_embedding_cache, purge_chunks, rebuild_is_cheaper
from memoryd.store.backfill_journal import (
    corpus_line_rows,
    delete_origin_rows_of_sessions,
    delete_rows,
    delete_rows_of_entries,
)
from memoryd.store.checkpoints import delete_checkpoints
from memoryd.store.corpus_files import delete_corpus_files
from memoryd.store.db import ANY_SQLITE_ERROR, Connection, FenceToken, Store
from memoryd.store.index_chunks import fts_shape, rewrite_chunk_pages, rowids_of_chunks
from memoryd.store.index_sources import delete_sources_by_id
from memoryd.store.index_state import bump_revision
from memoryd.store.lines import delete_sessions
from memoryd.store.origins import delete_origins_for_entries
from memoryd.store.participants import delete_participants_of_sessions
from memoryd.store.phase_signals import delete_signals
from memoryd.store.preimages import rewrite_preimage
from memoryd.store.seen_hashes import delete_scopes
from memoryd.store.short_term import purge_entries
from memoryd.store.suppressions import delete_suppressions_of_sessions, record_suppressions
from memoryd.store.tombstones import forgotten_ids, record_tombstones

RERUN_HINT = (
    "the forgotten records are in force and the remaining evidence is kept; "
    "fix the cause and rerun the same forget"
)


class LineageChanged(Exception):
    """Another writer changed the selected lineage (or a planned row) since planning."""


@dataclass(frozen=True, slots=True)
class ApplyOutcome:
    complete: bool
    tombstoned: bool


def _check_lineage(conn: Connection, plan: ForgetPlan) -> None:
    by_entry = bool(plan.entries.entries)
    now = read_lineage(conn, plan.agent_id, plan.session_ids, plan.lineage.entry_keys, by_entry=by_entry)
    if now.identity != plan.lineage.identity:
        raise LineageChanged


def _mark(conn: Connection, plan: ForgetPlan, now_ms: int, secret: bytes | None = None) -> int:
    _check_lineage(conn, plan)
    failpoint("forget.mark")
    if plan.entries.entries:
        # Single facts: their sessions stay, the claims from them are suppressed.
        added = record_suppressions(conn, plan.suppressions, now_ms)
        bump_revision(conn)  # fences index publications prepared before this purge
        return added
    ids = sorted(plan.session_ids)
    # An erased session keeps only its `hmac:` record: a plain one would put its id back in clear.
    erased = forgotten_ids(conn, ids, secret) - forgotten_ids(conn, ids) if secret is not None else set()
    return record_tombstones(conn, plan.agent_id, [s for s in ids if s not in erased], now_ms)


def _purge_index(conn: Connection, plan: ForgetPlan) -> None:
    _check_lineage(conn, plan)
    failpoint("forget.index")
    idx = plan.index
    # Set-based, by key: the cost follows the selected rows, not the index size. purge_chunks
    # removes FTS rows (and their terms: secure-delete), vectors, provenance, recall rows; the
    # chunks that shared their pages are rewritten (no older copy left in a page's free gap).
    purged = rowids_of_chunks(conn, list(idx.chunk_ids))
    # A large purge merges the index into one segment instead (rebuild_is_cheaper).
    rebuild = rebuild_is_cheaper(fts_shape(conn), idx.fts_rows)
    purge_chunks(conn, idx.chunk_ids, rebuild_segments=rebuild)
    rewrite_chunk_pages(conn, purged)
    delete_sources_by_id(conn, idx.source_ids)
    if idx.clear_embedding_cache:
        clear_embedding_cache(conn)  # agent-wide, recomputable, carries no attribution
    bump_revision(conn)  # fences index publications prepared before this purge, even with no rows


def _purge_state(conn: Connection, plan: ForgetPlan) -> None:
    _check_lineage(conn, plan)
    failpoint("forget.state")
    # Phase signals first: derived from staged entries, which stay the evidence for a retry.
    delete_signals(conn, plan.phase_signal_keys)
    purge_entries(conn, plan.short_term_keys)  # and the rows that shared their pages
    delete_checkpoints(conn, plan.checkpoint_keys)
    delete_scopes(conn, plan.seen_scopes)
    _purge_backfill_journal(conn, plan)
    failpoint("forget.preimages")
    for b in plan.backup_rewrites:
        if not rewrite_preimage(conn, b.id, b.content, b.content_hash, b.expected_hash):
            raise LineageChanged  # the preimage was rotated or rewritten since planning


def _purge_backfill_journal(conn: Connection, plan: ForgetPlan) -> None:
    """Backfill's rollback journal keeps what a run added: origin rows (session ids), prior
    staged rows (snippets) and appended corpus lines. Rows of the selected sessions and entry
    keys go with the staged state, so neither the text nor a later rollback outlives the purge."""
    delete_origin_rows_of_sessions(conn, sorted(plan.session_ids))
    delete_rows_of_entries(conn, sorted(plan.lineage.entry_keys))
    # Corpus lines carry their session in the citation; the journal has as many as backfill
    # appended, so this reads that history, never the store's origins or index.
    claims = set(plan.suppressions)
    doomed = [
        rowid
        for rowid, payload in corpus_line_rows(conn)
        if references_session(payload, plan.agent_id, plan.session_ids)
        or (claims and corpus_line_claim(payload, plan.agent_id) in claims)
    ]
    delete_rows(conn, doomed)


def _purge_origins(conn: Connection, plan: ForgetPlan) -> int:
    _check_lineage(conn, plan)
    failpoint("forget.origins")
    # The corpus-file records and recorded participants go with the origins: until the corpus
    # is clean they still say where a rerun must look (and whose sessions these were).
    delete_corpus_files(conn, plan.session_ids)
    delete_participants_of_sessions(conn, sorted(plan.session_ids))
    # A forgotten session's record excludes every claim of it; its suppressed claims (hashes of
    # its text) go, so no derivation of it outlives the purge.
    delete_suppressions_of_sessions(conn, sorted(plan.session_ids))
    removed = delete_origins_for_entries(conn, plan.agent_id, sorted(plan.lineage.entry_keys))
    # Their numbers (session ids and keys) and whatever line of theirs is left go with them.
    delete_sessions(conn, sorted(plan.session_ids))
    return removed


def _commit_files(workspace: Path, rewrites: Sequence[FileRewrite], stage: str) -> None:
    for w in rewrites:
        failpoint(stage)
        name = Path(w.relative_path).name
        try:
            commit_file(
                workspace / w.relative_path,
                w.content,
                expected_hash=w.expected_hash,
                root=workspace,
                conflict_message=f"{name} changed before the memory forget rewrite could commit; "
                + RERUN_HINT,
            )
        except MemorydError:
            raise
        except OSError as exc:
            raise OperationFailed(
                f"{w.relative_path}: forget rewrite failed: {exc.strerror or exc}; " + RERUN_HINT
            ) from None


async def _write(
    store: Store,
    stage: str,
    fn: Callable[[Connection, ForgetPlan], object],
    plan: ForgetPlan,
    fence: FenceToken,
) -> None:
    try:
        await store.write(fn, plan, fence=fence)
    except ANY_SQLITE_ERROR as exc:
        raise OperationFailed(f"forget: {stage} failed: {exc}; {RERUN_HINT}") from exc


async def apply_plan(
    store: Store,
    workspace: Path,
    plan: ForgetPlan,
    fence: FenceToken,
    *,
    tombstoned: bool,
    secret: bytes | None = None,
) -> ApplyOutcome:
    """Apply `plan`; `complete=False` means the lineage changed and the caller must re-plan.

    `tombstoned` says a previous round already committed the forgotten records; `secret` (the
    agent's key, when one exists) finds sessions an erasure already recorded in hashed form.
    """
    try:
        if not tombstoned:
            try:
                await store.write(_mark, plan, int(time.time() * 1000), secret, fence=fence)
            except ANY_SQLITE_ERROR as exc:
                raise OperationFailed(
                    f"forget: recording forgotten sessions failed: {exc}; nothing was "
                    "removed, fix the cause and rerun the same forget"
                ) from exc
            tombstoned = True
        if not plan.index.empty:
            await _write(store, "index purge", _purge_index, plan, fence=fence)
        await _write(store, "state purge", _purge_state, plan, fence=fence)
    except LineageChanged:
        return ApplyOutcome(False, tombstoned)
    # fsync-heavy file commits run off the event loop, so the lease keeps renewing.
    await anyio.to_thread.run_sync(_commit_files, workspace, plan.memory_rewrites, "forget.memory_files")
    await anyio.to_thread.run_sync(_commit_files, workspace, plan.corpus_rewrites, "forget.corpus")
    # A crashed write's temp may hold a copy of what was just scrubbed: every purge ends them.
    await anyio.to_thread.run_sync(remove_leftover_temps_under, workspace)
    try:
        await _write(store, "origin purge", _purge_origins, plan, fence=fence)
    except LineageChanged:
        return ApplyOutcome(False, tombstoned)
    return ApplyOutcome(True, tombstoned)
