"""`expire`: apply retention TTLs now (host-wide). It hides scopes past their TTL from reads
and dreaming (provenance stays resolvable for audit) and purges them
`retention.expired_purge_after_days` later. The payload takes no fields today."""

from __future__ import annotations

from pydantic import BaseModel

from memoryd.ops.op import JobContract, JobPolicy, LockPolicy, Op, OpContext, Routing
from memoryd.retention.request import ExpireRequest


async def run_expiry(ctx: OpContext, request: ExpireRequest) -> BaseModel:
    from memoryd.retention.expire import run_expire

    return await run_expire(ctx.settings, ctx.require_redis(), request)


def expiry_report() -> type[BaseModel]:
    from memoryd.retention.models import ExpireReport

    return ExpireReport


def takes_retention_lease(request: ExpireRequest) -> LockPolicy:
    return LockPolicy.IN_DOMAIN


OP = Op(
    contract=JobContract(
        name="expire",
        summary="apply retention TTLs now (host-wide)",
        request=ExpireRequest,
        result=expiry_report,
        routing=Routing.HOST,
        command="expire",
        purge=True,
    ),
    run=run_expiry,
    policy=JobPolicy(
        lock=takes_retention_lease,
    ),
)
