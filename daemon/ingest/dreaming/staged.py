"""Staged (short-term) entries as frozen snapshots, and the few writes dreaming makes to them.

Plain SQL over `short_term_entries` (written by ingestion and backfill), `phase_signals` and
`memory_entry_origins`. Each function takes a DB-API connection and runs inside the caller's
transaction (`Store.read` / `Store.write`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from daemon.store.db import Connection
from daemon.store.origins import EntryOrigin, origins_for_entries
from daemon.store.tombstones import forgotten_ids

TRUSTED_ORIGINS = frozenset({"owner", "agent"})
BATCH = 500


@dataclass(frozen=True, slots=True)
class StagedEntry:
    entry_key: str
    path: str
    start_line: int
    end_line: int
    snippet: str
    recall_count: int
    daily_count: int
    grounded_count: int
    total_score: float
    max_score: float
    first_recalled_at: int
    last_recalled_at: int
    query_hashes: tuple[str, ...]
    recall_days: tuple[str, ...]
    concept_tags: tuple[str, ...]
    origin_class: str
    session_kind: str
    observed_at: int
    claim_hash: str | None
    project_key: str | None
    promoted_at: int | None
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
            o.origin_class in TRUSTED_ORIGINS for o in self.origins)


_COLUMNS = ("entry_key, path, start_line, end_line, snippet, recall_count, daily_count, grounded_count, "
            "total_score, max_score, first_recalled_at, last_recalled_at, query_hashes, recall_days, "
            "concept_tags, origin_class, session_kind, observed_at, claim_hash, project_key, promoted_at")
STAGED_COLUMNS = tuple(c.strip() for c in _COLUMNS.split(","))


def _json_tuple(raw: str | None) -> tuple[str, ...]:
    try:
        value = json.loads(raw or "[]")
    except ValueError:
        return ()
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def read_staged(conn: Connection, agent_id: str, *, keys: Sequence[str] | None = None,
                include_promoted: bool = False) -> list[StagedEntry]:
    """Staged entries (all, or the given keys) with their origins and phase signals."""
    where = "" if include_promoted else " WHERE e.promoted_at IS NULL"
    sql = (f"SELECT {', '.join('e.' + c for c in STAGED_COLUMNS)}, "
           "COALESCE(s.light_hits, 0), COALESCE(s.rem_hits, 0), s.last_light_at, s.last_rem_at "
           "FROM short_term_entries e LEFT JOIN phase_signals s ON s.entry_key = e.entry_key")
    rows: list[tuple] = []
    if keys is None:
        rows = conn.execute(sql + where + " ORDER BY e.entry_key").fetchall()
    else:
        wanted = list(dict.fromkeys(keys))
        for start in range(0, len(wanted), BATCH):
            batch = wanted[start:start + BATCH]
            cond = f"e.entry_key IN ({','.join('?' * len(batch))})"
            clause = f" WHERE {cond}" + ("" if include_promoted else " AND e.promoted_at IS NULL")
            rows += conn.execute(sql + clause, batch).fetchall()
        rows.sort(key=lambda r: r[0])
    by_key: dict[str, list[EntryOrigin]] = {}
    for origin in origins_for_entries(conn, agent_id, [r[0] for r in rows]):
        by_key.setdefault(origin.entry_key, []).append(origin)
    out = []
    for r in rows:
        out.append(StagedEntry(
            entry_key=r[0], path=r[1], start_line=int(r[2]), end_line=int(r[3]), snippet=r[4],
            recall_count=int(r[5]), daily_count=int(r[6]), grounded_count=int(r[7]),
            total_score=float(r[8]), max_score=float(r[9]), first_recalled_at=int(r[10]),
            last_recalled_at=int(r[11]), query_hashes=_json_tuple(r[12]), recall_days=_json_tuple(r[13]),
            concept_tags=_json_tuple(r[14]), origin_class=r[15], session_kind=r[16], observed_at=int(r[17]),
            claim_hash=r[18], project_key=r[19], promoted_at=r[20],
            origins=tuple(by_key.get(r[0], ())), light_hits=int(r[21]), rem_hits=int(r[22]),
            last_light_at=r[23], last_rem_at=r[24]))
    return out


def mark_promoted(conn: Connection, keys: Iterable[str], now_ms: int) -> int:
    """Set promoted_at on still-unpromoted entries; return how many changed."""
    wanted = list(dict.fromkeys(keys))
    changed = 0
    for start in range(0, len(wanted), BATCH):
        batch = wanted[start:start + BATCH]
        changed += conn.execute(
            f"UPDATE short_term_entries SET promoted_at = ? WHERE promoted_at IS NULL "
            f"AND entry_key IN ({','.join('?' * len(batch))})", [now_ms, *batch]).rowcount
    return changed


def record_phase_hits(conn: Connection, keys: Iterable[str], phase: str, now_ms: int, day_start_ms: int) -> int:
    """Count one light/REM hit per entry per dreaming day (a rerun the same day adds none)."""
    if phase not in ("light", "rem"):
        raise ValueError(f"unknown phase {phase!r}")
    hits, last = f"{phase}_hits", f"last_{phase}_at"
    rows = [(k, now_ms, now_ms, day_start_ms) for k in dict.fromkeys(keys)]
    before = conn.total_changes
    conn.executemany(
        f"INSERT INTO phase_signals(entry_key, {hits}, {last}) VALUES (?, 1, ?) "
        f"ON CONFLICT(entry_key) DO UPDATE SET {hits} = {hits} + 1, {last} = ? "
        f"WHERE {last} IS NULL OR {last} < ?", rows)
    return conn.total_changes - before


def existing_staged_keys(conn: Connection, keys: Sequence[str]) -> set[str]:
    found: set[str] = set()
    wanted = list(dict.fromkeys(keys))
    for start in range(0, len(wanted), BATCH):
        batch = wanted[start:start + BATCH]
        found.update(k for (k,) in conn.execute(
            f"SELECT entry_key FROM short_term_entries WHERE entry_key IN ({','.join('?' * len(batch))})", batch))
    return found


def read_unforgotten(conn: Connection, agent_id: str, secret: bytes | None) -> list[StagedEntry]:
    """Unpromoted staged entries none of whose origin sessions is forgotten (one snapshot)."""
    entries = read_staged(conn, agent_id)
    gone = forgotten_ids(conn, {o.session_id for e in entries for o in e.origins}, secret)
    return [e for e in entries if not any(o.session_id in gone for o in e.origins)]
