"""Origin transfer when entries are merged, superseded or coalesced (reference §5.7).

Lineage is carried in code, never by the model: the surviving entry key receives the union of
its parents' origin rows. The rows are reserved (committed) *before* the text that cites the
survivor is published, and the exact rows added are returned so they can be rolled back if
the publication does not commit. A crash between the two leaves extra lineage (which forget
treats conservatively), never text without lineage.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from memoryd.store.db import Connection
from memoryd.store.origins import EntryOrigin, delete_origin_rows, origins_for_entries, record_origins


@dataclass(frozen=True, slots=True)
class Transfer:
    survivor_key: str
    parent_keys: tuple[str, ...]  # may include the survivor itself


def planned_rows(parents: Sequence[EntryOrigin], transfers: Iterable[Transfer]) -> list[EntryOrigin]:
    """Pure: the origin rows each survivor should hold, copied from its parents' rows."""
    by_key: dict[str, list[EntryOrigin]] = {}
    for origin in parents:
        by_key.setdefault(origin.entry_key, []).append(origin)
    rows: dict[tuple[str, str], EntryOrigin] = {}
    for t in transfers:
        for parent in t.parent_keys:
            for origin in by_key.get(parent, ()):
                rows.setdefault(
                    (t.survivor_key, origin.session_id), replace(origin, entry_key=t.survivor_key)
                )
    return sorted(rows.values(), key=lambda o: (o.entry_key, o.session_id))


def reserve_transfers(conn: Connection, agent_id: str, transfers: Sequence[Transfer]) -> list[EntryOrigin]:
    """Copy every parent's origin rows onto its survivor; return the rows actually added."""
    keys = sorted({k for t in transfers for k in t.parent_keys})
    parents = origins_for_entries(conn, agent_id, keys)
    return record_origins(conn, agent_id, planned_rows(parents, transfers))


def reserve_rows(conn: Connection, agent_id: str, rows: Iterable[EntryOrigin]) -> list[EntryOrigin]:
    return record_origins(conn, agent_id, rows)


def rollback_rows(conn: Connection, agent_id: str, added: Sequence[EntryOrigin]) -> int:
    """Delete exactly the rows a reservation added (by entry key and session)."""
    delete_origin_rows(conn, agent_id, [(o.entry_key, o.session_id) for o in added])
    return len(added)
