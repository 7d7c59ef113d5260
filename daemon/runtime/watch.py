"""Watching one agent's sessions for changes (watchfiles: inotify, anyio-native).

The watch sees the names of changed files only; no session is opened here, so admission is
still decided by the sweep before any transcript byte is read. Watched: the agent's sessions
directory (sessions.json and the transcripts) and the directory of its OpenClaw agent
database, whichever exist.

A change is reported with the ids of the sessions whose transcripts changed
(`<sessionId>.jsonl` in the sessions directory, read from the file names), or with None when
another file changed too (sessions.json, an archive, the OpenClaw database): then any session
may have. The live sweep considers only those sessions (daemon/ingest/live_hints.py).

A change is reported once it settles (a change of metadata alone is no change) (no further write for `ingest.watch_settle_ms`; a
stream that never settles at least every WATCH_MAX_GROUP_MS). When a watch is in place it
reports once without a change, so a catch-up sweep covers what was written before it
started. A watcher error (no such directory, inotify limits, a filesystem without inotify)
is one log line: the agent is then covered by the interval sweeps, and watching is tried
again every WATCH_RETRY_S.
"""

from __future__ import annotations

import logging
import os
import re
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


async def watch_agent(settings: Settings, agent: str, changed: Changed) -> None:
    """Forever: call `changed(agent, ids)` when a change to the agent's sessions settles (and
    once, with None, when a watch is in place). Never raises but for cancellation."""
    await _AgentWatch(settings, agent, changed).run()


class _AgentWatch:
    def __init__(self, settings: Settings, agent: str, changed: Changed):
        self.settings = settings
        self.agent = agent
        self.changed = changed
        self.failing = False  # the last attempt failed and said so: later failures stay quiet
        self.seen: dict[str, FileState] = {}  # the files' states at their last change

    async def run(self) -> None:
        while True:
            paths = await anyio.to_thread.run_sync(watch_paths, self.settings, self.agent)
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
                watch_error_line(exc, watch_dirs(self.settings, self.agent)),
                WATCH_RETRY_S,
            )
        self.failing = True

    async def _watch(self, paths: list[Path]) -> None:
        in_place = False
        # Transcripts named by session id: the sessions.json layout alone (an OpenClaw agent's
        # sessions live in its database, whose changes name no session).
        named = paths[0] if paths == [sessions_dir(self.settings, self.agent)] else None
        if self.settings.session_source_for(self.agent) == "openclaw":
            named = None
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
                # Catch up with what was written before the watch was in place: every session.
                self.changed(self.agent, None)
            elif changes:
                # A stat of another program's files: in a worker thread, off the event loop.
                changed, ids = await anyio.to_thread.run_sync(self._settled, {p for _, p in changes}, named)
                if changed:
                    self.changed(self.agent, ids)

    def _settled(self, paths: set[str], named: Path | None) -> tuple[bool, frozenset[str] | None]:
        """Whether `paths` hold new content, and which sessions' (None: any)."""
        files = changed_files(paths, self.seen)
        return bool(files), changed_sessions(files, named) if files and named else None
