"""Staged (short-term) entries as frozen snapshots, and the few writes dreaming makes to them.

Plain SQL over `short_term_entries` (written by ingestion and backfill), `phase_signals` and
`memory_entry_origins`. Each function takes a DB-API connection and runs inside the caller's
transaction (`Store.read` / `Store.write`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from daemon.store.batched import execute_in, select_in
from daemon.store.db import Connection
from daemon.store.origins import EntryOrigin, origins_for_entries
from daemon.store.short_term import COLUMNS, ShortTermEntry, decode_row
from daemon.store.tombstones import forgotten_ids

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
    where = "" if include_promoted else " WHERE e.promoted_at IS NULL"
    sql = (
        f"SELECT {', '.join('e.' + c for c in COLUMNS)}, "
        "COALESCE(s.light_hits, 0), COALESCE(s.rem_hits, 0), s.last_light_at, s.last_rem_at "
        "FROM short_term_entries e LEFT JOIN phase_signals s ON s.entry_key = e.entry_key"
    )
    rows: list[tuple] = []
    if keys is None:
        rows = conn.execute(sql + where + " ORDER BY e.entry_key").fetchall()
    else:
        clause = " WHERE e.entry_key IN ({marks})" + (
            "" if include_promoted else " AND e.promoted_at IS NULL"
        )
        rows = select_in(conn, sql + clause, dict.fromkeys(keys))
        rows.sort(key=lambda r: r[0])
    by_key: dict[str, list[EntryOrigin]] = {}
    for origin in origins_for_entries(conn, agent_id, [r[0] for r in rows]):
        by_key.setdefault(origin.entry_key, []).append(origin)
    out = []
    for r in rows:
        # The stored columns, then origins, light_hits, rem_hits, last_light_at, last_rem_at.
        values = decode_row(r)
        values += (tuple(by_key.get(r[0], ())), int(r[21]), int(r[22]), r[23], r[24])
        out.append(StagedEntry(*values))
    return out


def mark_promoted(conn: Connection, keys: Iterable[str], now_ms: int) -> int:
    """Set promoted_at on still-unpromoted entries; return how many changed."""
    return execute_in(
        conn,
        "UPDATE short_term_entries SET promoted_at = ? WHERE promoted_at IS NULL AND entry_key IN ({marks})",
        dict.fromkeys(keys),
        (now_ms,),
    )


def record_phase_hits(
    conn: Connection, keys: Iterable[str], phase: str, now_ms: int, day_start_ms: int
) -> int:
    """Count one light/REM hit per entry per dreaming day (a rerun the same day adds none)."""
    if phase not in ("light", "rem"):
        raise ValueError(f"unknown phase {phase!r}")
    hits, last = f"{phase}_hits", f"last_{phase}_at"
    rows = [(k, now_ms, now_ms, day_start_ms) for k in dict.fromkeys(keys)]
    before = conn.total_changes
    conn.executemany(
        f"INSERT INTO phase_signals(entry_key, {hits}, {last}) VALUES (?, 1, ?) "
        f"ON CONFLICT(entry_key) DO UPDATE SET {hits} = {hits} + 1, {last} = ? "
        f"WHERE {last} IS NULL OR {last} < ?",
        rows,
    )
    return conn.total_changes - before


def existing_staged_keys(conn: Connection, keys: Sequence[str]) -> set[str]:
    rows = select_in(
        conn, "SELECT entry_key FROM short_term_entries WHERE entry_key IN ({marks})", dict.fromkeys(keys)
    )
    return {k for (k,) in rows}


def read_unforgotten(conn: Connection, agent_id: str, secret: bytes | None) -> list[StagedEntry]:
    """Unpromoted staged entries none of whose origin sessions is forgotten (one snapshot)."""
    entries = read_staged(conn, agent_id)
    gone = forgotten_ids(conn, {o.session_id for e in entries for o in e.origins}, secret)
    return [e for e in entries if not any(o.session_id in gone for o in e.origins)]
