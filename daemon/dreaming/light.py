"""Light phase (reference §5.5): pick recent staged candidates, dedupe them, write the
`## Light Sleep` block of DREAMS.md and record light phase signals. Never writes MEMORY.md.

The pool is read and grouped without the lock (the grouping in a worker thread, so the event
loop keeps serving other jobs and lease renewals); the lock is held only to publish, and
publication drops every line quoting a session forgotten since the pool was read.
"""

from __future__ import annotations

import anyio

from memoryd.agent_runtime import AgentRuntime
from memoryd.dreaming.diary import BlockItem, DiaryLine, diary_key, publish_block
from memoryd.dreaming.pool import read_pool, rerun_if_purged
from memoryd.dreaming.report import LightReport
from memoryd.dreaming.selection import Group, group_similar
from memoryd.dreaming.staged import StagedEntry
from memoryd.failpoints import held
from memoryd.store.phase_signals import record_phase_hits

BLOCK, HEADING = "light", "Light Sleep"


def select_light(entries: list[StagedEntry], limit: int, dedupe_similarity: float) -> list[Group]:
    """Pure: newest first (then most recalled), similar entries from one source merged, capped."""
    ordered = sorted(entries, key=lambda e: (-e.last_recalled_at, -e.signal_count, e.entry_key))
    return group_similar(ordered, dedupe_similarity, same_path=True, limit=limit)


def light_line(group: Group, day: str) -> DiaryLine:
    head = group.head
    text = f"Candidate: {head.snippet}"
    details = (
        f"confidence: {group.avg_score:.2f}",
        f"evidence: {head.path}:{head.start_line}-{head.end_line}",
        f"recalls: {group.signal_count}",
        "status: staged",
    )
    return DiaryLine(diary_key("dream-light", day, text), text, details, group.origins)


async def run_light(
    rt: AgentRuntime, now_ms: int, day: str, day_start_ms: int
) -> tuple[LightReport, list[str]]:
    """The light phase; read again when a purge commits while it groups (ExclusionsChanged)."""
    return await rerun_if_purged(rt, "light", lambda: _light(rt, now_ms, day, day_start_ms))


async def _light(rt: AgentRuntime, now_ms: int, day: str, day_start_ms: int) -> tuple[LightReport, list[str]]:
    settings = rt.settings.dreaming
    store = rt.require_store()
    report = LightReport()
    generation, pool = await read_pool(rt, now_ms)
    report.considered = len(pool)
    await held("dream.select")  # the grouping starts (tests time a forget against it)
    groups = (
        await anyio.to_thread.run_sync(select_light, pool, settings.light_limit, settings.dedupe_similarity)
        if settings.light_limit
        else []
    )
    report.candidates = len(groups)
    items = [BlockItem(line=light_line(g, day)) for g in groups]
    if not items:
        items = [BlockItem(plain="_No new candidates._")]
    async with rt.lock().hold() as lease:
        written, _rows, warnings = await publish_block(rt, lease, BLOCK, HEADING, items, generation)
        report.diary_lines = written
        keys = [k for g in groups for k in g.keys]
        if keys and written:
            report.signals_recorded = await store.write(
                record_phase_hits, keys, "light", now_ms, day_start_ms, fence=lease.fence
            )
    return report, warnings
