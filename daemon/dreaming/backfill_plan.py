"""Pure planning for session backfill (reference §5.8): messages in, coalesced claims out.

Per day, messages stating the same claim (no role prefix, collapsed whitespace, lower case)
coalesce into one claim. The first citation is shared by every duplicate, but each duplicate
keeps its own session origin and provenance, so a claim repeated in several sessions keeps
every source origin.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memoryd.dreaming.diary import BlockItem, DiaryLine, diary_key
from memoryd.dreaming.text import claim_identity
from memoryd.markers import promotion_keys_in
from memoryd.store.origins import EntryOrigin

BACKFILL_QUERY_PREFIX = "__dreaming_session_backfill__:"
DIARY_KIND = "session-backfill"


@dataclass(frozen=True, slots=True)
class Message:
    """An owner/agent message of an admitted session, inside the backfill window."""

    agent_id: str
    session_id: str
    session_key: str | None
    line_number: int
    snippet: str
    origin_class: str
    observed_at: int
    day: str

    @property
    def session_path(self) -> str:
        return f"sessions/{self.agent_id}/{self.session_id}"


@dataclass(frozen=True, slots=True)
class Claim:
    day: str
    messages: tuple[Message, ...]  # first citation first; one per contributing message

    @property
    def first(self) -> Message:
        return self.messages[0]

    @property
    def session_ids(self) -> tuple[str, ...]:
        return tuple(sorted({m.session_id for m in self.messages}))

    def origins(self, entry_key: str) -> tuple[EntryOrigin, ...]:
        seen: dict[str, EntryOrigin] = {}
        for m in self.messages:
            seen.setdefault(
                m.session_id,
                EntryOrigin(
                    entry_key, m.agent_id, m.session_id, m.session_key, m.origin_class, m.observed_at
                ),
            )
        return tuple(seen.values())

    def diary_line(self) -> DiaryLine:
        text = self.first.snippet
        key = diary_key(DIARY_KIND, self.day, text)
        details = (
            f"sessions: {len(self.session_ids)}",
            f"evidence: {self.first.session_path}#L{self.first.line_number}",
        )
        return DiaryLine(key, text, details, self.origins(key))


def select_days(
    days: Iterable[str], processed: set[str], from_day: str | None, to_day: str | None, limit_days: int
) -> list[str]:
    """Oldest unprocessed days in the window first, at most `limit_days`."""
    window = sorted(
        d
        for d in set(days)
        if (from_day is None or d >= from_day) and (to_day is None or d <= to_day) and d not in processed
    )
    return window[:limit_days]


def coalesce(messages: Sequence[Message]) -> list[Claim]:
    ordered = sorted(messages, key=lambda m: (m.day, m.observed_at, m.session_path, m.line_number))
    claims: dict[tuple[str, str], list[Message]] = {}
    for m in ordered:
        claims.setdefault((m.day, claim_identity(m.snippet)), []).append(m)
    return [Claim(day, tuple(msgs)) for (day, _), msgs in claims.items()]


def diary_items(existing_block: str | None, claims: Sequence[Claim]) -> list[BlockItem]:
    """The backfill block: what it already holds, then one `### day` section per new day. A
    claim whose line the block holds already is not written again (its new origins are
    recorded on that line's key all the same)."""
    items: list[BlockItem] = []
    present: set[str] = set()
    if existing_block:
        items += [BlockItem(plain=ln) for ln in existing_block.strip("\n").split("\n")]
        present = set(promotion_keys_in(existing_block))
    day = None
    for c in claims:
        line = c.diary_line()
        if line.key in present:
            continue
        if c.day != day:
            day = c.day
            items.append(BlockItem(plain=f"### {day}"))
        items.append(BlockItem(line=line))
    return items
