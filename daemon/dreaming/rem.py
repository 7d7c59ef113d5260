"""REM phase (reference §5.5): themes across recent entries and "possible lasting truths",
written to the `## REM Sleep` block of DREAMS.md with REM phase signals. Never writes MEMORY.md.

    strength   = min(1, count / len(entries) * 2)                       (theme gate: minPatternStrength)
    confidence = avg*0.45 + min(1, ln(1+recalls)/ln(7))*0.25
                 + min(1, days/3)*0.2 + min(1, tags/6)*0.1               (truth gate: 0.45)
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import anyio

from memoryd.agent_runtime import AgentRuntime
from memoryd.dreaming.diary import BlockItem, DiaryLine, diary_key, publish_block
from memoryd.dreaming.pool import read_pool, rerun_if_purged
from memoryd.dreaming.report import RemReport
from memoryd.dreaming.selection import Group, group_similar
from memoryd.dreaming.staged import StagedEntry
from memoryd.dreaming.text import derive_tags
from memoryd.settings import DreamingSettings
from memoryd.store.phase_signals import record_phase_hits

BLOCK, HEADING = "rem", "REM Sleep"
TRUTH_SIMILARITY = 0.88
MIN_TRUTH_CONFIDENCE = 0.45
MAX_THEMES = 5


@dataclass(frozen=True, slots=True)
class Theme:
    tag: str
    strength: float
    members: tuple[StagedEntry, ...]


@dataclass(frozen=True, slots=True)
class Truth:
    group: Group
    confidence: float


def tags_of(e: StagedEntry) -> tuple[str, ...]:
    return e.concept_tags or derive_tags(e.snippet)


# Each entry's tags, derived once per sweep (deriving them is most of REM's work).
Tags = dict[str, frozenset[str]]


def entry_tags(entries: list[StagedEntry]) -> Tags:
    return {e.entry_key: frozenset(tags_of(e)) for e in entries}


def themes(entries: list[StagedEntry], min_strength: float, tags: Tags) -> list[Theme]:
    if not entries:
        return []
    counts = Counter(t for e in entries for t in tags[e.entry_key])
    out = []
    for tag, count in counts.items():
        strength = min(1.0, count / len(entries) * 2)
        if count >= 2 and strength >= min_strength:
            out.append(Theme(tag, strength, tuple(e for e in entries if tag in tags[e.entry_key])))
    out.sort(key=lambda t: (-t.strength, -len(t.members), t.tag))
    return out[:MAX_THEMES]


def confidence(group: Group, tags: Tags) -> float:
    days = {d for m in group.members for d in m.recall_days}
    group_tags = {t for m in group.members for t in tags[m.entry_key]}
    recalls = group.signal_count
    return (
        min(1.0, group.avg_score) * 0.45
        + min(1.0, math.log1p(recalls) / math.log(7)) * 0.25
        + min(1.0, len(days) / 3) * 0.2
        + min(1.0, len(group_tags) / 6) * 0.1
    )


def truths(entries: list[StagedEntry], limit: int, tags: Tags) -> list[Truth]:
    # Entries light already surfaced come first (REM prefers light's staging).
    ordered = sorted(entries, key=lambda e: (e.light_hits == 0, -e.last_recalled_at, e.entry_key))
    groups = group_similar(ordered, TRUTH_SIMILARITY, same_path=False)
    scored = [Truth(g, confidence(g, tags)) for g in groups]
    kept = [t for t in scored if t.confidence >= MIN_TRUTH_CONFIDENCE]
    kept.sort(key=lambda t: (-t.confidence, t.group.head.entry_key))
    return kept[: max(1, min(3, limit))]


def reflect(pool: list[StagedEntry], settings: DreamingSettings) -> tuple[list[Theme], list[Truth]]:
    """Pure, CPU-bound (run in a worker thread): the themes and truths of the pool."""
    tags = entry_tags(pool)
    found_truths = truths(pool, settings.rem_limit, tags) if settings.rem_limit else []
    return themes(pool, settings.min_pattern_strength, tags), found_truths


def rem_items(found_themes: list[Theme], found_truths: list[Truth], day: str) -> list[BlockItem]:
    items = [BlockItem(plain="### Reflections")]
    if not found_themes:
        items.append(BlockItem(plain="_No strong themes yet._"))
    for th in found_themes:
        text = f"Theme: `{th.tag}` kept surfacing across {len(th.members)} memories."
        origins = tuple(o for m in th.members for o in m.origins)
        items.append(
            BlockItem(
                line=DiaryLine(
                    diary_key("dream-rem", day, text), text, (f"strength: {th.strength:.2f}",), origins
                )
            )
        )
    items.append(BlockItem(plain=""))
    items.append(BlockItem(plain="### Possible Lasting Truths"))
    if not found_truths:
        items.append(BlockItem(plain="_None yet._"))
    for tr in found_truths:
        h = tr.group.head
        text = f"{h.snippet} [confidence={tr.confidence:.2f} evidence={h.path}:{h.start_line}-{h.end_line}]"
        items.append(BlockItem(line=DiaryLine(diary_key("dream-rem", day, text), text, (), tr.group.origins)))
    return items


async def run_rem(rt: AgentRuntime, now_ms: int, day: str, day_start_ms: int) -> tuple[RemReport, list[str]]:
    """The REM phase; read again when a purge commits while it reflects (ExclusionsChanged)."""
    return await rerun_if_purged(rt, "rem", lambda: _rem(rt, now_ms, day, day_start_ms))


async def _rem(rt: AgentRuntime, now_ms: int, day: str, day_start_ms: int) -> tuple[RemReport, list[str]]:
    settings = rt.settings.dreaming
    store = rt.require_store()
    report = RemReport()
    generation, pool = await read_pool(rt, now_ms)
    report.considered = len(pool)
    found_themes, found_truths = await anyio.to_thread.run_sync(reflect, pool, settings)
    report.themes = [t.tag for t in found_themes]
    report.truths = len(found_truths)
    # Publication drops the lines quoting a session forgotten since the pool was read.
    async with rt.lock().hold() as lease:
        written, _rows, warnings = await publish_block(
            rt, lease, BLOCK, HEADING, rem_items(found_themes, found_truths, day), generation
        )
        report.diary_lines = written
        keys = [k for t in found_truths for k in t.group.keys]
        if keys and written:
            report.signals_recorded = await store.write(
                record_phase_hits, keys, "rem", now_ms, day_start_ms, fence=lease.fence
            )
    return report, warnings
