"""One ingest sweep of one agent (reference §4.4, §5.1–§5.4; DESIGN §5 "Ingest sweep").

1. Enumerate sessions from metadata (an idle agent's listing is kept parsed between sweeps);
   read forgotten records and checkpoint stamps (what decides "unchanged") in one store read.
2. Decide admission per session before any transcript byte is read; an excluded session gets
   a checkpoint with its reason and an empty hash (written once, not every sweep). A session
   whose retention scope has expired is excluded too (reason `expired`): expiry hides it from
   every reader, so no new memory is derived from it.
3. Stat the admitted ones; an unchanged one costs that stat and nothing else. The full
   checkpoints of the changed ones are read in one go. A live sweep may be handed the sessions
   to consider (those the watcher saw change): it stats only those of the admitted ones.
4. Stream the changed ones from their cursors, outside the lock, within the per-sweep and
   per-file caps, in batches (5,000 messages, more as the store grows: ingest/batch.py). A run
   of small sessions is read in one worker-thread hand-off, not one each (a first sweep reads
   hundreds).
5. Commit each batch under the workspace lock: re-check forgotten records (a session forgotten
   meanwhile is dropped, never staged), append corpus lines, then one fenced transaction with
   origins, staged entries, the sessions' participants (metadata and message senders), seen
   hashes and checkpoints; stale checkpoints are removed.
   A batch commits in the background while the next one is read (commits stay in order, one
   at a time), so the store's work overlaps the parsing instead of adding to it. The corpus
   day files are fsynced once each when the sweep ends, not per batch (daemon/ingest/corpus.py).
A sweep with nothing to commit takes no lock and writes nothing.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.lowlevel
import orjson

from memoryd.constants import (
    EXCLUSION_STALE_RETRIES,
    INGEST_SCRATCH_RECLAIM_BYTES,
    INGEST_SEEN_PREFETCH_SESSIONS,
    INGEST_TAKE_CHUNK,
)
from memoryd.errors import MemorydError
from memoryd.failpoints import failpoint
from memoryd.ingest.batch import Batch
from memoryd.ingest.checkpoints import StampSet, StampSets, load_stamp_set, seen_scope, state_key
from memoryd.ingest.commit import commit_serial
from memoryd.ingest.decided import DecidedListing, DecidedListings, apply_forgotten_and_expiry, decide_listing
from memoryd.ingest.merge import commit_pooled
from memoryd.ingest.parallel import scan_with_workers, use_workers, worker_count
from memoryd.ingest.pending_appends import cut_off_uncommitted
from memoryd.ingest.plan import (
    ScanAction,
    ScanPlan,
    excluded_checkpoint_needs_write,
    file_cap,
    per_file_cap,
    plan_scan,
)
from memoryd.ingest.report import IngestReport
from memoryd.ingest.scan import Candidate, Cursor, TranscriptScanner
from memoryd.ingest.sweep_state import SweepState
from memoryd.retention.gate import load_gate
from memoryd.sessions.admission import policy_of
from memoryd.sessions.json_store import JsonSessionSource
from memoryd.sessions.model import Fingerprint, SessionInfo
from memoryd.store.checkpoints import (
    Checkpoint,
    CheckpointStamp,
    load_checkpoints_by_key,
)
from memoryd.store.db import Connection
from memoryd.store.erased_senders import ErasedSenders, load_erased_senders
from memoryd.store.exclusions import exclusion_generation
from memoryd.store.participants import ParticipantRow
from memoryd.store.scratch import ensure_scratch_dir, remove_scratch, remove_sweep_scratch
from memoryd.store.seen_hashes import load_seen
from memoryd.store.short_term import staged_so_far
from memoryd.store.tombstones import REASON_FORGOTTEN, any_tombstone, forgotten_ids

if TYPE_CHECKING:
    from memoryd.agent_runtime import AgentRuntime
    from memoryd.ops.op import ProgressFn

log = logging.getLogger("memoryd.ingest")


def _excluded_checkpoint(session: SessionInfo, reason: str, now_ms: int) -> Checkpoint:
    # The reference's shape: no read, size 0, empty hash (so lifting the rule forces a rescan).
    return Checkpoint(
        state_key(session.agent_id, session.session_path),
        session.agent_id,
        session.session_id,
        session.session_key,
        session.session_path,
        session.updated_at or 0,
        0,
        "",
        0,
        0,
        False,
        "",
        reason,
        now_ms,
    )


def _scanned_checkpoint(session: SessionInfo, fp: Fingerprint, cursor: Cursor, now_ms: int) -> Checkpoint:
    return Checkpoint(
        state_key(session.agent_id, session.session_path),
        session.agent_id,
        session.session_id,
        session.session_key,
        session.session_path,
        fp.mtime_ms,
        fp.size,
        cursor.content_hash,
        cursor.line_count,
        cursor.produced,
        cursor.at_end,
        cursor.carry,
        None,
        now_ms,
    )


def _load_state(
    conn: Connection,
    stamps: StampSets,
    db_path: str,
    agent_id: str,
    session_ids: list[str],
    secret: bytes | None,
) -> tuple[int, set[str], StampSet, ErasedSenders, int]:
    """The exclusion set (with its generation, read first), the checkpoint stamps and how many
    entries the store has staged."""
    return (
        exclusion_generation(conn),
        _forgotten(conn, session_ids, secret),
        load_stamp_set(conn, stamps, db_path, agent_id),
        load_erased_senders(conn, secret),
        staged_so_far(conn),
    )


def _forgotten(conn: Connection, session_ids: list[str], secret: bytes | None) -> set[str]:
    # Most stores have no forgotten records: then one probe replaces a keyed hash per session.
    if not any_tombstone(conn):
        return set()
    return forgotten_ids(conn, session_ids, secret)


def _forgotten_under_lock(
    conn: Connection, touched: list[str], checkpoint_ids: list[str], secret: bytes | None
) -> tuple[int, set[str], set[str]]:
    """(the exclusion generation, touched sessions forgotten meanwhile, checkpoint sessions whose
    record is hashed only). An erased session keeps only an `hmac:` record: a checkpoint would
    write its id back in clear."""
    gone = forgotten_ids(conn, touched, secret) if touched else set()
    erased = (
        forgotten_ids(conn, checkpoint_ids, secret) - forgotten_ids(conn, checkpoint_ids)
        if checkpoint_ids and secret is not None
        else set()
    )
    return exclusion_generation(conn), gone, erased


def _participant_rows(
    sessions: Sequence[SessionInfo], senders: Mapping[str, Mapping[str, Any]], erased: ErasedSenders
) -> list[ParticipantRow]:
    """Who took part in the sessions read: their metadata's participants and the senders of
    their messages (a sender's namespace is its senderIdentity minus `id`), less the senders an
    erasure removed from the session (its metadata may still name them)."""
    rows: list[ParticipantRow] = []
    for s in sessions:
        skips = erased.test_for(s.session_id)
        seen: set[str] = {p.actor_id for p in s.participants if skips(p.actor_id)} if skips else set()
        for p in s.participants:
            if p.actor_id not in seen:
                seen.add(p.actor_id)
                rows.append(ParticipantRow(s.session_id, p.actor_id, _namespace_json(dict(p.namespace))))
        for actor, identity in senders.get(s.session_id, {}).items():
            if actor not in seen:
                seen.add(actor)
                namespace = (
                    {k: v for k, v in identity.items() if k != "id"} if isinstance(identity, dict) else {}
                )
                rows.append(ParticipantRow(s.session_id, actor, _namespace_json(namespace)))
    return rows


def _namespace_json(namespace: dict[str, Any]) -> str:
    try:
        return orjson.dumps(namespace, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # a value JSON cannot hold: the id alone still finds the session
        return "{}"


class _Reading:
    """A scanner read in worker threads, opened by its first take."""

    def __init__(self, scanner: TranscriptScanner):
        self.scanner = scanner
        self.opened = False

    def take(self, limit: int) -> list[Candidate]:
        if not self.opened:
            self.scanner.open()
            failpoint("ingest.scan.open")  # the transcript is open (tests swap it for a FIFO here)
            self.opened = True
        return self.scanner.take(limit)


@dataclass
class _FirstTake:
    """A session's first take, read with the sessions before and after it in one thread hop
    (`_Sweep._first_takes`): most transcripts are read whole by it."""

    session: SessionInfo
    fp: Fingerprint
    plan: ScanPlan
    reading: _Reading
    cap: int  # the session's message cap
    found: list[Candidate] = field(default_factory=list)
    error: MemorydError | OSError | None = None  # the take failed (nothing of it was kept)


class _Sweep:
    def __init__(
        self, rt: AgentRuntime, progress: ProgressFn | None = None, consider: frozenset[str] | None = None
    ):
        self.rt = rt
        self.state = SweepState.start(rt, progress)
        self.consider = consider  # session ids to stat; None: every admitted one
        self._tg: anyio.abc.TaskGroup | None = None
        self._done: anyio.Event | None = None  # set when the commit in flight has finished

    @property
    def stale(self) -> bool:
        """A purge committed while this sweep read: run_ingest_sweep reads again (SweepState.stale)."""
        return self.state.stale

    def _exclude(self, reason: str) -> None:
        excluded = self.state.report.sessions_excluded
        excluded[reason] = excluded.get(reason, 0) + 1

    async def run(self) -> IngestReport:
        # The listing and the stat of every transcript are file I/O: off the event loop.
        decided = await anyio.to_thread.run_sync(self._decide)
        (
            self.state.generation,
            forgotten,
            (stamps, settled),
            self.state.erased,
            self.state.staged_before,
        ) = await self.state.store.read(
            _load_state,
            self.rt.caches.part(StampSets),
            str(self.state.store.path),
            self.state.agent,
            decided.session_ids,
            self.state.secret,
        )
        admitted, excluded = await self._admit_now(decided, forgotten)
        batch = self.state.new_batch(0)
        self._record_exclusions(excluded, stamps, batch)
        considered = (
            admitted if self.consider is None else [a for a in admitted if a[1].session_id in self.consider]
        )
        changed = await anyio.to_thread.run_sync(
            self._stat_admitted, considered, stamps, settled, decided.keys, batch
        )
        to_scan = await self._plan_scans(changed, stamps)
        self.state.sessions_to_read = len(to_scan)
        await self._scan_and_commit(to_scan, len(admitted), batch)
        return self._finished_report()

    def _decide(self) -> DecidedListing:
        """Step 1 (module docstring): the listing and what the admission policy alone decides of
        it (kept while the listing is idle)."""
        listing = self.rt.sessions.list_sessions()
        self.state.report.errors.extend(listing.errors)
        policy = policy_of(self.state.settings)
        decided = decide_listing(self.rt.caches.part(DecidedListings), self.state.agent, listing, policy)
        self.state.report.sessions_seen = len(decided.admitted) + len(decided.excluded)
        return decided

    async def _admit_now(
        self, decided: DecidedListing, forgotten: set[str]
    ) -> tuple[list[tuple[str, SessionInfo]], list[tuple[str, SessionInfo, str]]]:
        """Step 2: the decided split with this sweep's forgotten records and expired scopes."""
        gate = await load_gate(self.state.settings)
        expiring = gate.active  # read once: most stores have nothing expired
        if not (forgotten or expiring):
            return decided.admitted, decided.excluded
        return apply_forgotten_and_expiry(decided, forgotten, gate if expiring else None)

    def _record_exclusions(
        self,
        excluded: list[tuple[str, SessionInfo, str]],
        stamps: Mapping[str, CheckpointStamp],
        batch: Batch,
    ) -> None:
        """Step 2: an excluded session's checkpoint (written once, not every sweep) and counts."""
        for key, session, reason in excluded:
            if excluded_checkpoint_needs_write(stamps.get(key), reason, session.updated_at or 0):
                batch.checkpoints[key] = _excluded_checkpoint(session, reason, self.state.now_ms)
        report = self.state.report
        for reason, count in Counter(reason for _, _, reason in excluded).items():
            report.sessions_excluded[reason] = report.sessions_excluded.get(reason, 0) + count

    def _stat_admitted(
        self,
        admitted: list[tuple[str, SessionInfo]],
        stamps: Mapping[str, CheckpointStamp],
        settled: Mapping[str, tuple[int, int]],
        listed_keys: frozenset[str],
        batch: Batch,
    ) -> list[tuple[str, SessionInfo, Fingerprint]]:
        """Step 3: each admitted session's stat against its stamp. An unchanged one costs that
        stat and nothing else (the whole of a quiet re-sweep); the changed ones are returned.
        Checkpoints of sessions no longer listed, or whose transcript is gone, are deleted."""
        fingerprint = self.rt.sessions.fingerprints([session for _, session in admitted]).get
        settled_fp = settled.get
        changed: list[tuple[str, SessionInfo, Fingerprint]] = []
        missing: list[str] = []
        n_missing = 0
        for key, session in admitted:
            fp = fingerprint(session.session_id)
            if fp is None:
                n_missing += 1
                if key in stamps:
                    missing.append(key)
            elif settled_fp(key) != fp:  # not is_unchanged(stamp, fp), with the lookup in C
                changed.append((key, session, fp))
        self.state.report.sessions_missing += n_missing
        self.state.report.sessions_unchanged = len(admitted) - n_missing - len(changed)
        batch.deletions.extend(sorted(stamps.keys() - listed_keys))
        batch.deletions.extend(missing)
        return changed

    async def _plan_scans(
        self, changed: list[tuple[str, SessionInfo, Fingerprint]], stamps: Mapping[str, CheckpointStamp]
    ) -> list[tuple[SessionInfo, Fingerprint, ScanPlan]]:
        """Step 3: the full checkpoints of the changed sessions, read in one go, and a scan plan
        for each that still needs reading."""
        with_checkpoint = [key for key, _, _ in changed if key in stamps]
        checkpoints = (
            await self.state.store.read(load_checkpoints_by_key, with_checkpoint) if with_checkpoint else {}
        )
        to_scan: list[tuple[SessionInfo, Fingerprint, ScanPlan]] = []
        for key, session, fp in changed:
            plan = plan_scan(checkpoints.get(key), fp)
            if plan.action is ScanAction.UNCHANGED:  # its checkpoint moved on after the stamp was read
                self.state.report.sessions_unchanged += 1
                continue
            to_scan.append((session, fp, plan))
            self.state.paths_by_id[session.session_id] = session.session_path
            self.state.kinds_by_id[session.session_id] = session.session_kind
        return to_scan

    async def _scan_and_commit(
        self, to_scan: list[tuple[SessionInfo, Fingerprint, ScanPlan]], n_admitted: int, batch: Batch
    ) -> None:
        """Steps 4 and 5: read the sessions, committing each full batch in the background."""
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                batch = await self._scan_all(to_scan, n_admitted, batch)
                if not batch.empty():
                    await self._submit(batch)
                await self._drain()
        except BaseExceptionGroup as group:
            # Only one task can fail at a time here (a commit, or the scan); hand its error on as is.
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        finally:
            # What was appended is made durable however the sweep ends (one fsync per day file).
            with anyio.CancelScope(shield=True):
                if self.state.scratch_dir is not None:
                    await anyio.to_thread.run_sync(
                        remove_sweep_scratch, self.state.scratch_dir, os.getpid(), self.state.scratch_token
                    )
                await self.state.corpus.sync()

    def _finished_report(self) -> IngestReport:
        report = self.state.report
        report.lines_skipped = dict(sorted(report.lines_skipped.items()))
        report.sessions_excluded = dict(sorted(report.sessions_excluded.items()))
        report.corpus_files = sorted(set(report.corpus_files))
        return report

    async def _scan_all(
        self, to_scan: list[tuple[SessionInfo, Fingerprint, ScanPlan]], n_admitted: int, batch: Batch
    ) -> Batch:
        ingest = self.state.settings.ingest
        per_file = per_file_cap(n_admitted, ingest.max_messages_per_sweep, ingest.max_messages_per_file)
        remaining = ingest.max_messages_per_sweep
        workers = worker_count(ingest.workers)
        if use_workers(
            workers,
            [fp.size for _, fp, _ in to_scan],
            per_file,
            remaining,
            path_source=isinstance(self.rt.sessions, JsonSessionSource),
        ):
            return await self._scan_in_workers(to_scan, workers, batch)
        for start in range(0, len(to_scan), INGEST_SEEN_PREFETCH_SESSIONS):
            group = to_scan[start : start + INGEST_SEEN_PREFETCH_SESSIONS]
            if remaining <= 0:
                self.state.report.sessions_deferred += len(group)
                continue
            seen_sets = await self.state.store.read(
                load_seen, [seen_scope(self.state.agent, s.session_id) for s, _, _ in group]
            )
            while group:
                if remaining <= 0:
                    self.state.report.sessions_deferred += len(group)
                    break
                room = batch.limit - len(batch.candidates)
                firsts = await anyio.to_thread.run_sync(
                    self._first_takes, group, seen_sets, per_file, remaining, room
                )
                group = group[len(firsts) :]
                try:
                    for first in firsts:
                        taken, batch = await self._scan_one(first, batch)
                        remaining -= taken
                finally:
                    for first in firsts:  # any left open by a failure in between
                        first.reading.scanner.close()
        return batch

    def _first_takes(
        self,
        group: list[tuple[SessionInfo, Fingerprint, ScanPlan]],
        seen_sets: dict[str, set[str]],
        per_file: int,
        remaining: int,
        room: int,
    ) -> list[_FirstTake]:
        """On a worker thread: the first take of each session of `group` in turn, with the limits
        the sweep would give it, until one is left unfinished, the batch is full, the sweep's cap
        is reached or INGEST_TAKE_CHUNK messages were read. One hand-off for a run of small
        sessions instead of one each; `_scan_one` goes on from each take in order."""
        firsts: list[_FirstTake] = []
        budget = INGEST_TAKE_CHUNK
        try:
            for session, fp, plan in group:
                if firsts and (remaining <= 0 or room <= 0 or budget <= 0):
                    break
                scope = seen_scope(self.state.agent, session.session_id)
                scanner = TranscriptScanner(
                    self.rt.sessions,
                    session,
                    plan,
                    fp,
                    scope,
                    seen_sets.pop(scope, set()),
                    self.state.day_of,
                    self.state.report.lines_skipped,
                    self.state.erased.test_for(session.session_id),
                )
                first = _FirstTake(session, fp, plan, _Reading(scanner), file_cap(per_file, remaining))
                firsts.append(first)
                try:
                    first.found = first.reading.take(min(first.cap, room, INGEST_TAKE_CHUNK))
                except (MemorydError, OSError) as exc:
                    first.error = exc
                    scanner.close()
                    continue
                n = len(first.found)
                remaining -= n
                room -= n
                budget -= n
                if not (scanner.finished or n >= first.cap):
                    break  # more to read of it: `_scan_one` takes the rest
                scanner.close()  # read to its end or its cap: only the last one stays open
        except BaseException:
            for first in firsts:
                first.reading.scanner.close()
            raise
        return firsts

    async def _scan_in_workers(
        self, to_scan: list[tuple[SessionInfo, Fingerprint, ScanPlan]], workers: int, batch: Batch
    ) -> Batch:
        """Steps 4 and 5 in worker processes (daemon/ingest/parallel.py); the batches they fill are
        committed here, as the serial scan's are."""
        seen_sets = await self.state.store.read(
            load_seen, [seen_scope(self.state.agent, s.session_id) for s, _, _ in to_scan]
        )
        scratch = self.rt.paths.scratch_dir
        await anyio.to_thread.run_sync(_prepare_scratch, scratch)
        self.state.scratch_dir = scratch
        self.state.scratch_token = secrets.token_hex(6)  # its files go when the sweep ends, however
        self.state.scratch_reclaim = sum(fp.size for _, fp, _ in to_scan) >= INGEST_SCRATCH_RECLAIM_BYTES
        return await scan_with_workers(self.state, to_scan, seen_sets, workers, batch, self._submit)

    async def _submit(self, batch: Batch) -> None:
        """Commit `batch` in the background while reading goes on; commits stay strictly in order."""
        await self._drain()
        done = anyio.Event()
        self._done = done

        async def commit() -> None:
            try:
                await self._commit(batch)
            finally:
                done.set()

        assert self._tg is not None
        self._tg.start_soon(commit)

    async def _drain(self) -> None:
        if self._done is not None:
            await self._done.wait()

    async def _scan_one(self, first: _FirstTake, batch: Batch) -> tuple[int, Batch]:
        """A session from its first take on: the rest of its takes, in worker threads (opening
        and reading are file I/O and parsing, kept off the event loop), each added to the batch."""
        session, reading, cap = first.session, first.reading, first.cap
        scanner = reading.scanner
        taken = 0
        found = first.found
        try:
            if first.error is not None:
                raise first.error
            while True:
                taken += len(found)
                self.state.messages_taken(len(found))
                batch.candidates.extend(found)
                batch.cursors[session.session_id] = (session, first.fp, scanner.cursor())
                if scanner.senders:
                    batch.senders.setdefault(session.session_id, {}).update(scanner.take_senders())
                if scanner.finished or taken >= cap:
                    break
                if len(batch.candidates) >= batch.limit:
                    await self._submit(batch)  # the batch is full; carry on reading meanwhile
                    batch = self.state.new_batch(self.state.messages_read)
                else:
                    await anyio.lowlevel.checkpoint()  # let a background commit move on
                room = batch.limit - len(batch.candidates)
                found = await anyio.to_thread.run_sync(
                    reading.take, min(cap - taken, room, INGEST_TAKE_CHUNK)
                )
        except (MemorydError, OSError) as exc:
            # The last recorded cursor matches the candidates kept, so nothing is half-staged.
            self.state.report.errors.append(f"session {session.session_id}: {exc}")
        finally:
            scanner.close()
        self.state.report.sessions_scanned += reading.opened
        if scanner.rewritten or first.plan.rewrite:
            self.state.report.sessions_rewritten += 1
        if taken >= cap and not scanner.finished:
            self.state.report.sessions_capped += 1
        self.state.sessions_progress()
        if len(batch.candidates) >= batch.limit:
            await self._submit(batch)
            batch = self.state.new_batch(self.state.messages_read)
        return taken, batch

    async def _commit(self, batch: Batch) -> None:
        if batch.empty():
            return
        state = self.state
        async with self.rt.lock().hold() as lease:
            await cut_off_uncommitted(
                state.agent, state.store, self.rt.paths.workspace, lease.fence, state.corpus
            )
            # A purge may have finished while we were reading: re-check under the lock.
            touched = list({**batch.part_sessions, **batch.cursors})
            ids = sorted({*touched, *(c.session_id for c in batch.checkpoints.values())})
            generation, gone, erased = await state.store.read(
                _forgotten_under_lock, touched, ids, state.secret
            )
            if state.stale or generation != state.generation:
                # Read under an exclusion set that a purge has changed since: publish nothing
                # of it (the new set may exclude any sender or session in it).
                state.stale = True
                return
            checkpoints = list(batch.checkpoints.values())
            for sid in gone:
                cursor = batch.cursors.pop(sid, None)
                session = cursor[0] if cursor is not None else batch.part_sessions[sid]
                self._exclude(REASON_FORGOTTEN)
                checkpoints.append(_excluded_checkpoint(session, REASON_FORGOTTEN, state.now_ms))
            if erased:  # no checkpoint names an erased session; any left from before goes
                batch.deletions.extend(c.state_key for c in checkpoints if c.session_id in erased)
                checkpoints = [c for c in checkpoints if c.session_id not in erased]
            checkpoints.extend(
                _scanned_checkpoint(s, fp, cur, state.now_ms) for s, fp, cur in batch.cursors.values()
            )
            participants = _participant_rows(
                [s for s, _, _ in batch.cursors.values()], batch.senders, state.erased
            )
            # The parallel scan's rows are in scratch files (daemon/ingest/merge.py).
            commit = commit_pooled if batch.parts else commit_serial
            staged, removed = await commit(state, batch, lease, gone, checkpoints, participants)
        state.report.messages_staged += staged
        state.report.checkpoints_removed += removed


def _prepare_scratch(path: Path) -> None:
    ensure_scratch_dir(path)
    remove_scratch(path, only_orphans=True)  # left by a sweep whose process died


async def run_ingest_sweep(
    rt: AgentRuntime, progress: ProgressFn | None = None, consider: frozenset[str] | None = None
) -> IngestReport:
    """One sweep of `rt`'s agent: stage new messages of admitted sessions; see the module docstring.
    `progress` hears ("sessions", read, to read) and ("messages", read, 0) as reading goes on.
    `consider`: the session ids to look at (step 3); None, every admitted session."""
    for _ in range(EXCLUSION_STALE_RETRIES):
        sweep = _Sweep(rt, progress, consider)
        report = await sweep.run()
        if not sweep.stale:
            break
        log.info("ingest %s: a purge committed during the sweep; reading again under it", rt.agent_id)
    else:
        report.errors.append(
            "purges kept committing while this sweep read; what it read after the first was not staged "
            "and the next sweep reads it again"
        )
    return report
