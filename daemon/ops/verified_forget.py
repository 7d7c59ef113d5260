"""`forget` with `verify`: the retention verifier over what a purge removed.

The subject is the forgotten transcripts' text without their ids (the plain forgotten records
that keep them from being re-ingested are meant to remain), less the text the agent's other
sessions also hold (it may stay through them); only that agent's store and workspace are
checked (another agent's data is not this forget's residue, seed 000 "Other agents"), and
Redis. The forget op runs it after its purge, still under the workspace lease it holds for the
whole run (daemon/ops/forget.py), so no sweep stages anything between the purge and the check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from memoryd.ops.forget_redis import split_sessions
from memoryd.ops.verification import run_verify
from memoryd.retention.erase import session_subject

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from memoryd.retention.receipts import Verification
    from memoryd.settings import Settings


async def verify_forgotten(
    settings: Settings, redis: Redis, agent: str, session_ids: list[str]
) -> Verification:
    """Run the retention verifier over the content of `session_ids`, forgotten from `agent`."""
    forgotten, surviving = await anyio.to_thread.run_sync(split_sessions, settings, agent, session_ids)
    subject = await session_subject(settings, forgotten, include_ids=False, surviving=surviving)
    # Forget is per agent: only this agent's store and workspace can hold its residue.
    return await run_verify(settings, redis, subject, agents=[agent])


def render_verification(v: Verification) -> list[str]:
    """The human lines of the verifier's run, after the forget report's."""
    lines = [v.headline]
    for c in v.checks:
        state = f"FAILED ({c.count} findings)" if c.status == "failed" else c.status
        where = f" at {', '.join(c.locations)}" if c.locations else ""
        lines.append(f"Check {c.name}: {state}{where}" + (f" — {c.note}" if c.note else ""))
    return lines
