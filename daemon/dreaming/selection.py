"""The pool light and REM reflect on: recent, trusted, unpromoted staged entries whose source
still exists, grouped by similarity. Pure functions over snapshots."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from daemon.dreaming.staged import StagedEntry
from daemon.dreaming.text import jaccard, word_set
from daemon.store.origins import EntryOrigin

DAY_MS = 86_400_000
# Keys no word can be (words are non-empty): the empty word set, and "any word" for threshold 0.
EMPTY_SET, ANY_WORD = "", "\0"


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


def group_similar(
    entries: Sequence[StagedEntry], threshold: float, *, same_path: bool, limit: int | None = None
) -> list[Group]:
    """Greedy grouping in the given order: an entry joins the first group whose head it is
    similar to (`similarity` >= threshold), else starts a group; at most `limit` groups.

    Exact without comparing every pair: only heads that share a word with the entry in both
    word sets' prefixes are compared (`word_prefix`)."""
    sets = [word_set(e.snippet) for e in entries]
    order = _rarity(sets)
    groups: list[list[StagedEntry]] = []
    head_sets: list[frozenset[str]] = []
    heads_by_word: dict[tuple[str | None, str], list[int]] = {}
    for e, words_of_e in zip(entries, sets, strict=True):
        scope = e.path if same_path else None
        prefix = word_prefix(words_of_e, threshold, order)
        if threshold <= 0:  # everything is similar enough: the first group of the scope
            prefix = [ANY_WORD]
        candidates = sorted({g for w in prefix for g in heads_by_word.get((scope, w), ())})
        joined = next((g for g in candidates if _similar(head_sets[g], words_of_e, threshold)), None)
        if joined is not None:
            groups[joined].append(e)
        elif limit is None or len(groups) < limit:
            for w in prefix:
                heads_by_word.setdefault((scope, w), []).append(len(groups))
            groups.append([e])
            head_sets.append(words_of_e)
    return [Group(tuple(g)) for g in groups]


def _similar(head: frozenset[str], other: frozenset[str], threshold: float) -> bool:
    small, big = sorted((len(head), len(other)))
    # jaccard <= small/big: a pair too different in size is not compared (the slack absorbs
    # float rounding, so no similar pair is ever skipped).
    if big and small < threshold * big - 1e-9 * big:
        return False
    return jaccard(head, other) >= threshold


def _rarity(sets: Sequence[frozenset[str]]) -> dict[str, tuple[int, str]]:
    """The global word order of the prefixes: rarest first (few candidates per word)."""
    counts = Counter(w for s in sets for w in s)
    return {w: (n, w) for w, n in counts.items()}


def word_prefix(words_of: frozenset[str], threshold: float, order: dict[str, tuple[int, str]]) -> list[str]:
    """The prefix filter: if jaccard(x, y) >= t then x and y share a word among the first
    |x| - ceil(t|x|) + 1 words of each (one global order), so other pairs are never compared.
    An empty set is similar only to another empty set: it is filed under EMPTY_SET."""
    if not words_of:
        return [EMPTY_SET]
    # The epsilon keeps float rounding from shortening the prefix (a longer one stays exact).
    keep = len(words_of) - math.ceil(threshold * len(words_of) - 1e-9) + 1
    return sorted(words_of, key=order.__getitem__)[: max(1, keep)]
