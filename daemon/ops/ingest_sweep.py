"""`ingest_sweep`: one ingest sweep of an agent. The sweep takes the workspace lock itself,
only around staging (slow parsing runs outside it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel

from memoryd.ops.agent_request import AgentRequest, LiveGeneration
from memoryd.ops.op import JobContract, JobPolicy, LockPolicy, Op, OpContext, Routing

if TYPE_CHECKING:
    from memoryd.settings import Settings


class SweepRequest(AgentRequest):
    """ingest_sweep: one agent."""

    live: LiveGeneration = None


async def _run(ctx: OpContext, request: SweepRequest) -> BaseModel:
    import time

    import anyio

    from memoryd.ingest.last_sweep import record_sweep
    from memoryd.ingest.sweep import run_ingest_sweep

    rt = ctx.agent_runtime()
    report = await run_ingest_sweep(
        rt, progress=ctx.progress, consider=ctx.hints.lookup(request.live) if ctx.hints else None
    )
    # What `memoryd status` shows; a file write, so off the event loop.
    await anyio.to_thread.run_sync(record_sweep, rt.paths.state_dir, int(time.time() * 1000))
    return report


def _result() -> type[BaseModel]:
    from memoryd.ingest.report import IngestReport

    return IngestReport


def _lock(request: SweepRequest) -> LockPolicy:
    return LockPolicy.IN_DOMAIN


def _interval_s(settings: Settings) -> float:
    return settings.ingest.interval_s


OP = Op(
    contract=JobContract(
        name="ingest_sweep",
        summary="one ingest sweep of an agent",
        request=SweepRequest,
        result=_result,
        routing=Routing.AGENT,
        command="ingest",
    ),
    run=_run,
    policy=JobPolicy(
        lock=_lock,
        interval_s=_interval_s,
        sweep=True,
        sessions_scanned_field="sessionsScanned",
    ),
)
