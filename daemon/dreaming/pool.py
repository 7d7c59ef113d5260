"""The pool light and REM reflect on, read from the store and the workspace.

Read without the workspace lock: publication re-checks, under the lock, that no session a
diary line quotes was forgotten meanwhile (`diary.publish_block`).
"""

from __future__ import annotations

from pathlib import Path

import anyio

from daemon.agent_runtime import AgentRuntime
from daemon.dreaming.expiry import drop_expired
from daemon.dreaming.rehydrate import read_sources
from daemon.dreaming.selection import eligible
from daemon.dreaming.staged import StagedEntry, read_unforgotten


async def read_pool(rt: AgentRuntime, now_ms: int) -> list[StagedEntry]:
    """Unforgotten, unexpired staged entries that `eligible` keeps (their source file still exists)."""
    entries = await rt.require_store().read(read_unforgotten, rt.agent_id, rt.secret())
    entries, _expired = await drop_expired(rt.settings, rt.sessions, entries)
    lookback = rt.settings.dreaming.lookback_days
    # Reads the source files and walks every entry: in a worker thread, off the event loop.
    return await anyio.to_thread.run_sync(_live_eligible, rt.paths.workspace, entries, now_ms, lookback)


def _live_eligible(
    workspace: Path, entries: list[StagedEntry], now_ms: int, lookback_days: int
) -> list[StagedEntry]:
    sources = read_sources(workspace, {e.path for e in entries})
    live = {p for p, v in sources.items() if v is not None}
    return eligible(entries, now_ms, lookback_days, live)
