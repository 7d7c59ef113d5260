"""Does the index lag the files? (search's `stale: true`, reference §6.3)

Stale when: a memory file is new, gone or changed (stat differs and the hash differs too),
an admitted transcript changed, the embedding model changed, or the last index run left
work undone (memory_index_meta 'dirty'). Stats are taken outside the store's thread; only
files whose stat moved are re-hashed.

Sessions cost nothing per session while the session source is unchanged since the revision
the last complete index run read (and no index row changed since): then every transcript it
listed is indexed at the stat it has now. Otherwise all fingerprints are read in one transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import anyio

from memoryd.agent_runtime import AgentRuntime
from memoryd.errors import MemorydError
from memoryd.index.sources import FileStat, file_hash, list_session_refs, memory_file_stats
from memoryd.sessions.admission import policy_of
from memoryd.store.db import Connection
from memoryd.store.index_sources import index_models, sources_of
from memoryd.store.index_state import read_dirty, sessions_seen
from memoryd.store.tombstones import forgotten_ids


@dataclass(frozen=True, slots=True)
class Freshness:
    stale: bool
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class DiskState:
    memory: dict[str, tuple[Path, FileStat]]
    # path -> (session id, stat); None: not compared (not indexed, or unchanged since indexed)
    sessions: dict[str, tuple[str, FileStat]] | None


def _disk_state(rt: AgentRuntime, seen_revision: str | None) -> DiskState:
    memory = memory_file_stats(rt.paths.workspace)
    if "sessions" not in rt.settings.index.sources:
        return DiskState(memory, None)
    if seen_revision is not None and rt.sessions.unchanged_since(seen_revision):
        return DiskState(memory, None)
    try:
        refs, _ = list_session_refs(rt.sessions, rt.agent_id, policy_of(rt.settings))
    except MemorydError:
        return DiskState(memory, {})
    return DiskState(memory, {r.path: (r.session_id, r.stat) for r in refs if r.internal_reason is None})


async def disk_state(rt: AgentRuntime) -> DiskState:
    seen = await rt.require_store().read(sessions_seen)
    return await anyio.to_thread.run_sync(_disk_state, rt, seen)


def _moved(indexed_mtime: float, indexed_size: int, st: FileStat) -> bool:
    return indexed_size != st.size or abs(indexed_mtime - st.mtime_ms) > 0.5


def check_freshness(conn: Connection, disk: object, model: str, secret: bytes | None = None) -> Freshness:
    assert isinstance(disk, DiskState)
    dirty = read_dirty(conn)
    if dirty:
        return Freshness(True, f"the last index run left work undone ({dirty})")
    models = index_models(conn)
    if models and models != {model}:
        return Freshness(
            True, f"the index was built with {sorted(models - {model})[0]!r}, search uses {model!r}"
        )
    indexed = {r.path: r for r in sources_of(conn, "memory")}
    lagging = sorted(set(disk.memory) ^ set(indexed))
    for rel, (path, st) in disk.memory.items():
        row = indexed.get(rel)
        if row is not None and _moved(row.mtime, row.size, st) and file_hash(path) != row.hash:
            lagging.append(rel)
    if disk.sessions is not None:
        live = {r.path: r for r in sources_of(conn, "sessions")}
        forgotten = forgotten_ids(conn, sorted({sid for sid, _ in disk.sessions.values()}), secret)
        for index_path, (sid, st) in disk.sessions.items():
            row = live.get(index_path)
            if sid not in forgotten and (row is None or _moved(row.mtime, row.size, st)):
                lagging.append(index_path)
    if lagging:
        return Freshness(True, f"the index lags {len(lagging)} file(s), e.g. {sorted(lagging)[0]}")
    return Freshness(False)
