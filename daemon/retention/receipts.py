"""Erasure receipts (seed 001): what was decided and done, never what was erased.

A receipt carries the state (complete | partial | refused), the three counts of the three-way
decision, per-artifact counters, the blocking holds by their opaque ids, the caller's request
id, the day, and the verifier's checks. It never carries content, hashes, scope strings,
object ids or session ids of the subject: it outlives the erasure and is scanned by the
verifier like every other row.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

ReceiptState = Literal["complete", "partial", "refused"]
CheckName = Literal["derivability", "physical", "embeddings", "provenance_invariant"]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class BlockedByHold(_Model):
    hold_id: str
    structural: int  # scopes under the hold that would have been deleted
    provenance: int  # provenance children under the hold that would have been rewritten
    sessions: int  # ingested sessions under the hold that would have been forgotten


class ErasureArtifacts(_Model):
    scopes: int  # scope rows deleted
    objects: int  # memory-tool objects deleted
    provenance_edges: int  # edges rewritten to TOMBSTONE:<random>
    sessions: int  # ingested sessions sent through the forget pipeline
    forgotten_records_hashed: int  # forgotten-session records kept as hmac:<hex> only
    curated_writes: int  # observed-write rows of erased sessions removed
    forget: dict[str, int] = Field(default_factory=dict)  # the forget reports' artifact counters, summed


class VerificationCheck(_Model):
    name: CheckName
    passed: bool
    count: int  # findings (0 when passed)
    skipped: bool = False
    locations: list[str] = Field(default_factory=list)  # where: store:table.column or agent:file (no values)
    note: str = ""


class Verification(_Model):
    receipt_id: str | None = None
    verified: bool
    checks: list[VerificationCheck]


class ErasureReceipt(_Model):
    receipt_id: str
    request_id: str | None
    day: str  # YYYY-MM-DD (UTC); no finer time
    state: ReceiptState
    dry_run: bool
    structural_deleted: int
    provenance_rewritten: int
    hold_blocked: int
    blocked: list[BlockedByHold]
    artifacts: ErasureArtifacts
    verified: bool
    verification: Verification | None


class ReceiptList(_Model):
    receipts: list[ErasureReceipt]
