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

from memoryd.store.db import Connection
from memoryd.store.origins import entry_keys_of_sessions, origin_pairs


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
    conn: Connection,
    agent_id: str,
    session_ids: Collection[str],
    carried_keys: Collection[str] = (),
    *,
    by_entry: bool = False,
) -> Lineage:
    """Lineage of `session_ids`; `carried_keys` stay selected across re-plans (a key seen once
    stays selected even if another writer removed its rows meanwhile). `by_entry`: the keys were
    chosen themselves (forget --entry), so none is removed for a session's sake (none is mixed)."""
    sids = sorted(set(session_ids))
    entry_keys = frozenset(entry_keys_of_sessions(conn, agent_id, sids) | set(carried_keys))
    rows = origin_pairs(conn, agent_id, sorted(entry_keys))
    ordered = tuple(sorted({OriginRow(k, s) for k, s in rows}))  # (entry_key, session_id) order
    selected = set(sids)
    mixed = (
        frozenset() if by_entry else frozenset(r.entry_key for r in ordered if r.session_id not in selected)
    )
    return Lineage(ordered, entry_keys, mixed)
