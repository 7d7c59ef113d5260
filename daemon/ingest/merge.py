"""Committing a batch the parallel scan left in scratch files (daemon/ingest/parallel.py): the
serial commit's steps (daemon/ingest/commit.py `commit_serial`) with rows moved by `INSERT … SELECT`.

Under the workspace lock, with the batch's scratch files attached: check that every part is
there whole (a purge removes scratch files: then nothing of the batch is staged), reserve the
corpus files, append the corpus lines (read from the scratch rows, by day), then one fenced
transaction: staged lines (each the origin of its claim and its session's seen hash,
store/lines.py), staged entries (a claim that appears once and is new to the store is inserted
by SQL; a repeated or already staged one is merged as the serial path merges it), participants,
checkpoints. A batch with a session forgotten meanwhile, or with
lines another sweep of the agent staged since the workers read them, is staged row by row
through the serial path's own write, without that session or those lines.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio

from memoryd.constants import SESSION_INGESTION_SCORE
from memoryd.errors import OperationFailed
from memoryd.failpoints import failpoint
from memoryd.ingest.batch import Batch
from memoryd.ingest.checkpoints import seen_scope
from memoryd.ingest.commit import reserve_corpus_files, write_batch, write_candidates
from memoryd.ingest.staging import StagedMessage, stage_claims
from memoryd.ingest.sweep_state import SweepState
from memoryd.store.checkpoints import Checkpoint, delete_checkpoints, upsert_checkpoints
from memoryd.store.corpus_files import clear_pending_appends
from memoryd.store.db import ANY_SQLITE_ERROR, Connection
from memoryd.store.lines import add_lines
from memoryd.store.participants import ParticipantRow, record_participants
from memoryd.store.scratch import (
    CandRow,
    Part,
    attach,
    delete_part,
    detach,
    merge_lines,
    merge_new_claims,
    part_days,
    part_existing_keys,
    part_keys,
    part_lines,
    part_lines_of_sessions,
    part_present,
    part_rows,
    part_rows_of_keys,
    part_session_files,
    part_sessions_with_lines,
    part_staged_since,
    part_suppressed,
)
from memoryd.store.suppressions import any_suppression

if TYPE_CHECKING:
    from memoryd.lock import Lease

_Named = list[tuple[str, Part]]  # (schema name, part)


def _missing(scratch_dir: object) -> OperationFailed:
    return OperationFailed(
        f"{scratch_dir}: a scratch file of this sweep changed or went before its merge (a forget or "
        "erasure removes them); nothing of this batch was staged and the next sweep reads it again"
    )


async def commit_pooled(
    state: SweepState,
    batch: Batch,
    lease: Lease,
    gone: set[str],
    checkpoints: list[Checkpoint],
    participants: list[ParticipantRow],
) -> tuple[int, int]:
    """Stage `batch.parts` (less the sessions in `gone`) with the batch's checkpoints; (messages
    staged, checkpoints removed). Runs under `lease`."""
    store = state.store
    paths = sorted({p.path for p in batch.parts})
    names: list[str] = []
    try:
        names = await store.run(attach, paths)
        name_of = dict(zip(paths, names, strict=True))
        named = [(name_of[p.path], p) for p in batch.parts]
        if not await store.read(_present, named):
            raise _missing(state.scratch_dir)
        # As the serial commit: another sweep of this agent may have staged lines since the
        # workers read them; those are dropped, through the row-by-row path.
        since = await store.read(_staged_since, named)
        # Lines of a claim forgotten from their session (forget --entry) are dropped the same way.
        suppressed = await store.read(_suppressed, named)
        state.report.messages_suppressed += len(suppressed - since)
        since |= suppressed
        if gone or since:
            staged, removed = await _commit_rowwise(
                state, batch, lease, gone, since, checkpoints, participants, named
            )
        else:
            staged, removed = await _commit_merged(state, batch, lease, checkpoints, participants, named)
        if state.scratch_reclaim:  # a long sweep reuses the pages of merged rows (the files go at its end)
            await store.run(_delete_parts, named)
        return staged, removed
    except ANY_SQLITE_ERROR as exc:
        raise OperationFailed(
            f"{store.path}: ingest merge failed ({exc}); nothing of this batch was staged and the next "
            "sweep reads it again"
        ) from exc
    finally:
        with anyio.CancelScope(shield=True):
            await store.run(detach, names)


async def _commit_merged(
    state: SweepState,
    batch: Batch,
    lease: Lease,
    checkpoints: list[Checkpoint],
    participants: list[ParticipantRow],
    named: _Named,
) -> tuple[int, int]:
    store, corpus, fence = state.store, state.corpus, lease.fence
    days_of, pairs = await store.read(_summaries, named)
    days = sorted({day for per_part in days_of for day, *_ in per_part})
    paths = {day: path for per_part in days_of for day, path, *_ in per_part}
    await store.write(reserve_corpus_files, sorted(pairs), corpus.sizes_before(days), fence=fence)
    failpoint("ingest.corpus.reserved")
    by_day: dict[str, list[str]] = {day: [] for day in days}
    for day, line in await store.read(_lines, named):
        by_day[day].append(line)
    # As the serial path: Redis may have lost the lease, and another holder taken it, since the
    # last renewal; no await between this check and the append.
    await state.rt.lock().confirm(lease)
    appended = await corpus.append(by_day)
    failpoint("ingest.corpus.appended")
    # Each part's corpus line of a row: its day's first new line, plus the rows of that day in
    # earlier parts, plus its day_idx less the part's first day_idx of that day.
    before: Counter[str] = Counter()
    bases: list[dict[str, int]] = []
    for per_part in days_of:
        base = {}
        for day, _path, count, first_idx in per_part:
            base[day] = appended.firsts[day] + before[day] - first_idx
            before[day] += count
        bases.append(base)
    state.report.corpus_files.extend(paths[day] for day in days)
    removed = await write_batch(
        state,
        appended,
        write_parts,
        state.agent,
        named,
        bases,
        sorted(batch.seen_rowwise),
        checkpoints,
        batch.deletions,
        participants,
        state.day_bucket,
        state.now_ms,
        sorted(paths.values()),
        fence=fence,
    )
    return batch.staged_count, removed


async def _commit_rowwise(
    state: SweepState,
    batch: Batch,
    lease: Lease,
    gone: set[str],
    since: set[tuple[str, str]],
    checkpoints: list[Checkpoint],
    participants: list[ParticipantRow],
    named: _Named,
) -> tuple[int, int]:
    """The batch staged through the serial write, without the sessions forgotten meanwhile and
    the lines (session id, seen hash) staged since by another state."""
    store, corpus, fence = state.store, state.corpus, lease.fence
    rows = [CandRow(*r) for r in await store.read(_all_rows, named)]
    live = [r for r in rows if r.session_id not in gone]
    state.report.messages_dropped_forgotten += len(rows) - len(live)
    kept = [r for r in live if (r.session_id, r.seen_hash) not in since]
    by_day: dict[str, list[CandRow]] = {}
    for r in kept:
        by_day.setdefault(r.day, []).append(r)
    days = dict(sorted(by_day.items()))
    appended = None
    staged: list[StagedMessage] = []
    seen: dict[str, list[str]] = {}
    if days:
        pairs = sorted({(r.session_id, r.path) for r in kept})
        await store.write(reserve_corpus_files, pairs, corpus.sizes_before(list(days)), fence=fence)
        failpoint("ingest.corpus.reserved")
        await state.rt.lock().confirm(lease)  # as in _commit_merged
        appended = await corpus.append({day: [r.line for r in group] for day, group in days.items()})
        failpoint("ingest.corpus.appended")
        for day, group in days.items():
            first = appended.firsts[day]
            state.report.corpus_files.append(group[0].path)
            for offset, r in enumerate(group):
                staged.append(_staged(r, first + offset))
                seen.setdefault(seen_scope(state.agent, r.session_id), []).append(r.seen_hash)
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
        sorted({r.path for r in kept}),
        fence=fence,
    )
    return len(staged), removed


def _staged(r: CandRow, line: int) -> StagedMessage:
    return StagedMessage(
        r.claim_hash,
        r.snippet,
        r.path,
        line,
        r.origin_class,
        r.session_kind,
        r.observed_at,
        r.session_id,
        r.session_key,
        r.query_hash,
    )


# --- on the store's thread ------------------------------------------------------------------------


def _present(conn: Connection, named: _Named) -> bool:
    return all(part_present(conn, name, part) for name, part in named)


def _summaries(
    conn: Connection, named: _Named
) -> tuple[list[list[tuple[str, str, int, int]]], set[tuple[str, str]]]:
    pairs: set[tuple[str, str]] = set()
    for name, part in named:
        pairs.update(part_session_files(conn, name, part))
    return [part_days(conn, name, part) for name, part in named], pairs


def _lines(conn: Connection, named: _Named) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for name, part in named:
        out += part_lines(conn, name, part)
    return out


def _all_rows(conn: Connection, named: _Named) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for name, part in named:
        out += part_rows(conn, name, part)
    return out


def _staged_since(conn: Connection, named: _Named) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for name, part in named:
        out |= part_staged_since(conn, name, part)
    return out


def _suppressed(conn: Connection, named: _Named) -> set[tuple[str, str]]:
    if not any_suppression(conn):
        return set()
    out: set[tuple[str, str]] = set()
    for name, part in named:
        out |= part_suppressed(conn, name, part)
    return out


def _delete_parts(conn: Connection, named: _Named) -> None:
    for name, part in named:
        delete_part(conn, name, part)


def write_parts(
    conn: Connection,
    agent_id: str,
    named: _Named,
    bases: Sequence[dict[str, int]],
    seen_rowwise: Sequence[str],
    checkpoints: list[Checkpoint],
    deletions: list[str],
    participants: list[ParticipantRow],
    day_bucket: str,
    now_ms: int,
    appended_paths: list[str],
) -> int:
    """The batch's one fenced transaction, in the serial `_write_batch`'s order."""
    clear_pending_appends(conn, appended_paths)
    # Staged lines first (the origins: lineage is reserved before the entries are published). A
    # session split between batches, or with lines already, gets numbers after its last line.
    rowwise = set(seen_rowwise)
    for name, part in named:
        rowwise |= part_sessions_with_lines(conn, name, part)
    skip_sessions = sorted(rowwise)
    for name, part in named:
        merge_lines(conn, name, part, skip_sessions)
        if skip_sessions:
            add_lines(conn, part_lines_of_sessions(conn, name, part, skip_sessions))
    repeated = Counter(k for name, part in named for k in part_keys(conn, name, part))
    special = {k for k, n in repeated.items() if n > 1}
    for name, part in named:
        special |= part_existing_keys(conn, name, part)
    skip = sorted(special)
    for (name, part), base in zip(named, bases, strict=True):
        merge_new_claims(conn, name, part, base, skip, day_bucket, now_ms, SESSION_INGESTION_SCORE)
    if skip:
        # In staging order: by day, then reading order (parts are in reading order).
        found: list[tuple[str, int, int, StagedMessage]] = []
        for i, ((name, part), base) in enumerate(zip(named, bases, strict=True)):
            for raw in part_rows_of_keys(conn, name, part, skip):
                r = CandRow(*raw)
                found.append((r.day, i, r.day_idx, _staged(r, base[r.day] + r.day_idx)))
        found.sort(key=lambda f: f[:3])
        stage_claims(conn, [f[3] for f in found], day_bucket, now_ms)
    record_participants(conn, participants)
    upsert_checkpoints(conn, checkpoints)
    return delete_checkpoints(conn, deletions)
