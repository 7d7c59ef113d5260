"""Failpoints: named steps that a test or the fault campaign can make fail, or be told about.

    MEMORYD_FAILPOINTS=forget.index,forget.corpus memoryd forget …   # these steps fail
    MEMORYD_FAILPOINT_TRACE=/tmp/trace memoryd run                     # "<step> <pid>" per step reached
    MEMORYD_FAILPOINT_STOP=ingest.corpus.write memoryd ingest …         # SIGSTOP itself there, once
    MEMORYD_FAILPOINT_HOLD=dream.select MEMORYD_FAILPOINT_RELEASE=/tmp/go memoryd run
                                        # each job there waits (the process runs on) for /tmp/go

Each multi-step operation calls `failpoint("<name>")` at the boundaries whose crash
behaviour it promises (forget: forget.mark, forget.index, forget.state, forget.preimages,
forget.memory_files, forget.corpus, forget.origins), and where a test needs to know that a
step was reached (lock.wait: an acquisition found the lock held and waits for it). Every file
write has one right before it: `file.commit.<kind>` in the one workspace write helper
(daemon/fileio.py: memory, diary, corpus, daily_note, file), ingest.corpus.write for corpus
appends, ingest.last_sweep.write, erase.journal before the erasure journal's key file,
verify.read before each file the verifier reads (failed: the file reads as unreadable).

A test in the same process registers a callback with `on_failpoint(name, fn)`, for example
to set an event once a sweep waits for the lock, instead of sleeping and hoping. A test that
runs memoryd as a subprocess reads the trace file. The trace holds step names and process
ids only, never memory text or subject ids.

Unset in production: the check is one dict lookup and two environment lookups.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import anyio

from memoryd.errors import OperationFailed

ENV_VAR = "MEMORYD_FAILPOINTS"
TRACE_ENV_VAR = "MEMORYD_FAILPOINT_TRACE"
# The process stops itself (SIGSTOP) at these steps, the first time each is reached, after the
# trace line: a test holds it there for as long as it likes (past its lease) and sends SIGCONT.
STOP_ENV_VAR = "MEMORYD_FAILPOINT_STOP"
STOP_SETTLE_S = 0.05  # far longer than the kernel takes to stop every thread of the process

# Steps awaited with `held(name)` wait there, each time they are reached, until the file named
# by RELEASE_ENV_VAR exists; the event loop runs on, so a test can hold one job of a daemon.
HOLD_ENV_VAR = "MEMORYD_FAILPOINT_HOLD"
RELEASE_ENV_VAR = "MEMORYD_FAILPOINT_RELEASE"
HOLD_POLL_S = 0.05

_callbacks: dict[str, list[Callable[[], None]]] = {}


class FailpointTriggered(OperationFailed):
    """Raised by an armed failpoint; an OperationFailed so every caller handles it as a real fault."""


def failpoint(name: str) -> None:
    for callback in _callbacks.get(name, ()):
        callback()
    trace = os.environ.get(TRACE_ENV_VAR)
    if trace:
        _trace(trace, name)
    stops = os.environ.get(STOP_ENV_VAR)
    if stops and name in (names := [n.strip() for n in stops.split(",")]):
        os.environ[STOP_ENV_VAR] = ",".join(n for n in names if n != name)
        os.kill(os.getpid(), signal.SIGSTOP)
        # The stop reaches this thread only at some later point: it was seen to go on past the
        # step into the lease check right after it. Waiting here makes it stop at the step.
        time.sleep(STOP_SETTLE_S)
    armed = os.environ.get(ENV_VAR)
    if armed and name in {n.strip() for n in armed.split(",")}:
        raise FailpointTriggered(f"failpoint {name} triggered ({ENV_VAR})")


async def held(name: str) -> None:
    """`failpoint(name)` at an async step, which MEMORYD_FAILPOINT_HOLD can also hold."""
    failpoint(name)
    holds = os.environ.get(HOLD_ENV_VAR)
    if not holds or name not in {n.strip() for n in holds.split(",")}:
        return
    release = os.environ.get(RELEASE_ENV_VAR, "")
    while not (release and os.path.exists(release)):  # noqa: ASYNC110 - another process makes the file
        await anyio.sleep(HOLD_POLL_S)


@contextmanager
def on_failpoint(name: str, callback: Callable[[], None]) -> Iterator[None]:
    """Call `callback` (in the caller's thread, before any armed failure) each time `name` is
    reached, while the context is open."""
    _callbacks.setdefault(name, []).append(callback)
    try:
        yield
    finally:
        _callbacks[name].remove(callback)
        if not _callbacks[name]:
            del _callbacks[name]


def _trace(path: str, name: str) -> None:
    # One write(2) on an O_APPEND file: lines from several processes never interleave.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, f"{name} {os.getpid()}\n".encode())
    finally:
        os.close(fd)
