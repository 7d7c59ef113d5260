"""Text rewriting for forget (reference §7.4 step 1, §7.5): pure functions, no I/O.

* `scrub_corpus` drops session-corpus lines that reference a selected session and collects
  their snippets;
* `scrub_memory` removes, from a memory file or a backup, the promotion-marked entries of the
  selected entry keys, whole lines quoting a collected snippet, and session-reference sections.

Lines are split on "\\n" only, so a surviving "\\r" stays on its line and CRLF files keep
their endings.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from memoryd.constants import CORPUS_SNIPPET_MIN_CHARS
from memoryd.derivations import claim_hash
from memoryd.forget.refs import corpus_line_session, references_session
from memoryd.markers import LINEAGE_LINE_RE, PROMOTION_LINE_RE
from memoryd.utf16 import utf16_len

# `[<agent>/<sessionPath>#L<n>] <snippet>`; JavaScript's `.` stops at every line terminator.
_CORPUS_ROW_RE = re.compile(r"^\[[^\]]+#L\d+\]\s*([^\n\r\u2028\u2029]+)$")
_HEADING_RE = re.compile(r"^(#{1,6})\s")
_LIST_ROW_RE = re.compile(r"^(\s*)[-*+]\s")
_SESSION_ID_LINE_RE = re.compile(r"\bSession ID:", re.IGNORECASE)
_CONTINUATION_RE = re.compile(r"^\s+\S")
_FIRST_NON_SPACE_RE = re.compile(r"\S")
# Historical consolidation highlights quote removed text without lineage boundaries.
HISTORY_HIGHLIGHT_RE = re.compile(r"^## Memory Consolidation History\r?$[\s\S]*^ {2}- `[+-] ", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Selection:
    """What the scrub removes: entries by key, exact quotations, references to sessions."""

    agent_id: str
    session_ids: frozenset[str]
    entry_keys: frozenset[str]
    corpus_snippets: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CorpusScrub:
    content: str
    removed_lines: int
    snippets: tuple[str, ...]  # quoted text of removed rows, each >= CORPUS_SNIPPET_MIN_CHARS

    @property
    def remove_file(self) -> bool:
        return self.content.strip() == ""


@dataclass(frozen=True, slots=True)
class MemoryScrub:
    content: str
    removed_entries: int
    removed_lines: int


def scrub_corpus(content: str, agent_id: str, session_ids: Collection[str]) -> CorpusScrub:
    kept: list[str] = []
    snippets: list[str] = []
    removed = 0
    for line in content.split("\n"):
        if not references_session(line, agent_id, session_ids):
            kept.append(line)
            continue
        removed += 1
        m = _CORPUS_ROW_RE.match(line.rstrip())
        if m:
            snippet = m.group(1).strip()
            # Shorter malformed rows must never trigger broad substring deletion.
            if utf16_len(snippet) >= CORPUS_SNIPPET_MIN_CHARS:
                snippets.append(snippet)
    return CorpusScrub("\n".join(kept), removed, tuple(dict.fromkeys(snippets)))


def corpus_line_claim(line: str, agent_id: str) -> tuple[str, str] | None:
    """(claim hash, session id) of a corpus line as memoryd writes it, or None."""
    sid = corpus_line_session(line, agent_id)
    m = _CORPUS_ROW_RE.match(line.rstrip())
    if sid is None or m is None:
        return None
    return claim_hash(m.group(1)), sid


def scrub_corpus_claims(content: str, agent_id: str, pairs: Collection[tuple[str, str]]) -> CorpusScrub:
    """Drop the corpus lines of chosen claims: a line of one of a claim's sessions whose snippet
    is that claim (forget --entry). Other lines of those sessions stay."""
    wanted = set(pairs)
    kept: list[str] = []
    snippets: list[str] = []
    removed = 0
    for line in content.split("\n"):
        if not wanted or corpus_line_claim(line, agent_id) not in wanted:
            kept.append(line)
            continue
        removed += 1
        m = _CORPUS_ROW_RE.match(line.rstrip())
        snippet = m.group(1).strip() if m else ""
        if utf16_len(snippet) >= CORPUS_SNIPPET_MIN_CHARS:
            snippets.append(snippet)
    return CorpusScrub("\n".join(kept), removed, tuple(dict.fromkeys(snippets)))


def _promotion_key(line: str) -> str | None:
    m = PROMOTION_LINE_RE.match(line)
    return m.group(1).strip() if m else None


def scrub_memory(content: str, sel: Selection) -> MemoryScrub:
    lines = content.split("\n")
    removed_entries = 0
    removed_lines = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        key = _promotion_key(line)
        if key and key in sel.entry_keys:
            start = i - 1 if i > 0 and LINEAGE_LINE_RE.match(lines[i - 1]) else i
            end = i + 1
            # A second marker right below belongs to the next entry: stop there.
            if end < len(lines) and not PROMOTION_LINE_RE.match(lines[end]):
                end += 1
                while end < len(lines) and _CONTINUATION_RE.match(lines[end]):
                    end += 1
            del lines[start:end]
            removed_entries += 1
            i = start
            continue
        if any(snippet in line for snippet in sel.corpus_snippets):
            del lines[i]
            removed_lines += 1
            continue
        if not references_session(line, sel.agent_id, sel.session_ids):
            i += 1
            continue
        heading = _HEADING_RE.match(line)
        row = _LIST_ROW_RE.match(line)
        row_indent = len(row.group(1)) if row else None
        if not heading and not _SESSION_ID_LINE_RE.search(line):
            i += 1  # a passing mention is kept; only sections and labelled rows are removed
            continue
        end = i + 1
        while end < len(lines):
            nxt = lines[end]
            next_heading = _HEADING_RE.match(nxt)
            first = _FIRST_NON_SPACE_RE.search(nxt)
            first_non_space = first.start() if first else -1
            if (
                (row_indent is not None and first_non_space <= row_indent)
                or (next_heading and (not heading or len(next_heading.group(1)) <= len(heading.group(1))))
                or _SESSION_ID_LINE_RE.search(nxt)
            ):
                break
            end += 1
        del lines[i:end]
        removed_entries += 1
    return MemoryScrub("\n".join(lines), removed_entries, removed_lines)


def promotion_keys_on_lines(content: str) -> list[str]:
    """Keys of every promotion-marker line (split on \\r?\\n, as the reference's scan)."""
    keys = []
    for line in re.split(r"\r?\n", content):
        key = _promotion_key(line)
        if key:
            keys.append(key)
    return keys


def has_history_highlights(content: str) -> bool:
    return HISTORY_HIGHLIGHT_RE.search(content) is not None
