"""The erasure decision (seed 001), made in full before anything is deleted (pure).

Three ways, never two:
* structural cascade — the target scope and every scope under it are deleted, objects and
  all, and the ingested sessions among them go through the forget pipeline;
* provenance rewrite — objects of other scopes whose provenance cites an erased scope keep
  their content; their edge becomes TOMBSTONE:<random>, hash dropped, time to the day;
* hold-blocked — whatever a legal hold covers is neither deleted nor rewritten. Without
  allow_partial any blocked item refuses the whole erasure; with it the rest is erased and
  the receipt lists the blocking holds (state `partial`).
A target nothing names (no scope row, object, citing edge or session) is `not_found`: the seed
refuses it ("scope … not present; cannot erase"), and a receipt never calls it `complete`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from memoryd.retention.scopes import covering, is_within, parse_scope
from memoryd.store.retention import CitingEdge, HoldRow, ObjectRow, ScopeRow


@dataclass(frozen=True, slots=True)
class SessionTarget:
    """An ingested session the erasure reaches (retention/subjects.py)."""

    agent_id: str
    session_id: str
    scope: str  # the erased user's session scope (the tenant's, for a session without a user)
    hold_scopes: tuple[str, ...] = ()  # every participant's session scope: a hold on any blocks it
    shared: bool = False  # other users took part too: its derived memory goes whole, counted apart
    # A shared session whose every user turn names its sender (retention/contributions.py): the
    # subject's turns are removed from it, and the other participants' are read again.
    separable: bool = False

    def hold(self, holds: _Holds) -> HoldRow | None:
        for scope in (self.scope, *self.hold_scopes):
            found = holds.of(scope)
            if found is not None:
                return found
        return None


@dataclass(frozen=True, slots=True)
class ErasureSnapshot:
    """What the planner needs, read in one transaction (plus the session sources)."""

    target: str
    scopes: tuple[ScopeRow, ...]  # the target and its subtree, as stored
    objects: tuple[ObjectRow, ...]  # every object in those scopes
    citing: tuple[CitingEdge, ...]  # every edge citing the target or a scope under it
    holds: tuple[HoldRow, ...]
    sessions: tuple[SessionTarget, ...]  # ingested sessions the target reaches


@dataclass(frozen=True, slots=True)
class Blocked:
    hold_id: str
    kind: str  # structural | provenance | sessions
    count: int


@dataclass(frozen=True, slots=True)
class ErasurePlan:
    target: str
    state: str  # complete | partial | refused | not_found
    delete_scopes: tuple[str, ...]  # scope rows to delete (deepest first)
    delete_objects: tuple[ObjectRow, ...]
    rewrite_edges: tuple[str, ...]  # object ids whose provenance is neutralised
    forget_sessions: tuple[SessionTarget, ...]
    blocked: tuple[Blocked, ...]
    # Scopes kept only because a held scope lies under them; their own objects are deleted.
    containers: tuple[str, ...]

    @property
    def hold_blocked(self) -> int:
        return sum(b.count for b in self.blocked)

    @property
    def structural_deleted(self) -> int:
        return len(set(self.delete_scopes) | {s.scope for s in self.forget_sessions})

    @property
    def shared_sessions(self) -> int:
        return sum(1 for s in self.forget_sessions if s.shared)

    @property
    def has_work(self) -> bool:
        return bool(self.delete_scopes or self.delete_objects or self.rewrite_edges or self.forget_sessions)


class _Holds:
    """The legal holds by scope; `of(scope)` is the hold covering a scope, if any."""

    def __init__(self, holds: tuple[HoldRow, ...]):
        self.by_scope = {h.scope: h for h in holds}
        self.keys = frozenset(self.by_scope)

    def of(self, scope: str) -> HoldRow | None:
        found = covering(scope, self.keys)
        return self.by_scope[found] if found is not None else None


def plan_erasure(snapshot: ErasureSnapshot, allow_partial: bool) -> ErasurePlan:
    target = snapshot.target
    if not (snapshot.scopes or snapshot.objects or snapshot.citing or snapshot.sessions):
        return ErasurePlan(target, "not_found", (), (), (), (), (), ())
    holds = _Holds(snapshot.holds)
    blocked: Counter[tuple[str, str]] = Counter()
    containers = _containers(target, holds)

    delete_scopes: list[str] = []
    for row in snapshot.scopes:
        hold = holds.of(row.scope)
        if hold is not None:
            blocked[(hold.hold_id, "structural")] += 1
        elif row.scope not in containers:
            delete_scopes.append(row.scope)

    delete_objects = tuple(o for o in snapshot.objects if holds.of(o.scope) is None)
    rewrite = _edges_to_rewrite(snapshot.citing, {o.object_id for o in delete_objects}, holds, blocked)

    forget: list[SessionTarget] = []
    for session in snapshot.sessions:
        hold = session.hold(holds)
        if hold is not None:
            blocked[(hold.hold_id, "sessions")] += 1
        else:
            forget.append(session)

    blocks = tuple(Blocked(hold_id, kind, n) for (hold_id, kind), n in sorted(blocked.items()))
    plan = ErasurePlan(
        target,
        "complete",
        tuple(sorted(delete_scopes, key=lambda s: (-s.count(":"), s))),
        delete_objects,
        tuple(sorted(rewrite)),
        tuple(forget),
        blocks,
        tuple(sorted(containers)),
    )
    return _settle(plan, allow_partial)


def _containers(target: str, holds: _Holds) -> set[str]:
    """Ancestors (within the target) of any held scope: they stay as empty containers."""
    containers: set[str] = set()
    for h in holds.keys:
        if is_within(h, target) and h != target:
            containers.update(a.key for a in parse_scope(h).ancestors() if is_within(a.key, target))
    return containers


def _edges_to_rewrite(
    citing: tuple[CitingEdge, ...], deleted_ids: set[str], holds: _Holds, blocked: Counter[tuple[str, str]]
) -> list[str]:
    rewrite: list[str] = []
    for edge in citing:
        if edge.object_id in deleted_ids or holds.of(edge.provenance_parent) is not None:
            continue  # deleted with its scope, or the cited scope is held and so not erased
        hold = holds.of(edge.scope)
        if hold is not None:
            blocked[(hold.hold_id, "provenance")] += 1
        else:
            rewrite.append(edge.object_id)
    return rewrite


def _settle(plan: ErasurePlan, allow_partial: bool) -> ErasurePlan:
    """Any block refuses the whole erasure, unless partial erasure is allowed and work remains."""
    if not plan.blocked:
        return plan
    if not allow_partial or not plan.has_work:
        return ErasurePlan(plan.target, "refused", (), (), (), (), plan.blocked, ())
    return ErasurePlan(
        plan.target,
        "partial",
        plan.delete_scopes,
        plan.delete_objects,
        plan.rewrite_edges,
        plan.forget_sessions,
        plan.blocked,
        plan.containers,
    )
