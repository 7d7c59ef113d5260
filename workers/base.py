"""What every job function shares: payload validation, the domain import, the agent runtime,
the purge lock, metrics and one log line per job (ids and counts only, never content).

A job function validates its JSON payload with the domain's request model (unknown fields,
bad ids and empty selectors fail the job with a one-line error before anything runs) and
calls the domain entry point; the result is the JSON report the CLI prints.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import wraps
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from daemon.agent_runtime import AgentRuntime, agent_runtime, pooled_runtime
from daemon.errors import LockTimeout, OperationFailed, UsageError
from daemon.jobs import PURGE_JOBS
from daemon.runtime import metrics
from daemon.runtime.caches import ProcessCaches
from daemon.runtime.store_pool import StorePool
from daemon.settings import Settings

log = logging.getLogger("memoryd.jobs")
# ctx keys of the worker's open stores and of its process caches (workers.worker.MemorydWorker);
# absent, a job opens and closes its own store and gets caches of its own, as a plain arq
# Worker given only worker_kwargs would.
STORES = "stores"
CACHES = "caches"

M = TypeVar("M", bound=BaseModel)
JobFn = Callable[..., Awaitable[dict[str, Any]]]


class JobPayloadError(UsageError):
    """A job's payload does not match its request model; the job ran nothing."""


class AgentNotServed(UsageError):
    """The job names an agent this host does not own."""


def describe_validation(job: str, err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "payload"
    if first["type"] == "extra_forbidden":
        return f"{job}: payload.{where}: unknown field"
    return f"{job}: payload.{where}: {first['msg']}"


def parse_payload(model: type[M], payload: Any, job: str) -> M:
    if not isinstance(payload, dict):
        raise JobPayloadError(f"{job}: payload must be a JSON object, got {type(payload).__name__}")
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        raise JobPayloadError(describe_validation(job, exc)) from None
    except UsageError as exc:  # some request models raise it from their validators
        raise JobPayloadError(f"{job}: {exc}") from None


def domain(module: str, attr: str, job: str) -> Any:
    """Import a domain entry point when the job runs, so the daemon serves whatever is installed."""
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise OperationFailed(f"{job}: {module}.{attr} is not available in this build ({exc})") from None


def settings_of(ctx: dict[str, Any]) -> Settings:
    # The service swaps ctx["settings"] on SIGHUP (admission policy reload); read it per job.
    return ctx["settings"]  # type: ignore[no-any-return]


def ensure_served(ctx: dict[str, Any], agent: str, job: str) -> None:
    served = ctx.get("agents")
    if served is not None and agent not in served:
        raise AgentNotServed(f"{job}: agent {agent!r} is not served by host {ctx.get('host_id')!r}")


@asynccontextmanager
async def runtime(ctx: dict[str, Any], agent: str, *, readonly: bool = False) -> AsyncIterator[AgentRuntime]:
    """The agent's runtime for one job: read-only ones without Redis; the store from the
    worker's pool when there is one."""
    stores: StorePool | None = ctx.get(STORES)
    caches: ProcessCaches | None = ctx.get(CACHES)
    if stores is None:
        async with agent_runtime(
            settings_of(ctx),
            agent,
            readonly=readonly,
            redis=False if readonly else ctx["redis"],
            caches=caches,
        ) as rt:
            yield rt
        return
    async with pooled_runtime(
        settings_of(ctx),
        agent,
        stores,
        readonly=readonly,
        redis=None if readonly else ctx["redis"],
        caches=caches,
    ) as rt:
        yield rt


@asynccontextmanager
async def purge_lock(rt: AgentRuntime, job: str) -> AsyncIterator[None]:
    """Hold the workspace lock for a whole purge, so purges of one workspace never overlap,
    on any host. The domain's own `hold()` inside re-enters this lease (same task)."""
    started = time.monotonic()
    try:
        async with rt.lock().hold() as lease:
            metrics.LOCK_WAIT.labels(family=job).observe(lease.waited_s)
            yield
    except LockTimeout:
        metrics.LOCK_TIMEOUTS.labels(family=job).inc()
        metrics.LOCK_WAIT.labels(family=job).observe(time.monotonic() - started)
        raise


def dump(report: Any) -> dict[str, Any]:
    """The report as the CLI prints it (field order and aliases of the model)."""
    if isinstance(report, BaseModel):
        return report.model_dump(mode="json", by_alias=True)
    if isinstance(report, dict):
        return report
    raise OperationFailed(f"domain returned {type(report).__name__}, not a report model")


def observed(job: str) -> Callable[[JobFn], JobFn]:
    """Wrap a job function: duration, outcome and purge metrics, one structured log line."""

    def wrap(fn: JobFn) -> JobFn:
        @wraps(fn)
        async def run(ctx: dict[str, Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
            started = time.monotonic()
            outcome = "failed"
            try:
                result = await fn(ctx, *args, **kwargs)
                outcome = "complete"
                if job in PURGE_JOBS:
                    artifacts = result.get("artifacts")
                    if isinstance(artifacts, dict):
                        metrics.count_purged(job, artifacts)
                return result
            except BaseException as exc:
                # Cancellation (drain, timeout) returns the job to the queue: a retry, not a failure.
                if not isinstance(exc, Exception):
                    outcome = "retried"
                else:
                    # The message may name sessions or people (it goes to the job result, which
                    # the client reads); the log keeps the error class only.
                    log.warning("job %s %s failed: %s", ctx.get("job_id"), job, type(exc).__name__)
                raise
            finally:
                elapsed = time.monotonic() - started
                metrics.JOB_DURATION.labels(family=job).observe(elapsed)
                metrics.JOBS_TOTAL.labels(family=job, outcome=outcome).inc()
                if job in PURGE_JOBS and outcome != "retried":
                    metrics.PURGES.labels(family=job, outcome=outcome).inc()
                log.info(
                    "job %s %s %s in %.3fs (try %s)",
                    ctx.get("job_id"),
                    job,
                    outcome,
                    elapsed,
                    ctx.get("job_try"),
                )

        return run

    return wrap


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
        return True


def sweep_done(job: str, agent: str, elapsed_s: float) -> None:
    metrics.SWEEP_DURATION.labels(family=job, agent=agent).observe(elapsed_s)
    metrics.LAST_SWEEP.labels(family=job, agent=agent).set_to_current_time()
