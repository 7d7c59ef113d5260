"""The pool light and REM reflect on: recent, trusted, unpromoted staged entries whose source
still exists, grouped by similarity. Pure functions over snapshots."""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memoryd.constants import GROUP_COMPARISONS_MAX
from memoryd.dreaming.sketch import band_keys
from memoryd.dreaming.staged import StagedEntry
from memoryd.dreaming.text import jaccard, word_set
from memoryd.store.origins import EntryOrigin

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
    entries: Sequence[StagedEntry],
    threshold: float,
    *,
    same_path: bool,
    limit: int | None = None,
    comparisons: int | None = GROUP_COMPARISONS_MAX,
) -> list[Group]:
    """Greedy grouping in the given order: an entry joins the first group whose head it is
    similar to (`similarity` >= threshold), else starts a group; at most `limit` groups.

    Exact without comparing every pair: only heads that share a word with the entry in both
    word sets' prefixes, and could still share enough words after it, are compared (the
    prefix and positional filters of `word_prefix` and `_HeadIndex.candidates`).

    Bounded whatever the texts look like: when the prefix filter would look at more than
    `comparisons` heads for an entry (words shared by nearly every entry), its candidates are
    instead the heads that share MinHash bands with it (dreaming/sketch.py), the `comparisons`
    sharing the most, each checked with the exact similarity in group order. Such an entry may
    then miss a similar head (no band shared, or past the cap) and start a group or join a
    later one.
    `comparisons=None`: exact always, at a cost quadratic in the entries on such text."""
    sets = [word_set(e.snippet) for e in entries]
    order = _rarity(sets)
    groups: list[list[StagedEntry]] = []
    index = _HeadIndex(threshold)
    # No entry can look at more heads than there are entries: small pools need no sketches.
    bands = _Bands(sets, threshold) if comparisons is not None and len(entries) > comparisons else None
    for i, (e, words_of_e) in enumerate(zip(entries, sets, strict=True)):
        scope = e.path if same_path else None
        prefix = word_prefix(words_of_e, threshold, order)
        if threshold <= 0:  # everything is similar enough: the first group of the scope
            prefix = [ANY_WORD]
        candidates = index.candidates(scope, prefix, len(words_of_e), comparisons)
        if candidates is None:
            assert bands is not None and comparisons is not None  # more heads than the cap
            candidates = bands.candidates(scope, i, comparisons)
        joined = next((g for g in candidates if _similar(index.sets[g], words_of_e, threshold)), None)
        if joined is not None:
            groups[joined].append(e)
        elif limit is None or len(groups) < limit:
            index.add(scope, prefix, words_of_e)
            if bands is not None:
                bands.add(scope, i)
            groups.append([e])
    return [Group(tuple(g)) for g in groups]


class _Bands:
    """Group heads by (scope, band, band key) of their MinHash sketch, in group order. The
    sketches are made when an entry first needs them (varied text may never)."""

    def __init__(self, sets: Sequence[frozenset[str]], threshold: float):
        self.sets = sets
        self.threshold = threshold
        self.keys: list[list[int]] | None = None
        self.heads: list[tuple[str | None, int]] = []  # (scope, entry) of each head, in group order
        self.by_key: dict[tuple[str | None, int, int], list[int]] = {}

    def add(self, scope: str | None, entry: int) -> None:
        self.heads.append((scope, entry))
        if self.keys is not None:
            self._file(scope, entry, len(self.heads) - 1)

    def candidates(self, scope: str | None, entry: int, cap: int) -> list[int]:
        """At most `cap` heads sharing a band with the entry, those sharing the most bands (the
        likeliest similar; the earliest on a tie), in group order. A band's heads beyond its first
        `cap` are not looked at: at most bands x `cap` heads are counted."""
        if self.keys is None:
            self.keys = band_keys(self.sets, self.threshold)
            for head, (s, e) in enumerate(self.heads):
                self._file(s, e, head)
        shared: Counter[int] = Counter()
        for band, key in enumerate(self.keys[entry]):
            shared.update(self.by_key.get((scope, band, key), ())[:cap])
        return sorted(heapq.nsmallest(cap, shared, key=lambda head: (-shared[head], head)))

    def _file(self, scope: str | None, entry: int, head: int) -> None:
        assert self.keys is not None
        for band, key in enumerate(self.keys[entry]):
            self.by_key.setdefault((scope, band, key), []).append(head)


class _HeadIndex:
    """Group heads by (scope, word of their prefix), with the word's position in the prefix."""

    def __init__(self, threshold: float):
        self.threshold = threshold
        self.sets: list[frozenset[str]] = []
        self.by_word: dict[tuple[str | None, str], list[tuple[int, int]]] = {}

    def add(self, scope: str | None, prefix: list[str], words_of: frozenset[str]) -> None:
        head = len(self.sets)
        self.sets.append(words_of)
        for pos, w in enumerate(prefix):
            self.by_word.setdefault((scope, w), []).append((head, pos))

    def candidates(
        self, scope: str | None, prefix: list[str], size: int, cap: int | None
    ) -> list[int] | None:
        """Heads sharing a prefix word, in group order; None once more than `cap` heads were
        looked at (the filter is not selective for this entry). The positional filter: the
        first shared word (at position i of x, j of y, one global order) leaves at most
        1 + min(|x|-i-1, |y|-j-1) shared words, and jaccard >= t needs t/(1+t)·(|x|+|y|)."""
        t = self.threshold
        ratio = t / (1 + t) if t > 0 else 0.0
        seen: set[int] = set()
        kept: list[int] = []
        for i, w in enumerate(prefix):
            for head, j in self.by_word.get((scope, w), ()):
                if head in seen:
                    continue
                seen.add(head)
                if cap is not None and len(seen) > cap:
                    return None
                other = len(self.sets[head])
                if size and other and min(size - i, other - j) < ratio * (size + other) - 1e-9:
                    continue
                kept.append(head)
        kept.sort()
        return kept


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
