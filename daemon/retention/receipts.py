"""Erasure receipts (seed 001): what was decided and done, never what was erased.

A receipt carries the state, the three counts of the three-way decision, per-artifact
counters, the blocking holds by their opaque ids, the caller's request id, the day, and the
verifier's checks. It never carries content, hashes, scope strings, object ids, session ids
or paths of the subject: it outlives the erasure and is scanned by the verifier like every
other row. The residue paths a failed check found go to the caller's output at erase time
only (`Verification.residue`, never stored; see `stored_form`).

States: `complete`, `partial` (a legal hold kept part, `allow_partial`), `refused` (a hold,
nothing changed) and `not_found` (no scope, object, session or pending erasure names the
subject: nothing was erased, and the receipt says so instead of claiming `complete`).

JSON is camelCase, as every memoryd report; the Python attributes are snake_case.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

ReceiptState = Literal["complete", "partial", "refused", "not_found"]
CheckName = Literal[
    "provenance_invariant", "derivability", "physical", "fts_segments", "embeddings", "redis", "journal"
]
# `skipped` is not `passed`: the check could not run (no subject, no embedder for stored vectors).
# `waiting`: nothing else names the subject, but queued purge jobs do (no purge deletes another);
# the check passes once they have run (daemon/retention/settle.py).
CheckStatus = Literal["passed", "failed", "skipped", "waiting"]
# The reason a subject's checks give when skipped without one (`memoryd verify` alone).
NO_SUBJECT = "no erased subject given (the subject of an erasure is never stored: see its receipt)"
SETTLED_NOTE = "the queued purge jobs it waited for have run"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True)


class BlockedByHold(_Model):
    hold_id: str
    structural: int  # scopes under the hold that would have been deleted
    provenance: int  # provenance children under the hold that would have been rewritten
    sessions: int  # ingested sessions under the hold that would have been forgotten


class ErasureArtifacts(_Model):
    scopes: int  # scope rows deleted
    objects: int  # memory-tool objects deleted
    provenance_edges: int  # edges rewritten to TOMBSTONE:<random>
    sessions: int  # ingested sessions this run sent through the forget pipeline
    # Of those, sessions with another (non-agent) participant whose turns name no sender: their
    # derived memory was removed whole, the other participants' contributions with it.
    shared_sessions_removed: int = 0
    # Shared sessions whose every user turn names its sender: the subject's turns (and the replies
    # to them) are removed, and the session is read again for the other participants without them.
    shared_sessions_separated: int = 0
    forgotten_records_hashed: int  # forgotten-session records kept as hmac:<hex> only
    curated_writes: int  # observed-write rows of erased sessions removed
    participant_rows: int = 0  # recorded participants of erased sessions (and the subject's) removed
    redis_values_purged: int = 0  # earlier job arguments and results naming the subject, deleted
    times_coarsened: int = 0  # surviving times equal to an erased object's exact one, cut to the day
    forget: dict[str, int] = Field(default_factory=dict)  # the forget reports' artifact counters, summed


class VerificationCheck(_Model):
    name: CheckName
    status: CheckStatus
    count: int  # findings (0 unless failed)
    # Where: store:table.column, a page or frame kind, a Redis key family, or agent:workspace
    # file. A stored receipt keeps schema names only; file paths are replaced by their kind.
    locations: list[str] = Field(default_factory=list)
    note: str = ""

    @model_validator(mode="after")
    def _says_why(self) -> VerificationCheck:
        """A skipped check names its reason; a failed one has findings, a passed one none."""
        if self.status in ("skipped", "waiting") and not self.note:
            raise ValueError(f"check {self.name}: {self.status} without a reason")
        if (self.status == "failed") != (self.count > 0):
            raise ValueError(f"check {self.name}: {self.status} with {self.count} findings")
        return self

    @property
    def passed(self) -> bool:
        return self.status == "passed"


class Verification(_Model):
    receipt_id: str | None = None
    # True only when every check passed: a skipped check (nothing to compare with) is not a pass.
    verified: bool
    checks: list[VerificationCheck]
    # Ids of the queued purge jobs a `waiting` check waits for (random ids, never the subject's).
    waiting_for: list[str] = Field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(c.status == "failed" for c in self.checks)

    def settled(self) -> Verification:
        """This run once the purge jobs it waited for have run: what they named left Redis with
        them (a stored result keeps no arguments), so the waiting check passes."""
        checks = [
            c.model_copy(update={"status": "passed", "note": f"{c.note}; {SETTLED_NOTE}"})
            if c.status == "waiting"
            else c
            for c in self.checks
        ]
        return self.model_copy(
            update={"checks": checks, "waiting_for": [], "verified": all(c.passed for c in checks)}
        )

    def stored_form(self) -> Verification:
        """This run as stored (a receipt, a job's result in Redis): locations that are workspace
        files lose their path, which may name the subject (a file called after them)."""
        checks = [
            c.model_copy(update={"locations": sorted({_kind_of(loc) for loc in c.locations})})
            for c in self.checks
        ]
        return self.model_copy(update={"checks": checks})

    @property
    def headline(self) -> str:
        """One line a newcomer can read: what was verified, what failed, what could not run."""
        if self.verified:
            return "Verified: yes (every check passed)"
        failed = [c.name for c in self.checks if c.status == "failed"]
        if failed:
            return f"Verified: NO ({len(failed)} check(s) failed: {', '.join(failed)})"
        if self.waiting_for:
            return (
                f"Verified: not yet ({len(self.waiting_for)} queued purge job(s) still name the subject; "
                "no purge deletes another: checked again once they have run)"
            )
        skipped = [c for c in self.checks if c.status == "skipped"]
        if any(c.note == NO_SUBJECT for c in skipped):
            return (
                "Verified: not as an erasure (no subject was given, so no erased text or id was looked "
                "for; the checks that need none found nothing wrong. An erasure's receipt holds its own "
                "full run: memoryd receipts)"
            )
        return (
            f"Verified: not fully (nothing failed, but {len(skipped)} check(s) could not run: see why below)"
        )


class ErasureReceipt(_Model):
    receipt_id: str
    request_id: str | None
    day: str  # YYYY-MM-DD (UTC); no finer time
    state: ReceiptState
    dry_run: bool
    # This run finished an erasure a crash had interrupted (its pending journal was found): the
    # counts are this run's; the verification used the needles journaled before the crash.
    resumed: bool = False
    structural_deleted: int
    provenance_rewritten: int
    hold_blocked: int
    blocked: list[BlockedByHold]
    artifacts: ErasureArtifacts
    verified: bool
    verification: Verification | None

    def settled(self) -> ErasureReceipt:
        """The receipt once the purge jobs its verification waited for have run."""
        if self.verification is None or not self.verification.waiting_for:
            return self
        verification = self.verification.settled()
        return self.model_copy(update={"verification": verification, "verified": verification.verified})

    def stored_form(self) -> ErasureReceipt:
        """The receipt as stored (and as a job result in Redis): locations that are workspace
        files lose their path, which may name the subject (a file called after them)."""
        if self.verification is None:
            return self
        return self.model_copy(update={"verification": self.verification.stored_form()})


WORKSPACE_MARK = ":workspace/"


def _kind_of(location: str) -> str:
    """`agent main:workspace/memory/nadia.md` → `agent main:workspace file`; others unchanged."""
    head, sep, _ = location.partition(WORKSPACE_MARK)
    return f"{head}:workspace file" if sep else location


class ReceiptList(_Model):
    receipts: list[ErasureReceipt]


DeploymentState = Literal["complete", "partial", "refused", "not_found", "failed"]


class DeploymentReceipt(_Model):
    """An erasure sent to every host of a deployment (`memoryd enqueue erase` without
    `--queue`): each host's receipt, and the state of the whole. It names no host: counts only.

    `complete` only when every host finished with `complete` (or found nothing); `partial`
    while any host has not run it yet (its job waits for it, durably) or any host's erasure was
    partial; `refused` when a legal hold refused it on a host; `failed` when a host's job failed
    (send it again under the same request id); `not_found` when no host found anything."""

    erasure_id: str
    state: DeploymentState
    hosts: int  # hosts the erasure was sent to (every host serving an agent on this Redis)
    hosts_done: int  # of those, hosts whose erasure finished with a receipt
    hosts_pending: int  # hosts that have not run it yet: it waits for them
    hosts_failed: int
    verified: bool  # every host finished, and every receipt is verified
    receipts: list[ErasureReceipt]


def deployment_receipt(
    erasure_id: str, receipts: list[ErasureReceipt], pending: int, failed: int
) -> DeploymentReceipt:
    """The receipt of the whole from the hosts' receipts (pure)."""
    states = {r.state for r in receipts}
    state: DeploymentState
    if failed:
        state = "failed"
    elif "refused" in states:
        state = "refused"
    elif pending or "partial" in states:
        state = "partial"
    elif states <= {"not_found"}:
        state = "not_found"
    else:
        state = "complete"
    done = [r for r in receipts if r.state in ("complete", "not_found")]
    verified = (
        not pending
        and not failed
        and bool(receipts)
        and all(r.verified or r.state == "not_found" for r in done)
        and len(done) == len(receipts)
    )
    return DeploymentReceipt(
        erasure_id=erasure_id,
        state=state,
        hosts=len(receipts) + pending + failed,
        hosts_done=len(receipts),
        hosts_pending=pending,
        hosts_failed=failed,
        verified=verified and state == "complete",
        receipts=receipts,
    )
