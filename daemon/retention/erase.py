"""Erasure (seed 001, DESIGN §5): plan the three-way decision, then apply it in order.

    run_erase(settings, redis, EraseRequest(scope="tenant:t:user:u1"), purge_sessions=…) -> ErasureReceipt

Under the retention lease:
0. the leftover temp files of crashed atomic writes in every workspace are removed (a copy of
   the subject's words may sit in one; daemon/fileio.py says which temps are leftovers);
1. snapshot (one read transaction) + the ingested sessions the scope reaches: every session
   the user takes part in, live or archived (retention/subjects.py);
2. plan (pure, `plan.py`); refused → a `refused` receipt, nothing else changes;
3. the erased subject (ids, content, times) and the sessions reached are journaled, sealed
   (retention/journal.py), before anything is deleted; a rerun after a crash merges the entry
   it finds and verifies against the same needles;
4. one transaction in retention.sqlite: provenance children rewritten to TOMBSTONE:<random>
   and the structural subtree deleted — together, so no reader ever sees an erased parent
   next to a derivable edge;
5. per agent, under its workspace lock: the erased sessions go through the forget pipeline
   (`purge_sessions`, handed in by memoryd.ops.erasure),
   then, in one transaction, their forgotten records are replaced by keyed-hash records
   (hmac:<hex>, day-coarsened time) and their observed-write rows dropped;
6. earlier job arguments and results in Redis that name the subject are deleted
   (daemon/redis_values.py); the verifier runs; the receipt (this run's counts only) is stored and the journal entry
   deleted in one transaction, then the entry's key file.
A crash anywhere leaves state a rerun of the same request converges from: the plan is always
recomputed from what is live, and the sessions come from the (untouched) sources and the
participants recorded at ingestion.
Failpoints (tests): erase.journal, erase.retention, erase.forget, erase.hash_records, erase.verify, erase.receipt.
"""

from __future__ import annotations

import secrets
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio
from redis.asyncio import Redis

from memoryd.agent_runtime import AgentRuntime, agent_runtime
from memoryd.agents import agent_paths, agents_with_state
from memoryd.constants import DAY_MS
from memoryd.failpoints import failpoint
from memoryd.fileio import remove_leftover_temps_under
from memoryd.lock import Lease
from memoryd.redis_values import purge_naming
from memoryd.retention import journal
from memoryd.retention.contributions import Voices, read_contributions, session_texts, session_voices
from memoryd.retention.journal import PendingErasure
from memoryd.retention.needles import VerifySubject, compile_needles, subject_claim_hashes
from memoryd.retention.plan import ErasurePlan, ErasureSnapshot, SessionTarget, plan_erasure
from memoryd.retention.receipts import (
    BlockedByHold,
    ErasureArtifacts,
    ErasureReceipt,
    ReceiptList,
    Verification,
    VerificationCheck,
)
from memoryd.retention.redis_bytes import purge_naming_bytes
from memoryd.retention.request import EraseRequest
from memoryd.retention.scopes import parse_scope
from memoryd.retention.state import now_ms, open_for_read, open_for_write
from memoryd.retention.subjects import gather_sessions
from memoryd.retention.surviving import surviving_voices
from memoryd.sessions.model import ArchiveInfo, SessionInfo
from memoryd.settings import Settings
from memoryd.store import retention as repo
from memoryd.store.curated_writes import delete_writes_of_sessions
from memoryd.store.db import Connection, FenceToken, Store, truncate_wal
from memoryd.store.erased_senders import load_erased_senders, record_erased_senders, record_erased_subject
from memoryd.store.participants import participants_of_sessions
from memoryd.store.suppressions import record_suppressions, suppressions_of_sessions
from memoryd.store.tombstones import delete_tombstones, forgotten_ids, hashed_session_ref, record_tombstones

if TYPE_CHECKING:
    from memoryd.retention.verify import Embedder

REASON_ERASED = "erased"
PARTICIPANT_ROWS = "participantRows"  # carried with the forget counters, reported on its own
# Purges of Redis after the verification found values that concurrent jobs stored meanwhile.
REDIS_PURGE_ROUNDS = 3
# The forget pipeline, handed in by the caller (memoryd.ops.erasure): an agent's erased sessions
# go through it under the agent's workspace lease, and it returns the forget report's artifact
# counters. Retention does not import forget; the composition sits above both.
PurgeSessions = Callable[[AgentRuntime, list[str], Lease], Awaitable[Mapping[str, int]]]
NO_ARTIFACTS = ErasureArtifacts(
    scopes=0, objects=0, provenance_edges=0, sessions=0, forgotten_records_hashed=0, curated_writes=0
)


# --- snapshot -----------------------------------------------------------------------------------


def read_snapshot(
    conn: Connection, target: str
) -> tuple[tuple[Any, ...], tuple[Any, ...], tuple[Any, ...], tuple[Any, ...]]:
    scopes = repo.subtree_scopes(conn, target)
    objects = repo.objects_in_scopes(conn, [s.scope for s in scopes])
    return (
        tuple(scopes),
        tuple(objects),
        tuple(repo.citing_subtree(conn, target)),
        tuple(repo.all_holds(conn)),
    )


# --- the subject, for the verifier --------------------------------------------------------------


def subject_of(plan: ErasurePlan, rewritten_times: list[int], session_texts: list[str]) -> VerifySubject:
    ids: list[str] = []
    if plan.state == "complete" and plan.target not in plan.containers:
        # The subject's own scope and id, whether or not a memory-tool scope holds them: a job's
        # arguments or a participant row can name them all the same.
        ids += [plan.target, parse_scope(plan.target).leaf_id]
    for key in plan.delete_scopes:
        ids += [key, parse_scope(key).leaf_id]
    ids += [o.object_id for o in plan.delete_objects]
    # A separated session goes on for its other participants: its id stays, in their rows.
    ids += [s.session_id for s in plan.forget_sessions if not s.separable]
    contents = [o.content for o in plan.delete_objects] + session_texts
    times = [o.created_at for o in plan.delete_objects] + rewritten_times
    return VerifySubject(tuple(dict.fromkeys(ids)), tuple(contents), tuple(dict.fromkeys(times)))


async def session_subject(
    settings: Settings,
    sessions: Sequence[SessionInfo | ArchiveInfo],
    *,
    include_ids: bool,
    surviving: Sequence[SessionInfo | ArchiveInfo] = (),
) -> VerifySubject:
    """A verifier subject for sessions purged outside an erasure (`forget --verify`): their
    transcripts' text, and their ids only when no plain forgotten record is meant to remain.
    Text the `surviving` sessions also hold is not looked for: it may stay, through them."""
    texts = await anyio.to_thread.run_sync(session_texts, settings, sessions)
    left = (
        await anyio.to_thread.run_sync(session_voices, settings, surviving)
        if surviving
        else Voices([], set())
    )
    ids = tuple(s.session_id for s in sessions) if include_ids else ()
    return VerifySubject(ids=ids, contents=tuple(texts), shared=tuple(left.texts), shared_ids=tuple(left.ids))


# --- apply ----------------------------------------------------------------------------------------


def _apply_retention(conn: Connection, plan: ErasurePlan, times: Sequence[int]) -> tuple[int, int, int, int]:
    """The rewrite and the cascade in ONE transaction (seed: "in the same transaction"), and
    the subject's exact times cut to the day wherever they survive (seed: no sub-day time)."""
    rewritten = repo.rewrite_provenance(conn, plan.rewrite_edges)
    objects = repo.delete_objects(conn, [o.object_id for o in plan.delete_objects])
    scopes = repo.delete_scopes(conn, plan.delete_scopes)
    coarsened = repo.coarsen_times(conn, times)
    return rewritten, objects, scopes, coarsened


def _rewritten_times(conn: Connection, object_ids: tuple[str, ...]) -> list[int]:
    rows = repo.objects_by_id(conn, list(object_ids))
    return [r.provenance_at for r in rows.values() if r.provenance_at is not None]


def _record_erasure(
    conn: Connection,
    agent_id: str,
    secret: bytes,
    session_ids: list[str],
    separated: list[str],
    user: str | None,
    day_ms: int,
    agent_wide: bool,
    suppressions: list[tuple[str, str]],
) -> tuple[int, int, int]:
    """In one transaction, after the purge: the plain forgotten records of the erased sessions
    are swapped for keyed-hash ones (admission checks both forms, so one is always found; the
    time is the day's: a precise one would be tied to the session), except for separated
    sessions, which lose their record and get the subject as an erased sender instead: they are
    read again without the subject's turns. With `agent_wide` (a user's erasure) the subject is
    an erased sender of every session of the agent too, read or not yet read. Returns (records
    hashed, sessions separated, observed-write rows removed)."""
    if agent_wide and user is not None:
        record_erased_subject(conn, secret, user, day_ms)
    apart = set(separated)
    whole = [hashed_session_ref(secret, s) for s in session_ids if s not in apart]
    added = record_tombstones(conn, agent_id, whole, day_ms, reason=REASON_ERASED)
    delete_tombstones(conn, session_ids)
    split = record_erased_senders(conn, secret, [(s, user) for s in separated], day_ms) if user else 0
    # The other participants' facts forgotten from a separated session stay forgotten when it is
    # read again (the forget pipeline dropped the session's suppressions with the session).
    record_suppressions(conn, suppressions, day_ms)
    curated = delete_writes_of_sessions(conn, session_ids)
    return added, split, curated


@dataclass
class SessionsErased:
    """What this run did to the erased sessions (a rerun counts only what it did itself)."""

    sessions: int = 0  # sessions newly erased (whole, or the subject's turns of a separated one)
    scopes: set[str] = field(default_factory=set)  # their scopes
    shared: int = 0  # of those, shared sessions removed whole
    separated: int = 0  # of those, shared sessions whose other participants are read again
    curated: int = 0
    counters: dict[str, int] = field(default_factory=dict)

    def add(self, counters: Mapping[str, int]) -> None:
        for key, value in counters.items():
            self.counters[key] = self.counters.get(key, 0) + value


def _state_before(
    conn: Connection, ids: list[str], secret: bytes, user: str | None
) -> tuple[set[str], set[str], set[str]]:
    """(sessions with a plain forgotten record, with a hashed one, already separated from `user`)."""
    plain = forgotten_ids(conn, ids)
    hashed = forgotten_ids(conn, ids, secret) - plain
    erased = load_erased_senders(conn, secret)
    apart = {s for s in ids if user and erased.separated(s, user)}
    return plain, hashed, apart


async def _erase_agent_sessions(
    rt: AgentRuntime,
    targets: list[SessionTarget],
    user: str | None,
    day_ms: int,
    purge_sessions: PurgeSessions,
    agent_wide: bool,
    subject_texts: tuple[str, ...],
) -> SessionsErased:
    done = SessionsErased()
    secret = rt.secret()
    assert secret is not None  # a writable runtime creates the key
    store = rt.require_store()
    async with rt.lock().hold() as lease:
        failpoint("erase.forget")
        plain, hashed, apart = await store.read(
            _state_before, sorted({t.session_id for t in targets}), secret, user
        )
        # A session already separated from the subject is done: purging it again would only
        # take the other participants' re-read memory once more.
        targets = [t for t in targets if t.session_id not in apart]
        ids = sorted({t.session_id for t in targets})
        # A session forgotten before (a plain record) stays forgotten: it is never separated.
        separate = sorted(t.session_id for t in targets if t.separable and t.session_id not in plain | hashed)
        recorded = len(await store.read(participants_of_sessions, ids)) if ids else 0
        # Suppressed facts of a separated session that are not the subject's own, kept over the
        # purge. The subject's hashes are derived only when there is such a fact (rarely).
        suppressions = await store.read(suppressions_of_sessions, separate) if separate else []
        if suppressions:
            own = await anyio.to_thread.run_sync(subject_claim_hashes, subject_texts)
            suppressions = [pair for pair in suppressions if pair[0] not in own]
        if ids:
            done.add({**await purge_sessions(rt, ids, lease), PARTICIPANT_ROWS: recorded})
        failpoint("erase.hash_records")
        added, split, curated = await store.write(
            _record_erasure,
            rt.agent_id,
            secret,
            ids,
            separate,
            user,
            day_ms,
            agent_wide,
            suppressions,
            fence=lease.fence,
        )
        await store.run(truncate_wal)  # the plain records' frames go with them
    new = {s for s in ids if s not in hashed}
    done.sessions = added + split
    done.scopes = {t.scope for t in targets if t.session_id in new}
    done.shared = sum(1 for t in targets if t.shared and t.session_id in new and t.session_id not in separate)
    done.separated = split
    done.curated = curated
    return done


async def forget_sessions(
    settings: Settings,
    redis: Redis,
    sessions: tuple[SessionTarget, ...],
    now: int,
    purge_sessions: PurgeSessions,
    user: str | None = None,
    agent_wide: bool = False,
    subject_texts: tuple[str, ...] = (),
) -> SessionsErased:
    """Each agent's erased sessions through its forget pipeline, then their records: hashed
    forgotten records, or, for a separated shared session, the subject as an erased sender.
    `agent_wide` (a user's erasure): every agent with state on this host records the user as
    an erased sender, sessions or not, so what it has not read yet is skipped when it is.
    `subject_texts`: the subject's messages; a separated session keeps its other suppressed facts
    (forget --entry), never one derived from these."""
    by_agent: dict[str, list[SessionTarget]] = defaultdict(list)
    for s in sessions:
        by_agent[s.agent_id].append(s)
    if agent_wide and user is not None:
        for agent in agents_with_state(settings):
            by_agent.setdefault(agent, [])
    done = SessionsErased()
    day_ms = now // DAY_MS * DAY_MS
    for agent, targets in sorted(by_agent.items()):
        async with agent_runtime(settings, agent, redis=redis) as rt:
            part = await _erase_agent_sessions(
                rt, targets, user, day_ms, purge_sessions, agent_wide, subject_texts
            )
        done.sessions += part.sessions
        done.scopes |= part.scopes
        done.shared += part.shared
        done.separated += part.separated
        done.curated += part.curated
        done.add(part.counters)
    return done


def remove_leftover_temps_in_workspaces(settings: Settings) -> int:
    """The leftover temp files of atomic writes (daemon/fileio.py) in every workspace the
    verifier reads, whether or not the erasure reaches a session there."""
    return sum(
        remove_leftover_temps_under(agent_paths(settings, agent).workspace)
        for agent in agents_with_state(settings)
    )


# --- receipts -------------------------------------------------------------------------------------


def day_of(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d")


def build_receipt(
    plan: ErasurePlan,
    request: EraseRequest,
    now: int,
    artifacts: ErasureArtifacts,
    verification: Verification | None,
    *,
    structural: int | None = None,
    resumed: bool = False,
) -> ErasureReceipt:
    """`structural`: what this run deleted of the subtree (a dry run reports the plan's)."""
    by_hold: dict[str, dict[str, int]] = defaultdict(
        lambda: {"structural": 0, "provenance": 0, "sessions": 0}
    )
    for b in plan.blocked:
        by_hold[b.hold_id][b.kind] += b.count
    receipt_id = f"rcpt-{secrets.token_hex(8)}"
    if verification is not None:
        verification = verification.model_copy(update={"receipt_id": receipt_id})
    return ErasureReceipt(
        receipt_id=receipt_id,
        request_id=request.request_id,
        day=day_of(now),
        state=plan.state,  # type: ignore[arg-type]
        dry_run=request.dry_run,
        resumed=resumed,
        structural_deleted=0
        if plan.state in ("refused", "not_found")
        else (plan.structural_deleted if structural is None else structural),
        provenance_rewritten=artifacts.provenance_edges,
        hold_blocked=plan.hold_blocked,
        blocked=[BlockedByHold(hold_id=h, **counts) for h, counts in sorted(by_hold.items())],
        artifacts=artifacts,
        verified=verification.verified if verification else False,
        verification=verification,
    )


NEEDLES_LOST = (
    "the journal entry of an earlier run of this erasure had lost its key file, and with it the "
    "needles journaled before that run deleted anything: residue of what it deleted cannot be "
    "searched for; the other checks used what this run found"
)


def with_lost_needles(verification: Verification | None) -> Verification | None:
    """The verification of a run that adopted a keyless journal entry: a `journal` check that
    was skipped, so the receipt is not `verified` (a skipped check is not a pass)."""
    if verification is None:
        return None
    check = VerificationCheck(name="journal", status="skipped", count=0, note=NEEDLES_LOST)
    return verification.model_copy(update={"checks": [*verification.checks, check], "verified": False})


def planned_artifacts(plan: ErasurePlan) -> ErasureArtifacts:
    return ErasureArtifacts(
        scopes=len(plan.delete_scopes),
        objects=len(plan.delete_objects),
        provenance_edges=len(plan.rewrite_edges),
        sessions=len(plan.forget_sessions),
        shared_sessions_removed=sum(1 for s in plan.forget_sessions if s.shared and not s.separable),
        shared_sessions_separated=sum(1 for s in plan.forget_sessions if s.separable),
        forgotten_records_hashed=len(plan.forget_sessions),
        curated_writes=0,
    )


def _store_receipt(conn: Connection, receipt: ErasureReceipt) -> None:
    body = receipt.stored_form().model_dump_json(by_alias=True)
    repo.insert_receipt(conn, receipt.receipt_id, receipt.day, receipt.state, body)


# --- the entry point ------------------------------------------------------------------------------


async def _prepare(
    settings: Settings, store: Store | None, request: EraseRequest, journaled: tuple[SessionTarget, ...] = ()
) -> tuple[ErasurePlan, VerifySubject]:
    """Snapshot (one read transaction) + the sessions reached (and those a pending journal
    names) → plan → the subject, still in memory."""
    rows = await store.read(read_snapshot, request.scope) if store else ((), (), (), ())
    found = await gather_sessions(settings, request.scope, migrate=not request.dry_run)
    known = {(s.agent_id, s.session_id) for s in journaled}
    sessions = tuple(journaled) + tuple(s for s in found if (s.agent_id, s.session_id) not in known)
    plan = plan_erasure(ErasureSnapshot(request.scope, *rows, sessions), request.allow_partial)
    times = await store.read(_rewritten_times, plan.rewrite_edges) if store and plan.rewrite_edges else []
    deleted = set(plan.delete_scopes)
    times += [r.created_at for r in rows[0] if r.scope in deleted]  # the erased scopes' own times
    user = dict(parse_scope(request.scope).parts).get("user")
    targets, texts = await anyio.to_thread.run_sync(read_contributions, settings, plan.forget_sessions, user)
    plan = replace(plan, forget_sessions=tuple(targets))
    return plan, subject_of(plan, times, texts)


async def _with_surviving(settings: Settings, plan: ErasurePlan, subject: VerifySubject) -> VerifySubject:
    """The subject with the text and ids the sessions left behind also hold
    (retention/surviving.py): a piece of it may stay through them, so it is not residue. Read
    now, never journaled."""
    left = await anyio.to_thread.run_sync(surviving_voices, settings, plan.forget_sessions, subject.contents)
    return replace(
        subject, shared=subject.shared + tuple(left.texts), shared_ids=subject.shared_ids + tuple(left.ids)
    )


async def plan_erase(settings: Settings, request: EraseRequest) -> tuple[ErasurePlan, VerifySubject]:
    """The plan and the subject as the erasure's verifier sees it, now, without a lock or a
    write (tests)."""
    async with open_for_read(settings) as store:
        plan, subject = await _prepare(settings, store, request)
    return plan, await _with_surviving(settings, plan, subject)


async def _finish(
    store: Store,
    settings: Settings,
    receipt: ErasureReceipt,
    pending: PendingErasure | None,
    fence: FenceToken,
) -> None:
    """The receipt and the end of the journal entry in one transaction, then the entry's key."""

    def write(conn: Connection) -> None:
        _store_receipt(conn, receipt)
        if pending is not None:
            repo.delete_journal(conn, pending.journal_id)

    await store.write(write, fence=fence)
    if pending is not None:
        journal.drop_key(settings, pending.journal_id)


async def _purge_and_verify(
    settings: Settings, redis: Redis, subject: VerifySubject, embedder: Embedder | None, verify: bool
) -> tuple[int, Verification | None]:
    """Earlier job arguments and results naming the subject out of Redis, then the verifier.
    Jobs running beside the erasure may store results naming the subject after the purge (a
    forget's report lists its sessions): while the redis check finds any, purge and look again."""
    from memoryd.retention.verify import recheck_redis, run_verify

    # Compiled once, off the event loop: the sets hold every snippet of the erased sessions.
    needles = await anyio.to_thread.run_sync(compile_needles, subject)
    purged = await purge_naming(redis, lambda value: needles.hits(value) > 0, needles.may_hit)
    purged += await purge_naming_bytes(redis, lambda value: needles.hits_value(value) > 0)
    failpoint("erase.verify")
    verification = (
        await run_verify(settings, redis, subject, embedder=embedder, needles=needles) if verify else None
    )
    for _ in range(REDIS_PURGE_ROUNDS):
        if (
            verification is None
            or next(c for c in verification.checks if c.name == "redis").status != "failed"
        ):
            break  # passed, or waiting only on queued purges (no purge deletes another)
        purged += await purge_naming(redis, lambda value: needles.hits(value) > 0, needles.may_hit)
        purged += await purge_naming_bytes(redis, lambda value: needles.hits_value(value) > 0)
        verification = await recheck_redis(redis, needles, verification)
    return purged, verification


async def run_erase(
    settings: Settings,
    redis: Redis | None,
    request: EraseRequest,
    *,
    purge_sessions: PurgeSessions,
    embedder: Embedder | None,
    now: int | None = None,
    verify: bool = True,
) -> ErasureReceipt:
    """Erase `request.scope` (see the module doc). Refusal is a receipt with state `refused`,
    not an exception: the CLI turns it into exit 3, the job returns it. A dry run takes no
    lock, so it needs no Redis (`redis` None)."""
    ts = now if now is not None else now_ms()
    if request.dry_run:
        async with open_for_read(settings) as store:
            plan, _ = await _prepare(settings, store, request)
        return build_receipt(plan, request, ts, planned_artifacts(plan), None)
    assert redis is not None, "a real erasure takes the retention lease and workspace locks (Redis)"
    async with open_for_write(settings, redis) as (store, lease):
        await journal.drop_orphan_keys(settings, store, lease.fence)
        # A crashed atomic write's temp may hold the subject's words; the verifier reads them.
        await anyio.to_thread.run_sync(remove_leftover_temps_in_workspaces, settings)
        pending = await journal.load(settings, store, request.scope)
        resumed = pending is not None
        plan, subject = await _prepare(settings, store, request, pending.sessions if pending else ())
        if plan.state == "not_found" and pending is not None:
            plan = replace(plan, state="complete")  # all was done before the crash: verify, then receipt
        scope = parse_scope(request.scope)
        user = dict(scope.parts).get("user")
        agent_wide = scope.level == "user" and plan.state != "refused"
        if plan.state == "not_found" and agent_wide:
            # Nothing of the user is here yet: what arrives later is still theirs to keep out.
            await forget_sessions(settings, redis, (), ts, purge_sessions, user, agent_wide)
        if plan.state in ("refused", "not_found"):
            receipt = build_receipt(plan, request, ts, NO_ARTIFACTS, None, resumed=resumed)
            await store.write(_store_receipt, receipt, fence=lease.fence)
            return receipt
        pending = await journal.save(
            settings, store, request.scope, subject, plan.forget_sessions, lease.fence
        )
        failpoint("erase.retention")
        rewritten, objects, scopes, coarsened = await store.write(
            _apply_retention, plan, pending.subject.times_ms, fence=lease.fence
        )
        await store.run(truncate_wal)  # frames of the deleted rows leave the WAL now
        done = SessionsErased()
        if plan.forget_sessions or agent_wide:
            done = await forget_sessions(
                settings,
                redis,
                plan.forget_sessions,
                ts,
                purge_sessions,
                user,
                agent_wide,
                pending.subject.contents,
            )
        subject = await _with_surviving(settings, plan, pending.subject)
        purged, verification = await _purge_and_verify(settings, redis, subject, embedder, verify)
        if pending.needles_lost:
            verification = with_lost_needles(verification)
        artifacts = ErasureArtifacts(
            scopes=scopes,
            objects=objects,
            provenance_edges=rewritten,
            sessions=done.sessions,
            shared_sessions_removed=done.shared,
            shared_sessions_separated=done.separated,
            forgotten_records_hashed=done.sessions - done.separated,
            curated_writes=done.curated,
            participant_rows=done.counters.pop(PARTICIPANT_ROWS, 0),
            times_coarsened=coarsened,
            redis_values_purged=purged,
            forget=done.counters,
        )
        structural = scopes + len(done.scopes - set(plan.delete_scopes))
        receipt = build_receipt(
            plan, request, ts, artifacts, verification, structural=structural, resumed=resumed
        )
        failpoint("erase.receipt")
        await _finish(store, settings, receipt, pending, lease.fence)
        return receipt


async def list_receipts(settings: Settings) -> ReceiptList:
    async with open_for_read(settings) as store:
        bodies = await store.read(repo.receipt_bodies) if store else []
    return ReceiptList(receipts=[ErasureReceipt.model_validate_json(b) for b in bodies])
