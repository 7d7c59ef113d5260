"""Lineage sets (reference §7.3): which entry keys the selected sessions contributed to.

The reference reads every origin row of the agent. memoryd reads only what the answer
depends on, through indexes: the rows of the selected sessions (index on session_id), then
every row of the entry keys found there (primary key), so the cost follows the affected rows,
not the store's size. `lineage_identity` is that row set in a fixed order; a transaction that
sees a different identity knows another writer changed the lineage and re-plans.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

import orjson

from daemon.store.batched import select_in
from daemon.store.db import Connection


@dataclass(frozen=True, slots=True, order=True)
class OriginRow:
    entry_key: str
    session_id: str


@dataclass(frozen=True, slots=True)
class Lineage:
    rows: tuple[OriginRow, ...]  # ORDER BY entry_key, session_id
    entry_keys: frozenset[str]
    mixed_entry_keys: frozenset[str]

    @property
    def identity(self) -> str:
        return lineage_identity(self.rows)

    @property
    def origin_rows(self) -> int:
        """Rows removed on apply: every origin of a selected key, whichever its session."""
        return sum(1 for r in self.rows if r.entry_key in self.entry_keys)


def lineage_identity(rows: Iterable[OriginRow]) -> str:
    return orjson.dumps([[r.entry_key, r.session_id] for r in rows]).decode()


def read_lineage(
    conn: Connection, agent_id: str, session_ids: Collection[str], carried_keys: Collection[str] = ()
) -> Lineage:
    """Lineage of `session_ids`; `carried_keys` stay selected across re-plans (a key seen once
    stays selected even if another writer removed its rows meanwhile)."""
    sids = sorted(set(session_ids))
    by_session = select_in(
        conn,
        "SELECT entry_key FROM memory_entry_origins WHERE session_id IN ({marks}) AND agent_id = ?",
        sids,
        (agent_id,),
    )
    entry_keys = frozenset({k for (k,) in by_session} | set(carried_keys))
    rows = select_in(
        conn,
        "SELECT entry_key, session_id FROM memory_entry_origins WHERE entry_key IN ({marks}) "
        "AND agent_id = ?",
        sorted(entry_keys),
        (agent_id,),
    )
    ordered = tuple(sorted({OriginRow(k, s) for k, s in rows}))  # (entry_key, session_id) order
    selected = set(sids)
    mixed = frozenset(r.entry_key for r in ordered if r.session_id not in selected)
    return Lineage(ordered, entry_keys, mixed)


def keys_with_origins(conn: Connection, agent_id: str, entry_keys: Collection[str]) -> frozenset[str]:
    """Which of `entry_keys` have at least one origin row for this agent (primary-key lookups)."""
    if not entry_keys:
        return frozenset()
    rows = select_in(
        conn,
        "SELECT DISTINCT entry_key FROM memory_entry_origins WHERE entry_key IN ({marks}) AND agent_id = ?",
        sorted(set(entry_keys)),
        (agent_id,),
    )
    return frozenset(k for (k,) in rows)
