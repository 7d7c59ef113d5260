"""The workspace lock on real Redis: exclusion, fencing, bounded waits, re-entrancy."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from redis.asyncio import Redis

from memoryd.errors import FencedOut, LockLost, LockTimeout
from memoryd.lock import WorkspaceLock
from memoryd.store.db import Store
from memoryd.store.migrate import AGENT


async def test_two_holders_never_overlap(redis: Redis, tmp_path: Path) -> None:
    inside = 0
    max_inside = 0

    async def worker() -> None:
        nonlocal inside, max_inside
        for _ in range(5):
            async with WorkspaceLock(redis, tmp_path / "ws", wait_s=10).hold():
                inside += 1
                max_inside = max(max_inside, inside)
                await anyio.sleep(0.005)
                inside -= 1

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(worker)
    assert max_inside == 1


async def test_wait_is_bounded_and_names_the_holder(redis: Redis, tmp_path: Path) -> None:
    first = WorkspaceLock(redis, tmp_path / "ws", holder="first-holder")
    lease = await first._acquire()  # held by another process, as far as this task knows
    try:
        with pytest.raises(LockTimeout, match="first-holder"):
            async with WorkspaceLock(redis, tmp_path / "ws", wait_s=0.2).hold():
                pass
    finally:
        await first._release(lease)


async def test_reentrant_within_a_task(redis: Redis, tmp_path: Path) -> None:
    lock = WorkspaceLock(redis, tmp_path / "ws", wait_s=0.2)
    async with lock.hold() as outer, lock.hold() as inner:
        assert inner is outer


async def test_body_exception_is_not_wrapped(redis: Redis, tmp_path: Path) -> None:
    with pytest.raises(KeyError):
        async with WorkspaceLock(redis, tmp_path / "ws").hold():
            raise KeyError("x")
    # and the lock was released
    async with WorkspaceLock(redis, tmp_path / "ws", wait_s=0.1).hold():
        pass


async def test_stale_holder_cannot_commit_after_takeover(redis: Redis, tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "m.sqlite")
    try:
        first = WorkspaceLock(redis, tmp_path / "ws", ttl_ms=1000)
        lease1 = await first._acquire()  # simulate a holder that stopped renewing
        await redis.delete(first.redis_key)  # its lease expired
        async with WorkspaceLock(redis, tmp_path / "ws").hold() as lease2:
            await store.write(
                lambda c: c.execute("INSERT INTO store_meta VALUES ('k', 'new')"), fence=lease2.fence
            )
        with pytest.raises(FencedOut):
            await store.write(
                lambda c: c.execute("UPDATE store_meta SET value = 'stale'"), fence=lease1.fence
            )
        value = await store.read(
            lambda c: c.execute("SELECT value FROM store_meta WHERE key = 'k'").fetchone()[0]
        )
        assert value == "new"
    finally:
        await store.close()


async def test_lost_lease_cancels_the_body_and_raises(redis: Redis, tmp_path: Path) -> None:
    lock = WorkspaceLock(redis, tmp_path / "ws", ttl_ms=1000)
    reached_end = False
    with pytest.raises(LockLost):
        async with lock.hold():
            await redis.set(lock.redis_key, "someone-else", px=60_000)  # a lease, as another holder's
            await anyio.sleep(2)
            reached_end = True
    assert not reached_end


async def test_fence_survives_a_redis_counter_reset(redis: Redis, tmp_path: Path) -> None:
    lock = WorkspaceLock(redis, tmp_path / "ws")
    async with lock.hold() as a:
        first = a.fence_value
    await redis.delete(f"memoryd:fence:{lock.key}")  # as after a Redis restart without persistence
    async with lock.hold() as b:
        assert b.fence_value > first


async def test_an_acquisition_that_finds_the_lock_held_reaches_lock_wait_once(
    redis: Redis, tmp_path: Path
) -> None:
    from memoryd.failpoints import on_failpoint

    held, release, waiting = anyio.Event(), anyio.Event(), anyio.Event()
    reached: list[int] = []

    def heard() -> None:
        reached.append(1)
        waiting.set()

    async def other() -> None:
        async with WorkspaceLock(redis, tmp_path / "ws", holder="other").hold():
            held.set()
            await release.wait()

    async def second() -> None:
        async with WorkspaceLock(redis, tmp_path / "ws", wait_s=10).hold():
            pass

    with on_failpoint("lock.wait", heard):
        await second()  # the lock is free: no wait
        assert reached == []
        async with anyio.create_task_group() as tg:
            tg.start_soon(other)
            await held.wait()
            tg.start_soon(second)  # started from this task: it does not share the other's lease
            with anyio.fail_after(20):
                await waiting.wait()  # the second acquisition waits now, however slow the machine
            await anyio.sleep(0.2)  # several retries while still held
            release.set()
    assert reached == [1]


def _touch(conn: Any) -> None:
    conn.execute("SELECT 1")


async def test_fence_survives_a_clock_step_back_after_redis_lost_its_keys(
    redis: Redis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token taken while the clock ran an hour ahead is stored by the store; the clock steps
    back and Redis loses the counter: the next token still comes after it (issue 18, item 8)."""
    store = await Store.open(tmp_path / "memory.sqlite", schema=AGENT)
    try:
        lock = WorkspaceLock(redis, tmp_path / "ws", fence_store=store.path)
        real = time.time
        monkeypatch.setattr(time, "time", lambda: real() + 3600)
        async with lock.hold() as ahead:
            await store.write(_touch, fence=ahead.fence)
        monkeypatch.setattr(time, "time", real)
        await redis.delete(f"memoryd:fence:{lock.key}")
        async with lock.hold() as after:
            await store.write(_touch, fence=after.fence)  # not fenced off until the clock catches up
        assert after.fence_value > ahead.fence_value
    finally:
        await store.close()


async def test_a_fenced_off_write_says_what_happened(redis: Redis, tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "memory.sqlite", schema=AGENT)
    try:
        lock = WorkspaceLock(redis, tmp_path / "ws", fence_store=store.path)
        async with lock.hold() as old:
            pass
        async with lock.hold() as new:
            await store.write(_touch, fence=new.fence)
        with pytest.raises(FencedOut, match="another writer took the workspace lock") as err:
            await store.write(_touch, fence=old.fence)
        assert "rerun" in str(err.value)
    finally:
        await store.close()
