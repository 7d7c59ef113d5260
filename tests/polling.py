"""Waiting for what another task or process brings about: poll a condition up to a deadline
(never a fixed sleep: a loaded machine only makes the wait longer, not the test wrong)."""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable

import anyio


async def until(
    check: Callable[[], bool | Awaitable[bool]], what: str, timeout_s: float = 20.0, every_s: float = 0.01
) -> None:
    """Return once `check()` is true; AssertionError naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if await result if inspect.isawaitable(result) else result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s}s")
        await anyio.sleep(every_s)
