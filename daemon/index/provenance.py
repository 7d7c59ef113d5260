"""Chunk provenance (reference §6.2): classified by code at index time, never parsed from text."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

# The reference merges with findLast over this order: the later class wins (least trusted).
TRUST_ORDER: tuple[str, ...] = ("owner", "agent", "system", "untrusted")
# Session kinds whose transcripts are never indexed. "unknown" (no provenance) is not one:
# chunks that cannot be attributed are not presumed stale.
INTERNAL_SESSION_KINDS = frozenset({"cron", "heartbeat"})


class ChunkProvenance(NamedTuple):  # a tuple: it crosses the preparation worker's pipe
    origin_class: str
    session_kind: str
    observed_at: int
    supersedes_key: str | None = None


_RANK = {cls: rank for rank, cls in enumerate(TRUST_ORDER)}
_UNKNOWN_RANK = len(TRUST_ORDER) - 1  # unknown input counts as untrusted


def least_trusted(classes: Iterable[str]) -> str:
    """The least trusted class present; unknown input counts as untrusted, never as owner."""
    worst = -1
    for cls in classes:
        rank = _RANK.get(cls, _UNKNOWN_RANK)
        if rank > worst:
            worst = rank
    return TRUST_ORDER[worst] if worst >= 0 else "untrusted"


def common_kind(kinds: Iterable[str]) -> str:
    distinct = set(kinds)
    return distinct.pop() if len(distinct) == 1 else "unknown"


def single_value(values: Iterable[str | None]) -> str | None:
    """A supersedes key is kept only when exactly one distinct value is present."""
    distinct = {v for v in values if v}
    return distinct.pop() if len(distinct) == 1 else None


def memory_file_origin(rel_path: str) -> str:
    """Path classification: the curated root files are the owner's; other memory notes are
    written by the agent (reference §5.3 gives daily notes `agent`)."""
    return "owner" if rel_path in ("MEMORY.md", "USER.md") else "agent"
