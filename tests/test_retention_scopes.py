"""Scopes, TTL clamping, session mapping and the erasure plan: pure code, no I/O."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memoryd.constants import DAY_MS
from memoryd.errors import UsageError
from memoryd.retention.expire import plan_expiry
from memoryd.retention.mapping import session_scope
from memoryd.retention.plan import ErasureSnapshot, SessionTarget, plan_erasure
from memoryd.retention.scopes import (
    Scope,
    covering,
    decide_expiry,
    encode_component,
    is_within,
    parse_scope,
)
from memoryd.sessions.model import Participant, SessionInfo
from memoryd.store.retention import CitingEdge, HoldRow, ObjectRow, ScopeRow, subtree_bounds

component = st.text(
    st.characters(min_codepoint=33, max_codepoint=0x2FFF, blacklist_categories=("Cc", "Cs")),
    min_size=1,
    max_size=20,
).filter(lambda s: s == s.strip())


@given(st.lists(component, min_size=1, max_size=4))
def test_every_scope_key_parses_back_to_itself(ids: list[str]) -> None:
    scope = Scope(tuple(zip(("tenant", "user", "session", "object"), ids, strict=False)))
    assert parse_scope(scope.key) == scope
    assert scope.key.count(":") == 2 * len(ids) - 1  # ':' inside ids is always encoded


@given(st.lists(component, min_size=2, max_size=4), component)
def test_structural_children_sort_inside_the_parents_key_range(ids: list[str], sibling: str) -> None:
    child = Scope(tuple(zip(("tenant", "user", "session", "object"), ids, strict=False)))
    parent = child.parent
    assert parent is not None
    low, high = subtree_bounds(parent.key)
    assert low < child.key < high
    assert is_within(child.key, parent.key)
    # A sibling whose id merely extends the parent's id is not inside the parent.
    lookalike = Scope((*parent.parts[:-1], (parent.level, parent.leaf_id + sibling)))
    assert not is_within(lookalike.key, parent.key)
    assert not (low < lookalike.key < high) or lookalike.key.startswith(parent.key + ":")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "empty scope"),
        ("user:u1", "level 1 must be 'tenant'"),
        ("tenant:t:session:s", "level 2 must be 'user'"),
        ("tenant:t:user", "pairs"),
        ("tenant:t:user:u:session:s:object:o:extra:x", "deepest"),
        ("tenant::user:u", "tenant id is empty"),
        ("tenant:t:user:a%zz", "'%'"),
        ("tenant:t:user:a%3ab", "'%'"),  # only the canonical upper-case escape is accepted
        ("tenant:t:user:bad\x01id", "control character"),
    ],
)
def test_bad_scopes_are_refused_with_a_message_naming_the_problem(text: str, problem: str) -> None:
    with pytest.raises(UsageError, match="scope") as info:
        parse_scope(text)
    assert problem in str(info.value)


def test_an_actor_id_with_a_colon_is_encoded_so_prefixes_stay_exact() -> None:
    scope = parse_scope("tenant:t").child("user", "tg:2002")
    assert scope.key == "tenant:t:user:tg%3A2002"
    assert encode_component("50%") == "50%25"
    assert not is_within("tenant:t:user:tg%3A2002", "tenant:t:user:tg")


def test_a_longer_child_ttl_is_clamped_to_the_parent_and_says_so() -> None:
    parent_expires = 1_000 + 10 * DAY_MS
    longer = decide_expiry("tenant:t:user:u", 1_000, 30, "tenant:t", parent_expires)
    assert (longer.expires_at, longer.clamped) == (parent_expires, True)
    assert "clamped" in (longer.note or "") and "tenant:t" in (longer.note or "")
    shorter = decide_expiry("tenant:t:user:u", 1_000, 5, "tenant:t", parent_expires)
    assert (shorter.expires_at, shorter.clamped, shorter.note) == (1_000 + 5 * DAY_MS, False, None)
    inherited = decide_expiry("tenant:t:user:u", 1_000, None, "tenant:t", parent_expires)
    assert inherited.expires_at == parent_expires and not inherited.clamped
    assert decide_expiry("tenant:t", 1_000, None, None, None).expires_at is None


def test_covering_finds_a_hold_on_the_scope_or_an_ancestor_only() -> None:
    holds = {"tenant:t:user:u1"}
    assert covering("tenant:t:user:u1:session:s", holds) == "tenant:t:user:u1"
    assert covering("tenant:t:user:u1", holds) == "tenant:t:user:u1"
    assert covering("tenant:t", holds) is None
    assert covering("tenant:t:user:u10", holds) is None


def test_expiry_skips_held_scopes_and_parents_of_held_scopes() -> None:
    plan = plan_expiry(
        ["tenant:t:user:a", "tenant:t:user:b", "tenant:t:user:b:session:s", "tenant:t:user:c"],
        ["tenant:t:user:b:session:s", "tenant:t:user:c"],
    )
    assert plan.expire == ("tenant:t:user:a",)
    assert set(plan.held) == {"tenant:t:user:b", "tenant:t:user:b:session:s", "tenant:t:user:c"}


def _session(participants: list[Participant], sid: str = "s-1") -> SessionInfo:
    return SessionInfo(
        agent_id="main",
        session_id=sid,
        session_key="k",
        session_kind="interactive",
        participants=tuple(participants),
    )


def test_a_session_with_one_user_is_theirs_and_a_shared_one_the_tenants(settings) -> None:
    bot = Participant("helper", (("senderKind", "bot"),))
    self_ = Participant("main")
    nora = Participant("tg:nora")
    assert (
        session_scope(settings, _session([bot, self_, nora])) == "tenant:default:user:tg%3Anora:session:s-1"
    )
    assert session_scope(settings, _session([bot])) == "tenant:default"
    # A group chat is not its first participant's: expiring nora does not hide omar's words.
    assert session_scope(settings, _session([nora, Participant("omar")])) == "tenant:default"


# --- the three-way plan -----------------------------------------------------------------------


def _obj(oid: str, scope: str) -> ObjectRow:
    return ObjectRow(oid, scope, "text", "h", 1, None, None, None)


def _snapshot(holds: list[str], sessions: tuple[SessionTarget, ...] = ()) -> ErasureSnapshot:
    target = "tenant:t:user:u"
    scopes = tuple(
        ScopeRow(s, None, 1, None, None, None) for s in [target, f"{target}:session:a", f"{target}:session:b"]
    )
    objects = (_obj("o-u", target), _obj("o-a", f"{target}:session:a"), _obj("o-b", f"{target}:session:b"))
    citing = (
        CitingEdge("c1", "tenant:t:user:x:session:1", target),
        CitingEdge("c2", "tenant:t:user:y:session:2", f"{target}:session:a"),
        CitingEdge("o-b", f"{target}:session:b", target),
    )  # inside the subtree: deleted, not rewritten
    return ErasureSnapshot(
        target,
        scopes,
        objects,
        citing,
        tuple(HoldRow(f"hold-{i}", h, "r", 1) for i, h in enumerate(holds)),
        sessions,
    )


def test_without_holds_the_plan_deletes_the_subtree_and_rewrites_only_outside_children() -> None:
    plan = plan_erasure(_snapshot([]), allow_partial=False)
    assert plan.state == "complete"
    assert plan.delete_scopes[-1] == "tenant:t:user:u"  # deepest first
    assert {o.object_id for o in plan.delete_objects} == {"o-u", "o-a", "o-b"}
    assert plan.rewrite_edges == ("c1", "c2")
    assert plan.structural_deleted == 3


def test_a_held_provenance_child_refuses_the_plan_unless_partial_is_allowed() -> None:
    refused = plan_erasure(_snapshot(["tenant:t:user:x"]), allow_partial=False)
    assert refused.state == "refused" and not refused.has_work and refused.hold_blocked == 1
    partial = plan_erasure(_snapshot(["tenant:t:user:x"]), allow_partial=True)
    assert partial.state == "partial" and partial.rewrite_edges == ("c2",)
    assert [(b.hold_id, b.kind, b.count) for b in partial.blocked] == [("hold-0", "provenance", 1)]


def test_a_held_scope_inside_the_target_survives_with_its_ancestors_as_containers() -> None:
    session = SessionTarget("main", "s-held", "tenant:t:user:u:session:a")
    plan = plan_erasure(_snapshot(["tenant:t:user:u:session:a"], (session,)), allow_partial=True)
    assert plan.state == "partial"
    assert set(plan.delete_scopes) == {"tenant:t:user:u:session:b"}
    assert "tenant:t:user:u" in plan.containers
    assert {o.object_id for o in plan.delete_objects} == {"o-u", "o-b"}  # the container's own object goes
    assert plan.rewrite_edges == ("c1",)  # c2 cites the held scope, which is not erased
    assert plan.forget_sessions == ()
    assert {(b.kind, b.count) for b in plan.blocked} == {("structural", 1), ("sessions", 1)}


def test_a_hold_on_the_target_refuses_even_a_partial_erasure() -> None:
    plan = plan_erasure(_snapshot(["tenant:t"]), allow_partial=True)
    assert plan.state == "refused" and plan.hold_blocked == 3
