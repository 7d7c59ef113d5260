"""Stores a worker keeps open between jobs (StorePool).

A daemon runs many short jobs on a few agents. Opening a store (a thread, a connection, its
PRAGMAs, the schema check) and closing it cost a few milliseconds, as much as a small job, so
the worker keeps them open: a job checks a store out for its whole run — the connection is
its own until it hands it back, as with a store it opened itself — and the next job on the
same database file and mode (read-write or read-only) gets it back.

Why reuse is safe:
* An idle store holds no transaction: Store.read/write end theirs, and the functions they run
  keep no cursor past their return. So it blocks no writer, VACUUM or WAL checkpoint of
  another connection, and sees every commit made meanwhile.
* A store is reused only while its database is the file it opened and nobody changed that file
  since the store was handed back: device, inode, size and mtime are compared at checkout (one
  stat). A replaced or removed database gets a fresh store, and so does one another connection
  checkpointed or vacuumed meanwhile. The stale store is closed before the fresh one opens.
* A job that fails or is cancelled closes its store instead of handing it back: work it shipped
  to the store's thread may still be running there.
* At most `max_idle` stores stay open idle, whatever the number of agents: each is a thread and
  a connection, and a daemon serving hundreds of agents must fit its unit's `TasksMax`. Handing
  back one more closes the least recently used idle store.
* Stores idle for IDLE_CLOSE_S are closed (the worker calls `close_idle` from its poll loop), so
  a quiet daemon holds no database open and the last close checkpoints and removes the WAL, as
  without a pool. `close()` (worker shutdown) closes every idle store at once and each checked
  out one as its job ends; until `reopen()`, checkouts open and close a store of their own.

Every close runs in the task that caused it, under a shielded scope: cleanup that must happen.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio

from memoryd.store.db import Store

# Long enough to span the gaps between the jobs of a busy spell (the scheduler's sweeps, a
# client's forgets), short enough that an idle daemon soon holds no database open.
IDLE_CLOSE_S = 60.0
# Idle stores kept per (file, mode): enough for jobs that overlap on one agent (max_jobs);
# a busier moment opens more and closes the extra ones as their jobs end.
MAX_IDLE_PER_KEY = 2
# Idle stores kept in all (daemon.max_idle_stores is the daemon's): each is a thread.
MAX_IDLE = 32


@dataclass(eq=False, slots=True)
class _Pooled:
    store: Store
    file_id: tuple[int, int]  # (st_dev, st_ino) of the file the store opened
    left_as: tuple[int, int] = (-1, -1)  # (st_size, st_mtime_ns) when it was handed back
    idle_since: float = 0.0


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None


class StorePool:
    """Open per-agent stores, checked out by one job at a time. Event-loop only (not threadsafe)."""

    def __init__(
        self,
        *,
        idle_close_s: float = IDLE_CLOSE_S,
        max_idle_per_key: int = MAX_IDLE_PER_KEY,
        max_idle: int = MAX_IDLE,
    ):
        self.idle_close_s = idle_close_s
        self.max_idle_per_key = max_idle_per_key
        self.max_idle = max_idle
        self._idle: dict[tuple[Path, bool], list[_Pooled]] = {}
        self._open = True
        self.opened = 0  # stores opened and reused over the pool's life, for tests and debugging
        self.reused = 0

    @property
    def idle(self) -> int:
        return sum(len(entries) for entries in self._idle.values())

    @asynccontextmanager
    async def checkout(self, path: Path, *, readonly: bool = False) -> AsyncIterator[Store | None]:
        """The store of `path` for the caller alone until the block ends. Read-only: None when
        there is no database (nothing is created), as a read-only open would refuse it."""
        entry = await self._take(path, readonly)
        if entry is None:
            yield None
            return
        kept = False
        try:
            yield entry.store
            kept = self._keep(path, readonly, entry)
        finally:
            if not kept:
                await _close([entry])
        if kept:
            await self._close_over_cap()

    async def close_idle(self) -> None:
        """Close the stores idle for `idle_close_s` or longer."""
        cutoff = time.monotonic() - self.idle_close_s
        expired = [e for entries in self._idle.values() for e in entries if e.idle_since <= cutoff]
        if expired:
            for entries in self._idle.values():
                entries[:] = [e for e in entries if e.idle_since > cutoff]
            await _close(expired)

    async def close(self) -> None:
        """Close every idle store; checked-out stores close as their jobs end. Until `reopen()`,
        each checkout opens a store of its own and closes it after."""
        self._open = False
        idle = [e for entries in self._idle.values() for e in entries]
        self._idle.clear()
        await _close(idle)

    async def _close_over_cap(self) -> None:
        """Close the least recently used idle stores past `max_idle`."""
        over = self.idle - self.max_idle
        if over <= 0:
            return
        idle = sorted((e for entries in self._idle.values() for e in entries), key=lambda e: e.idle_since)
        oldest = idle[:over]
        for entries in self._idle.values():
            entries[:] = [e for e in entries if e not in oldest]
        await _close(oldest)

    def reopen(self) -> None:
        self._open = True

    async def _take(self, path: Path, readonly: bool) -> _Pooled | None:
        st = _stat(path)
        stale: list[_Pooled] = []
        found: _Pooled | None = None
        entries = self._idle.get((path, readonly), [])
        while entries and found is None:
            entry = entries.pop()
            if (
                st is not None
                and entry.file_id == (st.st_dev, st.st_ino)
                and entry.left_as == (st.st_size, st.st_mtime_ns)
            ):
                found = entry
            else:
                stale.append(entry)
        if stale:
            # Before the fresh open: the last connection to a file checkpoints and removes the
            # WAL by its name, which a replacement database at the same path would share.
            await _close(stale)
        if found is not None:
            self.reused += 1
            return found
        if readonly and st is None:
            return None
        store = await Store.open_existing(path) if readonly else await Store.open(path)
        if store is None:
            return None
        try:
            # Stat taken before the open if there was a file: if it was replaced in between, the
            # ids differ from the store's and the next checkout only reopens once more.
            st = st or os.stat(path)
        except BaseException:
            await _close([_Pooled(store, (0, 0))])
            raise
        self.opened += 1
        return _Pooled(store, (st.st_dev, st.st_ino))

    def _keep(self, path: Path, readonly: bool, entry: _Pooled) -> bool:
        """Put a store back for the next job; False when it should close instead."""
        entries = self._idle.setdefault((path, readonly), [])
        if not self._open or len(entries) >= self.max_idle_per_key:
            return False
        st = _stat(path)
        if st is None or entry.file_id != (st.st_dev, st.st_ino):
            return False
        entry.left_as = (st.st_size, st.st_mtime_ns)
        entry.idle_since = time.monotonic()
        entries.append(entry)
        return True


async def _close(entries: list[_Pooled]) -> None:
    """Close each store, even when one close fails or a cancellation reaches past the shield
    (asyncio's own task.cancel()); then raise the first error."""
    error: BaseException | None = None
    with anyio.CancelScope(shield=True):
        for entry in entries:
            try:
                await entry.store.close()
            except BaseException as exc:  # noqa: BLE001 - raised below, after the other closes
                error = error or exc
    if error is not None:
        raise error
