"""Keeping the daemon's background loops running (issue: no error ends the daemon).

Each loop (the scheduler, live ingestion, the heartbeat, the gauges) catches what it expects:
a lost Redis, one agent's unreadable files, a bad job record. Anything else would end the
task group and with it the daemon; instead the loop's one line gives the class and where it
was raised (never the message, which may name a session or a person), and the loop starts
again after a pause that doubles up to LOOP_RESTART_MAX_S.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable

import anyio

from memoryd.constants import LOOP_RESTART_MAX_S, REDIS_RETRY_MIN_S
from memoryd.runtime import metrics

log = logging.getLogger("memoryd.service")

_DAEMON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # memoryd's own code
_PACKAGE_PARENT = os.path.dirname(_DAEMON_DIR)  # paths print as memoryd/<module>.py


def innermost(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (a task group raises one), else `exc`."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def raised_at(exc: BaseException) -> str:
    """Where `exc` was raised: the two innermost frames of memoryd's own code
    (`memoryd/<module>.py:line`, by the package's import name), innermost last, then the
    library's frame if a library raised it."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
        tb = tb.tb_next
    if not frames:
        return "?"
    ours = [
        f"{os.path.relpath(path, _PACKAGE_PARENT)}:{line}"
        for path, line in frames
        if path.startswith(_DAEMON_DIR + os.sep)
    ][-2:]
    path, line = frames[-1]
    if not path.startswith(_DAEMON_DIR + os.sep):
        ours.append(f"{path}:{line}")
    return " > ".join(ours)


async def keep_running(name: str, loop: Callable[[], Awaitable[None]]) -> None:
    """Run `loop` until it returns; start it again after an error it did not expect."""
    pause = REDIS_RETRY_MIN_S
    while True:
        try:
            await loop()
            return
        except Exception as exc:
            leaf = innermost(exc)
            metrics.LOOP_RESTARTS.labels(loop=name).inc()
            log.error(
                "%s stopped on %s at %s; starting it again in %.1fs",
                name,
                type(leaf).__name__,
                raised_at(leaf),
                pause,
            )
        await anyio.sleep(pause)
        pause = min(pause * 2, LOOP_RESTART_MAX_S)
