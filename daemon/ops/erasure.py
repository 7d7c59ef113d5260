"""An erasure, with its sessions: the retention erasure (memoryd.retention.erase) runs each
erased session through the forget pipeline (memoryd.forget), handed in from here.

    await run_erase(settings, redis, EraseRequest(scope="tenant:t:user:u1")) -> ErasureReceipt
"""

from __future__ import annotations

from collections.abc import Mapping

from redis.asyncio import Redis

from memoryd.agent_runtime import AgentRuntime
from memoryd.forget.request import ForgetRequest
from memoryd.forget.run import purge
from memoryd.lock import Lease
from memoryd.ops.verification import embedder_of
from memoryd.retention import erase
from memoryd.retention.receipts import ErasureReceipt
from memoryd.retention.request import EraseRequest
from memoryd.settings import Settings


async def purge_sessions(rt: AgentRuntime, session_ids: list[str], lease: Lease) -> Mapping[str, int]:
    """Forget `session_ids` of `rt`'s agent under the erasure's lease; the artifact counters."""
    report = await purge(rt, ForgetRequest(agent=rt.agent_id, sessions=session_ids), lease)
    artifacts = report.artifacts.to_json()
    return {k: v for k, v in artifacts.items() if isinstance(v, int)}


async def run_erase(
    settings: Settings,
    redis: Redis | None,
    request: EraseRequest,
    *,
    now: int | None = None,
    verify: bool = True,
) -> ErasureReceipt:
    """Erase `request.scope` (memoryd.retention.erase), purging its sessions with forget; a dry
    run needs no Redis."""
    return await erase.run_erase(
        settings,
        redis,
        request,
        purge_sessions=purge_sessions,
        embedder=embedder_of(settings),
        now=now,
        verify=verify,
    )
