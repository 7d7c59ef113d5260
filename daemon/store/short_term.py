"""Short-term (staged) entries: the row type of `short_term_entries`, its column list and the
row encoding, shared by ingestion's staging, backfill and dreaming.

Each function takes a DB-API connection and runs inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from daemon.store.batched import select_in
from daemon.store.db import Connection

# Columns holding JSON lists (decoded to tuples of str).
_LIST_COLUMNS = (12, 13, 14)


@dataclass(frozen=True, slots=True)
class ShortTermEntry:
    """A staged entry as stored (one row of short_term_entries, in column order)."""

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


COLUMNS: tuple[str, ...] = tuple(ShortTermEntry.__dataclass_fields__)
SELECT_LIST = ", ".join(COLUMNS)


def _json_tuple(raw: str | None) -> tuple[str, ...]:
    # A damaged list reads as empty rather than failing the whole sweep.
    try:
        value = orjson.loads(raw or "[]")
    except orjson.JSONDecodeError:
        return ()
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def decode_row(row: Sequence) -> list[Any]:
    """A stored row (columns in COLUMNS order, first) as field values: JSON lists become tuples."""
    values = list(row[: len(COLUMNS)])
    for i in _LIST_COLUMNS:
        values[i] = _json_tuple(values[i])
    return values


def encode_row(entry: ShortTermEntry) -> tuple:
    """An entry as the values of an INSERT over COLUMNS."""
    return (
        entry.entry_key,
        entry.path,
        entry.start_line,
        entry.end_line,
        entry.snippet,
        entry.recall_count,
        entry.daily_count,
        entry.grounded_count,
        entry.total_score,
        entry.max_score,
        entry.first_recalled_at,
        entry.last_recalled_at,
        orjson.dumps(entry.query_hashes).decode(),
        orjson.dumps(entry.recall_days).decode(),
        orjson.dumps(entry.concept_tags).decode(),
        entry.origin_class,
        entry.session_kind,
        entry.observed_at,
        entry.claim_hash,
        entry.project_key,
        entry.promoted_at,
    )


def load_entries(conn: Connection, keys: Sequence[str]) -> dict[str, ShortTermEntry]:
    """The stored entries among `keys`, by key."""
    rows = select_in(
        conn, f"SELECT {SELECT_LIST} FROM short_term_entries WHERE entry_key IN ({{marks}})", keys
    )
    return {r[0]: ShortTermEntry(*decode_row(r)) for r in rows}
