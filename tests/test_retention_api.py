"""The memory-tool API on a real retention.sqlite and real Redis: writes, reads, lineage,
legal holds, TTL clamping, expiry and purge, and the CLI's JSON contract."""

from __future__ import annotations

import dataclasses
import json

import pytest

from memoryd.cli import main
from memoryd.constants import DAY_MS, TOMBSTONE_REF_PREFIX
from memoryd.errors import RefusedError, UsageError
from memoryd.retention import api
from memoryd.retention.content import content_hash
from memoryd.retention.state import retention_db_path
from memoryd.sessions.model import Participant, SessionInfo
from tests.conftest import make_settings

T0 = 1_790_000_000_000 + 12_345  # a sub-day instant
USER = "tenant:t:user:u1"


async def test_writing_creates_missing_ancestors_and_reads_return_provenance(settings, redis) -> None:
    parent = await api.write_object(settings, redis, USER, "Nora prefers tea in the afternoon", now=T0)
    assert parent.created_scopes == ["tenant:t", USER]
    child = await api.write_object(
        settings, redis, "tenant:t:user:u2:session:s1", "a derived note", provenance_parent=USER, now=T0 + 5
    )
    assert child.created_scopes == ["tenant:t:user:u2", "tenant:t:user:u2:session:s1"]
    assert child.provenance is not None
    assert child.provenance.parent_hash == content_hash("  NORA prefers tea in the afternoon ")  # normalized
    assert child.provenance.at == T0
    second = await api.write_object(settings, redis, "tenant:t:user:u2:session:s1", "another", now=T0 + 6)
    assert second.created_scopes == []

    read = await api.read_scope(settings, "tenant:t:user:u2:session:s1")
    assert read.state == "live"
    assert [o.content for o in read.objects] == ["a derived note", "another"]
    prov = read.objects[0].provenance
    assert prov is not None and (prov.parent, prov.parent_state) == (USER, "live")
    assert read.objects[1].provenance is None
    assert (await api.read_scope(settings, "tenant:t:user:nobody")).state == "missing"


async def test_reads_of_a_host_without_retention_state_create_nothing(settings) -> None:
    assert (await api.read_scope(settings, USER)).state == "missing"
    assert (await api.list_holds(settings)).holds == []
    assert (await api.list_receipts(settings)).receipts == []
    assert not retention_db_path(settings).exists()


async def test_bad_writes_name_the_field_and_change_nothing(settings, redis) -> None:
    with pytest.raises(UsageError, match="provenance_parent: scope tenant:t:user:ghost has no live object"):
        await api.write_object(settings, redis, USER, "x", provenance_parent="tenant:t:user:ghost")
    with pytest.raises(UsageError, match="content: empty"):
        await api.write_object(settings, redis, USER, "   ")
    with pytest.raises(UsageError, match="retention_days"):
        await api.write_object(settings, redis, USER, "x", retention_days=0)
    with pytest.raises(UsageError, match="scope"):
        await api.write_object(settings, redis, "user:u1", "x")
    assert (await api.read_scope(settings, USER)).state == "missing"


async def test_a_longer_child_ttl_is_clamped_to_the_parents_and_the_response_says_so(settings, redis) -> None:
    parent = await api.write_object(settings, redis, USER, "p", retention_days=10, now=T0)
    assert parent.expires_at == T0 + 10 * DAY_MS and not parent.clamped
    child = await api.write_object(settings, redis, f"{USER}:session:s", "c", retention_days=30, now=T0 + 1)
    assert child.clamped and child.expires_at == T0 + 10 * DAY_MS
    assert "clamped to its parent tenant:t:user:u1" in child.notes[0]
    inherited = await api.write_object(settings, redis, f"{USER}:session:s2", "c2", now=T0 + 2)
    assert inherited.expires_at == T0 + 10 * DAY_MS and not inherited.clamped
    # Shortening the parent later pulls every descendant down with it.
    await api.write_object(settings, redis, USER, "p2", retention_days=2, now=T0 + 3)
    await api.run_expire(settings, redis, now=T0 + 3 * DAY_MS)
    assert (await api.read_scope(settings, f"{USER}:session:s")).state == "expired"


async def test_expiry_hides_reads_but_keeps_provenance_resolvable(settings, redis) -> None:
    await api.write_object(settings, redis, USER, "the secret recipe uses cardamom", retention_days=1, now=T0)
    child = await api.write_object(
        settings, redis, "tenant:t:user:u2", "cites the recipe", provenance_parent=USER, now=T0 + 1
    )
    before = await api.run_expire(settings, redis, now=T0 + DAY_MS - 1)
    assert before.expired_scopes == 0
    report = await api.run_expire(settings, redis, now=T0 + DAY_MS)
    assert report.expired_scopes == 1

    hidden = await api.read_scope(settings, USER)
    assert (hidden.state, hidden.hidden_by, hidden.objects) == ("expired", USER, [])
    visible = await api.read_scope(settings, "tenant:t:user:u2")
    prov = visible.objects[0].provenance
    assert prov is not None and prov.parent == USER and prov.parent_state == "expired"
    assert prov.parent_hash == content_hash("the secret recipe uses cardamom")
    lineage = await api.lineage(settings, child.object_id)
    assert [s.scope for s in lineage.steps] == ["tenant:t:user:u2", USER]
    assert lineage.steps[1].object_state == "expired"
    with pytest.raises(RefusedError, match="expired"):
        await api.write_object(settings, redis, f"{USER}:session:late", "x")
    # The gate other readers (search, dreaming) use hides the user's sessions as well.
    gate = await api.load_gate(settings)
    session = SessionInfo("main", "s-9", "k", "interactive", participants=(Participant("u1"),))
    other = SessionInfo("main", "s-8", "k2", "interactive", participants=(Participant("u2"),))
    settings_t = dataclasses.replace(settings, retention=dataclasses.replace(settings.retention, tenant="t"))
    gate = api.RetentionGate(settings_t, gate.expired)
    assert gate.hides_session(session) and not gate.hides_session(other)
    again = await api.run_expire(settings, redis, now=T0 + 5 * DAY_MS)
    assert again.expired_scopes == 0  # reruns converge


async def test_held_scopes_are_not_expired(settings, redis) -> None:
    await api.write_object(
        settings, redis, "tenant:t:user:held", "kept for litigation", retention_days=1, now=T0
    )
    await api.write_object(settings, redis, "tenant:t:user:free", "ordinary", retention_days=1, now=T0)
    await api.write_object(settings, redis, "tenant:t:user:parent", "p", retention_days=1, now=T0)
    await api.write_object(settings, redis, "tenant:t:user:parent:session:s", "held child", now=T0)
    hold = await api.add_hold(settings, redis, "tenant:t:user:held", "case 42")
    await api.add_hold(settings, redis, "tenant:t:user:parent:session:s", "case 43")
    report = await api.run_expire(settings, redis, now=T0 + 2 * DAY_MS)
    assert report.expired_scopes == 1 and report.held_skipped == 3
    assert (await api.read_scope(settings, "tenant:t:user:held")).state == "live"
    assert (await api.read_scope(settings, "tenant:t:user:parent:session:s")).state == "live"
    assert (await api.read_scope(settings, "tenant:t:user:free")).state == "expired"
    # Released, the hold no longer protects it.
    released = await api.release_hold(settings, redis, "tenant:t:user:held")
    assert released.hold_id == hold.hold_id
    await api.run_expire(settings, redis, now=T0 + 3 * DAY_MS)
    assert (await api.read_scope(settings, "tenant:t:user:held")).state == "expired"


async def test_holds_are_listed_released_and_a_missing_one_is_a_usage_error(settings, redis) -> None:
    first = await api.add_hold(settings, redis, USER, "case 1")
    again = await api.add_hold(settings, redis, USER, "case 1, amended")
    assert again.hold_id == first.hold_id and again.reason == "case 1, amended"
    assert [h.scope for h in (await api.list_holds(settings)).holds] == [USER]
    await api.release_hold(settings, redis, USER)
    assert (await api.list_holds(settings)).holds == []
    with pytest.raises(UsageError, match="no legal hold on tenant:t:user:u1"):
        await api.release_hold(settings, redis, USER)
    with pytest.raises(UsageError, match="reason"):
        await api.add_hold(settings, redis, USER, " ")


async def test_purge_after_expiry_deletes_data_and_neutralises_edges_citing_it(
    tmp_path, sessions_root, redis
) -> None:
    settings = make_settings(tmp_path, sessions_root, retention={"expired_purge_after_days": 1})
    await api.write_object(settings, redis, USER, "expired subject text", retention_days=1, now=T0)
    child = await api.write_object(
        settings, redis, "tenant:t:user:u2", "derived", provenance_parent=USER, now=T0 + 1
    )
    first = await api.run_expire(settings, redis, now=T0 + DAY_MS)
    assert (first.expired_scopes, first.purged_objects) == (1, 0)
    purge = await api.run_expire(settings, redis, now=T0 + 2 * DAY_MS)
    assert (purge.purged_objects, purge.purged_scopes, purge.provenance_rewritten) == (1, 1, 1)
    assert (await api.read_scope(settings, USER)).state == "missing"
    prov = (await api.read_scope(settings, "tenant:t:user:u2")).objects[0].provenance
    assert prov is not None and prov.parent.startswith(TOMBSTONE_REF_PREFIX) and prov.parent_hash is None
    assert prov.at is not None and prov.at % DAY_MS == 0
    assert (await api.lineage(settings, child.object_id)).steps[0].provenance.parent_state == "erased"


def _cli(capsys, settings_path: str, *args: str) -> tuple[int, object]:
    code = main(["--config", settings_path, *args])
    out = capsys.readouterr().out
    return code, (json.loads(out) if out.strip().startswith(("{", "[")) else out)


def test_cli_contract_commands_exit_zero_with_json(tmp_path, capsys, redis_url) -> None:
    cfg = tmp_path / "memoryd.toml"
    cfg.write_text(
        f'state_dir = "{tmp_path / "state"}"\nsessions_root = "{tmp_path / "sessions"}"\n'
        f'redis_url = "{redis_url}"\n'
    )
    code, written = _cli(capsys, str(cfg), "mem", "write", "--scope", USER, "--content", "a note", "--json")
    assert code == 0 and isinstance(written, dict) and written["scope"] == USER
    code, read = _cli(capsys, str(cfg), "mem", "read", "--scope", USER, "--json")
    assert code == 0 and read["objects"][0]["content"] == "a note"  # type: ignore[index]
    code, holds = _cli(capsys, str(cfg), "hold", "list", "--json")
    assert (code, holds) == (0, {"holds": []})
    code, receipts = _cli(capsys, str(cfg), "receipts", "--json")
    assert (code, receipts) == (0, {"receipts": []})
    code, lineage = _cli(capsys, str(cfg), "mem", "lineage", "--object", written["objectId"], "--json")
    assert code == 0 and lineage["steps"][0]["scope"] == USER  # type: ignore[index]
    assert main(["--config", str(cfg), "mem", "read", "--scope", "nonsense"]) == 2
