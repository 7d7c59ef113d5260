"""Seed 001 as tests: one user scope, 1,847 provenance children under other subjects' session
scopes carrying the parent's content hash; erase the user (structural cascade + provenance
rewrite), and the same with one child under a legal hold (refused, or partial)."""

from __future__ import annotations

import json

from memoryd.cli import main
from memoryd.constants import DAY_MS, TOMBSTONE_REF_PREFIX
from memoryd.ops import erasure
from memoryd.retention import api
from memoryd.retention.api import EraseRequest, ObjectWrite
from memoryd.retention.content import content_hash
from memoryd.retention.state import retention_db_path
from memoryd.store.db import Store
from memoryd.store.migrate import RETENTION

CHILDREN = 1847
USER = "tenant:acme:user:u-1234"
PARENT_TEXT = "u-1234 lives at 14 Harbour Lane and was born on 3 March 1981"
T0 = 1_790_000_000_000 + 37_000_123  # a sub-day instant


def child_scope(i: int) -> str:
    return f"tenant:acme:user:subject-{i}:session:s-{i}"


async def build_seed(settings, redis) -> str:
    parent = await api.write_object(settings, redis, USER, PARENT_TEXT, now=T0)
    # A nested scope of the user, with an object of its own: part of the structural cascade.
    await api.write_object(settings, redis, f"{USER}:session:own", "the user's own session note", now=T0 + 1)
    await api.write_objects(
        settings,
        redis,
        [
            ObjectWrite(
                child_scope(i), f"summary {i} of a conversation with subject {i}", provenance_parent=USER
            )
            for i in range(CHILDREN)
        ],
        now=T0 + 2,
    )
    return parent.object_id


def _rows(conn):
    return conn.execute(
        "SELECT object_id, scope, content, provenance_parent, provenance_hash, provenance_at "
        "FROM retention_objects ORDER BY object_id"
    ).fetchall()


async def dump_objects(settings) -> list[tuple]:
    store = await Store.open(retention_db_path(settings), readonly=True, schema=RETENTION)
    try:
        return await store.read(_rows)
    finally:
        await store.close()


async def test_erasing_the_user_rewrites_all_1847_children_and_verifies(settings, redis) -> None:
    parent_id = await build_seed(settings, redis)
    parent_hash = content_hash(PARENT_TEXT)
    before = {r[0]: r for r in await dump_objects(settings)}
    assert sum(1 for r in before.values() if r[3] == USER and r[4] == parent_hash) == CHILDREN

    receipt = await erasure.run_erase(
        settings, redis, EraseRequest(scope=USER, request_id="dsr-77"), now=T0 + DAY_MS
    )

    assert (receipt.state, receipt.provenance_rewritten, receipt.hold_blocked) == ("complete", CHILDREN, 0)
    assert receipt.structural_deleted == 2  # the user scope and its nested session scope
    assert (receipt.artifacts.objects, receipt.artifacts.scopes) == (2, 2)
    assert receipt.request_id == "dsr-77" and receipt.day == "2026-09-23"
    assert receipt.verified, receipt.verification
    assert {c.name: c.passed for c in receipt.verification.checks} == {  # type: ignore[union-attr]
        "provenance_invariant": True,
        "derivability": True,
        "physical": True,
        "fts_segments": True,
        "embeddings": True,
        "redis": True,
    }

    after = await dump_objects(settings)
    assert len(after) == CHILDREN
    tokens = set()
    for object_id, _scope, content, pparent, phash, pat in after:
        assert content == before[object_id][2]  # every child keeps its content
        assert pparent.startswith(TOMBSTONE_REF_PREFIX) and pparent != USER
        assert phash is None and pat % DAY_MS == 0 and pat == (T0 // DAY_MS) * DAY_MS
        tokens.add(pparent)
    assert len(tokens) == CHILDREN  # opaque and unlinkable: no shared token groups the children

    # The receipt is stored and holds no content, hash or id of the subject.
    stored = (await api.list_receipts(settings)).receipts
    assert [r.receipt_id for r in stored] == [receipt.receipt_id]
    body = stored[0].model_dump_json()
    for secret in (USER, "u-1234", parent_hash, parent_hash[:12], parent_id, "Harbour Lane", str(T0)):
        assert secret not in body
    assert (await api.read_scope(settings, USER)).state == "missing"


async def test_rerunning_a_finished_erasure_finds_nothing_left_and_says_so(settings, redis) -> None:
    await api.write_object(settings, redis, USER, PARENT_TEXT, now=T0)
    await api.write_object(settings, redis, child_scope(1), "child", provenance_parent=USER, now=T0 + 1)
    first = await erasure.run_erase(settings, redis, EraseRequest(scope=USER))
    again = await erasure.run_erase(settings, redis, EraseRequest(scope=USER))
    assert (first.provenance_rewritten, again.provenance_rewritten, again.structural_deleted) == (1, 0, 0)
    assert again.state == "not_found" and not again.verified  # nothing names the subject any more


async def test_a_dry_run_plans_the_same_counts_and_changes_nothing(settings, redis) -> None:
    await build_seed(settings, redis)
    before = await dump_objects(settings)
    preview = await erasure.run_erase(settings, redis, EraseRequest(scope=USER, dry_run=True))
    assert (preview.dry_run, preview.state, preview.provenance_rewritten, preview.structural_deleted) == (
        True,
        "complete",
        CHILDREN,
        2,
    )
    assert preview.verification is None
    assert await dump_objects(settings) == before
    assert (await api.list_receipts(settings)).receipts == []


async def test_one_held_child_refuses_the_erasure_and_changes_nothing(settings, redis) -> None:
    await build_seed(settings, redis)
    hold = await api.add_hold(settings, redis, child_scope(7), "litigation 2026-118")
    before = await dump_objects(settings)

    receipt = await erasure.run_erase(settings, redis, EraseRequest(scope=USER))

    assert (
        receipt.state,
        receipt.hold_blocked,
        receipt.provenance_rewritten,
        receipt.structural_deleted,
    ) == ("refused", 1, 0, 0)
    assert [(b.hold_id, b.provenance) for b in receipt.blocked] == [(hold.hold_id, 1)]
    assert await dump_objects(settings) == before  # nothing changed
    assert (await api.read_scope(settings, USER)).state == "live"
    assert [r.state for r in (await api.list_receipts(settings)).receipts] == ["refused"]


async def test_one_held_child_with_allow_partial_erases_the_rest_and_lists_the_hold(settings, redis) -> None:
    await build_seed(settings, redis)
    hold = await api.add_hold(settings, redis, child_scope(7), "litigation 2026-118")

    receipt = await erasure.run_erase(settings, redis, EraseRequest(scope=USER, allow_partial=True))

    assert (receipt.state, receipt.hold_blocked, receipt.provenance_rewritten) == ("partial", 1, CHILDREN - 1)
    assert [b.hold_id for b in receipt.blocked] == [hold.hold_id]
    rows = {r[1]: r for r in await dump_objects(settings)}
    held = rows[child_scope(7)]
    assert (held[3], held[4]) == (USER, content_hash(PARENT_TEXT))  # the hold forbids the rewrite
    assert all(r[3].startswith(TOMBSTONE_REF_PREFIX) for s, r in rows.items() if s != child_scope(7))
    assert USER not in rows
    # The held row still confirms the subject, so the erasure is honestly not verified.
    assert not receipt.verified
    derivability = next(c for c in receipt.verification.checks if c.name == "derivability")  # type: ignore[union-attr]
    assert not derivability.passed
    assert "retention:retention_objects.provenance_parent" in derivability.locations
    assert "retention:retention_objects.provenance_hash" in derivability.locations


async def test_a_hold_on_a_nested_scope_keeps_it_and_its_ancestors_only(settings, redis) -> None:
    await build_seed(settings, redis)
    await api.add_hold(settings, redis, f"{USER}:session:own", "preserve")
    receipt = await erasure.run_erase(settings, redis, EraseRequest(scope=USER, allow_partial=True))
    assert receipt.state == "partial" and receipt.provenance_rewritten == CHILDREN
    assert [o.content for o in (await api.read_scope(settings, f"{USER}:session:own")).objects] == [
        "the user's own session note"
    ]
    assert (await api.read_scope(settings, USER)).objects == []  # container kept, its content erased


def test_cli_erase_under_a_hold_exits_3_and_prints_the_refused_receipt(tmp_path, capsys, redis_url) -> None:
    cfg = tmp_path / "memoryd.toml"
    cfg.write_text(
        f'state_dir = "{tmp_path / "state"}"\nsessions_root = "{tmp_path / "sessions"}"\n'
        f'redis_url = "{redis_url}"\n'
    )
    base = ["--config", str(cfg)]
    assert main([*base, "mem", "write", "--scope", USER, "--content", PARENT_TEXT]) == 0
    assert (
        main(
            [*base, "mem", "write", "--scope", child_scope(1), "--content", "c", "--provenance-parent", USER]
        )
        == 0
    )
    assert main([*base, "hold", "add", "--scope", child_scope(1), "--reason", "case"]) == 0
    capsys.readouterr()
    assert main([*base, "erase", "--scope", USER, "--json"]) == 3
    captured = capsys.readouterr()
    assert json.loads(captured.out)["state"] == "refused"
    assert "legal hold" in captured.err
    assert main([*base, "erase", "--scope", USER, "--allow-partial", "--request-id", "r-9", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "partial"
    assert main([*base, "receipts", "--json"]) == 0
    assert [r["requestId"] for r in json.loads(capsys.readouterr().out)["receipts"]] == [None, "r-9"]
