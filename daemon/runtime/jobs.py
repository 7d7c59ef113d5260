"""The arq job functions, generated from the operation registry (memoryd.ops.registry).

Each validates its JSON payload with its op (`Op.parse`: unknown fields, bad ids and empty
selectors fail the job with one JobPayloadError line before anything runs), refuses an agent
this host does not serve, runs the op with the worker's stores and Redis
(memoryd.ops.execute), and counts it: duration, outcome, purges, sweeps, and one log line
with ids and counts only, never content. The result is the JSON report the CLI prints.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel
from redis.asyncio import Redis

from memoryd.agent_runtime import AgentRuntime, agent_runtime
from memoryd.agents import agent_paths
from memoryd.caches import ProcessCaches
from memoryd.constants import AGENT_OWNER_KEY, AGENT_WAIT_FIRST_S, AGENT_WAIT_STEP_MAX_S
from memoryd.errors import AgentNotServed, MemorydError, OperationFailed
from memoryd.ingest.live_hints import LiveHints
from memoryd.ops.execute import execute
from memoryd.ops.op import Op, Report, Routing, agent_of
from memoryd.ops.registry import OPS
from memoryd.plain_report import report_json
from memoryd.runtime import metrics
from memoryd.runtime.hosts import parse_route
from memoryd.runtime.served import SERVED, ServedAgents
from memoryd.runtime.store_pool import StorePool
from memoryd.runtime.wire import queue_name
from memoryd.sessions.json_store import ListingCache
from memoryd.sessions.source import session_source_for
from memoryd.settings import Settings
from memoryd.store.engine import storage_problem
from memoryd.stored_form import stored_form

log = logging.getLogger("memoryd.jobs")
# ctx keys of the worker's open stores and of its process caches (MemorydWorker); absent, a job
# opens and closes its own store and gets caches of its own, as a plain arq Worker given only
# worker_kwargs would.
STORES = "stores"
CACHES = "caches"
# ctx key of the live-ingestion hints the service's watcher notes and live jobs read (one object
# shared by every job's copy of ctx); absent, a live job sweeps everything.
LIVE_HINTS = "live_hints"
HOST_SCOPE = "host"  # the `agent` label of host-wide sweeps in metrics

JobFn = Callable[[dict[str, Any], Any], Awaitable[dict[str, Any]]]


class WorkerResources:
    """An op's stores and Redis inside a job: the worker's pool and client (memoryd.ops.execute)."""

    def __init__(self, ctx: dict[str, Any]):
        self.ctx = ctx
        # The service swaps ctx["settings"] on SIGHUP (admission policy reload); read it per job.
        self.settings: Settings = ctx["settings"]

    def agent_runtime(self, agent: str, *, readonly: bool) -> AbstractAsyncContextManager[AgentRuntime]:
        stores: StorePool | None = self.ctx.get(STORES)
        caches: ProcessCaches | None = self.ctx.get(CACHES)
        if stores is None:
            redis = False if readonly else self.ctx["redis"]
            return agent_runtime(self.settings, agent, readonly=readonly, redis=redis, caches=caches)
        redis_client = None if readonly else self.ctx["redis"]
        return pooled_runtime(
            self.settings, agent, stores, readonly=readonly, redis=redis_client, caches=caches
        )

    async def redis(self) -> Redis:
        return self.ctx["redis"]  # type: ignore[no-any-return]

    @property
    def hints(self) -> LiveHints | None:
        return self.ctx.get(LIVE_HINTS)

    def lock_waited(self, op: str, waited_s: float, *, timed_out: bool) -> None:
        metrics.LOCK_WAIT.labels(family=op).observe(waited_s)
        if timed_out:
            metrics.LOCK_TIMEOUTS.labels(family=op).inc()


@asynccontextmanager
async def pooled_runtime(
    settings: Settings,
    agent_id: str,
    stores: StorePool,
    *,
    readonly: bool,
    redis: Redis | None,
    caches: ProcessCaches | None = None,
) -> AsyncIterator[AgentRuntime]:
    """The agent's runtime over a store checked out of the worker's pool; Redis and the process
    caches are the worker's."""
    caches = caches if caches is not None else ProcessCaches()
    paths = agent_paths(settings, agent_id)
    source = session_source_for(settings, agent_id, caches.part(ListingCache))
    async with stores.checkout(paths.db_path, readonly=readonly) as store:
        yield AgentRuntime(settings, paths, store, redis, source, readonly, caches)


async def ensure_served(ctx: dict[str, Any], agent: str, job: str) -> None:
    """Returns once `agent` is served here. A job for an agent this host's route names (of this
    deployment) that is not served yet — its directory away at a start, being found again at a
    heartbeat — waits for it with back-off, up to `daemon.agent_wait_s`; anything else fails at
    once with AgentNotServed."""
    served: ServedAgents | None = ctx.get(SERVED)
    if served is None or agent in served.agents:
        return
    host = ctx.get("host_id")
    settings: Settings = ctx["settings"]
    if not served.refused.get(agent) and await _routed_here(ctx, agent, settings):
        delay, deadline = AGENT_WAIT_FIRST_S, time.monotonic() + settings.daemon.agent_wait_s
        while agent not in served.agents and not served.refused.get(agent):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AgentNotServed(
                    f"{job}: agent {agent!r} is routed to host {host!r} but was not found there within "
                    f"daemon.agent_wait_s ({settings.daemon.agent_wait_s:g} s); check its directory "
                    "under sessions_root, then send the job again"
                )
            await anyio.sleep(min(delay, left))
            delay = min(delay * 2, AGENT_WAIT_STEP_MAX_S)
        if agent in served.agents:
            return
    why = served.refused.get(agent)  # the service's: its store could not be opened
    # Two whole messages, not one with an optional tail: docs/errors.md lists each as written.
    if why:
        raise AgentNotServed(
            f"{job}: agent {agent!r} is not served by host {host!r} until its store opens: {why}"
        )
    raise AgentNotServed(f"{job}: agent {agent!r} is not served by host {host!r}")


async def _routed_here(ctx: dict[str, Any], agent: str, settings: Settings) -> bool:
    """Whether the agent's route names this host's queue, of this deployment."""
    redis: Redis | None = ctx.get("redis")
    if redis is None:
        return False
    route = parse_route(await redis.hget(AGENT_OWNER_KEY, agent))  # type: ignore[misc]
    return (
        route is not None
        and route.queue == queue_name(ctx.get("host_id", settings.daemon.host_id))
        and route.deployment == settings.deployment
    )


def dump(report: Report) -> dict[str, Any]:
    """The report as the CLI prints it (field order and aliases of the model)."""
    return report_json(report)


def _is_purge(op: Op[Any], request: BaseModel | None) -> bool:
    """A purge the metrics count: one that ran (a payload refused before it did attempted
    nothing) and could delete (a dry run deletes nothing)."""
    return op.contract.purge and request is not None and not getattr(request, "dry_run", False)


def _count_success(op: Op[Any], request: BaseModel, report: dict[str, Any], elapsed_s: float) -> None:
    if _is_purge(op, request) and isinstance(artifacts := report.get("artifacts"), dict):
        metrics.count_purged(op.contract.name, artifacts)
    target = agent_of(request) if op.contract.routing is Routing.AGENT else HOST_SCOPE
    if op.policy.sweep:
        metrics.SWEEP_DURATION.labels(family=op.contract.name, agent=target).observe(elapsed_s)
        metrics.LAST_SWEEP.labels(family=op.contract.name, agent=target).set_to_current_time()
    if op.policy.sessions_scanned_field is not None:
        scanned = report.get(op.policy.sessions_scanned_field)
        if isinstance(scanned, int):
            metrics.SESSIONS_SCANNED.labels(agent=target).inc(scanned)


def job_function(op: Op[Any]) -> JobFn:
    """The arq job function of `op`, named after it."""

    async def job(ctx: dict[str, Any], payload: Any) -> dict[str, Any]:
        started = time.monotonic()
        outcome = "failed"
        attempted: BaseModel | None = None  # the request, once it is valid and served here
        try:
            request = op.contract.parse(payload)
            if op.contract.routing is Routing.AGENT:
                await ensure_served(ctx, agent_of(request), op.contract.name)
            attempted = request
            hints: LiveHints | None = ctx.get(LIVE_HINTS)
            if (
                op.contract.purge and hints is not None
            ):  # no in-memory live hint may name what is being forgotten
                hints.drop_all()
            result = await execute(op, WorkerResources(ctx), request)
            # Redis gets the stored form: no memory text, ids, keys or paths (daemon/stored_form.py).
            report = dump(stored_form(op.policy.redact_result(result) if op.policy.redact_result else result))
            outcome = "complete"
            _count_success(op, request, report, time.monotonic() - started)
            if op.policy.sweep and (refresh := ctx.get("refresh_gauges")) is not None:
                refresh()  # the lag and backlog gauges follow a sweep at once
            return report
        except BaseException as exc:
            # Cancellation (drain, timeout) returns the job to the queue: a retry, not a failure.
            if not isinstance(exc, Exception):
                outcome = "retried"
            else:
                # The message may name sessions or people (it goes to the job result, which
                # the client reads); the log keeps the error class only.
                log.warning("job %s %s failed: %s", ctx.get("job_id"), op.contract.name, type(exc).__name__)
                if not isinstance(exc, MemorydError) and storage_problem(exc) is None:
                    # A bug: where it was raised, for the report (frames only; no message).
                    log.error(
                        "job %s %s: unexpected %s at %s",
                        ctx.get("job_id"),
                        op.contract.name,
                        type(exc).__name__,
                        _frames(exc),
                    )
                problem = storage_problem(exc)
                if problem is not None:  # a full disk or a damaged file, said as the CLI says it
                    raise OperationFailed(problem) from None
            raise
        finally:
            if op.contract.purge and (hints := ctx.get(LIVE_HINTS)) is not None:  # nor one noted while it ran
                hints.drop_all()
            elapsed = time.monotonic() - started
            metrics.JOB_DURATION.labels(family=op.contract.name).observe(elapsed)
            metrics.JOBS_TOTAL.labels(family=op.contract.name, outcome=outcome).inc()
            if _is_purge(op, attempted) and outcome != "retried":
                metrics.PURGES.labels(family=op.contract.name, outcome=outcome).inc()
            log.info(
                "job %s %s %s in %.3fs (try %s)",
                ctx.get("job_id"),
                op.contract.name,
                outcome,
                elapsed,
                ctx.get("job_try"),
            )

    job.__name__ = job.__qualname__ = op.contract.name
    return job


JOB_FUNCTIONS: tuple[JobFn, ...] = tuple(job_function(op) for op in OPS)


class RedactJobErrors(logging.Filter):
    """arq logs a failed job as `… ! <id>:<fn> failed, <Class>: <message>` with the traceback;
    the message and traceback may name sessions or people, so keep only the class."""

    def filter(self, record: logging.LogRecord) -> bool:
        if (
            record.levelno >= logging.ERROR
            and isinstance(record.args, tuple)
            and len(record.args) == 4
            and "failed" in str(record.msg)
        ):
            record.args = (*record.args[:3], "(message in the job result)")
            record.exc_info = None
            record.exc_text = None
        elif record.levelno >= logging.ERROR and str(record.msg).startswith("deserializing job"):
            # A broken job record: one line with what is wrong (a field name), no traceback.
            cause = record.exc_info[1].__cause__ if record.exc_info and record.exc_info[1] else None
            record.msg = f"{record.msg}: %s; it fails alone"
            record.args = (*(record.args or ()), str(cause) if cause else "unreadable")
            record.exc_info = None
            record.exc_text = None
        return True


def _frames(exc: BaseException, depth: int = 6) -> str:
    """The innermost frames of `exc` as `file:line function`, innermost last: where a bug was
    raised, without its message (which may name sessions or people)."""
    frames = traceback.extract_tb(exc.__traceback__)[-depth:]
    return " < ".join(
        f"{'/'.join(Path(f.filename).parts[-2:])}:{f.lineno} {f.name}" for f in reversed(frames)
    )
