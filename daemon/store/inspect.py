"""Whole-store inspection for the erasure verifier, whatever the schema: compaction (so deleted
bytes leave the files) and every stored text value of every ordinary table (FTS and vec shadow
tables included: the verifier looks where no repository would).

Each function runs on the store's thread; `stored_values` inside a read transaction.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from memoryd.store.engine import Connection

INTEGER_FORM_MIN_BYTES = 6  # a needle this long matches random bytes once in 2**48 places


def compact(conn: Connection) -> str | None:
    """Checkpoint, merge FTS segments, rebuild the file, checkpoint again. A problem string or None."""
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%USING fts5%'"
    ).fetchall():
        conn.execute(f'INSERT INTO "{name}"("{name}") VALUES (\'optimize\')')
    conn.execute("VACUUM")
    busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    if busy and busy[0]:
        return "WAL checkpoint was blocked by a reader; WAL not truncated"
    return None


def _stored_cells(conn: Connection) -> Iterator[tuple[str, str, Any]]:
    """(table, column, value) of every cell of every ordinary table. Virtual tables are read
    through their shadow tables: selecting a contentless table yields NULLs."""
    tables = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
    ).fetchall()
    for name, sql in tables:
        if (sql or "").upper().startswith("CREATE VIRTUAL TABLE"):
            continue
        cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{name}")')]
        for row in conn.execute(f'SELECT * FROM "{name}"'):
            for col, value in zip(cols, row, strict=True):
                yield name, col, value


def stored_values(conn: Connection) -> Iterator[tuple[str, str, str]]:
    """(table, column, text) of every text or blob value (blobs decoded as UTF-8, ignoring what
    is not) of every ordinary table."""
    for name, col, value in _stored_cells(conn):
        if isinstance(value, bytes):
            value = value.decode("utf-8", "ignore")
        if isinstance(value, str):
            yield name, col, value


def stored_integers(conn: Connection) -> Iterator[tuple[str, str, int]]:
    """(table, column, value) of every integer value of every ordinary table: a column that
    can hold a time can hold an erased object's exact millisecond."""
    for name, col, value in _stored_cells(conn):
        if type(value) is int:
            yield name, col, value


def integer_byte_forms(number: int) -> tuple[bytes, ...]:
    """The bytes a non-negative integer below 2**48 takes in a database file, those of at least
    INTEGER_FORM_MIN_BYTES: in a record (a column, an index key) SQLite stores it big-endian in
    the fewest of 1, 2, 3, 4, 6 or 8 bytes (from 2**31, 6; from 2**47, 8 with two zero bytes
    first: its 6-byte form is in both); as a rowid it is a varint (7 bits a byte, the high bit
    set on every byte but the last). Shorter forms would match any file by chance; a claim
    number is below 2**35 once in 8,192, and is then found as a row's value only."""
    if not 0 <= number < 1 << 48:
        raise ValueError(f"not a 48-bit integer: {number}")
    groups = []
    rest = number
    while True:
        groups.append(rest & 0x7F)
        rest >>= 7
        if not rest:
            break
    varint = bytes([g | 0x80 for g in reversed(groups[1:])] + [groups[0]])
    record = number.to_bytes(6, "big") if number >= 1 << 31 else b""
    return tuple(f for f in (record, varint) if len(f) >= INTEGER_FORM_MIN_BYTES)


def fts_index_terms(conn: Connection) -> Iterator[tuple[str, int, str]]:
    """(table, doc rowid, term) of every FTS5 table, read from its index segments (fts5vocab):
    what the index holds, whatever its content table says."""
    for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%USING fts5%'"
    ).fetchall():
        vocab = f"verify_vocab_{name}"
        conn.execute(
            f'CREATE VIRTUAL TABLE IF NOT EXISTS temp."{vocab}" USING fts5vocab(main, "{name}", instance)'
        )
        try:
            for term, doc in conn.execute(f'SELECT term, doc FROM temp."{vocab}"'):
                yield name, int(doc), str(term)
        finally:
            conn.execute(f'DROP TABLE temp."{vocab}"')


def chunk_texts(conn: Connection) -> dict[int, str]:
    """The memory index's chunk text by rowid: the FTS rows' content (index/publish.py)."""
    return {int(r[0]): r[1] for r in conn.execute("SELECT rowid, text FROM memory_index_chunks")}
