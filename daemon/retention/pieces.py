"""The verifier's coverage rule (pure): the pieces of an erased message, and one matcher for all.

The rule: after a purge, no *piece* of a subject's message — any substring of at least
K = VERIFY_PIECE_CHARS characters — remains in any byte the verifier reads, in any form memoryd
writes the message in. A piece of K or more characters holds a window of exactly K, so the
needles are the K-character windows (K-grams) of every form, deduplicated; a message shorter
than K (but at least VERIFY_SNIPPET_MIN_CHARS) is a needle whole.

The forms (`message_forms`) are each normalisation memoryd applies before it stores text: the
text as written, its Unicode NFC and NFKC forms, each with its credentials masked
(daemon/sessions/redact.py), whitespace collapsed (the exported transcript
line and the corpus line, daemon/sessions/transcript.py collapse_ws), each line collapsed alone,
the exported line forms "User: …" and "Assistant: …" (the corpus line daemon/ingest/corpus.py
render_line is "[<agent>/<path>#L<n>] " + such a line, cut at RENDERED_LINE_MAX_CHARS: every
cut keeps a prefix, whose windows are windows of the whole), and each of those as a JSON string
body (job arguments and results in Redis, JSON columns), with and without ASCII escapes.

Text the surviving sessions also hold is not residue (`without_shared`): a window found in
their forms is dropped from the needles, so a clean purge of one of two sessions that quote the
same sentence still passes.

The matcher is ahocorasick-rs's BytesAhoCorasick (the Rust `aho-corasick` crate behind PyO3):
it searches bytes (a database file, a WAL, a Redis value) for every needle in one pass whose
cost follows the haystack, not the number of needles, and releases the GIL while it runs, so
the verifier's thread does not stall the event loop. pyahocorasick was the other candidate: its
published wheels are built for str keys (bytes need a build of one's own), and its automaton
holds a Python object per node. Measured here: a million distinct 16-byte needles build in
about 30 s and 600 MB on a loaded machine in the worst case (random bytes share no prefix);
the windows of real text share most of their prefixes and build in a fraction of that. An
erasure's subject is what one person said: 10^5 windows is a large one (docs/performance.md).
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ahocorasick_rs import BytesAhoCorasick, MatchKind

from memoryd.constants import VERIFY_PIECE_CHARS, VERIFY_SNIPPET_MIN_CHARS
from memoryd.sessions.redact import redact_secrets

K = VERIFY_PIECE_CHARS
EXPORT_PREFIXES = ("User: ", "Assistant: ")  # daemon/sessions/transcript.py's exported line forms
_SHARED_CHUNK_BYTES = 1 << 20  # surviving text is searched in chunks of about this size


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _json_bodies(text: str) -> Iterator[str]:
    """`text` as the inside of a JSON string: as orjson writes it (non-ASCII kept) and with
    \\uXXXX escapes (json.dumps' default)."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return
    yield json.dumps(text, ensure_ascii=False)[1:-1]
    yield json.dumps(text)[1:-1]


def _bases(text: str) -> dict[str, None]:
    """The text as written, its NFC and NFKC forms, and each with its credentials masked as
    memoryd stores it (daemon/sessions/redact.py)."""
    bases = dict.fromkeys((text, unicodedata.normalize("NFC", text), unicodedata.normalize("NFKC", text)))
    for base in list(bases):
        bases[redact_secrets(base)] = None
    return bases


def message_forms(text: str) -> dict[str, None]:
    """Every form in which memoryd may store this message's text (see the module doc)."""
    forms: dict[str, None] = {}
    for base in _bases(text):
        collapsed = _collapse(base)
        forms[base] = None
        forms[collapsed] = None
        for line in base.splitlines():
            forms[_collapse(line)] = None
        for prefix in EXPORT_PREFIXES:
            forms[prefix + collapsed] = None
    for form in list(forms):
        for body in _json_bodies(form):
            forms[body] = None
    forms.pop("", None)
    return forms


def windows(form: str) -> Iterator[str]:
    """The needles of one form: its K-character windows, or itself whole when shorter than K
    (and not shorter than VERIFY_SNIPPET_MIN_CHARS: shorter text is not evidence)."""
    if len(form) >= K:
        for i in range(len(form) - K + 1):
            yield form[i : i + K]
    elif len(form.strip()) >= VERIFY_SNIPPET_MIN_CHARS:
        yield form


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate is stored as such, too


def pieces(texts: Iterable[str]) -> set[bytes]:
    """The needles of these messages: every window of every form, as UTF-8 bytes."""
    out: set[bytes] = set()
    for text in texts:
        for form in message_forms(text):
            out.update(_encode(w) for w in windows(form))
    return out


def shared_forms(text: str) -> dict[str, None]:
    """The forms of a surviving message that can hold a window `message_forms` makes, with
    less repetition: a window of a line, or of an exported line past its prefix, is a window of
    the collapsed text, so only the prefixes' own windows are added."""
    forms: dict[str, None] = {}
    for base in _bases(text):
        collapsed = _collapse(base)
        forms[base] = None
        forms[collapsed] = None
        for prefix in EXPORT_PREFIXES:
            forms[prefix + collapsed[: K - 1]] = None
    for form in list(forms):
        for body in _json_bodies(form):  # escaping is per character: a line's is inside these
            forms[body] = None
    forms.pop("", None)
    return forms


def _chunks(texts: Iterable[str]) -> Iterator[bytes]:
    """The forms of `texts`, NUL-separated (NUL is in no collapsed text), about a MiB a chunk."""
    parts: list[bytes] = []
    size = 0
    for text in texts:
        for form in shared_forms(text):
            data = _encode(form)
            parts.append(data)
            size += len(data) + 1
            if size >= _SHARED_CHUNK_BYTES:
                yield b"\x00".join(parts)
                parts, size = [], 0
    if parts:
        yield b"\x00".join(parts)


def without_shared(needles: set[bytes], shared: Iterable[str]) -> set[bytes]:
    """`needles` less those found in any form of the `shared` (surviving) texts."""
    if not needles:
        return needles
    ordered = list(needles)
    automaton = BytesAhoCorasick(ordered, matchkind=MatchKind.Standard)
    found: set[int] = set()
    for chunk in _chunks(shared):
        found.update(i for i, _, _ in automaton.find_matches_as_indexes(chunk, overlapping=True))
    return {p for i, p in enumerate(ordered) if i not in found}


@dataclass(frozen=True, slots=True)
class PieceMatcher:
    """Every needle at once, over bytes: leftmost-longest, non-overlapping occurrences."""

    automaton: BytesAhoCorasick
    count: int  # needles

    @classmethod
    def of(cls, needles: Iterable[bytes]) -> PieceMatcher | None:
        unique = list(dict.fromkeys(needles))
        if not unique:
            return None
        return cls(BytesAhoCorasick(unique, matchkind=MatchKind.LeftmostLongest), len(unique))

    def starts(self, data: bytes) -> list[int]:
        """Where each copy starts: windows that follow on from one another (a copy longer than
        K is found as consecutive windows) are one copy."""
        out: list[int] = []
        end = -1
        for _, start, stop in self.automaton.find_matches_as_indexes(data):
            if start > end:
                out.append(start)
            end = stop
        return out

    def hits(self, data: bytes) -> int:
        return len(self.starts(data))

    def hits_text(self, text: str) -> int:
        return self.hits(_encode(text))
