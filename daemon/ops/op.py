"""What an operation declares: one `Op` per job family. Its `JobContract` is what other tools
see (the client, `memoryd enqueue`, the docs generator read only that); its `JobPolicy` is how
this daemon runs it (the worker, the scheduler, the metrics).

An op module (daemon/ops/<family>.py) builds its `Op` from light pieces only — its request
model, small functions — and imports its domain entry point inside `run`, so the registry
stays cheap to import.

One validation for a request, whichever way it arrives (CLI flags, a client call, a raw arq
job from another tool): `JobContract.parse`, whose every error is one `JobPayloadError` line
`<family>: <field>: <problem>`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Generic, TypeAlias, TypeVar

from pydantic import BaseModel, ValidationError

from memoryd.did_you_mean import closest
from memoryd.errors import JobPayloadError, MemorydError, UsageError
from memoryd.ops.payload import check_payload_size
from memoryd.plain_report import PlainReport

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from memoryd.agent_runtime import AgentRuntime
    from memoryd.ingest.live_hints import LiveHints
    from memoryd.lock import Lease
    from memoryd.settings import Settings

R = TypeVar("R", bound=BaseModel)
# An op's report: a pydantic model, or a plain report dataclass (daemon/plain_report.py) that
# pydantic reads through a `TypeAdapter` where a schema or a validation is wanted.
Report: TypeAlias = BaseModel | PlainReport
ProgressFn = Callable[[str, int, int], None]  # (phase, done, total), for a CLI progress bar


class Routing(Enum):
    """Which host's queue a job goes to."""

    AGENT = "agent"  # the host that owns `request.agent` (published in Redis)
    HOST = "host"  # host-wide state (retention.sqlite): the only host's queue, or the one named


class LockPolicy(Enum):
    """Who takes the workspace lock, and what the op is given to run with."""

    # Reads only: a read-only store (none if the agent has none yet), no Redis, no lock.
    NONE = "none"
    # The domain takes its locks around its own writes; slow work (parsing, embedding, model
    # calls) runs outside them. The op gets a writable store and Redis.
    IN_DOMAIN = "in_domain"
    # The op holds the agent's workspace lock for its whole run, once, and hands the lease to
    # the domain: purges of one workspace never overlap, on any host.
    WHOLE_RUN = "whole_run"


@dataclass(frozen=True, slots=True)
class OpContext:
    """What a run gets, opened as its lock policy says (memoryd.ops.execute)."""

    settings: Settings
    redis: Redis | None  # None under LockPolicy.NONE
    runtime: AgentRuntime | None  # the agent's runtime (Routing.AGENT); None for host-wide ops
    lease: Lease | None  # the workspace lease under LockPolicy.WHOLE_RUN
    progress: ProgressFn | None = None
    # The worker's live-ingestion hints (daemon/ingest/live_hints.py); None outside the daemon,
    # where a live job's generation names nothing: it sweeps everything.
    hints: LiveHints | None = None

    def agent_runtime(self) -> AgentRuntime:
        if self.runtime is None:
            raise RuntimeError("this operation was run without an agent runtime")
        return self.runtime

    def require_redis(self) -> Redis:
        if self.redis is None:
            raise RuntimeError("this operation was run without Redis")
        return self.redis

    def require_lease(self) -> Lease:
        if self.lease is None:
            raise RuntimeError("this operation was run without the workspace lease")
        return self.lease


def keep_result_s(settings: Settings) -> int:
    return settings.daemon.keep_result_s


def no_outcome(result: Mapping[str, Any]) -> MemorydError | None:
    return None


@dataclass(frozen=True, slots=True)
class JobContract(Generic[R]):
    """What a job family is on the wire, for every tool that submits it (docs/jobs.md is
    generated from these): its name, request and result, where it is routed, and how the
    submitting side treats it."""

    name: str  # the job function's name on the wire (arq's "f"), the metrics' family label
    summary: str  # one line for docs/jobs.md
    request: type[R]  # the payload model (extra fields forbidden); one for the CLI and the job
    result: Callable[[], type[Report]]  # the report's type (the job's result, the CLI's --json)
    routing: Routing
    # The `memoryd <command>` that runs it in the foreground (and `memoryd enqueue <command>`).
    command: str | None = None
    # Deletes data: its job record is kept until it runs, no other purge deletes it, it is refused
    # for a queue no live host serves, and it is counted in the purge metrics and alerts.
    purge: bool = False
    # The error a successful report still means for the CLI's exit code (a refused erasure).
    outcome: Callable[[Mapping[str, Any]], MemorydError | None] = no_outcome

    def parse(self, data: Any) -> R:
        """`data` (CLI flags, a client's request, a job's JSON payload) as this op's request;
        any problem is one JobPayloadError line naming the family and the field."""
        if isinstance(data, self.request):
            return data
        if isinstance(data, BaseModel):
            data = data.model_dump(mode="json")
        if not isinstance(data, dict):
            raise JobPayloadError(f"{self.name}: payload must be a JSON object, got {type(data).__name__}")
        check_payload_size(self.name, data)
        try:
            return self.request.model_validate(data)
        except ValidationError as exc:
            raise JobPayloadError(f"{self.name}: {describe_validation(exc, self.request)}") from None
        except UsageError as exc:  # the request models' validators name the field themselves
            raise JobPayloadError(f"{self.name}: {exc}") from None

    def payload(self, request: R) -> dict[str, Any]:
        """The request as JSON, the job's single argument."""
        return request.model_dump(mode="json")


@dataclass(frozen=True, slots=True)
class JobPolicy(Generic[R]):
    """How this daemon runs a job family: the locks it takes, how long its result is kept and
    what of it, how it is scheduled and counted. No submitting tool reads it."""

    lock: Callable[[R], LockPolicy]  # may depend on the request (a dry run takes no lock)
    # How long Redis keeps the result.
    result_ttl_s: Callable[[Settings], int] = keep_result_s
    # The payload names a data subject: a job given up before it ran keeps its result no longer
    # than result_ttl_s either. (A purge's job record itself never expires before it runs.)
    payload_names_subject: bool = False
    # Whether its report may quote memory text. A result is stored in Redis, outside what
    # forget and erase reach, so none may (DESIGN §6); tests/test_workers.py runs every op and
    # checks its stored result against this.
    result_may_carry_memory_text: bool = False
    # What else of the report to drop from the job's result, after its `Content` fields
    # (daemon/stored_form.py). A direct caller gets the whole report; Redis, outside what
    # forget and erase reach, gets the stored form.
    redact_result: Callable[[Report], Report] | None = None
    # The scheduler's interval for it (None: not scheduled with these settings).
    interval_s: Callable[[Settings], float | None] | None = None
    sweep: bool = False  # a sweep: its duration and last success are exported per agent (or host)
    sessions_scanned_field: str | None = None  # result field counted in memoryd_sessions_scanned_total
    # Long background work (minutes on a large history): a worker runs such jobs in at most
    # daemon.max_jobs - 1 of its slots together, so ingest sweeps, forgets and erasures always
    # find one free; the rest stay queued (memoryd.runtime.worker).
    background: bool = False

    def scheduled(self, settings: Settings) -> float | None:
        return None if self.interval_s is None else self.interval_s(settings)


@dataclass(frozen=True, slots=True)
class Op(Generic[R]):
    """A job family: its wire contract, the domain entry point that runs it, and this daemon's
    policy for running it."""

    contract: JobContract[R]
    run: Callable[[OpContext, R], Awaitable[Report]]  # imports its domain entry point when called
    policy: JobPolicy[R]


def agent_of(request: BaseModel) -> str:
    """The agent an agent-routed request names (its `agent` field)."""
    agent = getattr(request, "agent", None)
    if not isinstance(agent, str):
        raise TypeError(f"{type(request).__name__} names no agent")
    return agent


def describe_validation(err: ValidationError, model: type[BaseModel] | None = None) -> str:
    """`<field>: <problem>` for the first error (the field dotted, as the payload names it); an
    unknown top-level field of `model` gets the nearest known one."""
    first = err.errors()[0]
    # A field name comes from the payload: an unprintable one is shown escaped, so the line stays one.
    where = ".".join(str(p) if str(p).isprintable() else repr(str(p)) for p in first["loc"])
    if first["type"] == "extra_forbidden":
        problem = "unknown field"
        name = first["loc"][-1] if len(first["loc"]) == 1 else None
        nearest = closest(name, model.model_fields) if model is not None and isinstance(name, str) else None
        if nearest is not None:
            problem += f" (did you mean {nearest!r}?)"
    elif first["type"] == "value_error":  # a validator's ValueError: its message, not pydantic's prefix
        problem = str(first.get("ctx", {}).get("error", first["msg"]))
    else:
        problem = first["msg"]
    return f"{where}: {problem}" if where else problem
