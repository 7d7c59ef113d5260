"""Staged (short-term) entries as dreaming reads them: frozen snapshots of the stored entries
(written by ingestion and backfill) with their origins and phase signals.

Each function takes a connection and runs inside the caller's transaction (`Store.read`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memoryd.store.db import Connection
from memoryd.store.origins import EntryOrigin, origins_for_entries
from memoryd.store.short_term import ShortTermEntry, read_with_signals
from memoryd.store.suppressions import suppressed_among
from memoryd.store.tombstones import forgotten_ids

TRUSTED_ORIGINS = frozenset({"owner", "agent"})


@dataclass(frozen=True, slots=True)
class StagedEntry(ShortTermEntry):
    """A stored entry with its origins and phase signals, as dreaming reads it."""

    origins: tuple[EntryOrigin, ...] = ()
    light_hits: int = 0
    rem_hits: int = 0
    last_light_at: int | None = None
    last_rem_at: int | None = None

    @property
    def signal_count(self) -> int:
        return max(0, self.recall_count) + max(0, self.daily_count) + max(0, self.grounded_count)

    @property
    def avg_score(self) -> float:
        return self.total_score / max(1, self.signal_count)

    @property
    def session_ids(self) -> tuple[str, ...]:
        return tuple(sorted({o.session_id for o in self.origins}))

    @property
    def trusted(self) -> bool:
        """Structural trust gate: only owner/agent entries may reach a prompt or MEMORY.md."""
        return self.origin_class in TRUSTED_ORIGINS and all(
            o.origin_class in TRUSTED_ORIGINS for o in self.origins
        )


def read_staged(
    conn: Connection, agent_id: str, *, keys: Sequence[str] | None = None, include_promoted: bool = False
) -> list[StagedEntry]:
    """Staged entries (all, or the given keys) with their origins and phase signals."""
    rows = read_with_signals(conn, keys, include_promoted=include_promoted)
    by_key: dict[str, list[EntryOrigin]] = {}
    for origin in origins_for_entries(conn, agent_id, [values[0] for values, _ in rows]):
        by_key.setdefault(origin.entry_key, []).append(origin)
    out = []
    for values, signals in rows:
        # The stored columns, then origins, light_hits, rem_hits, last_light_at, last_rem_at.
        fields: list[Any] = [*values, tuple(by_key.get(values[0], ())), *signals]
        out.append(StagedEntry(*fields))
    return _without_suppressed(conn, out)


def _without_suppressed(conn: Connection, entries: list[StagedEntry]) -> list[StagedEntry]:
    """Entries whose claim is suppressed from every session it came from (forget --entry) are
    never dreamed on or promoted; one more session saying it is new evidence, and keeps it."""
    pairs = [(e.claim_hash, o.session_id) for e in entries if e.claim_hash for o in e.origins]
    suppressed = suppressed_among(conn, pairs)
    if not suppressed:
        return entries
    return [
        e
        for e in entries
        if not (
            e.claim_hash and e.origins and all((e.claim_hash, o.session_id) in suppressed for o in e.origins)
        )
    ]


def read_unforgotten(conn: Connection, agent_id: str, secret: bytes | None) -> list[StagedEntry]:
    """Unpromoted staged entries none of whose origin sessions is forgotten (one snapshot)."""
    entries = read_staged(conn, agent_id)
    gone = forgotten_ids(conn, {o.session_id for e in entries for o in e.origins}, secret)
    return [e for e in entries if not any(o.session_id in gone for o in e.origins)]
