"""Index preparation in a worker process, overlapping the publication of earlier groups.

    async with prepared_groups(work, groups) as results:
        async for group in results:
            ...  # publish it while the worker prepares the next ones

Reading, exporting and chunking transcripts is CPU work in Python; publishing is SQLite work
on the store's thread. On threads the two stall each other on the GIL, so a large run forks
one worker process that prepares the groups in order and sends each result through a pipe as
soon as it is ready. The worker writes nothing to disk: its results (memory text) exist only in
the two processes' memory and the pipe's kernel buffer, never in a scratch file that forget
and erase would have to reach.

Forked rather than spawned: the child starts in milliseconds with the parent's modules, the
session source and the plan already in memory, so nothing is pickled on the way in. It touches
none of the parent's SQLite connections (a transcript read opens its own), resets the signal
handling it inherited (a signal to it must not wake the parent's event loop) and ends with
`os._exit`, so none of the parent's clean-up runs twice.

A group that the worker did not deliver — it died, was killed, or failed — is prepared in this
process instead, so a run's result never depends on the worker; the warning says so.
"""

from __future__ import annotations

import fcntl
import gc
import itertools
import multiprocessing
import os
import signal
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import cast

import anyio

from memoryd.failpoints import failpoint
from memoryd.index.prepare import FileDone, PreparedGroup, PrepareWork, merge_groups, prepare_files
from memoryd.index.sources import MemoryFile, SessionRef

# Transcript bytes per group: small enough that publication starts soon after the run does
# (the first group is the only one nothing overlaps), large enough that a group's commit and
# FTS segment are amortised. Groups that share a transaction (index/streaming.py) cost no
# commit of their own, so they are smaller: publication starts after a quarter of the wait.
GROUP_BYTES = 1024 * 1024
STREAMED_GROUP_BYTES = 256 * 1024
PIPE_BYTES = 1024 * 1024
WORKER_STALL_S = 120.0  # far above a group's preparation (about 40 ms per MiB here)
STALLED = f"no group for {WORKER_STALL_S:.0f} s"
WORKER_FAILPOINT = "index.prepare.worker"  # the worker reaches it before each group

_FORK = multiprocessing.get_context("fork")


@dataclass(frozen=True, slots=True)
class Group:
    memory: tuple[MemoryFile, ...]
    sessions: tuple[SessionRef, ...]


@dataclass(slots=True)
class WorkerOutcome:
    """What the run learns about the worker: whether one ran, and why it stopped early."""

    used: bool = False
    pid: int | None = None
    lost: list[str] = field(default_factory=list)


def plan_groups(
    memory: Sequence[MemoryFile], sessions: Sequence[SessionRef], group_bytes: int
) -> list[Group]:
    """Consecutive planned files in groups of about `group_bytes` of transcript (memory files
    go with the first group: there are few and they are small)."""
    groups: list[Group] = []
    current: list[SessionRef] = []
    size = 0
    for ref in sessions:
        current.append(ref)
        size += ref.stat.size
        if size >= group_bytes:
            groups.append(Group(tuple(memory) if not groups else (), tuple(current)))
            current, size = [], 0
    if current or not groups:
        groups.append(Group(tuple(memory) if not groups else (), tuple(current)))
    return groups


def _widen(send: Connection) -> None:
    """A pipe buffer of a group's size, so the worker goes on preparing instead of waiting for
    the parent to read (64 KiB by default; Linux lets an unprivileged process ask for 1 MiB)."""
    try:
        fcntl.fcntl(send.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except OSError:
        pass  # a smaller limit (fs.pipe-max-size): the worker only waits more


def _receive(recv: Connection, remaining: int) -> list[object]:
    """The next group, and every further one of the `remaining` the worker has already sent:
    while publication is slower than preparation, ready groups share one transaction (each
    costs a commit and an FTS segment). None stands for a worker that is gone."""
    items: list[object] = []
    while True:
        try:
            # A worker that sends nothing for this long is given up (a fork taken while another
            # thread held a lock the child then needs never wakes); its groups are prepared here.
            items.append(recv.recv() if recv.poll(WORKER_STALL_S) else STALLED)
        except (EOFError, OSError):
            items.append(None)
        if not isinstance(items[-1], PreparedGroup) or len(items) == remaining or not recv.poll():
            return items


def worth_a_worker(groups: Sequence[Group], min_bytes: int) -> bool:
    """A run of one group, or of at most `min_bytes` of transcript, stays in-process (a live
    sync of a few changed sessions is one): publication would wait for little else than the
    first group, so nothing overlaps and the fork is lost."""
    size = sum(ref.stat.size for g in groups for ref in g.sessions)
    return len(groups) > 1 and size > min_bytes and (os.cpu_count() or 1) > 1


def _prepare(work: PrepareWork, group: Group, on_file: FileDone | None = None) -> PreparedGroup:
    return prepare_files(work, group.memory, group.sessions, on_file)


def _worker_main(send: Connection, work: PrepareWork, groups: list[Group]) -> None:
    signal.set_wakeup_fd(-1)  # the parent's event loop fd, inherited by the fork
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    code = 0
    try:
        for group in groups:
            failpoint(WORKER_FAILPOINT)
            send.send(_prepare(work, group))
    except BaseException as exc:  # the parent prepares the rest itself and reports why
        code = 1
        try:
            send.send(f"{type(exc).__name__}: {exc}")
        except BaseException:
            pass
    finally:
        send.close()
    os._exit(code)


@asynccontextmanager
async def prepared_groups(
    work: PrepareWork,
    groups: list[Group],
    *,
    use_worker: bool,
    outcome: WorkerOutcome | None = None,
    on_file: FileDone | None = None,
) -> AsyncIterator[AsyncIterator[PreparedGroup]]:
    """The groups prepared, in order: by a worker process when `use_worker`, else here (on a
    thread, so the event loop runs on). `on_file` hears of each file prepared here (the
    worker's are known when their group arrives)."""
    outcome = outcome if outcome is not None else WorkerOutcome()
    if not use_worker or not groups:

        async def here() -> AsyncGenerator[PreparedGroup, None]:
            for group in groups:
                yield await anyio.to_thread.run_sync(_prepare, work, group, on_file)

        local = here()
        try:
            yield local
        finally:
            await local.aclose()
        return

    recv, send = _FORK.Pipe(duplex=False)
    _widen(send)
    process = _FORK.Process(target=_worker_main, args=(send, work, groups), daemon=True)
    # Frozen, the parent's objects are never scanned by the child's collector: each scan would
    # write to their pages and make the kernel copy them (a first run took 2-3x longer there).
    gc.freeze()
    try:
        process.start()
    finally:
        gc.unfreeze()
    send.close()
    outcome.used, outcome.pid = True, process.pid

    async def from_worker() -> AsyncGenerator[PreparedGroup, None]:
        delivered = 0
        while delivered < len(groups):
            items = await anyio.to_thread.run_sync(_receive, recv, len(groups) - delivered)
            ready = [i for i in itertools.takewhile(lambda i: isinstance(i, PreparedGroup), items)]
            if ready:
                delivered += len(ready)
                yield merge_groups(cast(list[PreparedGroup], ready))
            if len(ready) < len(items):
                if items[-1] == STALLED:
                    process.kill()
                await anyio.to_thread.run_sync(process.join)
                why = items[-1] if isinstance(items[-1], str) else f"exit code {process.exitcode}"
                outcome.lost.append(
                    f"index preparation worker (pid {process.pid}) stopped ({why}); "
                    f"{len(groups) - delivered} of {len(groups)} group(s) were prepared in the main process"
                )
                break
        for group in groups[delivered:]:
            yield await anyio.to_thread.run_sync(_prepare, work, group, on_file)

    results = from_worker()
    try:
        yield results
    finally:
        with anyio.CancelScope(shield=True):
            await results.aclose()
            recv.close()
            if process.is_alive():
                process.kill()
            await anyio.to_thread.run_sync(process.join)
