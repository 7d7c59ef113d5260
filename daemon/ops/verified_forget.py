"""`forget --verify`: the forget pipeline, then the retention verifier over what it removed.

The subject is the forgotten transcripts' text without their ids (the plain forgotten records
that keep them from being re-ingested are meant to remain), less the text the agent's other
sessions also hold (it may stay through them); only that agent's store and workspace are
checked (another agent's data is not this forget's residue, seed 000 "Other agents").
"""

from __future__ import annotations

import anyio

from memoryd.errors import UsageError
from memoryd.forget.report import ForgetReport
from memoryd.forget.request import ForgetRequest
from memoryd.forget.run import forget
from memoryd.ops.forget_redis import purge_forgotten_from_redis, split_sessions
from memoryd.ops.verification import run_verify
from memoryd.redis_conn import connect_redis
from memoryd.retention.erase import session_subject
from memoryd.retention.receipts import Verification
from memoryd.settings import Settings


class VerifiedForgetReport(ForgetReport):
    """`forget --verify`: the reference's report, then (after `refusals`, so the reference's
    field order is kept) the retention verifier's run over the forgotten sessions' content."""

    verification: Verification


async def forget_verified(settings: Settings, request: ForgetRequest) -> VerifiedForgetReport:
    """Purge, then run the retention verifier over the forgotten sessions' content."""
    if request.dry_run:
        raise UsageError(
            "--verify: needs a real forget; a dry run removes nothing to verify (drop --dry-run)"
        )
    redis = await connect_redis(settings)
    try:
        report = await forget(settings, request, redis=redis)
        await purge_forgotten_from_redis(settings, redis, request.agent, report.sessionIds)
        forgotten, surviving = await anyio.to_thread.run_sync(
            split_sessions, settings, request.agent, report.sessionIds
        )
        subject = await session_subject(settings, forgotten, include_ids=False, surviving=surviving)
        # Forget is per agent: only this agent's store and workspace can hold its residue.
        verification = await run_verify(settings, redis, subject, agents=[request.agent])
    finally:
        await redis.aclose()
    return VerifiedForgetReport(**dict(report), verification=verification)


def render_verification(report: VerifiedForgetReport) -> list[str]:
    """The human lines of the verifier's run, after the forget report's."""
    v = report.verification
    lines = [v.headline]
    for c in v.checks:
        state = f"FAILED ({c.count} findings)" if c.status == "failed" else c.status
        where = f" at {', '.join(c.locations)}" if c.locations else ""
        lines.append(f"Check {c.name}: {state}{where}" + (f" — {c.note}" if c.note else ""))
    return lines
