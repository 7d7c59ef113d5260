"""The memory index (reference §6): chunking, FTS5, vectors, the embedding cache and search.

Entry points: `memoryd.index.sync.run_index_sync(rt, force=False)` and
`memoryd.index.search.run_search(rt, query, limit=10)`. Forget removes index rows with
`memoryd.index.purge.purge_chunks(conn, chunk_ids)`.
"""
