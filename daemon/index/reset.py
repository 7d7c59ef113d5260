"""`memoryd reset`: drop everything the index derived (chunks, full-text and vector rows,
sources, the embedding cache), under the workspace lock. Lineage, staged entries, checkpoints
and forgotten-session records are kept: `memoryd index` rebuilds the index from them and the
memory files, and a forgotten session stays forgotten."""

from __future__ import annotations

from memoryd.agent_runtime import AgentRuntime
from memoryd.index.purge import PurgeCounts, clear_embedding_cache, remove_sources
from memoryd.index.report import ResetReport
from memoryd.store.engine import Connection
from memoryd.store.index_chunks import orphan_chunk_files
from memoryd.store.index_sources import all_sources
from memoryd.store.index_state import set_dirty

RESET_REASON = "the index was reset; run `memoryd index` to rebuild it"


def _reset(conn: Connection) -> tuple[PurgeCounts, int]:
    keys = [(s.path, s.source) for s in all_sources(conn)]
    keys += [(path, source) for path, source, _session in orphan_chunk_files(conn)]
    counts = remove_sources(conn, keys)
    cached = clear_embedding_cache(conn)
    set_dirty(conn, RESET_REASON)  # search says the index is stale until it is rebuilt
    return counts, cached


async def reset_index(rt: AgentRuntime) -> ResetReport:
    store = rt.require_store()
    async with rt.lock().hold() as lease:
        counts, cached = await store.write(_reset, fence=lease.fence)
    return ResetReport(
        agent_id=rt.agent_id,
        index_sources=counts.sources,
        index_chunks=counts.chunks,
        fts_rows=counts.fts_rows,
        vector_rows=counts.vector_rows,
        embedding_cache_rows=cached,
    )
