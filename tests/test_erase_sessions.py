"""Erasing a user whose sessions were ingested and indexed: the sessions go through the forget
pipeline, their forgotten records survive only as keyed hashes that admission still honours,
and the verifier (with the configured embedder) passes over every agent store and workspace."""

from __future__ import annotations

from memoryd.agent_runtime import agent_runtime
from memoryd.index.sync import run_index_sync
from memoryd.ingest.sweep import run_ingest_sweep
from memoryd.ops import erasure
from memoryd.ops.verification import run_verify
from memoryd.retention import api
from memoryd.retention.api import EraseRequest
from memoryd.store.tombstones import forgotten_ids, hashed_session_ref
from tests.erase_world import build_world


def _tombstones(conn):
    return conn.execute("SELECT session_id, reason, created_at FROM memory_session_tombstones").fetchall()


async def test_erasing_a_user_forgets_their_sessions_and_keeps_only_hashed_records(
    tmp_path, sessions_root, unique, redis
) -> None:
    settings = build_world(tmp_path, sessions_root, unique)
    async with agent_runtime(settings, "main", redis=redis) as rt:
        staged = await run_ingest_sweep(rt)
        assert staged.messages_staged == 4
        await run_index_sync(rt)
    await api.write_object(
        settings, redis, "tenant:default:user:nora", "nora's preferred courier is Blue Finch"
    )
    await api.write_object(
        settings,
        redis,
        "tenant:default:user:omar",
        "omar said nora recommended a courier",
        provenance_parent="tenant:default:user:nora",
    )

    receipt = await erasure.run_erase(settings, redis, EraseRequest(scope="tenant:default:user:nora"))

    assert receipt.state == "complete", receipt
    assert (receipt.artifacts.sessions, receipt.artifacts.forgotten_records_hashed) == (1, 1)
    assert receipt.provenance_rewritten == 1
    assert receipt.structural_deleted == 2  # the user scope and the ingested session's scope
    assert receipt.artifacts.forget["sessionCorpusLines"] == 2
    assert receipt.artifacts.forget["shortTermEntries"] == 2
    assert receipt.artifacts.forget["indexChunks"] >= 1 and receipt.artifacts.forget["vectorRows"] >= 1
    assert receipt.verified, receipt.verification
    embeddings = next(c for c in receipt.verification.checks if c.name == "embeddings")  # type: ignore[union-attr]
    assert embeddings.status == "passed" and "hashing" in embeddings.note

    async with agent_runtime(settings, "main", redis=redis) as rt:
        secret = rt.secret()
        store = rt.require_store()
        rows = await store.read(_tombstones)
        assert rows == [(hashed_session_ref(secret, "sess-nora-1"), "erased", rows[0][2])]
        assert rows[0][2] % 86_400_000 == 0  # no sub-day time tied to the erased session
        # Admission honours the hashed record (and only a keyed lookup can find it).
        assert await store.read(forgotten_ids, ["sess-nora-1", "sess-omar-1"], secret) == {"sess-nora-1"}
        assert await store.read(forgotten_ids, ["sess-nora-1"], None) == set()
        again = await run_ingest_sweep(rt)
        assert again.messages_staged == 0
    corpus = "".join(p.read_text() for p in (settings.workspace_for("main") / "memory").rglob("*.txt"))
    assert "violet mongoose" not in corpus and "orchard rota" in corpus  # omar's memory is untouched

    rerun = await erasure.run_erase(settings, redis, EraseRequest(scope="tenant:default:user:nora"))
    assert rerun.state == "complete" and rerun.verified  # a rerun converges (forget is idempotent)


async def test_a_hold_on_a_users_session_scope_blocks_its_forget(
    tmp_path, sessions_root, unique, redis
) -> None:
    settings = build_world(tmp_path, sessions_root, unique)
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)
    hold = await api.add_hold(settings, redis, "tenant:default:user:nora:session:sess-nora-1", "subpoena")

    refused = await erasure.run_erase(settings, redis, EraseRequest(scope="tenant:default:user:nora"))

    assert refused.state == "refused"
    assert [(b.hold_id, b.sessions) for b in refused.blocked] == [(hold.hold_id, 1)]
    async with agent_runtime(settings, "main", redis=redis) as rt:
        assert await rt.require_store().read(_tombstones) == []  # nothing was forgotten
    corpus = "".join(p.read_text() for p in (settings.workspace_for("main") / "memory").rglob("*.txt"))
    assert "violet mongoose" in corpus


async def test_a_subject_for_forget_verify_ignores_plain_records_only_when_asked(
    tmp_path, sessions_root, unique, redis
) -> None:
    from memoryd.forget.request import ForgetRequest
    from memoryd.forget.run import run_forget

    settings = build_world(tmp_path, sessions_root, unique)
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)
        every = rt.sessions.list_sessions().sessions
        nora = [s for s in every if s.session_id == "sess-nora-1"]
        others = [s for s in every if s.session_id != "sess-nora-1"]  # what they say may stay
        await run_forget(rt, ForgetRequest(agent="main", sessions=["sess-nora-1"]))
    # A plain forget keeps the plain forgotten record by design: content-only subjects pass …
    content_only = await api.session_subject(settings, nora, include_ids=False, surviving=others)
    assert (await run_verify(settings, redis, content_only)).verified
    # … while an erasure-grade subject finds the plain id in the forgotten records.
    with_ids = await api.session_subject(settings, nora, include_ids=True, surviving=others)
    failed = await run_verify(settings, redis, with_ids)
    derivability = next(c for c in failed.checks if c.name == "derivability")
    assert derivability.locations == ["agent main:memory_session_tombstones.session_id"]


async def test_a_result_naming_the_subject_stored_during_the_erasure_is_purged_before_the_receipt(
    tmp_path, sessions_root, unique, redis
) -> None:
    """A forget running beside the erasure stores a report listing the erased session after the
    erasure's purge: the erasure finds it when it verifies, purges again, and verifies clean."""
    import orjson
    import redis as sync_redis

    from memoryd.failpoints import on_failpoint

    settings = build_world(tmp_path, sessions_root, unique)
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)
    key = f"arq:result:forget:late-{unique}"

    def a_late_result() -> None:
        r = sync_redis.Redis.from_url(settings.redis_url)
        r.set(key, orjson.dumps({"f": "forget", "r": {"sessionIds": ["sess-nora-1"]}}), ex=60)
        r.close()

    with on_failpoint("erase.verify", a_late_result):
        receipt = await erasure.run_erase(settings, redis, EraseRequest(scope="tenant:default:user:nora"))

    assert receipt.verified, receipt.verification
    assert receipt.artifacts.redis_values_purged >= 1
    assert await redis.get(key) is None
