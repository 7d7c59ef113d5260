"""What the memory-tool API returns (pydantic; field order is JSON order)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

ScopeState = Literal["live", "expired", "missing"]
ParentState = Literal["live", "expired", "erased", "missing"]


class Model(BaseModel):
    # camelCase in JSON, as every report (fields are still set and read by their Python names).
    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True)


class Provenance(Model):
    parent: str  # the cited scope, or TOMBSTONE:<random> after an erasure
    parent_hash: str | None  # sha256 of the parent's normalized content; None once erased
    at: int | None  # the cited content's time (Unix ms); whole days once erased
    parent_state: ParentState


class MemoryObject(Model):
    object_id: str
    scope: str
    content: str
    created_at: int
    provenance: Provenance | None


class WriteResult(Model):
    object_id: str
    scope: str
    created_scopes: list[str]  # missing ancestors (and the scope) created by this write
    expires_at: int | None  # the scope's effective expiry (Unix ms), None = never
    clamped: bool  # the requested retention was cut to the parent's
    notes: list[str]
    provenance: Provenance | None


class ReadResult(Model):
    scope: str
    state: ScopeState
    hidden_by: str | None  # the expired scope (itself or an ancestor) that makes it unreadable
    objects: list[MemoryObject]


class LineageStep(Model):
    object_id: str
    scope: str
    object_state: ScopeState
    provenance: Provenance | None


class LineageReport(Model):
    object_id: str
    steps: list[LineageStep]  # the object first, then the object each edge cites, and so on
    truncated: bool  # stopped at LINEAGE_MAX_DEPTH or a cycle


class HoldView(Model):
    hold_id: str
    scope: str
    reason: str
    created_at: int


class HoldList(Model):
    holds: list[HoldView]


class HoldReleased(Model):
    hold_id: str
    scope: str
    released: bool


class ExpireReport(Model):
    now: int
    expired_scopes: int  # newly unreadable
    held_skipped: int  # due but covered by (or containing) a legal hold
    purged_objects: int
    purged_scopes: int
    provenance_rewritten: int  # edges to purged scopes neutralised as in an erasure
