"""Chunk vectors: little-endian float32 BLOBs in `memory_index_vectors`, keyed by chunk rowid.

Nearest neighbours are exact (brute-force cosine) either way:
* with sqlite-vec loaded, `vec_distance_cosine` scans the BLOB table inside SQLite, so no
  vector leaves the database (no second copy of the vectors to keep in step or to purge);
* without it, numpy computes the same cosine in process over the matrix of the vectors, which
  a long-lived process keeps (VectorMatrices) per (database, index revision, model) — any
  publish or purge bumps the revision.
Ties are broken by chunk rowid in both, so the two backends return the same ranking.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from memoryd.store.engine import Connection, database_file, has_vector_extension
from memoryd.store.index_state import current_revision
from memoryd.store.index_vectors import nearest_in_sqlite, vectors_of_model

if TYPE_CHECKING:
    import numpy as np

# numpy is imported by the functions that compute with vectors: a search without an embedder
# loads this module (its VectorMatrices cache) but compares no vector, and its start-up should
# not pay for numpy.


def to_blob(vector: np.ndarray) -> bytes:
    import numpy as np

    return np.asarray(vector, dtype="<f4").tobytes()


def from_blob(blob: bytes) -> np.ndarray:
    import numpy as np

    return np.frombuffer(blob, dtype="<f4")


def backend_for(conn: Connection) -> str:
    return "sqlite-vec" if has_vector_extension(conn) else "numpy"


def nearest(
    conn: Connection,
    query: np.ndarray,
    model: str,
    k: int,
    backend: str | None = None,
    matrices: VectorMatrices | None = None,
) -> list[tuple[int, float]]:
    """The k chunk rowids most similar to `query` among vectors of `model`: (rowid, cosine).
    `matrices` keeps the numpy backend's matrix for the next search (None: read every time)."""
    import numpy as np

    if k <= 0:
        return []
    query = np.asarray(query, dtype=np.float32)
    backend = backend or backend_for(conn)
    if backend == "sqlite-vec" and has_vector_extension(conn):  # loads it here if not yet
        return nearest_in_sqlite(conn, to_blob(query), model, int(query.shape[0]), k)
    rowids, matrix = _matrix(conn, model, int(query.shape[0]), matrices)
    if not len(rowids):
        return []
    norms = np.linalg.norm(matrix, axis=1) * max(float(np.linalg.norm(query)), 1e-12)
    sims = (matrix @ query) / np.maximum(norms, 1e-12)
    if len(sims) > k:
        # Keep everything tied with the k-th best so the rowid tie-break matches SQL's.
        kth = np.partition(-sims, k - 1)[k - 1]
        keep = np.nonzero(-sims <= kth)[0]
    else:
        keep = np.arange(len(sims))
    order = keep[np.lexsort((rowids[keep], -sims[keep]))][:k]
    return [(int(rowids[i]), float(sims[i])) for i in order]


MatrixKey = tuple[str, int, str, int]  # (database file, index revision, model, dims)


class VectorMatrices:
    """The last vector matrix read (rowids, float32 rows), by MatrixKey: one entry, since a
    daemon searches one agent at a time. Searches on several stores' threads may share it."""

    CACHE_NAME = "vectors"  # its key in ProcessCaches.sizes()

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: tuple[MatrixKey, np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return 0 if self._last is None else 1

    def get(self, key: MatrixKey) -> tuple[np.ndarray, np.ndarray] | None:
        with self._lock:
            last = self._last
        return (last[1], last[2]) if last is not None and last[0] == key else None

    def put(self, key: MatrixKey, rowids: np.ndarray, matrix: np.ndarray) -> None:
        with self._lock:
            self._last = (key, rowids, matrix)

    def clear(self) -> None:
        with self._lock:
            self._last = None


def _matrix(
    conn: Connection, model: str, dims: int, matrices: VectorMatrices | None
) -> tuple[np.ndarray, np.ndarray]:
    import numpy as np

    db_file = database_file(conn)
    key = (db_file, current_revision(conn), model, dims)
    if matrices is not None and db_file:  # an in-memory database has no identity to key by
        hit = matrices.get(key)
        if hit is not None:
            return hit
    rows = vectors_of_model(conn, model, dims)
    rowids = np.fromiter((r for r, _ in rows), dtype=np.int64, count=len(rows))
    matrix = (
        np.frombuffer(b"".join(b for _, b in rows), dtype="<f4").reshape(len(rows), dims)
        if rows
        else np.zeros((0, dims), dtype=np.float32)
    )
    if matrices is not None and db_file:
        matrices.put(key, rowids, matrix)
    return rowids, matrix
