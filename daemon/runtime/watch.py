"""Watching the agents' sessions for changes (watchfiles: inotify, anyio-native).

The watch sees the names of changed files only; no session is opened here, so admission is
still decided by the sweep before any transcript byte is read. Watched, for every served agent
in one watch: the agent's sessions directory (sessions.json and the transcripts) and the
directory of its OpenClaw agent database, whichever exist.

A change is reported with the ids of the sessions whose transcripts changed
(`<sessionId>.jsonl` in the sessions directory, read from the file names), or with None when
another file changed too (sessions.json, an archive, the OpenClaw database): then any session
may have. The live sweep considers only those sessions (daemon/ingest/live_hints.py).

A change is reported once it settles (a change of metadata alone is no change) (no further write for `ingest.watch_settle_ms`; a
stream that never settles at least every WATCH_MAX_GROUP_MS). When a watch is in place it
reports once for each agent without a change, so a catch-up sweep covers what was written
before it started. An agent without a directory to watch is one log line, and so is a watcher
error (inotify limits, a filesystem without inotify): the interval sweeps cover what is not
watched, and watching is tried again every WATCH_RETRY_S.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import anyio
from watchfiles import Change, awatch

from memoryd.constants import WATCH_MAX_GROUP_MS, WATCH_RETRY_S, WATCH_WAKE_MS
from memoryd.runtime import metrics
from memoryd.sessions.source import OPENCLAW_DB_RELATIVE
from memoryd.settings import Settings

log = logging.getLogger("memoryd.watch")


def sessions_dir(settings: Settings, agent: str) -> Path:
    return settings.sessions_root / "agents" / agent / "sessions"


def watch_dirs(settings: Settings, agent: str) -> tuple[Path, Path]:
    """The directories whose changes can mean new messages of `agent`."""
    root = settings.sessions_root / "agents" / agent
    return sessions_dir(settings, agent), root.joinpath(*OPENCLAW_DB_RELATIVE).parent


def watch_paths(settings: Settings, agent: str) -> list[Path]:
    """Those of watch_dirs that exist."""
    return [p for p in watch_dirs(settings, agent) if p.is_dir()]


def watch_error_line(exc: BaseException, dirs: Iterable[Path]) -> str:
    """The first line of a watch error, with every file inside the watched directories cut to the
    directory: file names are session ids, and the log reaches journald, out of forget's reach."""
    line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    for d in dirs:
        inside = f"{d}/…"  # a replacement string: re reads its backslashes as escapes
        line = re.compile(re.escape(str(d)) + r"/[^\s\"',\]]+").sub(inside.replace("\\", "\\\\"), line)
    return line


def is_relevant(change: Change, path: str) -> bool:
    # SQLite's shared-memory index changes on reads too (ours among them): not a new message.
    return not path.endswith("-shm")


FileState = tuple[int, int] | None  # (size, mtime_ns); None: no such file


def file_state(path: str) -> FileState:
    try:
        st = os.stat(path)
    except OSError:
        return None
    if st.st_size == 0 and path.endswith("-wal"):
        # A reader's open creates an empty WAL and its close removes it: no message either way.
        return None
    return st.st_size, st.st_mtime_ns


def changed_files(paths: Iterable[str], seen: dict[str, FileState]) -> list[str]:
    """Those of `paths` whose size, mtime or existence changed since `seen` (updated). A change
    of metadata alone is not new content: SQLite chowns the WAL on every open when it runs as
    root, so the daemon's own reads of an OpenClaw database would otherwise start sweeps."""
    changed = []
    for path in paths:
        state = file_state(path)
        if path not in seen or seen[path] != state:
            changed.append(path)
        seen[path] = state
    return changed


def content_changed(paths: Iterable[str], seen: dict[str, FileState]) -> bool:
    return bool(changed_files(paths, seen))


TRANSCRIPT_SUFFIX = ".jsonl"  # a live transcript: <sessionId>.jsonl (daemon/sessions/json_store.py)


def changed_sessions(paths: Iterable[str], sessions_dir: Path) -> frozenset[str] | None:
    """The ids of the sessions whose live transcripts are `paths`, or None when any other file
    is among them (then any session may have changed)."""
    ids: set[str] = set()
    for path in paths:
        parent, name = os.path.split(path)
        if not name.endswith(TRANSCRIPT_SUFFIX) or len(name) == len(TRANSCRIPT_SUFFIX):
            return None
        if parent != str(sessions_dir) and os.path.realpath(parent) != os.path.realpath(sessions_dir):
            return None
        ids.add(name[: -len(TRANSCRIPT_SUFFIX)])
    return frozenset(ids) or None


Changed = Callable[[str, frozenset[str] | None], None]  # (agent, changed session ids or None)
Plan = dict[str, tuple[Path, ...]]  # agent -> its directories to watch (those that exist)


def watch_plan(settings: Settings, agents: Iterable[str]) -> Plan:
    """The directories to watch of each of `agents` that has any (I/O: a stat each)."""
    return {agent: tuple(paths) for agent in agents if (paths := watch_paths(settings, agent))}


def _agent_of(path: str, dirs: dict[str, str]) -> str | None:
    """The agent whose watched directory holds `path` (at any depth), or None."""
    here = path
    while here not in dirs:
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent
    return dirs[here]


class SessionsWatch:
    """Forever: call `changed(agent, ids)` when a change to an agent's sessions settles (and once
    for each agent, with None, when the watch is in place). Never raises but for cancellation.

    One watch (one inotify instance, one waiting thread) over the directories of every agent,
    however many are served: a watch per agent would be a thread or two each, and an inotify
    instance each (128 per user by default). The directories are listed again every
    WATCH_RETRY_S and when an agent is added; when they differ, the watch is set up again over
    the new list, and every agent gets a catch-up sweep, as at the start."""

    def __init__(self, settings: Settings, agents: Iterable[str], changed: Changed):
        self.settings = settings
        self.agents: list[str] = list(agents)
        self.changed = changed
        self.failing = False  # the last attempt failed and said so: later failures stay quiet
        self.missing: set[str] = set()  # agents without a directory to watch, said so
        self.seen: dict[str, FileState] = {}  # the files' states at their last change
        self._replan = False

    def add(self, agent: str) -> None:
        """Watch `agent` too (found after the start)."""
        if agent not in self.agents:
            self.agents.append(agent)
            self._replan = True

    async def _plan(self) -> Plan:
        plan = await anyio.to_thread.run_sync(watch_plan, self.settings, tuple(self.agents))
        self._note_missing(plan)
        return plan

    async def run(self) -> None:
        while True:
            plan = await self._plan()
            try:
                if plan:
                    await self._watch(plan)
                    continue  # the directories changed: watch the new ones at once
                await self._wait_for_directories(plan)
            except (OSError, RuntimeError) as exc:
                self._failed(exc, plan)
                await anyio.sleep(WATCH_RETRY_S)

    async def _wait_for_directories(self, plan: Plan) -> None:
        """Until an agent has a directory to watch (none has now)."""
        waited = 0.0
        while plan == {}:
            await anyio.sleep(WATCH_WAKE_MS / 1000)
            waited += WATCH_WAKE_MS / 1000
            if self._replan or waited >= WATCH_RETRY_S:
                self._replan, waited = False, 0.0
                plan = await self._plan()

    def _note_missing(self, plan: Plan) -> None:
        """One line per agent without a directory to watch, when it goes missing."""
        for agent in self.agents:
            if agent in plan:
                self.missing.discard(agent)
            elif agent not in self.missing:
                self.missing.add(agent)
                metrics.WATCHING.labels(agent=agent).set(0)
                log.warning(
                    "agent %s: cannot watch its sessions (no sessions directory under %s); the interval "
                    "sweeps cover it, watching is tried again every %.0fs",
                    agent,
                    self.settings.sessions_root / "agents" / agent,
                    WATCH_RETRY_S,
                )

    def _failed(self, exc: BaseException, plan: Plan) -> None:
        for agent in plan:
            metrics.WATCHING.labels(agent=agent).set(0)
        if not self.failing:
            dirs = [d for agent in plan for d in watch_dirs(self.settings, agent)]
            log.warning(
                "cannot watch the sessions of %d agent(s) (%s); the interval sweeps cover them, "
                "watching is tried again every %.0fs",
                len(plan),
                watch_error_line(exc, dirs),
                WATCH_RETRY_S,
            )
        self.failing = True

    def _named(self, agent: str, paths: tuple[Path, ...]) -> Path | None:
        """The directory whose transcripts are named by session id: the sessions.json layout alone
        (an OpenClaw agent's sessions live in its database, whose changes name no session)."""
        if self.settings.session_source_for(agent) == "openclaw":
            return None
        return paths[0] if paths == (sessions_dir(self.settings, agent),) else None

    async def _watch(self, plan: Plan) -> None:
        """Watch `plan` until its directories change (returns) or the watch fails (raises)."""
        dirs = {str(p): agent for agent, paths in plan.items() for p in paths}
        named = {agent: self._named(agent, paths) for agent, paths in plan.items()}
        in_place = False
        replan_at = time.monotonic() + WATCH_RETRY_S
        async for changes in awatch(
            *(Path(d) for d in dirs),
            watch_filter=is_relevant,
            debounce=WATCH_MAX_GROUP_MS,
            step=self.settings.ingest.watch_settle_ms,
            rust_timeout=WATCH_WAKE_MS,
            yield_on_timeout=True,
        ):
            if not in_place:
                in_place, self.failing = True, False
                log.info("watching the sessions of %d agent(s)", len(plan))
                for agent in plan:
                    metrics.WATCHING.labels(agent=agent).set(1)
                    # Catch up with what was written before the watch was in place: every session.
                    self.changed(agent, None)
            elif changes:
                by_agent: dict[str, set[str]] = {}
                for _, path in changes:
                    owner = _agent_of(path, dirs)
                    if owner is not None:
                        by_agent.setdefault(owner, set()).add(path)
                # A stat of another program's files: in a worker thread, off the event loop.
                settled = await anyio.to_thread.run_sync(self._settled, by_agent, named)
                for agent, ids in settled:
                    self.changed(agent, ids)
            if self._replan or time.monotonic() >= replan_at:
                self._replan, replan_at = False, time.monotonic() + WATCH_RETRY_S
                if await self._plan() != plan:
                    return

    def _settled(
        self, by_agent: dict[str, set[str]], named: dict[str, Path | None]
    ) -> list[tuple[str, frozenset[str] | None]]:
        """The agents whose changed paths hold new content, each with which sessions' (None: any)."""
        out = []
        for agent, paths in by_agent.items():
            files = changed_files(paths, self.seen)
            if files:
                where = named.get(agent)
                out.append((agent, changed_sessions(files, where) if where else None))
        return out
