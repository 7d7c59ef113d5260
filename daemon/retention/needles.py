"""What the verifier looks for (pure): the erased subject turned into needles.

The derivability invariant (seed 001): no live row may contain any value derivable from the
erased subject — its stable ids, any hash form memoryd computes of its content (also
truncated), any piece of it (every window of VERIFY_PIECE_CHARS characters of every form it is
stored in: retention/pieces.py), or a sub-day timestamp tied to it.
The subject exists only in memory while an erasure runs; it is never stored.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from memoryd import derivations
from memoryd.constants import (
    DAY_MS,
    SNIPPET_MAX_CHARS,
    VERIFY_HASH_PREFIX_CHARS,
    VERIFY_ID_MIN_CHARS,
    VERIFY_SNIPPET_MAX_CHARS,
    VERIFY_SNIPPET_MIN_CHARS,
    VERIFY_TERM_MIN_CHARS,
)
from memoryd.retention.literals import MIN_CHARS, LiteralSet, literal_set, non_overlapping
from memoryd.retention.pieces import EXPORT_PREFIXES, PieceMatcher, message_forms, pieces, without_shared
from memoryd.sessions.redact import redact_secrets
from memoryd.store.inspect import integer_byte_forms
from memoryd.utf16 import truncate_utf16

# Characters that continue an identifier: an id only counts where it is not part of a longer one.
_ID_CHARS = r"A-Za-z0-9_.\-"
ID_WORD_CHARS = frozenset(string.ascii_letters + string.digits + "_.-")  # the same, for literal sets


@dataclass(frozen=True, slots=True)
class VerifySubject:
    ids: tuple[str, ...] = ()  # scope keys, object ids, session ids, leaf ids of erased scopes
    contents: tuple[str, ...] = ()  # erased content: objects' text, erased sessions' messages
    times_ms: tuple[int, ...] = ()  # exact times of erased objects
    # Text that legitimately survives (other sessions' messages): a snippet found in it is not
    # residue, whoever else still holds it (forget --verify: "shared with surviving lineage").
    shared: tuple[str, ...] = ()
    # Ids that survive (other sessions', their participants' and senders'): a subject id found
    # only inside one of them is part of another id, not residue.
    shared_ids: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.ids or self.contents or self.times_ms)

    def merge(self, other: VerifySubject) -> VerifySubject:
        return VerifySubject(
            self.ids + other.ids,
            self.contents + other.contents,
            self.times_ms + other.times_ms,
            self.shared + other.shared,
            self.shared_ids + other.shared_ids,
        )


def _collapse(text: str) -> str:
    return " ".join(text.split())


def snippets(contents: Iterable[str]) -> list[str]:
    """The head and the tail of each content line (whitespace collapsed, as the corpus renders
    it), at most VERIFY_SNIPPET_MAX_CHARS each, at least the minimum: what the embeddings check
    embeds (the text checks look for every piece, retention/pieces.py)."""
    out: dict[str, None] = {}
    for content in contents:
        for line in _stored_forms(content.splitlines()):
            text = _collapse(line)
            if len(text) < VERIFY_SNIPPET_MIN_CHARS:
                continue
            out[text[:VERIFY_SNIPPET_MAX_CHARS]] = None
            if len(text) > VERIFY_SNIPPET_MAX_CHARS:
                out[text[-VERIFY_SNIPPET_MAX_CHARS:]] = None
    return list(out)


def _stored_forms(lines: list[str]) -> Iterable[str]:
    """Each line as read and, where it held a credential, as memoryd stored it (masked)."""
    for line in lines:
        yield line
        masked = redact_secrets(line)
        if masked != line:
            yield masked


def derivation_inputs(content: str) -> set[str]:
    """The texts memoryd hands a text derivation for this message: every form retention/pieces.py
    looks for, and the staged snippet of each exported line (cut at SNIPPET_MAX_CHARS, as the
    sweep cuts it before it hashes the claim)."""
    forms = set(message_forms(content))
    for prefix in EXPORT_PREFIXES:
        forms.add(truncate_utf16(prefix + _collapse(content), SNIPPET_MAX_CHARS))
    forms.update({content.strip(), _collapse(content).lower()})
    return forms


def _derived(content: str) -> set[object]:
    forms = derivation_inputs(content)
    return {d.function(form) for d in derivations.REGISTRY if d.source == "text" for form in forms if form}


def derived_values(content: str) -> set[str]:
    """What the registry's text derivations (daemon/derivations.py) make of this message, as
    text (an integer form in decimal)."""
    return {str(v) for v in _derived(content)}


def derived_numbers(content: str) -> set[int]:
    """The integers among the registry's text derivations of this message (the claim number)."""
    return {v for v in _derived(content) if type(v) is int}


def subject_claim_hashes(contents: Iterable[str]) -> frozenset[str]:
    """Every value the registry's text derivations make of these messages (claim hashes among
    them): what no record may keep once they are erased."""
    return frozenset(v for content in contents for v in derived_values(content))


def time_forms(ms: int) -> list[str]:
    if ms % DAY_MS == 0:
        return []  # whole days are allowed to remain
    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return [str(ms), dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"]


@dataclass(frozen=True, slots=True)
class Needles:
    """Compiled matchers. `matcher` finds, in bytes and all at once, every window of every form
    of the subject's messages (retention/pieces.py, the coverage rule) and the hash prefixes of
    the registered derivations (daemon/derivations.py, lower and upper case); `ids` is a literal
    set (retention/literals.py); `pattern` finds ids too short for a literal set and times; an
    id counts only where it is not part of a longer one. `exact` are short ids that only count
    as a whole value."""

    matcher: PieceMatcher | None
    ids: LiteralSet[str]
    pattern: re.Pattern[str] | None
    exact: frozenset[str]
    longer_ids: tuple[str, ...]  # surviving ids that hold a subject id: occurrences inside them do not count
    times: frozenset[int]
    terms: frozenset[str]  # full-text terms of the subject's text (as FTS5's unicode61 folds them)
    piece_count: int = 0  # windows of the subject's text among the matcher's needles
    hash_count: int = 0  # hash prefixes (each in two cases) among them
    # Integer derivations (claim numbers): an integer value equal to one is a hit, and their
    # stored bytes (store/inspect.py integer_byte_forms) are among the matcher's needles.
    numbers: frozenset[int] = frozenset()

    @property
    def searches_text(self) -> bool:
        """Whether any text can hit (ids and times alone are text too)."""
        return bool(
            self.matcher is not None or self.ids or self.pattern is not None or self.exact or self.numbers
        )

    def raw_starts(self, data: bytes) -> list[int]:
        """Where a piece or a hash prefix starts in raw bytes (a database file, its WAL)."""
        return self.matcher.starts(data) if self.matcher is not None else []

    def may_hit(self, text: str) -> bool:
        """A cheap superset of `hits` over a whole document (a short id only as a substring):
        lets a caller skip opening what cannot hold a needle."""
        if self.matcher is not None and self.matcher.hits_text(text):
            return True
        if self.ids.occurs_in(text):
            return True
        if self.pattern is not None and self.pattern.search(text) is not None:
            return True
        return any(e in text for e in self.exact)

    def _id_hits(self, text: str) -> int:
        spans = self.ids.spans(text)
        if self.pattern is not None:
            spans += [(m.start(), m.end() - m.start()) for m in self.pattern.finditer(text)]
        if spans and self.longer_ids:
            spans = _outside(spans, [s for i in self.longer_ids for s in _occurrences(text, i)])
        return len(non_overlapping(spans))

    def hits(self, value: str) -> int:
        if value in self.exact:
            return 1
        found = self.matcher.hits_text(value) if self.matcher is not None else 0
        return found + self._id_hits(value)

    def hits_value(self, data: bytes) -> int:
        """`hits_bytes`, and a short id that is the whole value."""
        n = self.hits_bytes(data)
        if self.exact and data.decode("utf-8", "replace") in self.exact:
            n += 1
        return n

    def hits_bytes(self, data: bytes) -> int:
        """`hits` over raw bytes (a file, a Redis value): pieces and hashes in the bytes as they
        are, ids and times in their UTF-8 reading."""
        found = self.matcher.hits(data) if self.matcher is not None else 0
        if not (self.ids or self.pattern is not None):
            return found
        return found + self._id_hits(data.decode("utf-8", "replace"))


def _occurrences(text: str, literal: str) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    at = text.find(literal)
    while at >= 0:
        found.append((at, len(literal)))
        at = text.find(literal, at + 1)
    return found


def _outside(spans: list[tuple[int, int]], covers: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans that no cover holds whole."""
    return [(start, n) for start, n in spans if not any(c <= start and start + n <= c + m for c, m in covers)]


def longer_ids(subject: VerifySubject) -> tuple[str, ...]:
    """The surviving ids that hold one of the subject's ids and are not one themselves."""
    own = set(subject.ids)
    wanted = [i for i in own if i]
    return tuple(sorted(i for i in set(subject.shared_ids) - own if any(w in i for w in wanted)))


def subject_pieces(subject: VerifySubject) -> set[bytes]:
    """The subject's needles less what the surviving text also holds."""
    found = pieces(subject.contents)
    return without_shared(found, subject.shared) if subject.shared else found


def compile_needles(subject: VerifySubject) -> Needles:
    # A message that a surviving session also says has derivations of its own that survive with
    # it (that session's staged claim, its suppressed claim): not residue, as its pieces are not.
    said = {_collapse(t) for t in subject.shared}
    derived = [_derived(c) for c in subject.contents if _collapse(c) not in said]
    # An integer is looked for in its decimal form too (as text: a JSON value, a log line) when
    # that is as long as a hash prefix; shorter digit runs would match any number by chance.
    hashes = {
        str(h)[:VERIFY_HASH_PREFIX_CHARS]
        for values in derived
        for h in values
        if type(h) is str or len(str(h)) >= VERIFY_HASH_PREFIX_CHARS
    }
    numbers = frozenset(v for values in derived for v in values if type(v) is int)
    alternatives: list[str] = []
    exact: set[str] = set()
    long_ids = [i for i in dict.fromkeys(subject.ids) if len(i) >= MIN_CHARS]
    for ident in dict.fromkeys(i for i in subject.ids if len(i) < MIN_CHARS):
        if len(ident) >= VERIFY_ID_MIN_CHARS:
            alternatives.append(f"(?<![{_ID_CHARS}]){re.escape(ident)}(?![{_ID_CHARS}])")
        elif ident:
            exact.add(ident)
    for ms in dict.fromkeys(subject.times_ms):
        alternatives += [f"(?<!\\d){re.escape(t)}(?!\\d)" for t in time_forms(ms)]
    pattern = re.compile("|".join(alternatives)) if alternatives else None
    times = frozenset(t for t in subject.times_ms if t % DAY_MS)
    terms = frozenset(t for c in subject.contents for t in fts_terms(c) if len(t) >= VERIFY_TERM_MIN_CHARS)
    windows = subject_pieces(subject)
    digests = {v.encode() for h in hashes for v in (h.lower(), h.upper())}
    digests |= {form for n in numbers for form in integer_byte_forms(n)}
    return Needles(
        matcher=PieceMatcher.of(windows | digests),
        ids=literal_set(long_ids, word_chars=ID_WORD_CHARS),
        pattern=pattern,
        exact=frozenset(exact),
        longer_ids=longer_ids(subject),
        times=times,
        terms=terms,
        piece_count=len(windows),
        hash_count=len(hashes),
        numbers=numbers,
    )


_WORD_RE = re.compile(r"\w+")


def fts_terms(text: str) -> set[str]:
    """Terms as the index's tokenizer (unicode61, remove_diacritics 2) makes them, closely
    enough for distinctive words: lower-cased, diacritics dropped, split at non-word chars."""
    folded = "".join(c for c in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(c))
    return set(_WORD_RE.findall(folded))
