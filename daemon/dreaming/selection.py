"""The pool light and REM reflect on: recent, trusted, unpromoted staged entries whose source
still exists, grouped by similarity. Pure functions over snapshots."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from daemon.dreaming.staged import StagedEntry
from daemon.dreaming.text import similarity
from daemon.store.origins import EntryOrigin

DAY_MS = 86_400_000


@dataclass(frozen=True, slots=True)
class Group:
    """Similar entries shown as one diary line; the first is the one quoted."""

    members: tuple[StagedEntry, ...]

    @property
    def head(self) -> StagedEntry:
        return self.members[0]

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(m.entry_key for m in self.members)

    @property
    def origins(self) -> tuple[EntryOrigin, ...]:
        return tuple(o for m in self.members for o in m.origins)

    @property
    def signal_count(self) -> int:
        return sum(m.signal_count for m in self.members)

    @property
    def avg_score(self) -> float:
        return sum(m.total_score for m in self.members) / max(1, self.signal_count)


def eligible(
    entries: Iterable[StagedEntry], now_ms: int, lookback_days: int, live_paths: set[str]
) -> list[StagedEntry]:
    """Within the lookback, trusted (never untrusted/system), unpromoted, source still present."""
    since = now_ms - lookback_days * DAY_MS
    return [
        e
        for e in entries
        if e.last_recalled_at >= since
        and e.trusted
        and e.promoted_at is None
        and e.path in live_paths
        and e.snippet.strip()
    ]


def group_similar(entries: Sequence[StagedEntry], threshold: float, *, same_path: bool) -> list[Group]:
    """Greedy grouping in the given order: an entry joins the first group it is similar to."""
    groups: list[list[StagedEntry]] = []
    for e in entries:
        for g in groups:
            if (not same_path or g[0].path == e.path) and similarity(g[0].snippet, e.snippet) >= threshold:
                g.append(e)
                break
        else:
            groups.append([e])
    return [Group(tuple(g)) for g in groups]
