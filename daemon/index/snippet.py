"""A hit's shown text: the part of its chunk that matched, within the reference's budget. Pure.

A chunk is longer than the snippet budget (a transcript chunk ~1,600 characters): showing its
head hides a word found at its end. The window is placed where it covers the most distinct
query words, starting a little before the first of them; a chunk that fits is shown whole.
"""

from __future__ import annotations

import re

from memoryd.constants import SEARCH_SNIPPET_MAX_CHARS
from memoryd.markers import LINEAGE_LINE_RE, PROMOTION_LINE_RE

ELLIPSIS = "…"
# Context kept before the first matched word, so the match reads in its sentence.
LEAD_CHARS = 80
# Match positions considered at most: a very common word repeats in every line.
MAX_POSITIONS = 400


def flatten(text: str) -> str:
    """The chunk's text without marker lines, whitespace collapsed."""
    lines = [
        line
        for line in text.splitlines()
        if not (PROMOTION_LINE_RE.match(line) or LINEAGE_LINE_RE.match(line))
    ]
    return " ".join(" ".join(lines).split())


def _positions(flat: str, words: list[str]) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    lower = flat.lower()
    for word in dict.fromkeys(words):
        for m in re.finditer(rf"(?<!\w){re.escape(word)}(?!\w)", lower):
            found.append((m.start(), word))
            if len(found) >= MAX_POSITIONS:
                break
    return sorted(found)


def matched_snippet(text: str, words: list[str], budget: int = SEARCH_SNIPPET_MAX_CHARS) -> str:
    flat = flatten(text)
    if len(flat) <= budget:
        return flat
    positions = _positions(flat, words)
    start = 0
    if positions:
        best = -1
        for i, (pos, _word) in enumerate(positions):
            covered = {w for p, w in positions[i:] if p < pos + budget - LEAD_CHARS}
            if len(covered) > best:
                best, start = len(covered), max(0, pos - LEAD_CHARS)
    start = min(start, len(flat) - (budget - 2))
    head = ELLIPSIS if start > 0 else ""
    room = budget - len(head)
    body = flat[start : start + room]
    if start + room < len(flat):
        body = body[:-1] + ELLIPSIS
    return head + body
