"""`dream`: dreaming phases (light, REM, deep) of an agent. Writes to DREAMS.md / MEMORY.md take
the workspace lock inside the domain; model calls run outside it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from memoryd.ops.agent_request import AgentRequest
from memoryd.ops.op import JobContract, JobPolicy, LockPolicy, Op, OpContext, Routing

if TYPE_CHECKING:
    from memoryd.settings import Settings


class DreamRequest(AgentRequest):
    phases: tuple[Literal["light", "rem", "deep"], ...] = Field(
        default=("light", "rem", "deep"), min_length=1, description="Dreaming phases to run, in order."
    )


async def _run(ctx: OpContext, request: DreamRequest) -> BaseModel:
    from memoryd.dreaming.sweep import run_dreaming

    return await run_dreaming(ctx.agent_runtime(), phases=request.phases)


def _result() -> type[BaseModel]:
    from memoryd.dreaming.report import DreamReport

    return DreamReport


def _lock(request: DreamRequest) -> LockPolicy:
    return LockPolicy.IN_DOMAIN


def _interval_s(settings: Settings) -> float | None:
    return settings.dreaming.interval_s if settings.dreaming.enabled else None


OP = Op(
    contract=JobContract(
        name="dream",
        summary="dreaming phases (light, REM, deep)",
        request=DreamRequest,
        result=_result,
        routing=Routing.AGENT,
        command="dream",
    ),
    run=_run,
    policy=JobPolicy(
        lock=_lock,
        interval_s=_interval_s,
        sweep=True,
        background=True,
    ),
)
