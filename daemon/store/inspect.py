"""Whole-store inspection for the erasure verifier, whatever the schema: compaction (so deleted
bytes leave the files) and every stored text value of every ordinary table (FTS and vec shadow
tables included: the verifier looks where no repository would).

Each function runs on the store's thread; `stored_values` inside a read transaction.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from memoryd.store.engine import Connection


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
