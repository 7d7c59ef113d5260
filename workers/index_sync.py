"""`index_sync` job: {"agent", "force"} → daemon.index.sync.run_index_sync → IndexReport JSON.
Publication takes the workspace lock inside the domain; chunking and embedding run outside it."""

from __future__ import annotations

import time
from typing import Any

from daemon.jobs import INDEX_SYNC, IndexRequest
from workers.base import domain, dump, ensure_served, observed, parse_payload, runtime, sweep_done


@observed(INDEX_SYNC)
async def index_sync(ctx: dict[str, Any], payload: Any) -> dict[str, Any]:
    run_index_sync = domain("daemon.index.sync", "run_index_sync", INDEX_SYNC)
    request = parse_payload(IndexRequest, payload, INDEX_SYNC)
    ensure_served(ctx, request.agent, INDEX_SYNC)
    started = time.monotonic()
    async with runtime(ctx, request.agent) as rt:
        report = dump(await run_index_sync(rt, force=request.force))
    sweep_done(INDEX_SYNC, request.agent, time.monotonic() - started)
    return report
