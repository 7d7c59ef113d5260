"""`backfill`: historical session backfill of an agent. A preview writes nothing (read-only
store, no Redis); apply and rollback write under the workspace lock inside the domain."""

from __future__ import annotations

from pydantic import BaseModel

from memoryd.dreaming.backfill_request import BackfillRequest
from memoryd.ops.op import LockPolicy, Op, OpContext, Routing


async def _run(ctx: OpContext, request: BackfillRequest) -> BaseModel:
    from memoryd.dreaming.backfill import run_backfill

    return await run_backfill(ctx.agent_runtime(), request)


def _result() -> type[BaseModel]:
    from memoryd.dreaming.report import BackfillReport

    return BackfillReport


def _lock(request: BackfillRequest) -> LockPolicy:
    return LockPolicy.NONE if request.mode == "preview" else LockPolicy.IN_DOMAIN


OP = Op(
    name="backfill",
    summary="historical session backfill",
    request=BackfillRequest,
    run=_run,
    result=_result,
    routing=Routing.AGENT,
    lock=_lock,
    command="backfill",
    background=True,
)
