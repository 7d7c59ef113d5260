"""The pool light and REM reflect on, read from the store and the workspace.

Read without the workspace lock: publication re-checks, under the lock, that the exclusion set
is the one the pool was read under (`diary.publish_block`); a phase whose pool a purge changed
meanwhile runs again (`rerun_if_purged`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import anyio

from memoryd.agent_runtime import AgentRuntime
from memoryd.constants import EXCLUSION_STALE_RETRIES
from memoryd.dreaming.expiry import drop_expired
from memoryd.dreaming.rehydrate import read_sources
from memoryd.dreaming.selection import eligible
from memoryd.dreaming.staged import StagedEntry, read_unforgotten
from memoryd.errors import OperationFailed
from memoryd.store.exclusions import ExclusionsChanged, exclusion_generation

T = TypeVar("T")
log = logging.getLogger("memoryd.dreaming")


async def read_pool(rt: AgentRuntime, now_ms: int) -> tuple[int, list[StagedEntry]]:
    """Unforgotten, unexpired staged entries that `eligible` keeps (their source file still
    exists), with the exclusion set's generation they were read under (publication re-checks it)."""
    generation = await rt.require_store().read(exclusion_generation)  # before the rows it stands for
    entries = await rt.require_store().read(read_unforgotten, rt.agent_id, rt.secret())
    entries, _expired = await drop_expired(rt.settings, rt.sessions, entries)
    lookback = rt.settings.dreaming.lookback_days
    # Reads the source files and walks every entry: in a worker thread, off the event loop.
    pool = await anyio.to_thread.run_sync(_live_eligible, rt.paths.workspace, entries, now_ms, lookback)
    return generation, pool


def _live_eligible(
    workspace: Path, entries: list[StagedEntry], now_ms: int, lookback_days: int
) -> list[StagedEntry]:
    sources = read_sources(workspace, {e.path for e in entries})
    live = {p for p, v in sources.items() if v is not None}
    return eligible(entries, now_ms, lookback_days, live)


async def rerun_if_purged(rt: AgentRuntime, phase: str, run: Callable[[], Awaitable[T]]) -> T:
    """`run` a dreaming phase; when a purge commits between its read of the pool and its
    publication (ExclusionsChanged), run it again on the pool as the purge left it."""
    for _ in range(EXCLUSION_STALE_RETRIES - 1):
        try:
            return await run()
        except ExclusionsChanged:
            log.info("dream %s %s: a purge committed meanwhile; reading the pool again", rt.agent_id, phase)
    try:
        return await run()
    except ExclusionsChanged:
        raise OperationFailed(
            f"agent {rt.agent_id}: purges kept committing during the {phase} phase; nothing was published, "
            "the next dreaming sweep tries again"
        ) from None
