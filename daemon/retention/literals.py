"""Many literal strings found at once in long text (pure): the verifier's snippets and hash
prefixes, hundreds to tens of thousands of them, over whole stores, workspaces and Redis values.

    snippets = literal_set(["the invoice is due", …])
    snippets.starts(text) -> [12, 480]     # non-overlapping, leftmost, the longest at a start

A regular expression of their alternation tries every literal at every position, so its cost
grows with their number: an erasure of 500 messages spent seconds per megabyte on it, and the
more its subject said, the slower it got. Here the cost follows the text. Every literal holds
at least MIN_CHARS characters, so each occurrence contains a position p, a multiple of STEP,
whose GRAM characters lie inside it, at an offset below STEP from its start. Only those
positions are read: the gram there is looked up among the grams at offsets 0…STEP-1 of every
literal, and each start it points to is confirmed by a set lookup per literal length.

Works alike on str and bytes. `fold=True` compares lower-cased text with lower-cased literals
(hex digests); only slices are lower-cased, so positions stay those of the text. `word_chars`
(str only) counts an occurrence only where no such character touches it (ids).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T", str, bytes)

GRAM = 6
STEP = 6
MIN_CHARS = GRAM + STEP - 1  # shorter literals could fit between two read positions


@dataclass(frozen=True, slots=True)
class LiteralSet(Generic[T]):
    grams: dict[T, tuple[int, ...]]  # a gram -> the offsets at which some literal holds it
    heads: dict[T, tuple[int, ...]]  # a literal's first MIN_CHARS -> lengths with that head, longest first
    literals: frozenset[T]
    fold: bool
    # Characters that continue a word: with them, an occurrence counts only where it is not part
    # of a longer word (an id inside a longer id is another id).
    word_chars: frozenset[str] = frozenset()

    def __len__(self) -> int:
        return len(self.literals)

    def spans(self, text: T, *, first: bool = False) -> list[tuple[int, int]]:
        """Every start at which a literal occurs, with the longest one there, as (start, length):
        occurrences may overlap. `first`: stop at the first one found."""
        found: list[tuple[int, int]] = []
        if not self.literals or len(text) < MIN_CHARS:
            return found
        grams, heads, literals, fold = self.grams, self.heads, self.literals, self.fold
        for p in range(0, len(text) - GRAM + 1, STEP):
            gram = text[p : p + GRAM]
            offsets = grams.get(gram.lower() if fold else gram)
            if offsets is None:
                continue
            for offset in offsets:
                start = p - offset
                if start < 0:
                    continue
                head = text[start : start + MIN_CHARS]
                lengths = heads.get(head.lower() if fold else head)
                if lengths is None:
                    continue
                for length in lengths:
                    piece = text[start : start + length]
                    if (piece.lower() if fold else piece) not in literals:
                        continue
                    if self.word_chars and not self._apart(text, start, start + length):
                        continue
                    found.append((start, length))
                    if first:
                        return found
                    break  # the longest at this start; shorter ones overlap it
        return found

    def _apart(self, text: T, start: int, end: int) -> bool:
        before = text[start - 1 : start] if start else ""
        after = text[end : end + 1]
        return before not in self.word_chars and after not in self.word_chars

    def starts(self, text: T) -> list[int]:
        return [start for start, _ in non_overlapping(self.spans(text))]

    def occurs_in(self, text: T) -> bool:
        return bool(self.spans(text, first=True))


def non_overlapping(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Leftmost first, the longest at a start, each after the end of the one before: the
    occurrences a regular expression of the alternation (longest literals first) would find."""
    kept: list[tuple[int, int]] = []
    end = 0
    for start, length in sorted(spans, key=lambda span: (span[0], -span[1])):
        if start >= end:
            kept.append((start, length))
            end = start + length
    return kept


def literal_set(
    literals: Iterable[T], *, fold: bool = False, word_chars: Iterable[str] = ()
) -> LiteralSet[T]:
    unique = frozenset(lit.lower() if fold else lit for lit in literals)
    short = [lit for lit in unique if len(lit) < MIN_CHARS]
    if short:
        raise ValueError(f"a literal of {len(short[0])} characters: at least {MIN_CHARS} are needed")
    grams: defaultdict[T, set[int]] = defaultdict(set)
    heads: defaultdict[T, set[int]] = defaultdict(set)
    for lit in unique:
        for offset in range(STEP):
            grams[lit[offset : offset + GRAM]].add(offset)
        heads[lit[:MIN_CHARS]].add(len(lit))
    return LiteralSet(
        grams={g: tuple(sorted(o)) for g, o in grams.items()},
        heads={h: tuple(sorted(n, reverse=True)) for h, n in heads.items()},
        literals=unique,
        fold=fold,
        word_chars=frozenset(word_chars),
    )
