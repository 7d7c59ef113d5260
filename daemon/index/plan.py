"""Planning an index run: what to (re)index, what to remove, what to skip. Pure.

A file is reindexed when it is new, its content hash (memory) or stat (sessions) differs
from the indexed row, the embedding model changed, or on `--force`. Every indexed source
that is no longer wanted — a deleted file, a forgotten session, an internal (cron,
heartbeat, dreaming-narrative) transcript — is removed without being reindexed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from memoryd.index.sources import MemoryFile, SessionRef
from memoryd.store.tombstones import REASON_FORGOTTEN

REASON_GONE = "no longer present"


@dataclass(frozen=True, slots=True)
class IndexedSource:
    path: str
    source: str
    hash: str
    mtime: float
    size: int
    session_id: str | None
    model: str


@dataclass(frozen=True, slots=True)
class Note:
    path: str
    source: str
    session_id: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class SyncPlan:
    memory: tuple[MemoryFile, ...]
    sessions: tuple[SessionRef, ...]
    unchanged: int
    removals: tuple[Note, ...]
    skipped: tuple[Note, ...]


def plan_sync(
    memory_files: Iterable[MemoryFile],
    session_refs: Iterable[SessionRef],
    indexed: Mapping[tuple[str, str], IndexedSource],
    forgotten: set[str],
    model: str,
    force: bool,
    extra_indexed: Iterable[tuple[str, str, str | None]] = (),
    only_session_paths: frozenset[str] | None = None,
) -> SyncPlan:
    """`extra_indexed` lists (path, source, session_id) of chunks with no source row (a
    force run sweeps them too). `only_session_paths`: the session sources this run considers
    (a live sync of the sessions that changed); the other indexed sessions are left as they are."""
    wanted: set[tuple[str, str]] = set()
    memory: list[MemoryFile] = []
    sessions: list[SessionRef] = []
    skipped: list[Note] = []
    unchanged = 0
    for f in memory_files:
        key = (f.rel_path, "memory")
        wanted.add(key)
        row = indexed.get(key)
        if force or row is None or row.hash != f.hash or row.model != model:
            memory.append(f)
        else:
            unchanged += 1
    not_indexed: dict[tuple[str, str], str] = {}
    for ref in session_refs:
        key = (ref.path, "sessions")
        reason = REASON_FORGOTTEN if ref.session_id in forgotten else ref.internal_reason
        if reason is not None:
            skipped.append(Note(ref.path, "sessions", ref.session_id, reason))
            not_indexed[key] = reason
            continue
        wanted.add(key)
        row = indexed.get(key)
        if (
            force
            or row is None
            or row.model != model
            or row.size != ref.stat.size
            or abs(row.mtime - ref.stat.mtime_ms) > 0.5
        ):
            sessions.append(ref)
        else:
            unchanged += 1
    candidates = {
        key: row.session_id
        for key, row in indexed.items()
        if only_session_paths is None or key[1] != "sessions" or key[0] in only_session_paths
    }
    for path, source, session_id in extra_indexed:
        candidates.setdefault((path, source), session_id)
    removals = [
        Note(
            path,
            source,
            session_id,
            REASON_FORGOTTEN
            if session_id is not None and session_id in forgotten
            else not_indexed.get((path, source), REASON_GONE),
        )
        for (path, source), session_id in sorted(candidates.items())
        if (path, source) not in wanted
    ]
    return SyncPlan(tuple(memory), tuple(sessions), unchanged, tuple(removals), tuple(skipped))
