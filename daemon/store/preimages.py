"""Rewrite preimages of MEMORY.md (`memory_backups`, "dreaming-memory-backups", reference §1,
§5.7): the content before an accepted consolidation rewrite, at most MAX_REWRITE_PREIMAGES kept.
Forget scrubs them in place (`rewrite_preimage`).

Each function runs inside the caller's transaction.
"""

from __future__ import annotations

from memoryd.constants import MAX_REWRITE_PREIMAGES
from memoryd.fileio import sha256_hex
from memoryd.store.engine import Connection, inserted_rowid


def store_preimage(conn: Connection, content: str, now_ms: int, relative_path: str = "MEMORY.md") -> int:
    """Insert a preimage before the rewrite is published; return its row id.

    Older preimages are pruned only after the rewrite commits (`prune_preimages`), so a
    rewrite that fails never costs an older preimage.
    """
    cur = conn.execute(
        "INSERT INTO memory_backups(created_at, relative_path, content, content_hash) VALUES (?, ?, ?, ?)",
        (now_ms, relative_path, content, sha256_hex(content)),
    )
    return inserted_rowid(cur)


def prune_preimages(conn: Connection) -> int:
    """Keep the newest MAX_REWRITE_PREIMAGES; return how many were removed."""
    return int(
        conn.execute(
            "DELETE FROM memory_backups WHERE id NOT IN "
            "(SELECT id FROM memory_backups ORDER BY created_at DESC, id DESC LIMIT ?)",
            (MAX_REWRITE_PREIMAGES,),
        ).rowcount
    )


def drop_preimage(conn: Connection, row_id: int) -> None:
    """Undo `store_preimage` when the rewrite it preceded did not commit."""
    conn.execute("DELETE FROM memory_backups WHERE id = ?", (row_id,))


def list_preimages(conn: Connection) -> list[tuple[int, int, str, str]]:
    return conn.execute(
        "SELECT id, created_at, content_hash, content FROM memory_backups ORDER BY created_at, id"
    ).fetchall()


def preimage_rows(conn: Connection) -> list[tuple[int, str, str, str]]:
    """(id, relative_path, content, content_hash) of every preimage, by id."""
    return conn.execute(
        "SELECT id, relative_path, content, content_hash FROM memory_backups ORDER BY id"
    ).fetchall()


def rewrite_preimage(
    conn: Connection, row_id: int, content: str, content_hash: str, expected_hash: str
) -> bool:
    """Replace a preimage's content if it still has `expected_hash`; False if it changed or went."""
    cur = conn.execute(
        "UPDATE memory_backups SET content = ?, content_hash = ? WHERE id = ? AND content_hash = ?",
        (content, content_hash, row_id, expected_hash),
    )
    return cur.rowcount == 1
