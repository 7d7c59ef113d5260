"""Committing a batch of the serial scan, under the workspace lock, after the sweep's re-check
of the exclusion set (daemon/ingest/sweep.py `_Sweep._commit`): reserve the corpus files,
append the corpus lines, then one fenced transaction with origins, staged entries, the
sessions' participants, seen hashes and checkpoints. `write_batch` is that transaction for the
pooled commit too (daemon/ingest/merge.py): a failed one undoes its corpus append."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from memoryd.errors import OperationFailed
from memoryd.failpoints import failpoint
from memoryd.ingest.batch import Batch
from memoryd.ingest.checkpoints import seen_scope
from memoryd.ingest.corpus import Appended, corpus_relative_path, render_line
from memoryd.ingest.scan import Candidate
from memoryd.ingest.staging import StagedMessage, claim_hash, query_hash, session_query, write_staging
from memoryd.ingest.sweep_state import SweepState
from memoryd.store.checkpoints import Checkpoint, delete_checkpoints, upsert_checkpoints
from memoryd.store.corpus_files import clear_pending_appends, record_corpus_files, record_pending_appends
from memoryd.store.db import ANY_SQLITE_ERROR, Connection, FenceToken
from memoryd.store.participants import ParticipantRow, record_participants
from memoryd.store.seen_hashes import add_seen, seen_among
from memoryd.store.suppressions import suppressed_among

if TYPE_CHECKING:
    from memoryd.lock import Lease

log = logging.getLogger("memoryd.ingest")


def commit_failed(path: object, exc: BaseException) -> OperationFailed:
    """A batch's reservation or commit failed: nothing of it was staged (its corpus append is
    cut back), so the next sweep reads it again."""
    return OperationFailed(
        f"{path}: ingest commit failed ({exc}); nothing of this batch was staged and the next sweep reads it again"
    )


async def commit_serial(
    state: SweepState,
    batch: Batch,
    lease: Lease,
    gone: set[str],
    checkpoints: list[Checkpoint],
    participants: list[ParticipantRow],
) -> tuple[int, int]:
    """Stage `batch.candidates` (less the sessions in `gone`) with the batch's checkpoints;
    (messages staged, checkpoints removed). Runs under `lease`."""
    store, report = state.store, state.report
    candidates = batch.candidates
    if gone:
        kept = [c for c in candidates if c.session_id not in gone]
        report.messages_dropped_forgotten += len(candidates) - len(kept)
        candidates = kept
    candidates = await _without_suppressed(state, candidates)
    if candidates:  # another sweep of this agent may have staged them since we read them
        keys = [(seen_scope(state.agent, c.session_id), c.seen_hash) for c in candidates]
        staged_since = await store.read(seen_among, keys)
        if staged_since:
            candidates = [c for c, k in zip(candidates, keys, strict=True) if k not in staged_since]
    if candidates:  # reserved before the append, so forget can find every line written
        try:
            await store.write(
                reserve_corpus_files,
                [(c.session_id, corpus_relative_path(c.day)) for c in candidates],
                state.corpus.sizes_before(sorted({c.day for c in candidates})),
                fence=lease.fence,
            )
        except ANY_SQLITE_ERROR as exc:
            raise commit_failed(store.path, exc) from exc
        failpoint("ingest.corpus.reserved")
        # No await between this check and the append: no other job of this process
        # can take the lease in between.
        await state.rt.lock().confirm(lease)
    appended, staged, seen = await _append_corpus(state, candidates)
    failpoint("ingest.corpus.appended")
    try:
        removed = await write_batch(
            state,
            appended,
            write_candidates,
            state.agent,
            staged,
            seen,
            checkpoints,
            batch.deletions,
            participants,
            state.day_bucket,
            state.now_ms,
            sorted({corpus_relative_path(c.day) for c in candidates}),
            fence=lease.fence,
        )
    except ANY_SQLITE_ERROR as exc:
        raise commit_failed(store.path, exc) from exc
    return len(staged), removed


async def _without_suppressed(state: SweepState, candidates: list[Candidate]) -> list[Candidate]:
    """Less the claims forgotten from their session (forget --entry): never staged again."""
    if not candidates:
        return candidates
    pairs = [(claim_hash(c.snippet), c.session_id) for c in candidates]
    suppressed = await state.store.read(suppressed_among, pairs)
    if not suppressed:
        return candidates
    kept = [c for c, p in zip(candidates, pairs, strict=True) if p not in suppressed]
    state.report.messages_suppressed += len(candidates) - len(kept)
    return kept


async def write_batch(
    state: SweepState, appended: Appended | None, fn: Callable[..., int], *args: Any, fence: FenceToken
) -> int:
    """The batch's store commit; if it fails (fenced off, disk full, cancelled) its corpus
    append is undone, so the retry stages those lines once and a writer that lost its lease
    leaves nothing of a session forgotten meanwhile."""
    try:
        return await state.store.write(fn, *args, fence=fence)
    except BaseException:
        if appended is not None:
            left = state.corpus.undo(appended)
            if left:  # another writer changed the file since: its sweep or forget owns it now
                log.warning("ingest %s: corpus append not undone in %d file(s)", state.agent, len(left))
        raise


async def _append_corpus(
    state: SweepState, candidates: Sequence[Candidate]
) -> tuple[Appended | None, list[StagedMessage], dict[str, list[str]]]:
    by_day: dict[str, list[Candidate]] = {}
    for c in candidates:
        by_day.setdefault(c.day, []).append(c)
    paths = state.paths_by_id
    days = dict(sorted(by_day.items()))
    if not days:
        return None, [], {}
    appended = await state.corpus.append(
        {
            day: [render_line(state.agent, paths[c.session_id], c.line_number, c.snippet) for c in group]
            for day, group in days.items()
        }
    )
    firsts = appended.firsts
    staged: list[StagedMessage] = []
    seen_by_id: dict[str, list[str]] = {}
    kinds = state.kinds_by_id
    for day, group in days.items():
        path = corpus_relative_path(day)
        state.report.corpus_files.append(path)
        qh = query_hash(session_query(day))
        first = firsts[day]
        for offset, c in enumerate(group):
            staged.append(
                StagedMessage(
                    claim_hash(c.snippet),
                    c.snippet,
                    path,
                    first + offset,
                    c.origin_class,
                    kinds[c.session_id],
                    c.observed_at,
                    c.session_id,
                    c.session_key,
                    qh,
                )
            )
            seen_by_id.setdefault(c.session_id, []).append(c.seen_hash)
    return appended, staged, {seen_scope(state.agent, sid): hashes for sid, hashes in seen_by_id.items()}


# --- on the store's thread ------------------------------------------------------------------------


def reserve_corpus_files(
    conn: Connection, pairs: list[tuple[str, str]], sizes: list[tuple[str, int, int]]
) -> None:
    """Before an append: which corpus files the sessions' lines go to, and each file's size (so a
    writer after a crash can cut off an append that never committed)."""
    record_corpus_files(conn, pairs)
    record_pending_appends(conn, sizes)


def write_candidates(
    conn: Connection,
    agent_id: str,
    staged: list[StagedMessage],
    seen: dict[str, list[str]],
    checkpoints: list[Checkpoint],
    deletions: list[str],
    participants: list[ParticipantRow],
    day_bucket: str,
    now_ms: int,
    appended_paths: list[str],
) -> int:
    """A serial batch's one fenced transaction: staged lines (origins and seen hashes), staged
    entries, participants, checkpoints."""
    clear_pending_appends(conn, appended_paths)  # committed with its lines: nothing to cut off
    # Each session's seen hashes are in the order of its staged messages: one line each.
    hashes = {scope: iter(digests) for scope, digests in seen.items()}
    aligned = [next(hashes.get(seen_scope(agent_id, m.session_id), iter(())), None) for m in staged]
    write_staging(
        conn, agent_id, staged, day_bucket, now_ms, aligned
    )  # lines (origins, seen hashes), then entries
    record_participants(conn, participants)
    left = {scope: list(rest) for scope, rest in hashes.items()}
    add_seen(conn, {scope: rest for scope, rest in left.items() if rest})  # none: one hash a message
    upsert_checkpoints(conn, checkpoints)
    return delete_checkpoints(conn, deletions)
