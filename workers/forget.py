"""`forget` job: a ForgetRequest payload → daemon.forget.run.run_forget → ForgetReport JSON.

A dry run uses a read-only store without Redis: no lock, no writes, not even a schema.
An apply holds the workspace lock for the whole purge (see workers.base.purge_lock). A rerun
of the same request converges (the domain's guarantee), so arq's at-least-once is safe.
"""

from __future__ import annotations

from typing import Any

from daemon.jobs import FORGET
from workers.base import domain, dump, ensure_served, observed, parse_payload, purge_lock, runtime


@observed(FORGET)
async def forget(ctx: dict[str, Any], payload: Any) -> dict[str, Any]:
    request_model = domain("daemon.forget.request", "ForgetRequest", FORGET)
    run_forget = domain("daemon.forget.run", "run_forget", FORGET)
    request = parse_payload(request_model, payload, FORGET)
    ensure_served(ctx, request.agent, FORGET)
    if request.dry_run:
        async with runtime(ctx, request.agent, readonly=True) as rt:
            return dump(await run_forget(rt, request))
    async with runtime(ctx, request.agent) as rt, purge_lock(rt, FORGET):
        return dump(await run_forget(rt, request))
