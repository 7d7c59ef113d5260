"""The daemon's own arq worker, run in-process over real Redis (burst mode: until its queue is
empty), for tests that enqueue jobs and want them run."""

from __future__ import annotations

from typing import Any

from memoryd.ingest.live_hints import LiveHints
from memoryd.runtime.jobs import LIVE_HINTS
from memoryd.runtime.served import SERVED, ServedAgents
from memoryd.runtime.service import arq_pool
from memoryd.runtime.worker import MemorydWorker, worker_kwargs
from memoryd.settings import Settings


async def run_jobs(
    settings: Settings,
    queue: str,
    agents: frozenset[str] = frozenset({"main"}),
    hints: LiveHints | None = None,
) -> MemorydWorker:
    """Run the queue empty with the daemon's own worker configuration (and, as the service
    gives its worker, the live-ingestion hints)."""
    pool = arq_pool(settings, queue)
    ctx: dict[str, Any] = {
        "settings": settings,
        SERVED: ServedAgents(agents),
        "host_id": settings.daemon.host_id,
    }
    if hints is not None:
        ctx[LIVE_HINTS] = hints
    worker = MemorydWorker(**{**worker_kwargs(settings, queue, ctx), "burst": True}, redis_pool=pool)
    try:
        await worker.main()
    finally:
        await pool.aclose(close_connection_pool=True)
    return worker
