"""The runtime handles one operation on one agent needs: settings, paths, store, Redis, lock.

    async with agent_runtime(settings, "main") as rt:
        async with rt.lock().hold() as lease:
            await rt.store.write(fn, fence=lease.fence)

`readonly=True` opens an existing store without creating or migrating anything (dry runs);
`rt.store` is None then if the agent has no store yet. `redis=False` skips Redis for
read-only commands. The runtime's own Redis client connects on first use (the lock), so an
operation that ends up changing nothing (a quiet re-sweep) never talks to Redis; an
unreachable Redis is then reported by the lock ("workspace lock: Redis unavailable").

The worker builds the same runtime over the stores it keeps open (memoryd.runtime.jobs).

`rt.caches` is what the process keeps between operations (daemon/caches.py): the worker hands
its own to every job; without one, the runtime gets a fresh one that ends with it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memoryd.agents import AgentPaths, agent_paths
from memoryd.caches import ProcessCaches
from memoryd.sessions.json_store import ListingCache
from memoryd.sessions.model import SessionSource
from memoryd.sessions.source import session_source_for
from memoryd.settings import Settings
from memoryd.store.db import Store
from memoryd.store.tombstones import load_or_create_secret

if TYPE_CHECKING:
    # Typing only: a read-only runtime (a dry run) never loads the Redis client.
    from redis.asyncio import Redis

    from memoryd.lock import WorkspaceLock


@dataclass
class AgentRuntime:
    settings: Settings
    paths: AgentPaths
    store: Store | None
    redis: Redis | None
    sessions: SessionSource
    readonly: bool = False
    caches: ProcessCaches = field(default_factory=ProcessCaches)

    @property
    def agent_id(self) -> str:
        return self.paths.agent_id

    def lock(self) -> WorkspaceLock:
        if self.redis is None:
            raise RuntimeError("this runtime was opened without Redis")
        from memoryd.lock import WorkspaceLock  # imports redis: only a runtime with Redis locks

        return WorkspaceLock(
            self.redis,
            self.paths.workspace,
            ttl_ms=self.settings.lock.ttl_ms,
            wait_s=self.settings.lock.wait_s,
            fence_store=self.paths.db_path,
        )

    def require_store(self) -> Store:
        if self.store is None:
            raise RuntimeError("this runtime has no store")
        return self.store

    def secret(self) -> bytes | None:
        """Key for hashed forgotten-session records; None if none was ever created (read-only)."""
        if self.readonly:
            try:
                return self.paths.secret_path.read_bytes()
            except FileNotFoundError:
                return None
        return load_or_create_secret(self.paths.secret_path)


@asynccontextmanager
async def agent_runtime(
    settings: Settings,
    agent_id: str,
    *,
    readonly: bool = False,
    redis: bool | Redis = True,
    caches: ProcessCaches | None = None,
) -> AsyncIterator[AgentRuntime]:
    caches = caches if caches is not None else ProcessCaches()
    paths = agent_paths(settings, agent_id)
    source = session_source_for(settings, agent_id, caches.part(ListingCache))
    store: Store | None = None
    client: Redis | None = None
    own_client = False
    try:
        if readonly:
            store = await Store.open_existing(paths.db_path)
        else:
            store = await Store.open(paths.db_path)
        if redis is True:
            # Imported here: a runtime without Redis must not load the client.
            from memoryd.redis_conn import redis_client

            client = redis_client(settings)  # no I/O until the first command
            own_client = True
        elif redis is not False:
            client = redis
        yield AgentRuntime(settings, paths, store, client, source, readonly, caches)
    finally:
        if store is not None:
            await store.close()
        if client is not None and own_client:
            await client.aclose()
