"""The workspace mutation lock (DESIGN §4): a Redis lease with renewal and a fencing token.

    async with WorkspaceLock(redis, workspace_dir).hold() as lease:
        await store.write(fn, fence=lease.fence)

* Acquire: `SET key token NX PX ttl`, retried every 40 ms up to `wait_s`, then LockTimeout.
* Fence: every acquisition increments a per-workspace counter; store writes refuse a token
  older than the newest they have seen, so a holder whose lease silently expired cannot
  commit. The counter never goes below the current time in microseconds, so it stays
  monotonic even if Redis restarts empty (tokens are far fewer than elapsed microseconds),
  nor below the newest token the workspace's store has seen plus one (`fence_store`), so a
  clock that ran ahead and stepped back, with Redis empty, does not fence every writer off
  until the clock catches up.
* Renewal: a task in the lease's task group extends the lease at ttl/3 (compare-and-extend).
  If the lease is lost, the body is cancelled and LockLost is raised.
* Fenced files: while a lease is held, every workspace file write of its task checks it first
  (memoryd.fileio.guarded_writes) and refuses when the lease may have expired: lost, or not
  renewed within LEASE_WRITABLE_FRACTION of its ttl by the monotonic clock (which a SIGSTOP
  does not stop), so a holder stopped past its lease writes no file when it resumes.
* Release: compare-and-delete, shielded from cancellation.
* Re-entrant within a task and its children (contextvars): a nested hold of the same
  workspace reuses the outer lease.
"""

from __future__ import annotations

import contextvars
import hashlib
import os
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from redis.asyncio import Redis
from redis.exceptions import RedisError

from memoryd.constants import FENCE_KEY, LOCK_KEY, LOCK_RETRY_S, LOCK_TTL_MS, LOCK_WAIT_S
from memoryd.errors import LockLost, LockTimeout, OperationFailed
from memoryd.failpoints import failpoint
from memoryd.fileio import guarded_writes
from memoryd.store.db import FenceToken, stored_fence

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
_EXTEND = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""
_NEXT_FENCE = """
local v = redis.call('INCR', KEYS[1])
local floor = tonumber(ARGV[1])
if v < floor then redis.call('SET', KEYS[1], ARGV[1]); v = floor end
return v
"""


# A lease is trusted for file writes this far into its ttl since the last renewal was sent:
# Redis counts the ttl from when it received that renewal, later than we sent it.
LEASE_WRITABLE_FRACTION = 0.8


async def _eval(redis: Redis, script: str, key: str, *args: str | int) -> Any:
    # redis-py's stubs type eval() as sync-or-async; on the asyncio client it is awaitable.
    return await redis.eval(script, 1, key, *args)  # type: ignore[arg-type,misc]


def workspace_key(workspace_dir: Path) -> str:
    """Lock identity of a workspace: sha256 of its absolute, normalised path."""
    normalised = os.path.abspath(os.fspath(workspace_dir))
    return hashlib.sha256(normalised.encode("utf-8")).hexdigest()


@dataclass
class Lease:
    workspace_key: str
    token: str
    fence_value: int
    acquired_at: float  # monotonic time the last acquisition or renewal was sent
    waited_s: float
    lost: bool = False
    ttl_ms: int = LOCK_TTL_MS
    workspace_dir: Path | None = None
    _depth: int = field(default=1, repr=False)

    @property
    def fence(self) -> FenceToken:
        return FenceToken(self.workspace_key, self.fence_value)

    def check_writable(self, path: Path) -> None:
        """LockLost unless the lease surely still holds (a file write is about to happen)."""
        if self.workspace_dir is not None and not _is_under(path, self.workspace_dir):
            return
        held_s = time.monotonic() - self.acquired_at
        if self.lost or held_s > self.ttl_ms / 1000 * LEASE_WRITABLE_FRACTION:
            self.lost = True
            raise LockLost(
                f"workspace lock of {self.workspace_dir}: not renewed for {held_s:.1f}s "
                f"(lease {self.ttl_ms / 1000:g}s), so it may be another writer's now; "
                f"{path.name} was not written — rerun the operation"
            )


def _is_under(path: Path, root: Path) -> bool:
    return os.path.abspath(path).startswith(os.path.abspath(root) + os.sep)


_held: contextvars.ContextVar[dict[str, Lease] | None] = contextvars.ContextVar(
    "memoryd_leases", default=None
)


def current_lease(workspace_dir: Path) -> Lease | None:
    held = _held.get()
    return held.get(workspace_key(workspace_dir)) if held else None


class WorkspaceLock:
    def __init__(
        self,
        redis: Redis,
        workspace_dir: Path,
        *,
        ttl_ms: int = LOCK_TTL_MS,
        wait_s: float = LOCK_WAIT_S,
        holder: str | None = None,
        fence_store: Path | None = None,
    ):
        self.redis = redis
        self.fence_store = fence_store  # the store whose writes this lock's tokens fence
        self.workspace_dir = workspace_dir
        self.key = workspace_key(workspace_dir)
        self.ttl_ms = ttl_ms
        self.wait_s = wait_s
        self.holder = holder or f"{os.uname().nodename}:{os.getpid()}"

    @property
    def redis_key(self) -> str:
        return LOCK_KEY.format(workspace=self.key)

    async def holder_info(self) -> str | None:
        """Who holds the lease now (the holder string part of the token), or None."""
        value = await self.redis.get(self.redis_key)
        if value is None:
            return None
        text = value.decode() if isinstance(value, bytes) else str(value)
        return text.rsplit("#", 1)[0]

    async def confirm(self, lease: Lease) -> None:
        """LockLost unless Redis still holds `lease` (one GET). Before a file write that no
        cut-back could undo once another writer wrote after it (a corpus append): Redis may
        have lost the key, and another holder taken it, since the last renewal."""
        try:
            value = await self.redis.get(self.redis_key)
        except RedisError as exc:
            raise OperationFailed(f"workspace lock: Redis unavailable: {exc}") from exc
        current = value.decode() if isinstance(value, bytes) else value
        if current != lease.token:
            lease.lost = True
            raise LockLost(
                f"workspace lock of {self.workspace_dir}: no longer this writer's in Redis "
                "(lost with Redis, or expired); nothing was appended — rerun the operation"
            )

    async def _acquire(self) -> Lease:
        token = f"{self.holder}#{secrets.token_hex(8)}"
        started = time.monotonic()
        deadline = started + self.wait_s
        waiting = False
        while True:
            sent = time.monotonic()
            try:
                ok = await self.redis.set(self.redis_key, token, nx=True, px=self.ttl_ms)
            except RedisError as exc:
                raise OperationFailed(f"workspace lock: Redis unavailable: {exc}") from exc
            if ok:
                break
            if not waiting:
                waiting = True
                failpoint("lock.wait")  # held by another: this acquisition waits (tests hear it)
            if time.monotonic() >= deadline:
                holder = await self.holder_info()
                raise LockTimeout(
                    f"timed out after {self.wait_s:g}s waiting for the workspace lock of "
                    f"{self.workspace_dir} (held by {holder or 'unknown'})"
                )
            await anyio.sleep(LOCK_RETRY_S)
        floor = int(time.time() * 1_000_000)
        if self.fence_store is not None:
            seen = await anyio.to_thread.run_sync(stored_fence, self.fence_store, self.key)
            if seen is not None and seen >= floor:
                floor = seen + 1
        try:
            fence = int(await _eval(self.redis, _NEXT_FENCE, FENCE_KEY.format(workspace=self.key), floor))
        except RedisError as exc:
            # Without a fence the lease is useless: give it back (best effort) rather than make
            # the next writer wait out its TTL, and fail like any other Redis outage.
            await self._release(Lease(self.key, token, 0, started, 0.0))
            raise OperationFailed(f"workspace lock: Redis unavailable: {exc}") from exc
        waited = time.monotonic() - started
        return Lease(
            self.key, token, fence, sent, waited, ttl_ms=self.ttl_ms, workspace_dir=self.workspace_dir
        )

    async def _release(self, lease: Lease) -> None:
        try:
            await _eval(self.redis, _RELEASE, self.redis_key, lease.token)
        except RedisError:
            pass  # the lease expires by itself; the fence protects the store meanwhile

    async def _renew(self, lease: Lease, scope: anyio.CancelScope) -> None:
        interval = self.ttl_ms / 3000.0
        while True:
            await anyio.sleep(interval)
            sent = time.monotonic()
            try:
                ok = await _eval(self.redis, _EXTEND, self.redis_key, lease.token, self.ttl_ms)
            except RedisError:
                # A brief outage is tolerated until the lease would have expired.
                if time.monotonic() - lease.acquired_at > self.ttl_ms / 1000.0:
                    ok = 0
                else:
                    continue
            if not ok:
                lease.lost = True
                scope.cancel()
                return
            lease.acquired_at = sent

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[Lease]:
        held = _held.get() or {}
        outer = held.get(self.key)
        if outer is not None:
            if outer.lost:
                raise LockLost(f"workspace lock of {self.workspace_dir} was lost")
            yield outer
            return
        lease = await self._acquire()
        token = _held.set({**held, self.key: lease})
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._renew, lease, tg.cancel_scope)
                try:
                    with guarded_writes(lease.check_writable):
                        yield lease
                finally:
                    tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The renewal task never fails, so a group holds only the body's own exception:
            # hand the caller that exception, not a wrapper.
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        finally:
            _held.reset(token)
            with anyio.CancelScope(shield=True):
                await self._release(lease)
        if lease.lost:
            raise LockLost(
                f"workspace lock of {self.workspace_dir} expired while held; "
                "its writes were fenced off — rerun the operation"
            )
