"""The parallel scan of a large sweep (`ingest.workers`): when to use it, the worker pool, and
how the workers' results become the serial sweep's batches.

* **When.** Only when it cannot change what is staged and pays: more than one worker, a
  sessions.json source (workers open transcripts by path), at least INGEST_PARALLEL_MIN_BYTES to read,
  and caps that cannot cut any session short (a candidate is a line holding at least
  SNIPPET_MIN_CHARS bytes of its text, so a session yields at most its size over that, plus
  one: below its per-file cap, and all of them together below the per-sweep cap). A live sweep
  of a few changed sessions stays serial.
* **The pool.** Worker processes from a forkserver (never a fork of the daemon, whose threads
  and event loop a child must not inherit), kept for the process's life and created at the first
  large sweep; they import only the scan task (daemon/ingest/scan_task.py).
* **Batches.** Results come back in reading order and are cut into the serial sweep's batches
  (each as many candidates as its `limit`, a session's cursor in the batch its last candidate
  is in, or the next one when that candidate fills a batch), so the same rows are committed in
  the same transactions: a batch names ranges of scratch rows (`Part`) instead of holding them.
  Two differences, both inside one sweep: a session split between two batches gets its
  checkpoint only with the second (a crash in between rescans it and its seen hashes keep what
  was staged from being staged twice), and its senders are recorded with the second.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

import anyio

from memoryd.constants import (
    INGEST_PARALLEL_MIN_BYTES,
    INGEST_TASK_BYTES,
    INGEST_WORKERS_MAX,
    MAX_TRACKED_MESSAGES_PER_SESSION,
    SNIPPET_MIN_CHARS,
)
from memoryd.errors import OperationFailed
from memoryd.ingest.batch import Batch
from memoryd.ingest.checkpoints import seen_scope
from memoryd.ingest.plan import ScanPlan
from memoryd.ingest.scan_task import (
    ScanTask,
    SessionJob,
    SessionResult,
    TaskResult,
    exit_with_owner,
    run_task,
)
from memoryd.ingest.sweep_state import SweepState
from memoryd.sessions.json_store import JsonSessionSource
from memoryd.sessions.model import Fingerprint, SessionInfo
from memoryd.store.engine import ANY_SQLITE_ERROR
from memoryd.store.scratch import Part


def worker_count(configured: int) -> int:
    """`ingest.workers`, with 0 meaning the number of cores (at most INGEST_WORKERS_MAX)."""
    if configured > 0:
        return configured
    return max(1, min(os.cpu_count() or 1, INGEST_WORKERS_MAX))


def use_workers(
    workers: int,
    sizes: Sequence[int],
    per_file_cap: int,
    per_sweep_cap: int,
    *,
    path_source: bool,
) -> bool:
    """Whether a sweep with transcripts of these byte sizes to read is scanned by the pool. Pure."""
    if workers <= 1 or not path_source or sum(sizes) < INGEST_PARALLEL_MIN_BYTES:
        return False
    # A candidate is one line whose text has at least SNIPPET_MIN_CHARS characters, each at least
    # one byte there (JSON escapes and the text parts' own keys only add bytes).
    bounds = [size // SNIPPET_MIN_CHARS + 1 for size in sizes]
    return max(bounds) < per_file_cap and sum(bounds) < per_sweep_cap


def plan_tasks(sizes: Sequence[int], workers: int, task_bytes: int | None = None) -> list[range]:
    """Consecutive runs of sessions, about `task_bytes` each (smaller when that would leave a
    worker idle), in reading order. Pure."""
    if task_bytes is None:
        task_bytes = INGEST_TASK_BYTES
    total = sum(sizes)
    target = max(1, min(task_bytes, total // (2 * workers) or 1))
    tasks: list[range] = []
    start = 0
    acc = 0
    for i, size in enumerate(sizes):
        acc += size
        if acc >= target:
            tasks.append(range(start, i + 1))
            start, acc = i + 1, 0
    if start < len(sizes):
        tasks.append(range(start, len(sizes)))
    return tasks


# What a task's failure looks like from here (its process died; its scratch write failed).
_WORKER_FAILURES: tuple[type[BaseException], ...] = (OSError, BrokenProcessPool, *ANY_SQLITE_ERROR)

# --- the pool ------------------------------------------------------------------------------------

_pool_lock = threading.Lock()
_pool: tuple[int, ProcessPoolExecutor] | None = None


def scan_pool(workers: int) -> ProcessPoolExecutor:
    """The process's pool of `workers` scan processes (replaced when the count changes)."""
    global _pool
    with _pool_lock:
        # A pool whose process died (killed, out of memory) is broken for good: start a new one.
        if _pool is not None and _pool[0] == workers and not getattr(_pool[1], "_broken", False):
            return _pool[1]
        if _pool is not None:
            _pool[1].shutdown(wait=False, cancel_futures=True)
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["memoryd.ingest.scan_task"])
        executor = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=exit_with_owner)
        _pool = (workers, executor)
        return executor


def pool_pids() -> list[int]:
    """The scan processes alive now, and their forkserver (what a memory figure must add)."""
    with _pool_lock:
        if _pool is None:
            return []
        pids = list(getattr(_pool[1], "_processes", None) or {})
    from multiprocessing import forkserver

    server = getattr(forkserver._forkserver, "_forkserver_pid", None)
    return [*pids, *([server] if server else [])]


def shutdown_pool() -> None:
    global _pool
    with _pool_lock:
        if _pool is not None:
            _pool[1].shutdown(wait=True, cancel_futures=True)
            _pool = None


_NO_HASHES: frozenset[str] = frozenset()


def _frozen(hashes: set[str] | None) -> frozenset[str]:
    # One empty set for every session without a hash (all of a first sweep's), not one each.
    return frozenset(hashes) if hashes else _NO_HASHES


# --- cutting results into batches ----------------------------------------------------------------


@dataclass
class BatchCutter:
    """Turns session results, in reading order, into the serial sweep's batches (module docstring)."""

    batch: Batch
    new_batch: Callable[[int], Batch]  # SweepState.new_batch: the messages of the earlier batches
    count: int = 0  # candidates in `batch`
    before: int = 0  # candidates in the batches cut before `batch`

    def add(
        self,
        result: SessionResult,
        first_seq: int,
        task: TaskResult,
        session: SessionInfo,
        fp: Fingerprint,
        seen_rowwise: bool,
    ) -> list[Batch]:
        """Add one session's result (its rows start at `first_seq` of `task`'s file); the batches
        it filled, to commit in order. `seen_rowwise`: its seen hashes cannot be numbered in the
        worker (hashes stored before, or more than the cap); a session split between batches
        cannot either."""
        full: list[Batch] = []
        touched: list[Batch] = []
        offset = 0
        n = result.candidates
        while offset < n:
            take = min(self.batch.limit - self.count, n - offset)
            lo = first_seq + offset
            parts = self.batch.parts
            last = parts[-1] if parts else None
            if last is not None and last.path == task.path and last.task == task.task and last.hi + 1 == lo:
                parts[-1] = last._replace(hi=lo + take - 1)
            else:
                parts.append(Part(task.path, task.task, lo, lo + take - 1))
            self.batch.staged_count += take
            self.batch.part_sessions[session.session_id] = session
            touched.append(self.batch)
            self.count += take
            offset += take
            if self.count >= self.batch.limit:
                full.append(self.batch)
                self.before += self.count
                self.batch = self.new_batch(self.before)
                self.count = 0
        if result.cursor is not None:
            self.batch.cursors[session.session_id] = (session, fp, result.cursor)
        if result.senders:
            self.batch.senders.setdefault(session.session_id, {}).update(result.senders)
        if seen_rowwise or len(touched) > 1:
            for b in touched:
                b.seen_rowwise.add(session.session_id)
        return full


# --- the scan loop -------------------------------------------------------------------------------


async def scan_with_workers(
    state: SweepState,
    to_scan: list[tuple[SessionInfo, Fingerprint, ScanPlan]],
    seen_sets: dict[str, set[str]],
    workers: int,
    batch: Batch,
    submit: Callable[[Batch], Awaitable[None]],
) -> Batch:
    """Scan `to_scan` in the pool and hand each full batch to `submit`; the last batch (not yet
    submitted). The scratch files (`state.scratch_dir`, named with `state.scratch_token`) are the
    sweep's to remove."""
    pool = scan_pool(workers)
    agent = state.agent
    source = state.rt.sessions
    assert isinstance(source, JsonSessionSource)  # use_workers(path_source=...): workers open files by path
    tasks = [
        ScanTask(
            n,
            agent,
            str(source.dir),
            str(source.root),
            state.settings.dreaming.timezone,
            str(state.scratch_dir),
            os.getpid(),
            state.scratch_token,
            state.erased,
            tuple(
                SessionJob(
                    i,
                    to_scan[i][0],
                    to_scan[i][1],
                    to_scan[i][2],
                    _frozen(seen_sets.get(seen_scope(agent, to_scan[i][0].session_id))),
                )
                for i in run
            ),
        )
        for n, run in enumerate(plan_tasks([fp.size for _, fp, _ in to_scan], workers))
    ]
    cutter = BatchCutter(batch, state.new_batch, before=state.messages_read)
    ahead = 2 * workers  # tasks queued beyond the one awaited: the workers never wait on the merge
    futures: list[Future[TaskResult]] = []
    try:
        for n in range(len(tasks)):
            try:
                while len(futures) < min(n + 1 + ahead, len(tasks)):
                    futures.append(pool.submit(run_task, tasks[len(futures)]))
                result = await anyio.to_thread.run_sync(futures[n].result, abandon_on_cancel=True)
            except _WORKER_FAILURES as exc:
                raise OperationFailed(
                    f"{state.scratch_dir}: a scan worker failed ({exc.__class__.__name__}: {exc}); what "
                    "was staged before stays, the next sweep reads the rest again"
                ) from None
            for full in _consume(state, cutter, result, tasks[n]):
                await submit(full)
    finally:
        for future in futures:
            future.cancel()
    return cutter.batch


def _consume(state: SweepState, cutter: BatchCutter, result: TaskResult, task: ScanTask) -> list[Batch]:
    report = state.report
    for reason, count in result.skipped.items():
        report.lines_skipped[reason] = report.lines_skipped.get(reason, 0) + count
    full: list[Batch] = []
    seq = result.lo
    for job, r in zip(task.sessions, result.sessions, strict=True):
        session, fp = job.session, job.fingerprint
        if r.opened:
            report.sessions_scanned += 1
        if r.error is not None:
            report.errors.append(r.error)
        if r.rewritten:
            report.sessions_rewritten += 1
        rowwise = bool(job.seen) or r.candidates > MAX_TRACKED_MESSAGES_PER_SESSION
        full.extend(cutter.add(r, seq, result, session, fp, rowwise))
        seq += r.candidates
        state.messages_taken(r.candidates)
        state.sessions_progress()
    return full
