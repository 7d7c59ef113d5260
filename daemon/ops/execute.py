"""Running an op: open what its lock policy says, take the workspace lock once if the op holds
it for the whole run, call `run`. The worker (memoryd.runtime.jobs) and the foreground CLI
(`LocalResources`) differ only in where stores and Redis come from.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol

from memoryd.agent_runtime import AgentRuntime, agent_runtime
from memoryd.errors import LockTimeout
from memoryd.ops.op import LockPolicy, Op, OpContext, ProgressFn, R, Report, Routing, agent_of
from memoryd.settings import Settings

if TYPE_CHECKING:
    # Typing only: an op without a lock (a dry run) never loads the Redis client.
    from redis.asyncio import Redis

    from memoryd.ingest.live_hints import LiveHints
    from memoryd.lock import Lease


class Resources(Protocol):
    """Where an op's stores and Redis come from."""

    settings: Settings

    def agent_runtime(self, agent: str, *, readonly: bool) -> AbstractAsyncContextManager[AgentRuntime]:
        """The agent's runtime: read-only ones without Redis, writable ones with it."""
        ...

    async def redis(self) -> Redis:
        """A connected client for host-wide ops (their own leases)."""
        ...

    def lock_waited(self, op: str, waited_s: float, *, timed_out: bool) -> None:
        """Called once per whole-run lock acquisition (metrics)."""
        ...

    @property
    def hints(self) -> LiveHints | None:
        """The live-ingestion hints live jobs read (the worker's); None: every live job sweeps all."""
        ...


async def execute(
    op: Op[R], resources: Resources, request: R, *, progress: ProgressFn | None = None
) -> Report:
    """Run `request` (already parsed by `op.contract.parse`) as `op` declares; returns its report."""
    policy = op.policy.lock(request)
    settings = resources.settings
    if op.contract.routing is Routing.HOST:
        redis = None if policy is LockPolicy.NONE else await resources.redis()
        return await op.run(OpContext(settings, redis, None, None, progress, resources.hints), request)
    readonly = policy is LockPolicy.NONE
    async with resources.agent_runtime(agent_of(request), readonly=readonly) as rt:
        if policy is not LockPolicy.WHOLE_RUN:
            return await op.run(OpContext(settings, rt.redis, rt, None, progress, resources.hints), request)
        async with _whole_run_lock(op, resources, rt) as lease:
            return await op.run(OpContext(settings, rt.redis, rt, lease, progress, resources.hints), request)


@asynccontextmanager
async def _whole_run_lock(op: Op[Any], resources: Resources, rt: AgentRuntime) -> AsyncIterator[Lease]:
    started = time.monotonic()
    try:
        async with rt.lock().hold() as lease:
            resources.lock_waited(op.contract.name, lease.waited_s, timed_out=False)
            yield lease
    except LockTimeout:
        resources.lock_waited(op.contract.name, time.monotonic() - started, timed_out=True)
        raise


class LocalResources:
    """An op run in this process (the CLI's foreground commands, tools): each runtime opens its
    own store; Redis is connected on first need and closed by `close`."""

    def __init__(self, settings: Settings, redis: Redis | None = None):
        self.settings = settings
        self._redis = redis
        self._own_redis = redis is None

    def agent_runtime(self, agent: str, *, readonly: bool) -> AbstractAsyncContextManager[AgentRuntime]:
        redis: bool | Redis = False if readonly else self._redis or True  # True: its own, lazily
        return agent_runtime(self.settings, agent, readonly=readonly, redis=redis)

    async def redis(self) -> Redis:
        if self._redis is None:
            from memoryd.redis_conn import connect_redis  # imports redis: only host-wide ops need it

            self._redis = await connect_redis(self.settings)  # one line if unreachable
        return self._redis

    def lock_waited(self, op: str, waited_s: float, *, timed_out: bool) -> None:
        pass  # a foreground command exports no metrics

    @property
    def hints(self) -> LiveHints | None:
        return None  # no watcher runs in a foreground command

    async def close(self) -> None:
        if self._redis is not None and self._own_redis:
            await self._redis.aclose()
            self._redis = None


async def run_locally(
    op: Op[R], settings: Settings, request: R, *, progress: ProgressFn | None = None
) -> Report:
    """Run `request` in this process (what `memoryd forget`, `memoryd erase`, … do)."""
    resources = LocalResources(settings)
    try:
        return await execute(op, resources, request, progress=progress)
    finally:
        await resources.close()
