"""arq in one place: memoryd's worker (MemorydWorker) and its configuration (worker_kwargs).

Values follow reference/perf-limits.md: arq's default poll of 0.5 s caps a worker at about
2 jobs/s and makes a round trip take 0.5 s, so `poll_delay` is set explicitly
(daemon.poll_delay_s). Results are JSON and kept as each operation says (`Op.result_ttl_s`):
`daemon.keep_result_s`, or `retention.erase_result_ttl_s` for an erasure, whose payload names
a data subject.

arq's public hooks are used where they exist (`after_job_end` rings a job's doorbell once its
result is stored). The methods overridden below have no hook; each says why, and
tests/test_arq_contract.py fails when an arq release within pyproject's range changes what
an override relies on.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import secrets
import time
from contextlib import suppress
from typing import Any

import orjson
from arq.constants import in_progress_key_prefix, job_key_prefix, result_key_prefix, retry_key_prefix
from arq.jobs import serialize_result
from arq.worker import Function, Worker, func
from redis.exceptions import RedisError

from memoryd.caches import ProcessCaches
from memoryd.constants import (
    HEARTBEAT_S,
    JOB_DONE_KEY,
    JOB_DONE_TTL_S,
    QUEUE_BELL_BLOCK_S,
    QUEUE_BELL_KEY,
    REQUEST_KEY,
)
from memoryd.errors import JobRecordError, UsageError
from memoryd.job_ids import REQUEST, job_name_of, parse_job_id
from memoryd.ops.op import Op
from memoryd.ops.registry import OPS, op_named
from memoryd.runtime import interrupted, metrics
from memoryd.runtime.jobs import CACHES, STORES, RedactJobErrors, job_function
from memoryd.runtime.store_pool import StorePool
from memoryd.runtime.wire import deserialize, serialize
from memoryd.settings import Settings

log = logging.getLogger("memoryd.jobs")
# arq retries a job only when it is cancelled (drain, Retry); a failing job is not retried, so
# the try limit bounds how often a job is interrupted by restarts before it is given up.
MAX_TRIES = 5
# How long sweeps wait, after a start, for the purges a dead worker was running to run again.
RECOVERED_PURGES_FIRST_S = 30.0


def functions(settings: Settings) -> list[Function]:
    """One arq function per operation of the registry, keeping its result as the op says."""
    return [
        func(
            job_function(op),  # type: ignore[arg-type]
            name=op.contract.name,
            keep_result=op.policy.result_ttl_s(settings),
            max_tries=MAX_TRIES,
        )
        for op in OPS
    ]


def worker_kwargs(settings: Settings, queue: str, ctx: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments for MemorydWorker (or a plain arq Worker); the redis pool is the caller's."""
    d = settings.daemon
    return {
        "functions": functions(settings),
        "queue_name": queue,
        "handle_signals": False,  # the service owns SIGTERM/SIGHUP (drain, reload)
        "poll_delay": d.poll_delay_s,
        "max_jobs": d.max_jobs,
        "job_timeout": d.job_timeout_s,
        "keep_result": d.keep_result_s,
        "max_tries": MAX_TRIES,
        "job_serializer": serialize,
        "job_deserializer": deserialize,
        "log_results": False,  # results are reports about memory; the job log line has counts only
        "health_check_interval": 60,
        "ctx": ctx,
    }


def _op_of(job_id: str) -> Op[Any] | None:
    try:
        return op_named(job_name_of(job_id))
    except UsageError:
        return None  # not one of ours (another tool's id scheme): the worker-wide defaults apply


def _is_background(job_id: str) -> bool:
    op = _op_of(job_id)
    return op is not None and op.policy.background


def _error_class(result_data: bytes | None) -> str:
    """The error class a given-up job's stored result names (daemon/runtime/wire.py's form)."""
    try:
        error = orjson.loads(result_data or b"null").get("r", {}).get("error")
    except (orjson.JSONDecodeError, AttributeError):
        return "unknown"
    return error if isinstance(error, str) and error.isidentifier() and len(error) <= 64 else "unknown"


def _count_not_run(job_id: str, error: str) -> None:
    op = _op_of(job_id)  # a family label only for memoryd's own names: labels stay bounded
    metrics.JOBS_NOT_RUN.labels(family=op.contract.name if op is not None else "other", reason=error).inc()


def _member_problem(member: bytes, score: float | None) -> str | None:
    """Why arq cannot start this queue member, or None."""
    try:
        member.decode()
    except UnicodeDecodeError:
        return "job id is not UTF-8"
    if score is not None and not (math.isfinite(score) and score > 0):
        return f"queue score {score} is not a time"
    return None


def quiet_job_logs() -> None:
    """arq logs each job's arguments at INFO and a failure's message with its traceback;
    payloads and messages name sessions and people, so keep arq's job lines out and the class
    of a failure only (memoryd.runtime.jobs logs one line per job with ids and counts)."""
    arq_log = logging.getLogger("arq.worker")
    arq_log.setLevel(logging.WARNING)
    if not any(isinstance(f, RedactJobErrors) for f in arq_log.filters):
        arq_log.addFilter(RedactJobErrors())


class MemorydWorker(Worker):
    """arq's Worker, with subject-naming results kept short on every path. arq applies a
    function's `keep_result` when the function ran, but a job it gives up on before running
    (too many tries, expired) is stored with the worker-wide default — with its arguments.

    It also answers doorbells (memoryd.runtime.client): between its polls it starts a job as soon as a
    client rings the queue's bell, and once a result is stored it rings the job's own bell.

    It keeps the process caches every job shares (memoryd.runtime.caches, in ctx["caches"]).

    And it keeps the agents' stores open between jobs (memoryd.runtime.store_pool, in ctx["stores"]):
    while `main()` runs; when it ends (shutdown, a lost Redis, a burst done) every store is
    closed, the ones still in use as their jobs end.

    And when it starts it retries at once what a dead worker of its queue was running
    (memoryd.runtime.interrupted); an interrupted purge (a forget) runs before any sweep does, so
    its forgotten records are written before a sweep can ingest those sessions again.

    And it keeps a slot free of background jobs (Op.background: dreaming, backfill), which run
    for minutes on a large history: the ones over the cap wait in the queue, never started."""

    _bell_task: asyncio.Task[None] | None = None
    _enqueued: asyncio.Event | None = None
    _redis_lost: BaseException | None = None  # a job's task met a Redis outage: the poll loop ends

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.setdefault("after_job_end", self._after_job_end)
        kwargs.setdefault("on_startup", self._on_startup)
        super().__init__(*args, **kwargs)
        settings: Settings | None = self.ctx.get("settings")  # absent: a worker given only arq's kwargs
        self.stores = StorePool(max_idle=settings.daemon.max_idle_stores) if settings else StorePool()
        self.ctx[STORES] = self.stores
        self.caches = ProcessCaches()
        self.ctx[CACHES] = self.caches
        self.instance = f"{self.ctx.get('host_id', self.queue_name)}:{os.getpid()}:{secrets.token_hex(4)}"
        self._alive_at = 0.0
        # Interrupted purges retried at this start; sweeps wait until they have ended, or for
        # RECOVERED_PURGES_FIRST_S at most (a purge stuck behind a lock must not stop them all).
        self._recovered_purges: set[str] = set()
        self._recovered_at = 0.0

    async def _on_startup(self, ctx: dict[str, Any]) -> None:
        # arq calls on_startup at each main(), once its Redis pool is there.
        await interrupted.register(self.pool, self.queue_name, self.instance)
        self._alive_at = time.monotonic()
        running = [job_id for job_id, task in self.tasks.items() if not task.done()]
        recovered = await interrupted.recover(self.pool, self.queue_name, self.instance, running)
        for job_id in recovered:
            log.warning("job %s: its worker died while running it; retrying it now", job_id)
            op = _op_of(job_id)
            if op is not None and op.contract.purge:
                self._recovered_purges.add(job_id)
                self._recovered_at = time.monotonic()

    # Override: `main` is arq's public entry point, and arq has no hook at its end (on_shutdown
    # runs in close(), which the service does not call between Redis reconnects). The stores
    # and the bell listener live exactly as long as a main().
    async def main(self) -> None:
        self.stores.reopen()
        self._redis_lost = None  # this start's recovery retries the job that met it
        try:
            await super().main()
        finally:
            try:
                if self._bell_task is not None:
                    self._bell_task.cancel()
                    with suppress(asyncio.CancelledError):
                        await self._bell_task
                    self._bell_task = None
            finally:
                await self.stores.close()

    # Override: arq has no hook between its polls, and its poll loop sleeps out poll_delay; this
    # waits that time out itself, polling again as soon as a client rings, and closes idle stores.
    async def _poll_iteration(self) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        if self._redis_lost is not None:
            raise self._redis_lost
        await self.stores.close_idle()
        if time.monotonic() - self._alive_at >= HEARTBEAT_S:
            await interrupted.refresh(self.pool, self.instance)
            self._alive_at = time.monotonic()
        await super()._poll_iteration()
        if self.burst:  # a burst worker stops when the queue is empty; nothing to wait for
            return
        if self._enqueued is None:
            self._enqueued = asyncio.Event()
            self._bell_task = asyncio.create_task(self._listen_enqueued(self._enqueued))
        # arq sleeps out the rest of poll_delay after this returns; wait it out here instead,
        # polling again whenever a client rings, so a new job starts within a round trip.
        while (remaining := self.poll_delay_s - (loop.time() - started)) > 0:
            try:
                await asyncio.wait_for(self._enqueued.wait(), remaining)
            except TimeoutError:
                return
            self._enqueued.clear()  # before the poll: a ring during it means another poll
            await super()._poll_iteration()

    async def _listen_enqueued(self, enqueued: asyncio.Event) -> None:
        key = QUEUE_BELL_KEY.format(queue=self.queue_name)
        while True:
            try:
                rang = await self.pool.blpop([key], timeout=QUEUE_BELL_BLOCK_S)  # type: ignore[misc]
            except (RedisError, OSError):
                await asyncio.sleep(QUEUE_BELL_BLOCK_S)  # Redis is away: the polls report it and go on
                continue
            if rang is not None:
                enqueued.set()

    # Override: arq has no hook that can keep a job from starting.
    async def start_jobs(self, job_ids: list[bytes]) -> None:
        # arq's start_jobs raises on a member that is not UTF-8 or not scored with a time (-inf),
        # which ended the worker on every start: such a member fails alone.
        startable = []
        scores = await self.pool.zmscore(self.queue_name, job_ids) if job_ids else []  # type: ignore[arg-type]
        for member, score in zip(job_ids, scores, strict=True):
            problem = _member_problem(member, score)
            if problem is None:
                startable.append(member)
            else:
                await self._fail_unrunnable(member, problem)
        # Redis can lose a running job's in-progress key (a restart without persistence). If the
        # job is then enqueued again, arq would start a second copy in this same worker, and the
        # copies' bookkeeping collides (`del job_tasks[id]` fails one of them with a KeyError).
        # A job this worker is still running stays queued: the running copy's result finishes it.
        running = {job_id for job_id, task in self.tasks.items() if not task.done()}
        startable = [j for j in startable if j.decode() not in running]
        startable = self._hold_back_background(startable, running)
        if startable == [] and len(job_ids) >= self.queue_read_limit:
            # a page of held-back dreams hides what is behind it; the jobs found past them are
            # fewer than a page, so this second call does not read on again
            await self.start_jobs(await self._past_held_back())
            return
        await super().start_jobs(await self._hold_back_sweeps(startable))

    def _hold_back_background(self, job_ids: list[bytes], running: set[str]) -> list[bytes]:
        """Background jobs (Op.background: dreaming, backfill) take at most max_jobs - 1 slots
        together, so an ingest sweep, a forget or an erasure never waits for one to end. The
        others stay queued, never started: no try is spent and nothing fails; a later poll
        starts them when a background job has ended."""
        cap = max(1, self.max_jobs - 1)  # max_jobs = 1 leaves no slot to keep free
        busy = sum(1 for job_id in running if _is_background(job_id))
        startable = []
        for member in job_ids:
            if _is_background(member.decode()):
                if busy >= cap:
                    continue
                busy += 1
            startable.append(member)
        return startable

    async def _past_held_back(self) -> list[bytes]:
        """arq reads the first queue_read_limit ready jobs; when held-back background jobs fill
        that page, a forget behind them would never be seen. Read on, past every job that would
        be held back, up to the first one that can start."""
        offset = self.queue_read_limit
        while True:
            page = await self.pool.zrangebyscore(
                self.queue_name,
                min=float("-inf"),
                max=time.time() * 1000,
                start=offset,
                num=self.queue_read_limit,
            )
            if not page:
                return []
            found = [m for m in page if not _is_background(m.decode(errors="replace"))]
            if found:
                return found[: self.queue_read_limit - 1]
            offset += len(page)

    async def _hold_back_sweeps(self, job_ids: list[bytes]) -> list[bytes]:
        """Sweeps stay queued while a purge interrupted by a crash has not run again."""
        if self._recovered_purges and time.monotonic() - self._recovered_at > RECOVERED_PURGES_FIRST_S:
            self._recovered_purges = set()
        if not self._recovered_purges:
            return job_ids
        pending = sorted(self._recovered_purges)
        scores = await self.pool.zmscore(self.queue_name, pending)
        self._recovered_purges = {j for j, score in zip(pending, scores, strict=True) if score is not None}
        if not self._recovered_purges:
            return job_ids
        startable = []
        for member in job_ids:
            op = _op_of(member.decode())
            if op is None or not op.policy.sweep or member.decode() in self._recovered_purges:
                startable.append(member)
        return startable

    # Override: arq's run_job raises on a record its decoding does not check (the job's
    # deserializer refuses most of them first), and the poll loop re-raises what a job's task
    # raised, ending the worker. The job fails alone. A lost Redis (the job's own writes, or
    # arq storing its result, met the outage: nothing is stored and the job is still in progress)
    # ends the poll loop at its next iteration, for the service to reconnect and the worker's
    # next start to retry the job; not raised from this task, which nobody reads once the poll
    # loop has already ended on the same outage.
    async def run_job(self, job_id: str, score: int) -> None:
        try:
            await super().run_job(job_id, score)
        except (RedisError, OSError) as exc:
            log.warning(
                "job %s: Redis went away before its result was stored (%s); it runs again once Redis is back",
                job_id,
                type(exc).__name__,
            )
            self._redis_lost = exc
        except Exception as exc:
            await self._fail_unrunnable(job_id.encode(), f"arq could not run it ({type(exc).__name__})")

    async def _fail_unrunnable(self, member: bytes, problem: str) -> None:
        """A failed result for a job arq cannot start or run, which leaves the queue with its
        job, try and in-progress keys; a result a run already stored is kept."""
        job_id = member.decode(errors="backslashreplace")
        log.error("job %s: %s; failed and removed from the queue", job_id, problem)
        _count_not_run(job_id, JobRecordError.__name__)
        now_ms = int(time.time() * 1000)
        result = serialize_result(
            job_name_of(job_id),
            (),
            {},
            0,  # never tried
            0,
            False,
            JobRecordError(f"job {job_id}: {problem}"),
            now_ms,
            now_ms,
            job_id,
            self.queue_name,
            job_id=job_id,
            serializer=self.job_serializer,
        )
        op = _op_of(job_id)
        ttl_s = op.policy.result_ttl_s(self.ctx["settings"]) if op is not None else self.keep_result_s
        async with self.pool.pipeline(transaction=True) as pipe:
            for prefix in (job_key_prefix, retry_key_prefix, in_progress_key_prefix):
                pipe.delete(prefix.encode() + member)
            pipe.zrem(self.queue_name, member)
            if result is not None:
                pipe.set(result_key_prefix.encode() + member, result, px=int(ttl_s * 1000), nx=True)
            await pipe.execute()
        await self._ended(job_id)

    async def _after_job_end(self, ctx: dict[str, Any]) -> None:
        # arq calls after_job_end once finish_job's transaction has stored the result. A job
        # that went back to the queue (a drain cancelled it) rings too: a waiting client reads
        # it still queued and waits on.
        await self._ended(ctx["job_id"])

    # Override: a job arq gives up on before running it (too many tries, expired, unknown
    # function) ends here, and no hook runs on that path: its result gets the subject TTL and
    # its doorbell rings here.
    async def finish_failed_job(self, job_id: str, result_data: bytes | None) -> None:
        await super().finish_failed_job(job_id, result_data)
        _count_not_run(job_id, _error_class(result_data))
        op = _op_of(job_id)
        if op is not None and op.policy.payload_names_subject:
            ttl_s = op.policy.result_ttl_s(self.ctx["settings"])
            await self.pool.pexpire(result_key_prefix + job_id, ttl_s * 1000)
        await self._ended(job_id)

    async def _ended(self, job_id: str) -> None:
        """A job has a result: its request id's record lives as long as the result (until now it
        lived while the job waited and ran), then waiting clients are woken."""
        if parse_job_id(job_id).kind == REQUEST:
            op = _op_of(job_id)
            ttl_s = op.policy.result_ttl_s(self.ctx["settings"]) if op is not None else self.keep_result_s
            try:
                # A job a drain sent back to the queue has no result yet: its record stays.
                if await self.pool.exists(result_key_prefix + job_id):
                    await self.pool.pexpire(REQUEST_KEY.format(job_id=job_id), int(ttl_s * 1000))
            except (RedisError, OSError) as exc:
                log.warning("job %s: request record kept without expiry (%s)", job_id, type(exc).__name__)
        await self._wake_waiters(job_id)

    async def _wake_waiters(self, job_id: str) -> None:
        """Ring the job's doorbell (memoryd.runtime.client.wait BLPOPs it). Called only after arq's
        transaction has stored the result, so a woken client always finds it."""
        key = JOB_DONE_KEY.format(job_id=job_id)
        try:
            async with self.pool.pipeline(transaction=True) as pipe:
                pipe.rpush(key, 1)
                pipe.expire(key, JOB_DONE_TTL_S)
                await pipe.execute()
        except (RedisError, OSError) as exc:
            # The result is stored; a client that misses the wake-up sees it at its next poll.
            log.warning("job %s: completion wake-up not sent (%s)", job_id, type(exc).__name__)
