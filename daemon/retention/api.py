"""The memory-tool API over scopes (async): write, read, lineage, legal holds, and the entry
points of expiry, erasure planning, receipts and verification. An erasure runs through
memoryd.ops.erasure, which hands it the forget pipeline for the erased sessions.

    await write_object(settings, redis, "tenant:t:user:u1", "a note")
    await read_scope(settings, "tenant:t:user:u1")

Writes take the retention lease and commit in one fenced transaction; reads open the store
read-only and never create it.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace

from redis.asyncio import Redis

from memoryd.constants import LINEAGE_MAX_DEPTH, TOMBSTONE_REF_PREFIX
from memoryd.errors import RefusedError, UsageError
from memoryd.retention.content import content_hash, validate_content
from memoryd.retention.erase import list_receipts, plan_erase, session_subject
from memoryd.retention.expire import run_expire, run_retention_sweep
from memoryd.retention.gate import RetentionGate, load_gate
from memoryd.retention.models import (
    HoldList,
    HoldReleased,
    HoldView,
    LineageReport,
    LineageStep,
    MemoryObject,
    ParentState,
    Provenance,
    ReadResult,
    ScopeState,
    WriteResult,
)
from memoryd.retention.needles import VerifySubject
from memoryd.retention.receipts import ErasureReceipt, ReceiptList, Verification
from memoryd.retention.request import EraseRequest, ExpireRequest
from memoryd.retention.scopes import covering, decide_expiry, parse_scope
from memoryd.retention.state import now_ms, open_for_read, open_for_write
from memoryd.sessions.redact import redact_secrets
from memoryd.settings import Settings
from memoryd.store import retention as repo
from memoryd.store.db import Connection

__all__ = [
    "ObjectWrite",
    "write_object",
    "write_objects",
    "read_scope",
    "lineage",
    "add_hold",
    "release_hold",
    "list_holds",
    "ExpireRequest",
    "run_expire",
    "run_retention_sweep",
    "EraseRequest",
    "ErasureReceipt",
    "plan_erase",
    "session_subject",
    "VerifySubject",
    "ReceiptList",
    "list_receipts",
    "Verification",
    "RetentionGate",
    "load_gate",
]


@dataclass(frozen=True, slots=True)
class ObjectWrite:
    scope: str
    content: str
    provenance_parent: str | None = None
    retention_days: int | None = None


def _validate(item: ObjectWrite) -> ObjectWrite:
    parse_scope(item.scope)
    validate_content(item.content)
    if item.provenance_parent is not None:
        parse_scope(item.provenance_parent, field="provenance_parent")
    if item.retention_days is not None and (
        not isinstance(item.retention_days, int) or item.retention_days < 1
    ):
        raise UsageError(f"retention_days: {item.retention_days!r} must be a whole number of days >= 1")
    # What the memory tool stores obeys the rule transcript text does: no credential kept.
    return replace(item, content=redact_secrets(item.content))


async def write_object(
    settings: Settings,
    redis: Redis,
    scope: str,
    content: str,
    provenance_parent: str | None = None,
    retention_days: int | None = None,
    *,
    now: int | None = None,
) -> WriteResult:
    """Store one object in `scope` (creating missing ancestors), optionally citing a parent scope."""
    results = await write_objects(
        settings, redis, [ObjectWrite(scope, content, provenance_parent, retention_days)], now=now
    )
    return results[0]


async def write_objects(
    settings: Settings, redis: Redis, items: list[ObjectWrite], *, now: int | None = None
) -> list[WriteResult]:
    """Many writes in one transaction (one lease, one commit); later items may cite earlier ones."""
    checked = [_validate(i) for i in items]
    ts = now if now is not None else now_ms()
    async with open_for_write(settings, redis) as (store, lease):
        return await store.write(_apply_writes, checked, ts, fence=lease.fence)


class _WriteTxn:
    """State of one write transaction: rows read once, new rows batched for executemany."""

    def __init__(self, conn: Connection, now: int):
        self.conn = conn
        self.now = now
        self.scopes: dict[str, repo.ScopeRow | None] = {}
        self.latest: dict[str, repo.ObjectRow | None] = {}
        self.new_scopes: list[repo.ScopeRow] = []
        self.new_objects: list[repo.ObjectRow] = []
        self.expired = repo.expired_scope_keys(conn)

    def prefetch(self, items: list[ObjectWrite]) -> None:
        keys: set[str] = set()
        for item in items:
            for s in (item.scope, item.provenance_parent):
                if s is not None:
                    parsed = parse_scope(s)
                    keys.update([parsed.key, *parsed.ancestor_keys()])
        found = repo.scopes_by_key(self.conn, keys)
        for k in keys:
            self.scopes[k] = found.get(k)
        parents = {i.provenance_parent for i in items if i.provenance_parent}
        latest = repo.latest_objects(self.conn, sorted(parents)) if parents else {}
        for p in parents:
            self.latest[p] = latest.get(p)

    def ensure_scope(
        self, scope: str, retention_days: int | None
    ) -> tuple[list[str], repo.ScopeRow, str | None]:
        parsed = parse_scope(scope)
        created: list[str] = []
        parent_row: repo.ScopeRow | None = None
        note: str | None = None
        for key in [*parsed.ancestor_keys(), parsed.key]:
            row = self.scopes.get(key)
            days = retention_days if key == parsed.key else None
            if row is None:
                parent_key = parent_row.scope if parent_row else None
                decision = decide_expiry(
                    key, self.now, days, parent_key, parent_row.expires_at if parent_row else None
                )
                row = repo.ScopeRow(key, parent_key, self.now, days, decision.expires_at, None)
                self.new_scopes.append(row)
                created.append(key)
                note = note or decision.note
            elif days is not None:
                decision = decide_expiry(
                    key, row.created_at, days, row.parent, parent_row.expires_at if parent_row else None
                )
                row = repo.ScopeRow(
                    row.scope, row.parent, row.created_at, days, decision.expires_at, row.expired_at
                )
                self._flush_scopes()
                repo.set_scope_retention(self.conn, key, days, decision.expires_at)
                note = note or decision.note
            self.scopes[key] = row
            parent_row = row
        assert parent_row is not None
        return created, parent_row, note

    def _flush_scopes(self) -> None:
        if self.new_scopes:
            repo.insert_scopes(self.conn, self.new_scopes)
            self.new_scopes = []

    def flush(self) -> None:
        self._flush_scopes()
        if self.new_objects:
            repo.insert_objects(self.conn, self.new_objects)
            self.new_objects = []


def _apply_writes(conn: Connection, items: list[ObjectWrite], now: int) -> list[WriteResult]:
    txn = _WriteTxn(conn, now)
    txn.prefetch(items)
    results: list[WriteResult] = []
    for item in items:
        hidden = covering(item.scope, txn.expired)
        if hidden is not None:
            raise RefusedError(
                f"scope: {item.scope} is unreadable since {hidden} expired; it takes no writes"
            )
        provenance: Provenance | None = None
        edge: tuple[str | None, str | None, int | None] = (None, None, None)
        if item.provenance_parent is not None:
            parent = item.provenance_parent
            if covering(parent, txn.expired) is not None:
                raise RefusedError(f"provenance_parent: {parent} has expired and cannot be cited")
            cited = txn.latest.get(parent)
            if cited is None:
                raise UsageError(f"provenance_parent: scope {parent} has no live object to cite")
            edge = (parent, cited.content_hash, cited.created_at)
            provenance = Provenance(
                parent=parent, parent_hash=cited.content_hash, at=cited.created_at, parent_state="live"
            )
        created, row, note = txn.ensure_scope(item.scope, item.retention_days)
        obj = repo.ObjectRow(
            f"obj-{secrets.token_hex(12)}", row.scope, item.content, content_hash(item.content), now, *edge
        )
        txn.new_objects.append(obj)
        txn.latest[row.scope] = obj
        results.append(
            WriteResult(
                object_id=obj.object_id,
                scope=row.scope,
                created_scopes=created,
                expires_at=row.expires_at,
                clamped=note is not None,
                notes=[note] if note else [],
                provenance=provenance,
            )
        )
    txn.flush()
    return results


# --- reads --------------------------------------------------------------------------------------


def _parent_states(conn: Connection, parents: set[str], expired: set[str]) -> dict[str, ParentState]:
    states: dict[str, ParentState] = {}
    real = sorted(p for p in parents if not p.startswith(TOMBSTONE_REF_PREFIX))
    present = repo.scopes_by_key(conn, real)
    for p in parents:
        if p.startswith(TOMBSTONE_REF_PREFIX):
            states[p] = "erased"
        elif p not in present:
            states[p] = "missing"
        elif covering(p, expired) is not None:
            states[p] = "expired"
        else:
            states[p] = "live"
    return states


def _provenance(obj: repo.ObjectRow, states: dict[str, ParentState]) -> Provenance | None:
    if obj.provenance_parent is None:
        return None
    return Provenance(
        parent=obj.provenance_parent,
        parent_hash=obj.provenance_hash,
        at=obj.provenance_at,
        parent_state=states[obj.provenance_parent],
    )


def _read(conn: Connection, scope: str) -> ReadResult:
    expired = repo.expired_scope_keys(conn)
    if not repo.scopes_by_key(conn, [scope]):
        return ReadResult(scope=scope, state="missing", hidden_by=None, objects=[])
    hidden = covering(scope, expired)
    if hidden is not None:
        return ReadResult(scope=scope, state="expired", hidden_by=hidden, objects=[])
    objects = repo.objects_in_scopes(conn, [scope])
    states = _parent_states(conn, {o.provenance_parent for o in objects if o.provenance_parent}, expired)
    return ReadResult(
        scope=scope,
        state="live",
        hidden_by=None,
        objects=[
            MemoryObject(
                object_id=o.object_id,
                scope=o.scope,
                content=o.content,
                created_at=o.created_at,
                provenance=_provenance(o, states),
            )
            for o in objects
        ],
    )


async def read_scope(settings: Settings, scope: str) -> ReadResult:
    """The live objects of `scope` with their provenance; an expired scope reads as empty."""
    key = parse_scope(scope).key
    async with open_for_read(settings) as store:
        if store is None:
            return ReadResult(scope=key, state="missing", hidden_by=None, objects=[])
        return await store.read(_read, key)


def _lineage(conn: Connection, object_id: str) -> LineageReport:
    expired = repo.expired_scope_keys(conn)
    steps: list[LineageStep] = []
    seen: set[str] = set()
    current = repo.objects_by_id(conn, [object_id]).get(object_id)
    if current is None:
        raise UsageError(f"object: no object {object_id!r}")
    truncated = False
    while current is not None:
        if current.object_id in seen or len(steps) >= LINEAGE_MAX_DEPTH:
            truncated = True
            break
        seen.add(current.object_id)
        parent = current.provenance_parent
        states = _parent_states(conn, {parent}, expired) if parent else {}
        state: ScopeState = "expired" if covering(current.scope, expired) else "live"
        steps.append(
            LineageStep(
                object_id=current.object_id,
                scope=current.scope,
                object_state=state,
                provenance=_provenance(current, states),
            )
        )
        if parent is None or states.get(parent) in ("erased", "missing"):
            break
        # The edge cites a scope; resolve it to the object whose hash the edge carries (expired
        # parents stay resolvable for audit), else the scope's newest object.
        candidates = repo.objects_in_scopes(conn, [parent])
        match = [o for o in candidates if o.content_hash == current.provenance_hash]
        pool = match or candidates
        current = max(pool, key=lambda o: (o.created_at, o.object_id)) if pool else None
    return LineageReport(object_id=object_id, steps=steps, truncated=truncated)


async def lineage(settings: Settings, object_id: str) -> LineageReport:
    """The provenance chain of an object, resolvable through expired scopes (audit)."""
    if not object_id or len(object_id) > 128:
        raise UsageError(f"object: invalid object id {object_id!r}")
    async with open_for_read(settings) as store:
        if store is None:
            raise UsageError(f"object: no object {object_id!r}")
        return await store.read(_lineage, object_id)


# --- legal holds ----------------------------------------------------------------------------------


def _view(h: repo.HoldRow) -> HoldView:
    return HoldView(hold_id=h.hold_id, scope=h.scope, reason=h.reason, created_at=h.created_at)


async def add_hold(
    settings: Settings, redis: Redis, scope: str, reason: str, *, now: int | None = None
) -> HoldView:
    """Hold `scope` and everything under it: no expiry, no erasure, no provenance rewrite."""
    key = parse_scope(scope).key
    if not reason or not reason.strip():
        raise UsageError("reason: a legal hold needs a reason")
    hold = repo.HoldRow(
        f"hold-{secrets.token_hex(8)}", key, reason.strip(), now if now is not None else now_ms()
    )
    async with open_for_write(settings, redis) as (store, lease):
        return _view(await store.write(repo.upsert_hold, hold, fence=lease.fence))


async def release_hold(settings: Settings, redis: Redis, scope: str) -> HoldReleased:
    key = parse_scope(scope).key
    async with open_for_write(settings, redis) as (store, lease):
        row = await store.write(repo.delete_hold, key, fence=lease.fence)
    if row is None:
        raise UsageError(f"scope: no legal hold on {key}")
    return HoldReleased(hold_id=row.hold_id, scope=key, released=True)


async def list_holds(settings: Settings) -> HoldList:
    async with open_for_read(settings) as store:
        if store is None:
            return HoldList(holds=[])
        rows = await store.read(repo.all_holds)
    return HoldList(holds=[_view(h) for h in rows])
