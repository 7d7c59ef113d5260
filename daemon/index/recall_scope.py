"""Recall scoped to who is asking (`recall.scope`): which hits a participant may see. Pure.

A hit is shown to a participant only when every session in its lineage includes that
participant, or when it is owner-level memory: text with no session lineage at all that the
owner wrote (MEMORY.md or USER.md lines without a promotion marker). Anything else fails
closed: an entry whose origins are not recorded, a session with no recorded participants,
agent-written notes of unknown lineage, a merged entry with one foreign origin.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

RecallScope = Literal["participant", "agent"]


@dataclass(frozen=True, slots=True)
class HitLineage:
    """What a hit derives from: its sessions (a transcript chunk's own, or the origins of the
    entries a memory chunk quotes) and whether any quoted entry has no recorded origin."""

    sessions: frozenset[str]
    entry_keys: frozenset[str]
    unresolved: bool
    origin_class: str | None  # the chunk's provenance class; None when it has none


def owner_level(lineage: HitLineage) -> bool:
    return (
        not lineage.sessions
        and not lineage.entry_keys
        and not lineage.unresolved
        and lineage.origin_class == "owner"
    )


def visible_to(lineage: HitLineage, participants: Mapping[str, frozenset[str]], participant: str) -> bool:
    """Whether `participant` may recall a hit of this lineage; `participants` maps a session id
    to the actors recorded in it (a session absent from it has none)."""
    if owner_level(lineage):
        return True
    if not lineage.sessions or lineage.unresolved:
        return False
    return all(participant in participants.get(s, frozenset()) for s in lineage.sessions)
