"""A typed client for other tools: enqueue memoryd jobs on the owning host's queue and wait.

    async with MemorydClient.connect(settings) as client:
        job = await client.enqueue_forget(ForgetRequest(agent="main", sessions=["s1"]))
        report = await client.wait(job.job_id, timeout_s=60)   # report.result is the ForgetReport JSON

* Routing: every daemon publishes `agent → route` in the Redis hash `memoryd:agents` (its
  queue, its deployment and the agent's store: memoryd.runtime.hosts.Route); a job for an agent
  goes to its owner's queue. An agent nobody serves is a UsageError; so is one whose route names
  another deployment than the config's (`daemon.deployment_id`): nothing is sent there.
* Requests are validated by their operation (memoryd.ops: `Op.parse`), as the CLI and the job
  validate them, before anything is enqueued; a bad one is one JobPayloadError line.
* Job ids are random (memoryd.runtime.wire): each request runs. With a `request_id`, the same
  request sent again is answered by its queued, running or successful run (`deduplicated`); a
  failed run runs again; another payload under the same request id is refused. A purge's job
  record does not expire before it runs, and a purge for a host that is not alive is refused
  unless the caller asks to leave it queued.
* Pickup is pushed: after enqueuing, the client RPUSHes the queue's bell (QUEUE_BELL_KEY) and
  the worker, blocked on it between polls, starts the job at once.
* Completion is pushed: the worker RPUSHes the job's doorbell (JOB_DONE_KEY) after arq has
  stored the result, and `wait` BLPOPs it, so a finished job is seen within a Redis round trip.
  The result is also polled every CLIENT_POLL_S (explicitly: arq's 0.5 s default would make
  every round trip take half a second), so a daemon that rings no bell is still seen within a poll.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, Literal

import anyio
from arq.connections import ArqRedis
from arq.constants import (
    default_queue_name,
    in_progress_key_prefix,
    job_key_prefix,
    result_key_prefix,
    retry_key_prefix,
)
from arq.jobs import DeserializationError, Job, JobResult, JobStatus
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel
from redis.exceptions import RedisError, ResponseError, WatchError

from memoryd.constants import (
    AGENT_OWNER_KEY,
    CLIENT_POLL_S,
    HEARTBEATS_KEY,
    JOB_DONE_KEY,
    JOB_DONE_TTL_S,
    MAX_AGENTS_NAMED,
    PURGE_JOB_EXPIRES_S,
    QUEUE_BELL_KEY,
    QUEUE_BELL_TTL_S,
    QUEUE_PREFIX,
    REQUEST_ID_MAX_CHARS,
    REQUEST_KEY,
)
from memoryd.errors import MemorydError, OperationFailed, UsageError, exit_code_of
from memoryd.failpoints import failpoint
from memoryd.job_ids import job_name_of, random_job_id, request_job_id
from memoryd.ops import erase as erase_op
from memoryd.ops import forget as forget_op
from memoryd.ops import index_sync as index_op
from memoryd.ops import ingest_sweep as ingest_op
from memoryd.ops.op import Op, Routing, agent_of
from memoryd.ops.registry import op_named
from memoryd.ops.result import M, read_result
from memoryd.redis_conn import connection_pool, unreachable
from memoryd.runtime import interrupted, replication
from memoryd.runtime.hosts import Route, host_of_queue, parse_heartbeat, parse_route
from memoryd.runtime.wire import deserialize, request_fingerprint, serialize
from memoryd.settings import Settings

# Rounds of a request-id enqueue racing other clients of the same request id (see _enqueue_request).
REQUEST_ROUNDS = 5

JobState = Literal["queued", "deferred", "running", "complete", "failed", "not_found"]


def _names(names: list[str]) -> str:
    if not names:
        return "none"
    shown = ", ".join(names[:MAX_AGENTS_NAMED])
    more = len(names) - MAX_AGENTS_NAMED
    return f"{shown}, and {more} more" if more > 0 else shown


def check_request_id(request_id: str) -> None:
    """A request id is a caller's reference: 1 to REQUEST_ID_MAX_CHARS printable characters."""
    if (
        not isinstance(request_id, str)
        or not 0 < len(request_id) <= REQUEST_ID_MAX_CHARS
        or request_id != request_id.strip()
        or any(ord(c) < 32 or ord(c) == 127 for c in request_id)
    ):
        raise UsageError(
            f"request id {request_id!r}: must be 1-{REQUEST_ID_MAX_CHARS} printable characters "
            "(an unguessable reference such as a UUID, never a subject's id)"
        )


def _is_purge(function: str) -> bool:
    try:
        return op_named(function).contract.purge
    except UsageError:
        return False  # another tool's function: arq's defaults


class UnroutedAgent(UsageError):
    """No host's route names the agent: a mistyped name, or its daemon never ran on this Redis."""

    def __init__(self, message: str, *, agent: str):
        super().__init__(message)
        self.agent = agent


class OtherDeployment(UsageError):
    """The agent's route names a host of another deployment (or none it can tell): nothing is sent."""


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)


class EnqueuedJob(_Model):
    job_id: str
    function: str
    queue: str
    deduplicated: bool  # its request id's queued, running or successful run answers it


class JobReport(_Model):
    job_id: str
    function: str
    queue: str | None
    state: JobState
    tries: int | None
    enqueued_at: str | None
    started_at: str | None
    finished_at: str | None
    error: str | None  # "<ErrorClass>: <message>" when the job failed
    result: dict[str, Any] | None  # the domain's report, as the CLI prints it
    # A queued job whose host is not alive: why it waits ("its host 'h1' stopped 3 min ago").
    waiting_on: str | None = None

    @property
    def done(self) -> bool:
        return self.state in ("complete", "failed", "not_found")

    def result_as(self, model: type[M]) -> M | None:
        """The job's result read through its report type (its op's `result()`): None when the
        job has no result, or when the result is not that report (another memoryd version wrote
        it, or another tool). Callers read attributes, never the result's keys."""
        return read_result(model, self.result)

    def outcome(self) -> MemorydError | None:
        """The error a completed job's report means, as its operation reads it (a refused
        erasure): what the direct command would have raised after printing the same report."""
        if self.state != "complete" or self.result is None:
            return None
        try:
            op = op_named(self.function)
        except UsageError:
            return None  # not a memoryd job
        return op.contract.outcome(self.result)

    def exit_code(self) -> int:
        """The exit code the same request has as a direct command (0 ok, 1 failed, 2 usage, 3 refused)."""
        if self.state == "complete":
            problem = self.outcome()
            return 0 if problem is None else problem.exit_code
        return exit_code_of((self.error or "").split(":", 1)[0])


_STATES: dict[JobStatus, JobState] = {
    JobStatus.queued: "queued",
    JobStatus.deferred: "deferred",
    JobStatus.in_progress: "running",
    JobStatus.complete: "complete",
}


def _iso(when: datetime | None) -> str | None:
    if when is None:
        return None
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _finished(job_id: str, r: JobResult) -> JobReport:
    return JobReport(
        job_id=job_id,
        function=r.function,
        queue=r.queue_name,
        state="complete" if r.success else "failed",
        tries=r.job_try,
        enqueued_at=_iso(r.enqueue_time),
        started_at=_iso(r.start_time),
        finished_at=_iso(r.finish_time),
        error=None if r.success else _error_text(r.result),
        result=r.result if r.success and isinstance(r.result, dict) else None,
    )


def _not_found(job_id: str, queue: str | None) -> JobReport:
    return JobReport(
        job_id=job_id,
        function=job_name_of(job_id),
        queue=queue,
        state="not_found",
        tries=None,
        enqueued_at=None,
        started_at=None,
        finished_at=None,
        error=None,
        result=None,
    )


def _unreadable(
    job_id: str, queue: str | None, problem: str = "job record unreadable (not a job arq can run)"
) -> JobReport:
    return JobReport(
        job_id=job_id,
        function=job_name_of(job_id),
        queue=queue,
        state="failed",
        tries=None,
        enqueued_at=None,
        started_at=None,
        finished_at=None,
        error=f"JobRecordError: {problem}",
        result=None,
    )


def _wrong_type(exc: ResponseError) -> str:
    """A job or result key that is not a string (WRONGTYPE): what `memoryd jobs` says of it."""
    if "WRONGTYPE" in str(exc):
        return "job record unreadable (its key holds another Redis type, not a job value)"
    return f"job record unreadable ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"


def _error_text(result: Any) -> str:
    if isinstance(result, dict) and "error" in result:
        return f"{result['error']}: {result.get('message', '')}"
    return str(result)


class _Doorbell:
    """Set when the worker signals that the job's result is stored."""

    def __init__(self) -> None:
        self.rung = anyio.Event()


class MemorydClient:
    def __init__(self, redis: ArqRedis, settings: Settings, *, poll_delay_s: float = CLIENT_POLL_S):
        self.redis = redis
        self.settings = settings
        self.poll_delay_s = poll_delay_s

    @classmethod
    @asynccontextmanager
    async def connect(
        cls, settings: Settings, *, poll_delay_s: float = CLIENT_POLL_S
    ) -> AsyncIterator[MemorydClient]:
        pool = connection_pool(settings, health_check_interval=0)
        redis = ArqRedis(pool, job_serializer=serialize, job_deserializer=deserialize)
        try:
            await redis.ping()
        except (RedisError, OSError) as exc:
            await redis.aclose(close_connection_pool=True)
            raise unreachable(settings, exc) from None
        try:
            yield cls(redis, settings, poll_delay_s=poll_delay_s)
        finally:
            await redis.aclose(close_connection_pool=True)

    # --- routing ----------------------------------------------------------------------------

    async def queue_for(self, agent: str, *, queue_anyway: bool = False) -> str:
        """The queue of the host that owns `agent`. A job for an owner that is not alive would
        wait unseen: refused (OperationFailed, naming the host, its silence and the hosts that
        are alive) unless `queue_anyway`, which queues it for when the host is back."""
        raw = await self.redis.hget(AGENT_OWNER_KEY, agent)  # type: ignore[misc]
        if raw is None:
            served = _names(sorted(k.decode() for k in await self.redis.hkeys(AGENT_OWNER_KEY)))  # type: ignore[misc]
            raise UnroutedAgent(
                f"agent {agent!r} is not served by any host (served: {served}); check the "
                "name, or start `memoryd run` on the host that owns its state",
                agent=agent,
            )
        queue = self._own_route(agent, parse_route(raw)).queue
        if not queue_anyway:
            await self.require_live(queue, f"agent {agent!r}")
        return queue

    def _own_route(self, agent: str, route: Route | None) -> Route:
        """The route, when a host of this config's deployment wrote it; else OtherDeployment: a
        job sent along it would run on another deployment's store of an agent of the same name."""
        mine = self.settings.deployment
        if route is None:
            raise OtherDeployment(
                f"agent {agent!r}: its route in Redis hash {AGENT_OWNER_KEY} is not a route; nothing "
                "was sent (the daemon that serves it rewrites it within a heartbeat)"
            )
        if route.deployment is None:
            raise OtherDeployment(
                f"agent {agent!r}: its route names host {route.host!r} but no deployment (an older "
                "memoryd wrote it); nothing was sent: restart memoryd there to republish it"
            )
        if route.deployment != mine:
            raise OtherDeployment(
                f"agent {agent!r}: its route names host {route.host!r} of deployment "
                f"{route.deployment!r}, not this config's {mine!r} (daemon.deployment_id); nothing was "
                "sent: use that deployment's config, or give each deployment its own Redis database"
            )
        return route

    async def require_live(self, queue: str, what: str) -> None:
        """OperationFailed unless a live host serves `queue`: the refusal names the hosts alive."""
        host = host_of_queue(queue)
        beats = await self.redis.hgetall(HEARTBEATS_KEY)  # type: ignore[misc]
        now = time.time()
        heartbeat = parse_heartbeat(host, beats.get(host.encode()))
        if heartbeat.alive(now):
            return
        alive_hosts = _names(
            sorted(
                name
                for raw_name, value in beats.items()
                if parse_heartbeat(name := raw_name.decode(errors="replace"), value).alive(now)
            )
        )
        raise OperationFailed(
            f"{what}: {heartbeat.silence(now)} (hosts alive: {alive_hosts}); start `memoryd run` "
            "there, or pass --queue-anyway to queue the job for when it is back"
        )

    async def default_queue(self) -> str:
        """The only host's queue, for jobs that name no agent (erase); ambiguous → UsageError."""
        owners = await self.redis.hgetall(AGENT_OWNER_KEY)  # type: ignore[misc]
        queues: set[str] = {
            route.queue for value in owners.values() if (route := parse_route(value)) is not None
        }
        if len(queues) == 1:
            return queues.pop()
        if not queues:
            raise UsageError(f"no memoryd host is registered in Redis hash {AGENT_OWNER_KEY}")
        raise UsageError(
            f"{len(queues)} memoryd hosts share this Redis; name the queue (--queue) for this job"
        )

    # --- enqueue ----------------------------------------------------------------------------

    async def enqueue(
        self,
        function: str,
        payload: dict[str, Any],
        *,
        queue: str,
        request_id: str | None = None,
        job_id: str | None = None,
    ) -> EnqueuedJob:
        """Enqueue `payload` for `function` on `queue`. Its job id is random; with the caller's
        `request_id`, the request id's (memoryd.runtime.wire): a queued, running or successful run
        of the same payload under it answers this request (`deduplicated`), a failed one runs
        again, and another payload under it is refused (UsageError). `job_id`: the caller's
        own unique id (the daemon's live sweeps name their agent). A purge returns once
        `redis.purge_replicas` replicas hold it (memoryd.runtime.replication), else OperationFailed."""
        job = await self._enqueue(function, payload, queue=queue, request_id=request_id, job_id=job_id)
        replicas = self.settings.redis.replicas_for_purges(self.settings.redis_url)
        if replicas and _is_purge(function):
            timeout_ms = self.settings.redis.purge_replica_timeout_ms
            acknowledged = await replication.ring_replicated(self.redis, queue, replicas, timeout_ms)
            if acknowledged < replicas:
                raise replication.not_replicated(function, job.job_id, acknowledged, replicas, timeout_ms)
        return job

    async def _enqueue(
        self,
        function: str,
        payload: dict[str, Any],
        *,
        queue: str,
        request_id: str | None,
        job_id: str | None,
    ) -> EnqueuedJob:
        if job_id is None and request_id is not None:
            return await self._enqueue_request(function, payload, queue, request_id)
        job_id = random_job_id(function) if job_id is None else job_id
        job = await self._put(function, payload, queue, job_id)
        # The same request again while its job's only worker is dead: the job runs anew.
        released = job is None and await interrupted.release_if_orphaned(self.redis, queue, job_id)
        if job is not None or released:
            await self._ring(queue)
        return EnqueuedJob(job_id=job_id, function=function, queue=queue, deduplicated=job is None)

    async def _enqueue_request(
        self, function: str, payload: dict[str, Any], queue: str, request_id: str
    ) -> EnqueuedJob:
        check_request_id(request_id)
        job_id = request_job_id(function, request_id)
        fingerprint = request_fingerprint(request_id, function, payload).encode()
        record = REQUEST_KEY.format(job_id=job_id)
        # Bounded: each round either enqueues, answers, or clears a failed run a racing client
        # had not yet cleared.
        for _ in range(REQUEST_ROUNDS):
            if not await self.redis.set(record, fingerprint, nx=True):
                stored = await self.redis.get(record)
                if stored is None:
                    continue  # expired meanwhile: claim it again
                if stored != fingerprint:
                    raise UsageError(
                        f"request id {request_id!r}: already used for another {function} request; "
                        "give each different request its own request id"
                    )
            if (await self.job(job_id, queue)).state == "failed":
                # A failure never answers a request: the same request id runs again.
                await self.redis.delete(result_key_prefix + job_id)
            job = await self._put(function, payload, queue, job_id)
            if job is not None:
                await self._ring(queue)
                return EnqueuedJob(job_id=job_id, function=function, queue=queue, deduplicated=False)
            if (await self.job(job_id, queue)).state == "failed":
                continue  # it failed between the two reads: run it again
            if await self._take_over(job_id, queue) or await interrupted.release_if_orphaned(
                self.redis, queue, job_id
            ):
                await self._ring(queue)
            return EnqueuedJob(job_id=job_id, function=function, queue=queue, deduplicated=True)
        raise OperationFailed(f"request id {request_id!r}: its job kept changing state; send it again")

    async def _take_over(self, job_id: str, queue: str) -> bool:
        """The request's job waits, not started, on another queue whose host is not alive (the
        agent's route moved, a failover): move it to `queue`, where it runs, instead of answering
        the request with a job nothing runs. True when it moved."""
        if await self.redis.zscore(queue, job_id) is not None:
            return False
        now = time.time()
        beats = await self.redis.hgetall(HEARTBEATS_KEY)  # type: ignore[misc]
        async for raw in self.redis.scan_iter(match=QUEUE_PREFIX + "*", count=500, _type="zset"):
            other = raw.decode(errors="replace")
            if other == queue or await self.redis.zscore(other, job_id) is None:
                continue
            host = host_of_queue(other)
            if parse_heartbeat(host, beats.get(host.encode())).alive(now):
                return False  # a live host will run it where it is
            async with self.redis.pipeline(transaction=True) as pipe:
                # Not if a worker of the old queue starts it meanwhile (its in-progress key).
                await pipe.watch(in_progress_key_prefix + job_id)
                if await pipe.exists(in_progress_key_prefix + job_id):
                    await pipe.reset()  # type: ignore[no-untyped-call]
                    return False
                pipe.multi()  # type: ignore[no-untyped-call]
                pipe.zrem(other, job_id)
                pipe.zadd(queue, {job_id: int(now * 1000)})
                try:
                    await pipe.execute()
                except WatchError:
                    return False
            return True
        return False

    async def _put(self, function: str, payload: dict[str, Any], queue: str, job_id: str) -> Job | None:
        """arq's enqueue; a purge's job record is kept until it runs (arq expires it in a day)."""
        purge = _is_purge(function)
        job = await self.redis.enqueue_job(
            function,
            payload,
            _job_id=job_id,
            _queue_name=queue,
            _expires=PURGE_JOB_EXPIRES_S if purge else None,
        )
        if job is not None and purge:
            await self.redis.persist(job_key_prefix + job_id)
        return job

    async def _ring(self, queue: str) -> None:
        """Ring the queue's bell: the worker starts the job now, not at its next poll."""
        bell = QUEUE_BELL_KEY.format(queue=queue)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.rpush(bell, 1)
            pipe.expire(bell, QUEUE_BELL_TTL_S)
            await pipe.execute()

    async def result_stands_s(self, job_id: str) -> float | None:
        """How long the finished result of `job_id` stays in Redis (a request sent again under
        its request id is answered by it until then); None while the job is still queued or running."""
        ttl_ms = await self.redis.pttl(result_key_prefix + job_id)
        return ttl_ms / 1000 if ttl_ms is not None and ttl_ms > 0 else None

    async def submit(
        self,
        op: Op[Any],
        request: BaseModel | dict[str, Any],
        *,
        queue: str | None = None,
        request_id: str | None = None,
        queue_anyway: bool = False,
    ) -> EnqueuedJob:
        """Validate `request` as `op` does and enqueue it on the queue its routing names (or
        `queue`). A purge for a queue no live host serves is refused (OperationFailed naming
        the hosts alive) unless `queue_anyway`: it would wait unseen."""
        req = op.contract.parse(request)
        if request_id is not None:
            check_request_id(request_id)
        if queue is None and op.contract.routing is Routing.AGENT:
            queue = await self.queue_for(agent_of(req), queue_anyway=queue_anyway)  # checks its host
        elif op.contract.purge and not queue_anyway:
            queue = queue if queue is not None else await self.default_queue()
            await self.require_live(queue, f"{op.contract.name} for queue {queue!r}")
        elif queue is None:
            queue = await self.default_queue()
        return await self.enqueue(
            op.contract.name, op.contract.payload(req), queue=queue, request_id=request_id
        )

    async def enqueue_forget(
        self,
        request: BaseModel | dict[str, Any],
        *,
        request_id: str | None = None,
        queue_anyway: bool = False,
    ) -> EnqueuedJob:
        return await self.submit(forget_op.OP, request, request_id=request_id, queue_anyway=queue_anyway)

    async def enqueue_erase(
        self,
        request: BaseModel | dict[str, Any],
        *,
        queue: str | None = None,
        request_id: str | None = None,
        queue_anyway: bool = False,
    ) -> EnqueuedJob:
        return await self.submit(
            erase_op.OP, request, queue=queue, request_id=request_id, queue_anyway=queue_anyway
        )

    async def enqueue_ingest(self, agent: str, *, request_id: str | None = None) -> EnqueuedJob:
        return await self.submit(ingest_op.OP, {"agent": agent}, request_id=request_id)

    async def enqueue_index(
        self, agent: str, *, force: bool = False, request_id: str | None = None
    ) -> EnqueuedJob:
        return await self.submit(index_op.OP, {"agent": agent, "force": force}, request_id=request_id)

    # --- results ----------------------------------------------------------------------------

    def _handle(self, job_id: str, queue: str | None) -> Job:
        # Without its queue arq's Job cannot see a queued job's score; it is then given arq's
        # default queue, which memoryd never uses (and which an ACL for `~arq:*` allows), and
        # the job reads as not found there: `job` and `wait` tell "queued" from its job key.
        return Job(job_id, self.redis, _queue_name=queue or default_queue_name, _deserializer=deserialize)

    async def job(self, job_id: str, queue: str | None = None) -> JobReport:
        """The job's state and, once it is done, its result (arq's Job API: result_info, info, status)."""
        handle = self._handle(job_id, queue)
        try:
            done = await handle.result_info()
            if done is not None:
                return _finished(job_id, done)
            info = await handle.info()
        except DeserializationError:
            # Another tool (or a fault) left a record arq cannot read; the worker fails it
            # when it comes up. Reported, not raised: one bad record must not hide the others.
            return _unreadable(job_id, queue)
        except ResponseError as exc:
            return _unreadable(job_id, queue, _wrong_type(exc))
        status = None if info is None else await handle.status()
        if info is None or status is JobStatus.complete:
            # It may have finished since its result was looked for (its job record goes as its
            # result is stored): report its result (a failure too), never "complete" without
            # one, nor "not found" for a job that just finished.
            try:
                done = await handle.result_info()
            except DeserializationError:
                return _unreadable(job_id, queue)
            except ResponseError as exc:
                return _unreadable(job_id, queue, _wrong_type(exc))
            if done is not None:
                return _finished(job_id, done)
            return _not_found(job_id, queue)
        assert status is not None
        state: JobState = _STATES.get(status, "queued")  # a job key but no known queue: queued
        # arq's Job API has no try count for a job that has not finished; its retry counter
        # (incremented as each try starts) is the record.
        retries = await self.redis.get(retry_key_prefix + job_id)
        return JobReport(
            job_id=job_id,
            function=info.function,
            queue=queue,
            state=state,
            tries=int(retries) if retries and retries.isdigit() else info.job_try,
            enqueued_at=_iso(info.enqueue_time),
            started_at=None,
            finished_at=None,
            error=None,
            result=None,
        )

    async def wait(
        self, job_id: str, *, queue: str | None = None, timeout_s: float | None = None
    ) -> JobReport:
        """Wait until the job is complete or failed; OperationFailed on timeout or an unknown job.

        The worker rings the job's doorbell (JOB_DONE_KEY) once its result is stored, and a
        background BLPOP wakes this wait at once. The result itself is always read through
        arq's Job (`result_info`, then `status`), polled on the usual back-off, so a missed ring
        (a daemon without it, another client popping it first) only costs the next poll. With
        the job's `queue` (EnqueuedJob.queue) a poll of a pending job is two Redis round trips.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        bell = _Doorbell()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._listen, job_id, bell, deadline)
                try:
                    report = await self._poll(self._handle(job_id, queue), queue, bell, deadline, timeout_s)
                finally:
                    tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:  # the listener never fails: hand the poll's error on as is
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        return report

    async def _poll(
        self,
        handle: Job,
        queue: str | None,
        bell: _Doorbell,
        deadline: float | None,
        timeout_s: float | None,
    ) -> JobReport:
        job_id = handle.job_id
        while True:
            done = await handle.result_info()
            if done is not None:
                return _finished(job_id, done)
            status = await handle.status()
            if status is JobStatus.complete:
                continue  # it finished between the two reads
            if status is JobStatus.not_found:
                # Read whole, as `job` reads it: one that finished since its result was looked
                # for (its record goes as its result is stored) is reported, never "not found";
                # without its queue, a pending job is told by its record.
                report = await self.job(job_id, queue)
                if report.state == "not_found":
                    raise OperationFailed(f"job {job_id}: not found (never enqueued, or its result expired)")
                if report.done:
                    return report
            if deadline is not None and time.monotonic() >= deadline:
                state = _STATES.get(status, "queued")  # a job key but no known queue: queued
                raise OperationFailed(f"job {job_id}: still {state} after {timeout_s:g}s")
            # The ring normally ends this wait; the poll delay bounds a missed one. No faster
            # polls: they would only take CPU from the worker running the job.
            failpoint("client.wait.idle")  # polled, not done: waits for the ring (tests hear it)
            with anyio.move_on_after(self.poll_delay_s):
                await bell.rung.wait()
            if bell.rung.is_set():
                bell.rung = anyio.Event()  # a stale ring (an earlier run of this id) must not spin

    async def _listen(self, job_id: str, bell: _Doorbell, deadline: float | None) -> None:
        key = JOB_DONE_KEY.format(job_id=job_id)
        while True:
            # Redis times blocking commands out in whole server ticks (~0.1 s), so the BLPOP
            # only wakes; the polls handle deadlines.
            block_s = JOB_DONE_TTL_S if deadline is None else max(1, math.ceil(deadline - time.monotonic()))
            try:
                rang = await self.redis.blpop([key], timeout=block_s)  # type: ignore[misc]
            except (RedisError, OSError):
                return  # the polls still see the result
            if rang is not None:
                bell.rung.set()

    async def list_jobs(self, queue: str, *, finished_limit: int = 50) -> list[JobReport]:
        """Queued and running jobs of a queue (oldest first), then its newest finished jobs."""
        # A member that is not UTF-8 is shown escaped (the worker fails it when it comes up).
        pending = [m.decode(errors="backslashreplace") for m in await self.redis.zrange(queue, 0, -1)]
        out = [await self.job(job_id, queue) for job_id in pending]
        host = host_of_queue(queue)
        heartbeat = parse_heartbeat(host, await self.redis.hget(HEARTBEATS_KEY, host))  # type: ignore[misc]
        now = time.time()
        if not heartbeat.alive(now):  # nothing runs them until the host is back: say so
            why = heartbeat.silence(now)
            out = [r.model_copy(update={"waiting_on": why}) if not r.done else r for r in out]
        finished: list[JobReport] = []
        broken: list[JobReport] = []  # result keys of the wrong type, whatever queue they were for
        # SCAN, not arq's all_job_results (KEYS over the whole keyspace, failing on a result
        # that expires meanwhile); each result is read through arq's Job.
        async for key in self.redis.scan_iter(match=result_key_prefix + "*", count=500):
            job_id = key.decode(errors="backslashreplace")[len(result_key_prefix) :]
            if job_id in pending:
                continue
            try:
                done = await self._handle(job_id, queue).result_info()
            except DeserializationError:
                continue  # not a result arq can read: not a job of ours
            except ResponseError as exc:  # not even a string (a hash, a list): one line, then the rest
                broken.append(_unreadable(job_id, None, _wrong_type(exc)))
                continue
            if done is not None and done.queue_name == queue:
                finished.append(_finished(job_id, done))
        finished.sort(key=lambda report: report.finished_at or "", reverse=True)
        return out + finished[:finished_limit] + broken[:finished_limit]
