"""The subject model (issue 16 item 1): a user is found in every session they take part in —
as the second participant of a group chat, in a session reset into an archive after ingestion
— through the participants recorded at ingestion; a shared session's memory goes whole and is
counted apart; nobody else's direct session is touched."""

from __future__ import annotations

from memoryd.agent_runtime import agent_runtime
from memoryd.forget.request import ForgetRequest
from memoryd.forget.run import run_forget
from memoryd.index.sync import run_index_sync
from memoryd.ingest.sweep import run_ingest_sweep
from memoryd.ops import erasure
from memoryd.ops.verification import run_verify
from memoryd.retention.api import EraseRequest, plan_erase
from memoryd.retention.subjects import gather_sessions
from tests.conftest import make_settings
from tests.erase_world import (
    NADIA_WORDS,
    OLGA_DIRECT_TEXT,
    OLGA_GROUP_TEXT,
    OMAR_TEXT,
    add_group_world,
    reset_nadias_session,
    said_by,
)

NADIA = "tenant:default:user:nadia"


def _participants(conn):
    return conn.execute(
        "SELECT session_id, actor_id, namespace FROM session_participants ORDER BY 1, 2"
    ).fetchall()


def _world(tmp_path, sessions_root, unique):
    return make_settings(
        tmp_path,
        sessions_root,
        daemon={"host_id": f"test-{unique}"},
        index={"sources": ["memory", "sessions"], "embedding": {"provider": "hashing"}},
    )


async def test_ingestion_records_each_sessions_participants_and_message_senders(
    tmp_path, sessions_root, unique, redis
) -> None:
    settings = _world(tmp_path, sessions_root, unique)
    b = add_group_world(sessions_root)
    b.append("sess-group-1", said_by("tg:3003", "Remember that the ferry leaves at nine sharp."), 4)
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)
        rows = await rt.require_store().read(_participants)
    group = [(actor, ns) for sid, actor, ns in rows if sid == "sess-group-1"]
    assert [a for a, _ in group] == ["nadia", "olga", "tg:3003"]  # tg:3003 only ever sent a message
    assert dict(group)["tg:3003"] == '{"pluginId":"telegram","senderKind":"human","type":"observation"}'
    assert ("sess-nadia-1", "nadia", '{"type":"profile"}') in rows  # from its metadata


async def test_an_archived_session_and_a_group_chat_are_found_by_any_participant(
    tmp_path, sessions_root, unique, redis
) -> None:
    settings = _world(tmp_path, sessions_root, unique)
    b = add_group_world(sessions_root)
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)
    reset_nadias_session(b)

    found = await gather_sessions(settings, NADIA, migrate=False)

    assert [(s.session_id, s.shared) for s in found] == [
        ("sess-group-1", True),
        ("sess-nadia-1", False),  # no longer in any metadata: found by its recorded participants
        ("sess-nadia-2", False),
    ]
    group = found[0]
    assert group.scope == "tenant:default:user:nadia:session:sess-group-1"
    assert "tenant:default:user:olga:session:sess-group-1" in group.hold_scopes
    olga = await gather_sessions(settings, "tenant:default:user:olga", migrate=False)
    assert [s.session_id for s in olga] == ["sess-group-1", "sess-olga-1"]


async def test_a_group_without_per_message_senders_is_removed_whole_and_counted(
    tmp_path, sessions_root, unique, redis
) -> None:
    settings = _world(tmp_path, sessions_root, unique)
    b = add_group_world(sessions_root, senders=False)
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)
        await run_index_sync(rt)
    reset_nadias_session(b)

    receipt = await erasure.run_erase(settings, redis, EraseRequest(scope=NADIA))

    assert receipt.state == "complete" and receipt.verified, receipt.verification
    assert receipt.artifacts.sessions == 3 and receipt.artifacts.shared_sessions_removed == 1
    workspace = settings.workspace_for("main")
    corpus = "".join(p.read_text() for p in (workspace / "memory").rglob("*.txt"))
    assert not any(word in corpus for word in NADIA_WORDS)
    assert OLGA_DIRECT_TEXT in corpus and OMAR_TEXT in corpus  # other users' direct sessions are intact
    async with agent_runtime(settings, "main", redis=redis) as rt:
        rows = await rt.require_store().read(_participants)
    assert {sid for sid, _, _ in rows} == {"sess-olga-1", "sess-omar-1"}
    assert not any(actor == "nadia" for _, actor, _ in rows)
    async with agent_runtime(settings, "main", redis=redis) as rt:
        again = await run_ingest_sweep(rt)
    assert again.messages_staged == 0  # the group is never read again: olga's turns went with it
    assert OLGA_GROUP_TEXT not in "".join(p.read_text() for p in (workspace / "memory").rglob("*.txt"))


async def test_a_group_whose_turns_name_their_senders_loses_only_the_subjects_turns(
    tmp_path, sessions_root, unique, redis
) -> None:
    settings = _world(tmp_path, sessions_root, unique)
    b = add_group_world(sessions_root)
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)
        await run_index_sync(rt)
    reset_nadias_session(b)
    _, subject = await plan_erase(settings, EraseRequest(scope=NADIA))

    receipt = await erasure.run_erase(settings, redis, EraseRequest(scope=NADIA))

    assert receipt.state == "complete" and receipt.verified, receipt.verification
    a = receipt.artifacts
    assert (a.sessions, a.shared_sessions_separated, a.shared_sessions_removed) == (3, 1, 0)
    # The next sweep and index run read the group again, without nadia's turns and the replies.
    async with agent_runtime(settings, "main", redis=redis) as rt:
        again = await run_ingest_sweep(rt)
        await run_index_sync(rt)
        rows = await rt.require_store().read(_participants)
    assert again.messages_staged == 2  # olga's turn and its reply
    corpus = "".join(p.read_text() for p in (settings.workspace_for("main") / "memory").rglob("*.txt"))
    assert OLGA_GROUP_TEXT in corpus and not any(word in corpus for word in NADIA_WORDS)
    assert [(sid, actor) for sid, actor, _ in rows if sid == "sess-group-1"] == [("sess-group-1", "olga")]
    # Nothing re-read holds her: the verifier, with her journaled needles, still passes.
    assert (await run_verify(settings, redis, subject)).verified


async def test_forget_removes_the_recorded_participants_of_the_sessions_it_forgets(
    tmp_path, sessions_root, unique, redis
) -> None:
    settings = _world(tmp_path, sessions_root, unique)
    add_group_world(sessions_root)
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)
        await run_forget(rt, ForgetRequest(agent="main", sessions=["sess-group-1"]))
        rows = await rt.require_store().read(_participants)
    assert "sess-group-1" not in {sid for sid, _, _ in rows}
    assert ("sess-olga-1", "olga", '{"type":"profile"}') in rows


async def test_a_dry_run_counts_the_shared_sessions_it_would_remove_whole(
    tmp_path, sessions_root, unique, redis
) -> None:
    settings = _world(tmp_path, sessions_root, unique)
    add_group_world(sessions_root)
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)
    preview = await erasure.run_erase(settings, None, EraseRequest(scope=NADIA, dry_run=True))
    a = preview.artifacts
    assert (a.sessions, a.shared_sessions_removed, a.shared_sessions_separated) == (2, 0, 1)
