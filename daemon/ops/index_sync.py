"""`index_sync`: sync an agent's search index. Publication takes the workspace lock inside the
domain; chunking and embedding run outside it. A report that discarded prepared work (a
source changed or a session was forgotten meanwhile) exits 1: run it again."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, StrictBool

from memoryd.errors import MemorydError, OperationFailed
from memoryd.ops.agent_request import AgentRequest, LiveGeneration
from memoryd.ops.op import JobContract, JobPolicy, LockPolicy, Op, OpContext, Routing

if TYPE_CHECKING:
    from memoryd.settings import Settings


class IndexRequest(AgentRequest):
    force: StrictBool = Field(default=False, description="Re-chunk and re-embed even unchanged sources.")
    live: LiveGeneration = None


async def _run(ctx: OpContext, request: IndexRequest) -> BaseModel:
    from memoryd.index.sync import run_index_sync

    return await run_index_sync(
        ctx.agent_runtime(),
        force=request.force,
        progress=ctx.progress,
        consider=ctx.hints.lookup(request.live) if ctx.hints else None,
    )


def _result() -> type[BaseModel]:
    from memoryd.index.report import IndexReport

    return IndexReport


def _lock(request: IndexRequest) -> LockPolicy:
    return LockPolicy.IN_DOMAIN


def _interval_s(settings: Settings) -> float:
    return settings.index.interval_s


def _outcome(result: Mapping[str, Any]) -> MemorydError | None:
    from memoryd.index.report import IndexReport
    from memoryd.ops.result import read_result

    report = read_result(IndexReport, result)
    if report is None or report.ok:  # None: another version's result, nothing to read
        return None
    return OperationFailed(
        "index_sync: prepared work was discarded at publication (see discarded); run it again"
    )


OP = Op(
    contract=JobContract(
        name="index_sync",
        summary="sync an agent's search index",
        request=IndexRequest,
        result=_result,
        routing=Routing.AGENT,
        outcome=_outcome,
        command="index",
    ),
    run=_run,
    policy=JobPolicy(
        lock=_lock,
        interval_s=_interval_s,
        sweep=True,
    ),
)
