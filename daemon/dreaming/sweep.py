"""One dreaming sweep: light → REM → deep with one timestamp (reference §5.1)."""

from __future__ import annotations

import time
from datetime import datetime
from zoneinfo import ZoneInfo

from memoryd.agent_runtime import AgentRuntime
from memoryd.dreaming.light import run_light
from memoryd.dreaming.promote import run_promote
from memoryd.dreaming.rem import run_rem
from memoryd.dreaming.report import DreamReport
from memoryd.errors import UsageError

PHASES: tuple[str, ...] = ("light", "rem", "deep")


def day_bounds(now_ms: int, tz: str) -> tuple[str, int]:
    """The dreaming day of `now_ms` in `tz` and the Unix ms at which that day began."""
    local = datetime.fromtimestamp(now_ms / 1000, ZoneInfo(tz))
    start = local.replace(hour=0, minute=0, second=0, microsecond=0)
    return local.strftime("%Y-%m-%d"), int(start.timestamp() * 1000)


async def run_dreaming(
    rt: AgentRuntime, phases: tuple[str, ...] | list[str] = PHASES, *, now_ms: int | None = None
) -> DreamReport:
    unknown = [p for p in phases if p not in PHASES]
    if unknown:
        raise UsageError(f"phase: unknown {unknown[0]!r} (choose from {', '.join(PHASES)})")
    now = int(time.time() * 1000) if now_ms is None else now_ms
    day, day_start = day_bounds(now, rt.settings.dreaming.timezone)
    ordered = [p for p in PHASES if p in phases]
    report = DreamReport(
        agent_id=rt.agent_id,
        sweep_at=datetime.fromtimestamp(now / 1000, ZoneInfo("UTC"))
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z"),
        phases=ordered,
    )
    if "light" in ordered:
        report.light, warnings = await run_light(rt, now, day, day_start)
        report.warnings += warnings
    if "rem" in ordered:
        report.rem, warnings = await run_rem(rt, now, day, day_start)
        report.warnings += warnings
    if "deep" in ordered:
        report.deep = await run_promote(rt, None, now_ms=now)
    return report
