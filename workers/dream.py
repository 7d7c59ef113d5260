"""`dream` job: {"agent", "phases"} → daemon.dreaming.sweep.run_dreaming → DreamReport JSON.
Writes to DREAMS.md / MEMORY.md take the workspace lock inside the domain; model calls run outside it."""

from __future__ import annotations

import time
from typing import Any

from daemon.jobs import DREAM, DreamRequest
from workers.base import domain, dump, ensure_served, observed, parse_payload, runtime, sweep_done


@observed(DREAM)
async def dream(ctx: dict[str, Any], payload: Any) -> dict[str, Any]:
    run_dreaming = domain("daemon.dreaming.sweep", "run_dreaming", DREAM)
    request = parse_payload(DreamRequest, payload, DREAM)
    ensure_served(ctx, request.agent, DREAM)
    started = time.monotonic()
    async with runtime(ctx, request.agent) as rt:
        report = dump(await run_dreaming(rt, phases=request.phases))
    sweep_done(DREAM, request.agent, time.monotonic() - started)
    return report
