"""`forget`: purge what was derived from chosen sessions of one agent; `dry_run` previews.

A preview reads a read-only store without Redis: no lock, no writes, not even a schema. A
purge holds the workspace lock for its whole run (plan and apply), then deletes earlier job
arguments and results in Redis that name what it forgot (daemon/ops/forget_redis.py). A rerun of the same
request converges, so arq's at-least-once delivery is safe.
"""

from __future__ import annotations

from pydantic import BaseModel

from memoryd.forget.request import ForgetRequest
from memoryd.ops.op import JobContract, JobPolicy, LockPolicy, Op, OpContext, Routing


async def _run(ctx: OpContext, request: ForgetRequest) -> BaseModel:
    from memoryd.forget.run import preview_forget, purge

    if request.dry_run:
        return await preview_forget(ctx.agent_runtime(), request)
    # Imported here: it loads redis and arq, which a dry run never uses.
    from memoryd.ops.forget_redis import purge_forgotten_from_redis

    report = await purge(ctx.agent_runtime(), request, ctx.require_lease())
    await purge_forgotten_from_redis(ctx.settings, ctx.require_redis(), request.agent, report.sessionIds)
    return report


def _result() -> type[BaseModel]:
    from memoryd.forget.report import ForgetReport

    return ForgetReport


def _lock(request: ForgetRequest) -> LockPolicy:
    return LockPolicy.NONE if request.dry_run else LockPolicy.WHOLE_RUN


OP = Op(
    contract=JobContract(
        name="forget",
        summary="purge what was derived from selected sessions of one agent; `dry_run` previews",
        request=ForgetRequest,
        result=_result,
        routing=Routing.AGENT,
        command="forget",
        purge=True,
    ),
    run=_run,
    policy=JobPolicy(
        lock=_lock,
    ),
)
