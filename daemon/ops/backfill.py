"""`backfill`: historical session backfill of an agent. A preview writes nothing (read-only
store, no Redis); apply and rollback write under the workspace lock inside the domain."""

from __future__ import annotations

from pydantic import BaseModel

from memoryd.dreaming.backfill_request import BackfillRequest
from memoryd.ops.op import JobContract, JobPolicy, LockPolicy, Op, OpContext, Routing


async def _run(ctx: OpContext, request: BackfillRequest) -> BaseModel:
    from memoryd.dreaming.backfill import run_backfill

    return await run_backfill(ctx.agent_runtime(), request)


def _result() -> type[BaseModel]:
    from memoryd.dreaming.report import BackfillReport

    return BackfillReport


def _lock(request: BackfillRequest) -> LockPolicy:
    return LockPolicy.NONE if request.mode == "preview" else LockPolicy.IN_DOMAIN


OP = Op(
    contract=JobContract(
        name="backfill",
        summary="historical session backfill",
        request=BackfillRequest,
        result=_result,
        routing=Routing.AGENT,
        command="backfill",
    ),
    run=_run,
    policy=JobPolicy(
        lock=_lock,
        background=True,
    ),
)
