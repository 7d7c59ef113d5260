"""Checkpoint keys and stamp sets: what a sweep derives from the stored checkpoints
(store/checkpoints.py) to decide "unchanged" with one lookup per session (reference §4.5).

* a checkpoint is keyed `<agent>:<sessionPath>`; a seen-hash scope is `<agent>:<sessionId>`;
* a StampSet holds every stamp of one agent and the fingerprint under which each settled session
  counts as unchanged; StampSets keeps the last one per store and agent between sweeps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from memoryd.ingest.plan import settled_fingerprint
from memoryd.store.checkpoints import CheckpointStamp, checkpoint_token, load_stamps
from memoryd.store.engine import Connection


def state_key(agent_id: str, session_path: str) -> str:
    return f"{agent_id}:{session_path}"


def seen_scope(agent_id: str, session_id: str) -> str:
    return f"{agent_id}:{session_id}"


class StampSet(NamedTuple):
    """Every checkpoint stamp of one agent, and the fingerprint under which each settled session
    (fully scanned, not excluded, nothing left unread) counts as unchanged: a quiet re-sweep
    decides a session with one dict lookup and a tuple comparison, both in C."""

    stamps: Mapping[str, CheckpointStamp]
    settled: Mapping[str, tuple[int, int]]  # state_key -> (mtime_ms, size)


def stamp_set(stamps: Mapping[str, CheckpointStamp]) -> StampSet:
    settled = {key: fp for key, stamp in stamps.items() if (fp := settled_fingerprint(stamp)) is not None}
    return StampSet(stamps, settled)


class StampSets:
    """(database path, agent) -> (checkpoint token, the stamp set read at that token), kept by a
    long-lived process between sweeps. The token changes with every write to ingest_checkpoints
    (a trigger, migration 2), so equal tokens mean equal stamps and a quiet re-sweep skips
    reading ~10k rows. Shared between the stores' threads: each entry is replaced whole, and a
    pair is always read in one transaction."""

    CACHE_NAME = "stamps"  # its key in ProcessCaches.sizes()

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], tuple[int, StampSet]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, db_path: str, agent_id: str, token: int) -> StampSet | None:
        entry = self._entries.get((db_path, agent_id))
        return entry[1] if entry is not None and entry[0] == token else None

    def put(self, db_path: str, agent_id: str, token: int, stamps: StampSet) -> None:
        self._entries[(db_path, agent_id)] = (token, stamps)

    def clear(self) -> None:
        self._entries.clear()


def load_stamp_set(conn: Connection, cache: StampSets, db_path: str, agent_id: str) -> StampSet:
    """The agent's stamps, reusing the last ones read from this database while its checkpoint
    token holds. The mappings are shared: callers only read them."""
    token = checkpoint_token(conn)
    cached = cache.get(db_path, agent_id, token)
    if cached is not None:
        return cached
    stamps = stamp_set(load_stamps(conn, agent_id))
    cache.put(db_path, agent_id, token, stamps)
    return stamps
