"""Watching one agent's sessions for changes (watchfiles: inotify, anyio-native).

The watch sees the names of changed files only; no session is opened here, so admission is
still decided by the sweep before any transcript byte is read. Watched: the agent's sessions
directory (sessions.json and the transcripts) and the directory of its OpenClaw agent
database, whichever exist.

A change is reported once it settles (no further write for `ingest.watch_settle_ms`; a
stream that never settles at least every WATCH_MAX_GROUP_MS). When a watch is in place it
reports once without a change, so a catch-up sweep covers what was written before it
started. A watcher error (no such directory, inotify limits, a filesystem without inotify)
is one log line: the agent is then covered by the interval sweeps, and watching is tried
again every WATCH_RETRY_S.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import anyio
from watchfiles import Change, awatch

from daemon.constants import WATCH_MAX_GROUP_MS, WATCH_RETRY_S, WATCH_WAKE_MS
from daemon.runtime import metrics
from daemon.sessions.source import OPENCLAW_DB_RELATIVE
from daemon.settings import Settings

log = logging.getLogger("memoryd.watch")


def watch_paths(settings: Settings, agent: str) -> list[Path]:
    """The directories whose changes can mean new messages of `agent`, those that exist."""
    root = settings.sessions_root / "agents" / agent
    candidates = (root / "sessions", root.joinpath(*OPENCLAW_DB_RELATIVE).parent)
    return [p for p in candidates if p.is_dir()]


def is_relevant(change: Change, path: str) -> bool:
    # SQLite's shared-memory index changes on reads too (ours among them): not a new message.
    return not path.endswith("-shm")


async def watch_agent(settings: Settings, agent: str, changed: Callable[[str], None]) -> None:
    """Forever: call `changed(agent)` when a change to the agent's sessions settles (and once
    when a watch is in place). Never raises but for cancellation."""
    await _AgentWatch(settings, agent, changed).run()


class _AgentWatch:
    def __init__(self, settings: Settings, agent: str, changed: Callable[[str], None]):
        self.settings = settings
        self.agent = agent
        self.changed = changed
        self.failing = False  # the last attempt failed and said so: later failures stay quiet

    async def run(self) -> None:
        while True:
            paths = watch_paths(self.settings, self.agent)
            try:
                if not paths:
                    raise FileNotFoundError(
                        f"no sessions directory under {self.settings.sessions_root / 'agents' / self.agent}"
                    )
                await self._watch(paths)
            except (OSError, RuntimeError) as exc:
                self._failed(exc)
            await anyio.sleep(WATCH_RETRY_S)

    def _failed(self, exc: BaseException) -> None:
        metrics.WATCHING.labels(agent=self.agent).set(0)
        if not self.failing:
            log.warning(
                "agent %s: cannot watch its sessions (%s); the interval sweeps cover it, "
                "watching is tried again every %.0fs",
                self.agent,
                str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                WATCH_RETRY_S,
            )
        self.failing = True

    async def _watch(self, paths: list[Path]) -> None:
        in_place = False
        async for changes in awatch(
            *paths,
            watch_filter=is_relevant,
            debounce=WATCH_MAX_GROUP_MS,
            step=self.settings.ingest.watch_settle_ms,
            rust_timeout=WATCH_WAKE_MS,
            yield_on_timeout=True,
        ):
            if not in_place:
                in_place, self.failing = True, False
                metrics.WATCHING.labels(agent=self.agent).set(1)
                log.info("agent %s: watching %s", self.agent, ", ".join(str(p) for p in paths))
                self.changed(self.agent)  # catch up with what was written before the watch was in place
            elif changes:
                self.changed(self.agent)
