"""Entry selectors → entries (`forget --entry KEY`, `--match TEXT`). Pure: what the store and the
memory files hold of the candidate entries in, the chosen entries out.

* `--entry` names an entry key exactly: a staged entry, a promoted (marked) entry of a memory
  file, an entry with origin rows, or a claim already suppressed (a rerun converges). A key
  that is none of these is an error naming it: a typo must not pass as done.
* `--match` is the whole text of an entry, compared exactly after collapsing whitespace (the
  form every staged snippet has); the exported role prefix (`User: `, `Assistant: `) may be
  left out. A promoted line is compared without its bullet and its trailing score note.
  Text that no entry has selects nothing, and the report says so.
* What was derived from a chosen entry and quotes it (a dream diary's candidate or lasting
  truth) is chosen with it: `derived_keys`. A theme that only counts it (REM's "kept
  surfacing") quotes no text of it and stays.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memoryd.constants import CORPUS_SNIPPET_MIN_CHARS
from memoryd.derivations import claim_hash, normalize_snippet
from memoryd.errors import UsageError
from memoryd.markers import LINEAGE_LINE_RE, PROMOTION_LINE_RE
from memoryd.store.lines import CLAIM_KEY_PREFIX
from memoryd.utf16 import utf16_key, utf16_len

ROLE_PREFIXES = ("User: ", "Assistant: ")  # the exported line forms (daemon/sessions/transcript.py)
# A promoted line: `- <text> [score=… …]` (dreaming/promote.py); the note is not the entry's text.
_PROMOTED_LINE_RE = re.compile(r"^\s*[-*+]\s+(.*?)(?:\s+\[(?:score|confidence)=[^\]]*\])?\s*$")
_CONTINUATION_RE = re.compile(r"^\s+\S")

Pair = tuple[str, str]  # (claim hash, session id)


@dataclass(frozen=True, slots=True)
class EntryOriginRef:
    session_id: str
    session_key: str | None


@dataclass(frozen=True, slots=True)
class ChosenEntry:
    entry_key: str
    text: str  # the staged snippet or the promoted line's text ("" when neither is left)
    origins: tuple[EntryOriginRef, ...]

    @property
    def claim(self) -> str | None:
        """The claim hash its suppression records: the key's, or its text's."""
        if self.entry_key.startswith(CLAIM_KEY_PREFIX):
            return self.entry_key[len(CLAIM_KEY_PREFIX) :]
        return claim_hash(self.text) if self.text else None


@dataclass(frozen=True, slots=True)
class EntrySelection:
    entries: tuple[ChosenEntry, ...]  # in key order
    unmatched_match: str | None = None  # `--match` text that no entry has
    requested: bool = False  # the forget names entries (even if none matched)

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(e.entry_key for e in self.entries)

    @property
    def origin_session_ids(self) -> frozenset[str]:
        return frozenset(o.session_id for e in self.entries for o in e.origins)

    @property
    def suppressions(self) -> tuple[Pair, ...]:
        """(claim hash, session id) for each origin of each chosen entry."""
        pairs = {(e.claim, o.session_id) for e in self.entries if e.claim for o in e.origins}
        return tuple(sorted((c, s) for c, s in pairs if c))

    @property
    def snippets(self) -> tuple[str, ...]:
        """The chosen texts long enough to remove a line that quotes one (as corpus snippets)."""
        texts = (e.text for e in self.entries if utf16_len(e.text) >= CORPUS_SNIPPET_MIN_CHARS)
        return tuple(dict.fromkeys(texts))


NO_ENTRIES = EntrySelection(())


@dataclass(frozen=True, slots=True)
class EntryFacts:
    """What the store and the memory files hold of the candidate keys (read by forget.snapshot)."""

    staged: dict[str, str]  # entry key -> staged snippet
    promoted: dict[str, str]  # entry key -> promoted line's text (marked entries of MEMORY.md)
    marked: frozenset[str]  # every marker key of every memory file (diary lines included)
    origins: dict[str, tuple[EntryOriginRef, ...]]  # entry key -> its origin rows
    suppressed: dict[str, tuple[str, ...]]  # claim hash -> sessions it is suppressed from


def match_forms(text: str) -> tuple[str, ...]:
    """The staged snippets `--match TEXT` stands for: the text, and with each role prefix."""
    said = normalize_snippet(text)
    forms = [said] + [p + said for p in ROLE_PREFIXES if not said.startswith(p)]
    return tuple(dict.fromkeys(forms))


def match_claim_keys(text: str) -> tuple[str, ...]:
    """The staged entry keys `--match TEXT` can name (a staged claim's key is its text's hash)."""
    return tuple(CLAIM_KEY_PREFIX + claim_hash(f) for f in match_forms(text))


def entry_claim(key: str) -> str | None:
    return key[len(CLAIM_KEY_PREFIX) :] if key.startswith(CLAIM_KEY_PREFIX) else None


def promoted_text(line: str) -> str:
    """A promoted line's entry text: without its bullet and its trailing score note."""
    m = _PROMOTED_LINE_RE.match(line.rstrip("\r"))
    return normalize_snippet(m.group(1) if m else line)


def marked_entries(content: str) -> list[tuple[str, str]]:
    """(key, entry block) of each promotion-marked entry: the line below the marker and its
    indented continuation lines, as forget.scrub removes them."""
    lines = content.split("\n")
    out: list[tuple[str, str]] = []
    for i, line in enumerate(lines):
        m = PROMOTION_LINE_RE.match(line)
        if not m:
            continue
        end = i + 1
        if (
            end < len(lines)
            and not PROMOTION_LINE_RE.match(lines[end])
            and not LINEAGE_LINE_RE.match(lines[end])
        ):
            end += 1
            while end < len(lines) and _CONTINUATION_RE.match(lines[end]):
                end += 1
        out.append((m.group(1).strip(), "\n".join(lines[i + 1 : end])))
    return out


def promoted_texts(contents: Iterable[str]) -> dict[str, str]:
    """Entry key -> the text of its marked line, over memory files (the first one found wins)."""
    out: dict[str, str] = {}
    for content in contents:
        for key, block in marked_entries(content):
            first = block.split("\n", 1)[0]
            out.setdefault(key, promoted_text(first) if first.strip() else "")
    return out


def select_entries(
    agent_id: str, keys: Sequence[str], match: str | None, facts: EntryFacts
) -> EntrySelection:
    """The chosen entries; an unknown key raises UsageError naming it."""
    chosen: dict[str, None] = {}
    for key in keys:
        claim = entry_claim(key)
        known = (
            key in facts.staged
            or key in facts.promoted
            or key in facts.marked
            or key in facts.origins
            or (claim is not None and claim in facts.suppressed)
        )
        if not known:
            raise UsageError(
                f"entries: no entry {key!r} in the memory of agent {agent_id} (not staged, promoted "
                "or recorded); `memoryd search --json` shows each hit's key"
            )
        chosen[key] = None
    unmatched = None
    if match is not None:
        forms = set(match_forms(match))
        found = [
            k
            for k in sorted({*facts.staged, *facts.promoted}, key=utf16_key)
            if normalize_snippet(facts.staged.get(k, "")) in forms
            or normalize_snippet(facts.promoted.get(k, "")) in forms
        ]
        if not found:
            unmatched = match
        chosen.update(dict.fromkeys(found))
    entries = []
    for key in sorted(chosen, key=utf16_key):
        origins = list(facts.origins.get(key, ()))
        claim = entry_claim(key)
        seen = {o.session_id for o in origins}
        # A rerun: the entry is gone, its suppressions name the sessions it came from.
        origins += [EntryOriginRef(s, None) for s in facts.suppressed.get(claim or "", ()) if s not in seen]
        text = facts.staged.get(key) or facts.promoted.get(key) or ""
        entries.append(ChosenEntry(key, text, tuple(sorted(origins, key=lambda o: utf16_key(o.session_id)))))
    return EntrySelection(tuple(entries), unmatched, requested=True)


def derived_keys(contents: Iterable[str], selection: EntrySelection) -> frozenset[str]:
    """Keys of marked entries of memory files (diary lines) whose block quotes a chosen entry's
    text: derived from it, they go with it. A promoted claim is a fact of its own, never derived
    (a longer fact that contains this one stays)."""
    snippets = selection.snippets
    if not snippets:
        return frozenset()
    return frozenset(
        key
        for content in contents
        for key, block in marked_entries(content)
        if entry_claim(key) is None and any(s in block for s in snippets)
    )
