"""Where host-level retention state lives and how its writers are serialized.

`state_dir/retention.sqlite` holds scopes, objects, holds and receipts for the whole host
(the commands take no --agent). Its mutations run under WorkspaceLock(state_dir/retention),
and every write transaction carries that lease's fence.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from memoryd.constants import RETENTION_DB_NAME, RETENTION_LOCK_NAME
from memoryd.settings import Settings
from memoryd.store.db import Store
from memoryd.store.migrate import RETENTION

if TYPE_CHECKING:
    # Writers only: a reader (the retention gate of every search) loads neither the Redis
    # client nor the lock.
    from redis.asyncio import Redis

    from memoryd.lock import Lease, WorkspaceLock


def retention_db_path(settings: Settings) -> Path:
    return settings.state_dir / RETENTION_DB_NAME


def retention_lock(settings: Settings, redis: Redis) -> WorkspaceLock:
    from memoryd.lock import WorkspaceLock

    return WorkspaceLock(
        redis,
        settings.state_dir / RETENTION_LOCK_NAME,
        ttl_ms=settings.lock.ttl_ms,
        wait_s=settings.lock.wait_s,
        fence_store=retention_db_path(settings),
    )


def now_ms() -> int:
    return int(time.time() * 1000)


@asynccontextmanager
async def open_for_read(settings: Settings) -> AsyncIterator[Store | None]:
    """The store read-only, or None if nothing was ever written (reads create nothing)."""
    store = await Store.open_existing(retention_db_path(settings), schema=RETENTION)
    if store is None:
        yield None
        return
    try:
        yield store
    finally:
        await store.close()


@asynccontextmanager
async def open_for_write(settings: Settings, redis: Redis) -> AsyncIterator[tuple[Store, Lease]]:
    """The store (created and migrated if needed) and the retention lease, held together."""
    async with retention_lock(settings, redis).hold() as lease:
        store = await Store.open(retention_db_path(settings), schema=RETENTION)
        try:
            yield store, lease
        finally:
            await store.close()
