"""Phase signals (`phase_signals`, reference §5.5–§5.6): light and REM hits per staged entry,
at most one per dreaming day. Read joined with the entries (store/short_term.py).

Each function runs inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from memoryd.store.batched import execute_in
from memoryd.store.engine import Connection


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


def delete_signals(conn: Connection, keys: Sequence[str]) -> int:
    return execute_in(conn, "DELETE FROM phase_signals WHERE entry_key IN ({marks})", keys)
