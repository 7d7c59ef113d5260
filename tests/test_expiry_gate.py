"""Retention expiry hides a user's sessions from every reader outside the retention store —
search, dreaming, promotion, ingest — while `mem lineage` still resolves provenance through
the expired scope; a held scope is never hidden and nothing of another user changes."""

from __future__ import annotations

from memoryd.agent_runtime import agent_runtime
from memoryd.constants import DAY_MS
from memoryd.dreaming.promote import run_promote
from memoryd.dreaming.sweep import run_dreaming
from memoryd.index.search import run_search
from memoryd.index.sync import run_index_sync
from memoryd.ingest.sweep import run_ingest_sweep
from memoryd.retention import api
from memoryd.retention.gate import REASON_EXPIRED
from memoryd.retention.state import now_ms
from tests.builders import Msg, SessionStoreBuilder
from tests.conftest import make_settings

NORA_TEXT = "Remember that the violet mongoose launch is on Friday at noon."
OMAR_TEXT = "Remember that the orchard rota changes every Monday morning."
SHARED_TEXT = "Remember that the harbour gate code rotates every fortnight."
NORA, OMAR = "tenant:default:user:nora", "tenant:default:user:omar"


def build_world(tmp_path, sessions_root, unique):
    settings = make_settings(
        tmp_path,
        sessions_root,
        daemon={"host_id": f"test-{unique}"},
        index={"sources": ["memory", "sessions"]},
        dreaming={"min_score": 0, "min_recall_count": 0, "min_unique_queries": 0},
    )
    b = SessionStoreBuilder(sessions_root, "main")
    b.add(
        "agent:main:dm:nora",
        "sess-nora-1",
        [Msg("user", NORA_TEXT), Msg("user", SHARED_TEXT)],
        participants=[{"actorId": "nora"}],
        chatType="direct",
    )
    b.add(
        "agent:main:dm:omar",
        "sess-omar-1",
        [Msg("user", OMAR_TEXT), Msg("user", SHARED_TEXT)],
        participants=[{"actorId": "omar"}],
        chatType="direct",
    )
    return settings


async def expire_users(settings, redis, *users: str, hold: str | None = None):
    """Give each user scope a TTL that ran out yesterday, optionally hold one, then expire."""
    past = now_ms() - 2 * DAY_MS
    for user in users:
        await api.write_object(settings, redis, user, f"profile of {user}", retention_days=1, now=past)
    if hold is not None:
        await api.add_hold(settings, redis, hold, "litigation")
    return await api.run_expire(settings, redis)


def session_ids(report) -> set[str | None]:
    return {h.session_id for h in report.results}


async def test_expired_users_session_and_promoted_memory_leave_search_but_shared_memory_stays(
    tmp_path, sessions_root, unique, redis
) -> None:
    settings = build_world(tmp_path, sessions_root, unique)
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)
        dream = await run_dreaming(rt)
        assert dream.deep is not None and len(dream.deep.promoted) == 3
        await run_index_sync(rt)
        before = {q: await run_search(rt, q) for q in ("mongoose", "orchard", "harbour")}
        memory_hits = {q: [h for h in r.results if h.path == "MEMORY.md"] for q, r in before.items()}
        assert all(len(hits) == 1 for hits in memory_hits.values())
        assert "sess-nora-1" in session_ids(before["mongoose"])

        report = await expire_users(settings, redis, NORA)
        assert report.expired_scopes == 1

        mongoose = await run_search(rt, "mongoose")
        assert mongoose.results == []  # nora's session chunk and her promoted entry are both hidden
        harbour = await run_search(rt, "harbour")
        # The entry omar shares keeps its MEMORY.md hit; only nora's own session chunk went.
        assert [h.path for h in harbour.results if h.path == "MEMORY.md"] == ["MEMORY.md"]
        assert session_ids(harbour) == {None, "sess-omar-1"}
        assert (await run_search(rt, "orchard")).results == before["orchard"].results  # omar unchanged


async def test_expired_user_is_unreadable_but_provenance_citing_it_stays_resolvable(
    tmp_path, sessions_root, unique, redis
) -> None:
    settings = build_world(tmp_path, sessions_root, unique)
    past = now_ms() - 2 * DAY_MS
    await api.write_object(
        settings, redis, NORA, "nora prefers the Blue Finch courier", retention_days=1, now=past
    )
    child = await api.write_object(
        settings, redis, OMAR, "omar heard nora recommend a courier", provenance_parent=NORA
    )
    assert (await api.run_expire(settings, redis)).expired_scopes == 1

    read = await api.read_scope(settings, NORA)
    assert (read.state, read.hidden_by, read.objects) == ("expired", NORA, [])
    omar = await api.read_scope(settings, OMAR)
    assert [o.content for o in omar.objects] == ["omar heard nora recommend a courier"]
    assert omar.objects[0].provenance is not None and omar.objects[0].provenance.parent_state == "expired"
    chain = await api.lineage(settings, child.object_id)
    assert [s.scope for s in chain.steps] == [OMAR, NORA]
    assert chain.steps[1].object_state == "expired"  # audit still reaches the expired parent
    assert chain.steps[0].provenance is not None and chain.steps[0].provenance.parent_hash is not None


async def test_dreaming_and_promotion_skip_entries_of_an_expired_user_but_not_of_a_held_one(
    tmp_path, sessions_root, unique, redis
) -> None:
    settings = build_world(tmp_path, sessions_root, unique)
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)
        report = await expire_users(settings, redis, NORA, OMAR, hold=OMAR)
        assert (report.expired_scopes, report.held_skipped) == (1, 1)

        dream = await run_dreaming(rt, phases=("light", "rem"))
        diary = (rt.paths.workspace / "DREAMS.md").read_text()
        assert "violet mongoose" not in diary and "orchard rota" in diary and "harbour gate" in diary
        assert dream.light is not None and dream.light.candidates == 2

        promoted = await run_promote(rt)
        texts = " ".join(p.text for p in promoted.promoted)
        assert "orchard rota" in texts and "harbour gate" in texts and "violet mongoose" not in texts
        assert promoted.rejected.get("expired") == 1  # nora's own entry; the shared one has omar too
        memory = (rt.paths.workspace / "MEMORY.md").read_text()
        assert "violet mongoose" not in memory
        staged = await rt.store.read(
            lambda c: c.execute(
                "SELECT count(*) FROM short_term_entries WHERE snippet LIKE '%violet mongoose%'"
            ).fetchone()[0]
        )
        assert staged == 1  # hidden, not deleted: expiry is not erasure


async def test_a_session_of_an_expired_scope_is_not_newly_staged(
    tmp_path, sessions_root, unique, redis
) -> None:
    settings = build_world(tmp_path, sessions_root, unique)
    await expire_users(settings, redis, NORA)
    async with agent_runtime(settings, "main", redis=redis) as rt:
        report = await run_ingest_sweep(rt)
        assert report.sessions_excluded == {REASON_EXPIRED: 1}
        assert report.messages_staged == 2  # omar's two messages only
        snippets = await rt.store.read(
            lambda c: [r[0] for r in c.execute("SELECT snippet FROM short_term_entries")]
        )
        assert not any("violet mongoose" in s for s in snippets)


async def test_nothing_is_hidden_while_no_scope_has_expired(tmp_path, sessions_root, unique, redis) -> None:
    settings = build_world(tmp_path, sessions_root, unique)
    await api.write_object(settings, redis, NORA, "nora's profile", retention_days=30)
    assert (await api.run_expire(settings, redis)).expired_scopes == 0
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)
        await run_index_sync(rt)
        assert "sess-nora-1" in session_ids(await run_search(rt, "mongoose"))
