"""Promotion and lineage markers in memory files (DESIGN §3, reference §1, §7.5).

    <!-- memoryd-lineage:<supersedesKey> -->      optional, directly above the promotion marker
    <!-- memoryd-promotion:<entryKey> -->         directly above the entry line
    - the entry text …

memoryd writes its own prefix and recognises the reference system's
(`openclaw-memory-promotion:` / `openclaw-memory-lineage:`) so such workspaces read as is.
"""

from __future__ import annotations

import re

from memoryd.constants import (
    FOREIGN_LINEAGE_MARKER_PREFIX,
    FOREIGN_PROMOTION_MARKER_PREFIX,
    LINEAGE_MARKER_PREFIX,
    PROMOTION_MARKER_PREFIX,
)

_PROMO = f"(?:{re.escape(PROMOTION_MARKER_PREFIX)}|{re.escape(FOREIGN_PROMOTION_MARKER_PREFIX)})"
_LINEAGE = f"(?:{re.escape(LINEAGE_MARKER_PREFIX)}|{re.escape(FOREIGN_LINEAGE_MARKER_PREFIX)})"

# A line that consists solely of a promotion marker; group 1 is the key (strip it).
PROMOTION_LINE_RE = re.compile(rf"^\s*<!--\s*{_PROMO}([^\n]*?)\s*-->\s*$")
# A line that consists solely of a lineage marker; group 1 is the supersedes key.
LINEAGE_LINE_RE = re.compile(rf"^\s*<!--\s*{_LINEAGE}([^\n]*?)\s*-->\s*$")
# Promotion markers anywhere in text (case-insensitive, as the reference's extractor).
PROMOTION_ANYWHERE_RE = re.compile(rf"<!--\s*{_PROMO}([^\n]*?)\s*-->", re.IGNORECASE)


def promotion_marker(entry_key: str) -> str:
    return f"<!-- {PROMOTION_MARKER_PREFIX}{entry_key} -->"


def lineage_marker(supersedes_key: str) -> str:
    return f"<!-- {LINEAGE_MARKER_PREFIX}{supersedes_key} -->"


def promotion_key(line: str) -> str | None:
    """The entry key if `line` is a promotion-marker line, else None."""
    m = PROMOTION_LINE_RE.match(line.rstrip("\r"))
    return m.group(1).strip() if m else None


def lineage_key(line: str) -> str | None:
    m = LINEAGE_LINE_RE.match(line.rstrip("\r"))
    return m.group(1).strip() if m else None


def promotion_keys_in(text: str) -> list[str]:
    return [m.group(1).strip() for m in PROMOTION_ANYWHERE_RE.finditer(text)]
