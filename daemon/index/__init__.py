"""The memory index (reference §6): chunking, FTS5, vectors, the embedding cache and search.

Entry points: `daemon.index.sync.run_index_sync(rt, force=False)` and
`daemon.index.search.run_search(rt, query, limit=10)`. Forget removes index rows with
`daemon.index.purge.purge_chunks(conn, chunk_ids)`.
"""
