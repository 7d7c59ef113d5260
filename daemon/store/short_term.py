"""Short-term (staged) entries (`short_term_entries`, reference §5.4): the row type, its column
list and encoding, and every query over the table — ingestion's staging, backfill, dreaming and
forget. Dreaming's reads join the phase signals (store/phase_signals.py) of each entry.

Each function takes a connection and runs inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from memoryd.store.batched import execute_in, select_in
from memoryd.store.engine import Connection
from memoryd.store.lines import CLAIM_KEY_PREFIX, claim_of_key
from memoryd.store.pages import rows_sharing_pages

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


# --- the key index --------------------------------------------------------------------------------
# Entries are found by key through one index on an expression (agent schema version 13): a
# claim's key as the claim hash's 6 bytes, any other key as its text. A lookup must spell the
# index's expression (`key_index`) and bind `index_value`s, or SQLite reads the whole table.
_CLAIM_KEY_GLOB = f"'{CLAIM_KEY_PREFIX}" + "[0-9a-f]" * 12 + "'"


def key_index(column: str = "entry_key") -> str:
    """The key index's expression over `column` (an entry key: the table's, or another's)."""
    return f"(CASE WHEN {column} GLOB {_CLAIM_KEY_GLOB} THEN unhex(substr({column}, {len(CLAIM_KEY_PREFIX) + 1})) ELSE {column} END)"


def index_value(entry_key: str) -> bytes | str:
    """What the key index holds for `entry_key` (key_index computed here)."""
    claim = claim_of_key(entry_key)
    return entry_key if claim is None else claim.to_bytes(6, "big")


_KEY = key_index()


def _values(keys: Iterable[str]) -> list[bytes | str]:
    return [index_value(k) for k in dict.fromkeys(keys)]


def _json_tuple(raw: str | None) -> tuple[str, ...]:
    # A damaged list reads as empty rather than failing the whole sweep.
    try:
        value = orjson.loads(raw or "[]")
    except orjson.JSONDecodeError:
        return ()
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def decode_row(row: Sequence[Any]) -> list[Any]:
    """A stored row (columns in COLUMNS order, first) as field values: JSON lists become tuples."""
    values = list(row[: len(COLUMNS)])
    for i in _LIST_COLUMNS:
        values[i] = _json_tuple(values[i])
    return values


def encode_row(entry: ShortTermEntry) -> tuple[Any, ...]:
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
        conn, f"SELECT {SELECT_LIST} FROM short_term_entries WHERE {_KEY} IN ({{marks}})", _values(keys)
    )
    return {r[0]: ShortTermEntry(*decode_row(r)) for r in rows}


def load_raw_rows(conn: Connection, keys: Sequence[str]) -> list[tuple[Any, ...]]:
    """The stored rows among `keys`, as stored (JSON lists undecoded), in COLUMNS order."""
    return select_in(
        conn, f"SELECT {SELECT_LIST} FROM short_term_entries WHERE {_KEY} IN ({{marks}})", _values(keys)
    )


def load_raw_row(conn: Connection, key: str) -> tuple[Any, ...]:
    return tuple(
        conn.execute(
            f"SELECT {SELECT_LIST} FROM short_term_entries WHERE {_KEY} = ?", (index_value(key),)
        ).fetchone()
    )


def staged_so_far(conn: Connection) -> int:
    """About how many entries the store has staged (its highest row number: one index probe)."""
    return int(conn.execute("SELECT coalesce(max(rowid), 0) FROM short_term_entries").fetchone()[0])


def existing_keys(conn: Connection, keys: Iterable[str]) -> set[str]:
    rows = select_in(
        conn, f"SELECT entry_key FROM short_term_entries WHERE {_KEY} IN ({{marks}})", _values(keys)
    )
    return {k for (k,) in rows}


# --- staging (ingestion) ------------------------------------------------------------------------

# What a daily signal changes on an existing entry; columns other writers own (promotion) stay.
_SIGNAL_COLUMNS = (
    "daily_count",
    "total_score",
    "max_score",
    "last_recalled_at",
    "query_hashes",
    "recall_days",
    "origin_class",
    "session_kind",
    "observed_at",
    "claim_hash",
)
_UPDATE_SIGNALS = ", ".join(f"{c} = excluded.{c}" for c in _SIGNAL_COLUMNS)


class NewClaim(NamedTuple):
    """A claim staged for the first time from one signal: the values a fresh entry does not share
    with the other fresh entries of its batch."""

    entry_key: str
    path: str
    line: int
    snippet: str
    query_hash: str
    origin_class: str
    session_kind: str
    observed_at: int
    claim_hash: str


def insert_new_claims(
    conn: Connection, claims: Sequence[NewClaim], day_bucket: str, now_ms: int, score: float
) -> None:
    """Insert entries that each got one signal today (the common case of a first sweep), written
    with under half the bound values of a whole row (binding dominates the cost of a wide row).
    The per-batch constants are SQL literals: a validated day, an integer and a float."""
    days = _sql_text(orjson.dumps([day_bucket]).decode())
    conn.executemany(
        "INSERT INTO short_term_entries (entry_key, path, start_line, end_line, snippet, daily_count, total_score, "
        "max_score, first_recalled_at, last_recalled_at, query_hashes, recall_days, origin_class, session_kind, "
        "observed_at, claim_hash) "
        f"VALUES (?1, ?2, ?3, ?3, ?4, 1, {float(score)!r}, {float(score)!r}, {int(now_ms)}, "
        f"{int(now_ms)}, json_array(?5), {days}, ?6, ?7, ?8, ?9)",
        claims,
    )


def upsert_signals(conn: Connection, entries: Sequence[ShortTermEntry]) -> None:
    """Write merged entries: a new key is inserted whole, an existing one gets only the columns a
    signal changes."""
    conn.executemany(
        f"INSERT INTO short_term_entries ({SELECT_LIST}) VALUES ({','.join('?' * len(COLUMNS))}) "
        f"ON CONFLICT{_KEY} DO UPDATE SET {_UPDATE_SIGNALS}",
        [encode_row(e) for e in entries],
    )


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


# --- backfill -----------------------------------------------------------------------------------


def insert_raw_row(conn: Connection, values: Sequence[Any]) -> None:
    """Insert a whole entry given as stored values in COLUMNS order."""
    conn.execute(
        f"INSERT INTO short_term_entries({SELECT_LIST}) VALUES ({','.join('?' * len(COLUMNS))})", values
    )


def add_grounded_signal(
    conn: Connection,
    key: str,
    score: float,
    now_ms: int,
    query_hashes: str,
    recall_days: str,
    origin_class: str,
    observed_at: int,
) -> None:
    """One grounded signal on an existing entry (the JSON lists as they are to be stored)."""
    conn.execute(
        "UPDATE short_term_entries SET grounded_count = grounded_count + 1, total_score = total_score + ?, "
        "max_score = MAX(max_score, ?), last_recalled_at = ?, query_hashes = ?, recall_days = ?, "
        f"origin_class = ?, observed_at = MAX(observed_at, ?) WHERE {_KEY} = ?",
        (score, score, now_ms, query_hashes, recall_days, origin_class, observed_at, index_value(key)),
    )


def restore_raw_row(conn: Connection, values: Sequence[Any]) -> int:
    """Put back every column of an entry that still exists (values as stored, COLUMNS order)."""
    sets = ", ".join(f"{c} = ?" for c in COLUMNS[1:])
    return int(
        conn.execute(
            f"UPDATE short_term_entries SET {sets} WHERE {_KEY} = ?", [*values[1:], index_value(values[0])]
        ).rowcount
    )


# --- dreaming -----------------------------------------------------------------------------------


class PhaseSignals(NamedTuple):
    light_hits: int
    rem_hits: int
    last_light_at: int | None
    last_rem_at: int | None


def read_with_signals(
    conn: Connection, keys: Sequence[str] | None = None, *, include_promoted: bool = False
) -> list[tuple[list[Any], PhaseSignals]]:
    """Entries (all, or the given keys; unpromoted ones unless `include_promoted`) in key order,
    each as its decoded field values and its phase signals."""
    sql = (
        f"SELECT {', '.join('e.' + c for c in COLUMNS)}, "
        "COALESCE(s.light_hits, 0), COALESCE(s.rem_hits, 0), s.last_light_at, s.last_rem_at "
        "FROM short_term_entries e LEFT JOIN phase_signals s ON s.entry_key = e.entry_key"
    )
    if keys is None:
        where = "" if include_promoted else " WHERE e.promoted_at IS NULL"
        rows = conn.execute(sql + where + " ORDER BY e.entry_key").fetchall()
    else:
        clause = f" WHERE {key_index('e.entry_key')} IN ({{marks}})" + (
            "" if include_promoted else " AND e.promoted_at IS NULL"
        )
        rows = select_in(conn, sql + clause, _values(keys))
        rows.sort(key=lambda r: r[0])
    n = len(COLUMNS)
    return [(decode_row(r), PhaseSignals(int(r[n]), int(r[n + 1]), r[n + 2], r[n + 3])) for r in rows]


def mark_promoted(conn: Connection, keys: Iterable[str], now_ms: int) -> int:
    """Set promoted_at on still-unpromoted entries; return how many changed."""
    return execute_in(
        conn,
        f"UPDATE short_term_entries SET promoted_at = ? WHERE promoted_at IS NULL AND {_KEY} IN ({{marks}})",
        _values(keys),
        (now_ms,),
    )


# --- forget -------------------------------------------------------------------------------------


class EntryText(NamedTuple):
    entry_key: str
    path: str
    snippet: str


def texts_by_key(conn: Connection, keys: Sequence[str]) -> list[EntryText]:
    rows = select_in(
        conn,
        f"SELECT entry_key, path, snippet FROM short_term_entries WHERE {_KEY} IN ({{marks}})",
        _values(keys),
    )
    return [EntryText(*r) for r in rows]


def texts_by_path(conn: Connection, paths: Sequence[str]) -> list[EntryText]:
    """Entries staged from these workspace files (by the path index)."""
    rows = select_in(
        conn, "SELECT entry_key, path, snippet FROM short_term_entries WHERE path IN ({marks})", paths
    )
    return [EntryText(*r) for r in rows]


def texts_outside(conn: Connection, low: str, high: str) -> list[EntryText]:
    """Entries whose path is not in [low, high) (by the path index)."""
    rows = conn.execute(
        "SELECT entry_key, path, snippet FROM short_term_entries WHERE path < ? OR path >= ?", (low, high)
    ).fetchall()
    return [EntryText(*r) for r in rows]


def delete_entries(conn: Connection, keys: Sequence[str]) -> int:
    return execute_in(conn, f"DELETE FROM short_term_entries WHERE {_KEY} IN ({{marks}})", _values(keys))


_REWRITE = "temp.short_term_rewrite"  # temp_store is memory: the copies never reach a file
# A row's stored text (a lower bound of its cell size; daemon/store/pages.py).
_ROW_BYTES = "length(entry_key) + length(path) + length(snippet) + length(query_hashes) + length(recall_days)"


def purge_entries(conn: Connection, keys: Sequence[str]) -> int:
    """Delete these entries and rewrite the rows that shared their pages, so no older copy of
    them stays in a page's free gap (daemon/store/pages.py); the number deleted."""
    rowids = [
        r[0]
        for r in select_in(
            conn, f"SELECT rowid FROM short_term_entries WHERE {_KEY} IN ({{marks}})", _values(keys)
        )
    ]
    deleted = delete_entries(conn, keys)
    around = rows_sharing_pages(conn, "short_term_entries", _ROW_BYTES, rowids)
    if around:
        _rewrite_rows(conn, around)
    return deleted


def _rewrite_rows(conn: Connection, rowids: Sequence[int]) -> None:
    """Delete and reinsert these rows, unchanged and under the same rowids."""
    name = _REWRITE.split(".")[1]
    conn.execute(
        f"CREATE TEMP TABLE IF NOT EXISTS {name} AS SELECT rowid AS rid, * FROM short_term_entries WHERE 0"
    )
    conn.execute(f"DELETE FROM {_REWRITE}")
    execute_in(
        conn,
        f"INSERT INTO {_REWRITE} SELECT rowid, * FROM short_term_entries WHERE rowid IN ({{marks}})",
        rowids,
    )
    execute_in(conn, "DELETE FROM short_term_entries WHERE rowid IN ({marks})", rowids)
    conn.execute(
        f"INSERT INTO short_term_entries(rowid, {SELECT_LIST}) SELECT rid, {SELECT_LIST} FROM {_REWRITE} ORDER BY rid"
    )
    conn.execute(f"DELETE FROM {_REWRITE}")
