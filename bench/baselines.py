"""The bare operations each product figure is compared with, on the same data in the same run.

Each is the floor of what the product does: parsing the same JSONL with orjson, stat-ing the
same files, inserting the same chunks into a bare FTS5 table, a no-op arq job round trip with
the same polls, one indexed UPDATE over the same rows.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

try:  # the same SQLite build the product uses (3.51, FTS5 secure-delete)
    import pysqlite3.dbapi2 as sqlite3  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover
    import sqlite3  # type: ignore[no-redef]


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def orjson_parse(paths: Iterable[Path]) -> tuple[int, int]:
    """Parse every line and pull out role and text, as any transcript reader must.

    Returns (messages, text characters).
    """
    messages = 0
    chars = 0
    for path in paths:
        with open(path, "rb") as fh:
            for line in fh:
                obj = orjson.loads(line)
                if obj.get("type") == "message":
                    msg = obj.get("message") or {}
                    if msg.get("role"):
                        messages += 1
                        chars += len(_message_text(msg))
    return messages, chars


def stat_loop(paths: Iterable[Path]) -> int:
    n = 0
    for path in paths:
        os.stat(path)
        n += 1
    return n


def transcript_chunks(paths: Iterable[Path], chunk_chars: int = 1600) -> list[str]:
    """Message text cut into chunks of about `chunk_chars` (the index's default 400 tokens)."""
    out: list[str] = []
    for path in paths:
        buf = ""
        with open(path, "rb") as fh:
            for line in fh:
                obj = orjson.loads(line)
                if obj.get("type") == "message":
                    buf += _message_text(obj.get("message") or {}) + "\n"
                    while len(buf) >= chunk_chars:
                        out.append(buf[:chunk_chars])
                        buf = buf[chunk_chars:]
        if buf:
            out.append(buf)
    return out


def connect(path: Path) -> Any:
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA cache_size = -65536")
    return conn


FTS_DDL = "CREATE VIRTUAL TABLE fts USING fts5(text, tokenize='unicode61 remove_diacritics 2')"


def fts5_insert(db_path: Path, chunks: list[str]) -> int:
    """One executemany into a fresh FTS5 table that keeps its own content (the product's tokenizer;
    the product's table reads its content from the chunk rows), one txn."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
    build_fts(db_path, chunks)
    return len(chunks)


def build_fts(db_path: Path, chunks: Iterable[str]) -> None:
    conn = connect(db_path)
    try:
        conn.execute(FTS_DDL)
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO fts(rowid, text) VALUES (?, ?)", enumerate(chunks, 1))
        conn.execute("COMMIT")
    finally:
        conn.close()


def fts_unranked_match(conn: Any, query: str, limit: int = 10) -> int:
    return len(conn.execute("SELECT rowid FROM fts WHERE fts MATCH ? LIMIT ?", (query, limit)).fetchall())


def build_provenance_table(db_path: Path, subject: str, children: int, others: int) -> Any:
    """A table of provenance rows: `children` cite `subject`, `others` cite other subjects."""
    conn = connect(db_path)
    conn.execute(
        "CREATE TABLE prov (id INTEGER PRIMARY KEY, parent TEXT, parent_hash TEXT, "
        "parent_created_at INTEGER, content TEXT)"
    )
    conn.execute("CREATE INDEX prov_parent ON prov(parent)")
    conn.execute("BEGIN")
    rows = [
        (
            subject if i < children else f"user:u-{i % 5000}",
            uuid.uuid4().hex,
            1_790_000_000_000 + i,
            f"derived note {i}",
        )
        for i in range(children + others)
    ]
    conn.executemany(
        "INSERT INTO prov(parent, parent_hash, parent_created_at, content) VALUES (?, ?, ?, ?)", rows
    )
    conn.execute("COMMIT")
    return conn


def indexed_update(conn: Any, subject: str) -> int:
    """Rewrite the provenance of every row citing `subject` in one indexed UPDATE (one txn)."""
    conn.execute("BEGIN")
    cur = conn.execute(
        "UPDATE prov SET parent = 'TOMBSTONE:' || hex(randomblob(8)), parent_hash = NULL, "
        "parent_created_at = parent_created_at / 86400000 * 86400000 WHERE parent = ?",
        (subject,),
    )
    n = cur.rowcount
    conn.execute("ROLLBACK")  # so every repetition rewrites the same rows
    return int(n)


async def noop(ctx: dict[str, Any], payload: dict[str, Any] | None = None) -> dict[str, Any]:
    """A job that does nothing but return `result_bytes` of JSON, so storing, reading and
    decoding a result of the product's size is counted on both sides of the comparison."""
    size = int((payload or {}).get("result_bytes", 0))
    return {"pad": "x" * size} if size else {}
