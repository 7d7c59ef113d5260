"""What the verifier looks for (pure): the erased subject turned into needles.

The derivability invariant (seed 001): no live row may contain any value derivable from the
erased subject — its stable ids, any hash form memoryd computes of its content (also
truncated), an exact snippet of it (>= 12 chars), or a sub-day timestamp tied to it.
The subject exists only in memory while an erasure runs; it is never stored.
"""

from __future__ import annotations

import hashlib
import re
import string
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from daemon.constants import (
    DAY_MS,
    VERIFY_HASH_PREFIX_CHARS,
    VERIFY_ID_MIN_CHARS,
    VERIFY_SNIPPET_MAX_CHARS,
    VERIFY_SNIPPET_MIN_CHARS,
    VERIFY_TERM_MIN_CHARS,
)
from daemon.retention.literals import MIN_CHARS, LiteralSet, literal_set, non_overlapping
from daemon.sessions.redact import redact_secrets

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

    @property
    def empty(self) -> bool:
        return not (self.ids or self.contents or self.times_ms)

    def merge(self, other: VerifySubject) -> VerifySubject:
        return VerifySubject(
            self.ids + other.ids,
            self.contents + other.contents,
            self.times_ms + other.times_ms,
            self.shared + other.shared,
        )


def _collapse(text: str) -> str:
    return " ".join(text.split())


def snippets(contents: Iterable[str]) -> list[str]:
    """Exact windows of each content line (whitespace collapsed, as the corpus renders it):
    the head and the tail, at most VERIFY_SNIPPET_MAX_CHARS each, at least the minimum."""
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


def hash_forms(content: str) -> set[str]:
    """sha256 and sha1 of the forms memoryd hashes: raw, stripped, normalized (strip+lower,
    the provenance hash), whitespace-collapsed (staging), collapsed and lower-cased; each also
    with its credentials masked, as memoryd stores it."""
    forms: set[str] = set()
    for text in _stored_forms([content]):
        forms |= {text, text.strip(), text.strip().lower(), _collapse(text), _collapse(text).lower()}
    out: set[str] = set()
    for form in forms:
        data = form.encode("utf-8")
        out.add(hashlib.sha256(data).hexdigest())
        out.add(hashlib.sha1(data, usedforsecurity=False).hexdigest())
    return out


def time_forms(ms: int) -> list[str]:
    if ms % DAY_MS == 0:
        return []  # whole days are allowed to remain
    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return [str(ms), dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"]


@dataclass(frozen=True, slots=True)
class Needles:
    """Compiled matchers. `snippets`, `hashes` and `ids` are literal sets (their number grows
    with what the subject said and how many sessions it had: see retention/literals.py);
    `pattern` finds ids too short for a literal set and times; an id counts only where it is not
    part of a longer one. `exact` are short ids that only count as a whole value; `raw` finds
    snippets in raw database bytes."""

    snippets: LiteralSet[str]
    hashes: LiteralSet[str]  # hex prefixes, in any case
    ids: LiteralSet[str]
    pattern: re.Pattern[str] | None
    exact: frozenset[str]
    raw: LiteralSet[bytes] | None
    snippet_count: int
    times: frozenset[int]
    terms: frozenset[str]  # full-text terms of the snippets (as FTS5's unicode61 folds them)

    @property
    def searches_text(self) -> bool:
        """Whether any text can hit (ids and times alone are text too)."""
        return bool(self.snippets or self.hashes or self.ids or self.pattern is not None or self.exact)

    def may_hit(self, text: str) -> bool:
        """A cheap superset of `hits` over a whole document (a short id only as a substring):
        lets a caller skip opening what cannot hold a needle."""
        if self.snippets.occurs_in(text) or self.hashes.occurs_in(text) or self.ids.occurs_in(text):
            return True
        if self.pattern is not None and self.pattern.search(text) is not None:
            return True
        return any(e in text for e in self.exact)

    def hits(self, value: str) -> int:
        if value in self.exact:
            return 1
        spans = self.snippets.spans(value) + self.hashes.spans(value) + self.ids.spans(value)
        if self.pattern is not None:
            spans += [(m.start(), m.end() - m.start()) for m in self.pattern.finditer(value)]
        return len(non_overlapping(spans))


def compile_needles(subject: VerifySubject) -> Needles:
    snips = snippets(subject.contents)
    if subject.shared:
        surviving = "\n".join(_collapse(t) for t in subject.shared)
        snips = [s for s in snips if s not in surviving]
    hashes = {h[:VERIFY_HASH_PREFIX_CHARS] for c in subject.contents for h in hash_forms(c)}
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
    raw = literal_set(s.encode("utf-8") for s in snips) if snips else None
    times = frozenset(t for t in subject.times_ms if t % DAY_MS)
    terms = frozenset(t for s in snips for t in fts_terms(s) if len(t) >= VERIFY_TERM_MIN_CHARS)
    return Needles(
        snippets=literal_set(snips),
        hashes=literal_set(hashes, fold=True),
        ids=literal_set(long_ids, word_chars=ID_WORD_CHARS),
        pattern=pattern,
        exact=frozenset(exact),
        raw=raw,
        snippet_count=len(snips),
        times=times,
        terms=terms,
    )


_WORD_RE = re.compile(r"\w+")


def fts_terms(text: str) -> set[str]:
    """Terms as the index's tokenizer (unicode61, remove_diacritics 2) makes them, closely
    enough for distinctive words: lower-cased, diacritics dropped, split at non-word chars."""
    folded = "".join(c for c in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(c))
    return set(_WORD_RE.findall(folded))
