"""The embedding cache (`memory_embedding_cache`, reference §6): vectors by (provider, model,
provider key, chunk content hash), so unchanged text is not embedded again. Agent-wide and
recomputable; written in the same transaction as the chunks it serves, so a refused publication
leaves no cached embedding of purged text behind (reference §6.3 point 4).

Each function runs inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence

from memoryd.store.batched import select_in
from memoryd.store.engine import Connection

# provider, model, provider_key, hash, embedding, dims, updated_at
CacheValues = tuple[str, str, str, str, bytes, int, int]


def cached_embeddings(
    conn: Connection, provider: str, model: str, provider_key: str, hashes: Sequence[str]
) -> dict[str, bytes]:
    """hash -> embedding of the cached ones among `hashes` (primary-key lookups)."""
    rows = select_in(
        conn,
        "SELECT hash, embedding FROM memory_embedding_cache WHERE provider = ? AND model = ? "
        "AND provider_key = ? AND hash IN ({marks})",
        hashes,
        before=(provider, model, provider_key),
    )
    return {h: blob for h, blob in rows}


def cache_embeddings(conn: Connection, rows: Sequence[CacheValues]) -> None:
    conn.executemany(
        "INSERT INTO memory_embedding_cache(provider, model, provider_key, hash, embedding, dims, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(provider, model, provider_key, hash) "
        "DO UPDATE SET updated_at = excluded.updated_at",
        rows,
    )


def clear_cache(conn: Connection) -> int:
    """The whole agent cache (recomputable), as the reference's newest forget does (§7.6)."""
    return int(conn.execute("DELETE FROM memory_embedding_cache").rowcount)


def cached_count(conn: Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM memory_embedding_cache").fetchone()[0])


def all_cached_embeddings(conn: Connection) -> list[bytes]:
    """Every cached vector (the erasure verifier compares them with the erased text's)."""
    return [r[0] for r in conn.execute("SELECT embedding FROM memory_embedding_cache")]
