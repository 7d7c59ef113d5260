"""`forget --verify`: the forget pipeline, then the retention verifier over what it removed.

The subject is the forgotten transcripts' text without their ids: the plain forgotten records
that keep them from being re-ingested are meant to remain.
"""

from __future__ import annotations

import anyio

from daemon.errors import UsageError
from daemon.forget.report import ForgetReport
from daemon.forget.request import ForgetRequest
from daemon.forget.run import forget
from daemon.ops.verification import run_verify
from daemon.redis_conn import connect_redis
from daemon.retention.erase import session_subject
from daemon.retention.receipts import Verification
from daemon.sessions.model import ArchiveInfo, SessionInfo
from daemon.sessions.source import session_source_for
from daemon.settings import Settings


class VerifiedForgetReport(ForgetReport):
    """`forget --verify`: the reference's report, then (after `refusals`, so the reference's
    field order is kept) the retention verifier's run over the forgotten sessions' content."""

    verification: Verification


def _forgotten_sessions(
    settings: Settings, agent: str, session_ids: list[str]
) -> list[SessionInfo | ArchiveInfo]:
    """The live windows and archives of the forgotten ids (transcripts are never deleted)."""
    wanted = set(session_ids)
    source = session_source_for(settings, agent)
    found: list[SessionInfo | ArchiveInfo] = [
        s for s in source.list_sessions().sessions if s.session_id in wanted
    ]
    found += [a for a in source.list_archives() if a.session_id in wanted]
    return found


async def forget_verified(settings: Settings, request: ForgetRequest) -> VerifiedForgetReport:
    """Purge, then run the retention verifier over the forgotten sessions' content."""
    if request.dry_run:
        raise UsageError(
            "--verify: needs a real forget; a dry run removes nothing to verify (drop --dry-run)"
        )
    redis = await connect_redis(settings.redis_url)
    try:
        report = await forget(settings, request, redis=redis)
        sessions = await anyio.to_thread.run_sync(
            _forgotten_sessions, settings, request.agent, report.sessionIds
        )
        subject = await session_subject(settings, sessions, include_ids=False)
        verification = await run_verify(settings, redis, subject)
    finally:
        await redis.aclose()
    return VerifiedForgetReport(**dict(report), verification=verification)


def render_verification(report: VerifiedForgetReport) -> list[str]:
    """The human lines of the verifier's run, after the forget report's."""
    v = report.verification
    lines = [f"Verified: {'yes' if v.verified else 'NO'}"]
    for c in v.checks:
        state = f"FAILED ({c.count} findings)" if c.status == "failed" else c.status
        where = f" at {', '.join(c.locations)}" if c.locations else ""
        lines.append(f"Check {c.name}: {state}{where}" + (f" — {c.note}" if c.note else ""))
    return lines
