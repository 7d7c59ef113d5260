"""`expire` job: an ExpireRequest payload ({} today) → daemon.retention.api.run_expire →
ExpireReport JSON. Expiry is host-wide: it hides scopes past their TTL from reads and dreaming
(provenance stays resolvable for audit) and purges them `retention.expired_purge_after_days` later."""

from __future__ import annotations

from typing import Any

from daemon.jobs import EXPIRE
from workers.base import domain, dump, observed, parse_payload, settings_of


async def run_expiry(ctx: dict[str, Any], payload: Any, job: str) -> dict[str, Any]:
    request_model = domain("daemon.retention.request", "ExpireRequest", job)
    run_expire = domain("daemon.retention.api", "run_expire", job)
    parse_payload(request_model, payload, job)
    return dump(await run_expire(settings_of(ctx), ctx["redis"]))


@observed(EXPIRE)
async def expire(ctx: dict[str, Any], payload: Any) -> dict[str, Any]:
    return await run_expiry(ctx, payload, EXPIRE)
