"""Chunk vectors (`memory_index_vectors`): little-endian float32 BLOBs keyed by chunk rowid,
written and purged with their chunks (store/index_chunks.py). With sqlite-vec loaded the
nearest neighbours are found inside SQLite; otherwise index/vectors.py reads them for numpy.

Each function runs inside the caller's transaction.
"""

from __future__ import annotations

from memoryd.store.engine import Connection


def nearest_in_sqlite(
    conn: Connection, query: bytes, model: str, dims: int, k: int
) -> list[tuple[int, float]]:
    """(chunk rowid, cosine) of the k vectors of `model` most similar to `query`, by
    sqlite-vec's vec_distance_cosine (the extension must be loaded); ties by rowid."""
    rows = conn.execute(
        "SELECT chunk_rowid, 1.0 - vec_distance_cosine(embedding, ?) AS sim FROM memory_index_vectors "
        "WHERE model = ? AND dims = ? ORDER BY sim DESC, chunk_rowid LIMIT ?",
        (query, model, dims, k),
    ).fetchall()
    return [(int(r), float(s)) for r, s in rows]


def vectors_of_model(conn: Connection, model: str, dims: int) -> list[tuple[int, bytes]]:
    """(chunk rowid, embedding) of every vector of `model`, by rowid."""
    return conn.execute(
        "SELECT chunk_rowid, embedding FROM memory_index_vectors WHERE model = ? AND dims = ? ORDER BY chunk_rowid",
        (model, dims),
    ).fetchall()


def all_embeddings(conn: Connection) -> list[bytes]:
    """Every stored vector (the erasure verifier compares them with the erased text's)."""
    return [r[0] for r in conn.execute("SELECT embedding FROM memory_index_vectors")]
