"""`backfill` job: a BackfillRequest payload → daemon.dreaming.backfill.run_backfill →
BackfillReport JSON. Apply and rollback write under the workspace lock inside the domain."""

from __future__ import annotations

from typing import Any

from daemon.jobs import BACKFILL
from workers.base import domain, dump, ensure_served, observed, parse_payload, runtime


@observed(BACKFILL)
async def backfill(ctx: dict[str, Any], payload: Any) -> dict[str, Any]:
    request_model = domain("daemon.dreaming.backfill", "BackfillRequest", BACKFILL)
    run_backfill = domain("daemon.dreaming.backfill", "run_backfill", BACKFILL)
    request = parse_payload(request_model, payload, BACKFILL)
    ensure_served(ctx, request.agent, BACKFILL)
    async with runtime(ctx, request.agent) as rt:
        return dump(await run_backfill(rt, request))
