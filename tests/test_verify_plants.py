"""The verifier must be able to fail. After a real erasure (user scope + ingested session), the
erased text — or a hash, id or sub-day time derived from it — is planted in one artifact kind
at a time: the verifier fails naming that place, and passes again once the plant is gone.
Then the physical check: erased bytes are in the raw database files before compaction and
not after."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import orjson
import pytest

from memoryd.agent_runtime import agent_runtime
from memoryd.agents import agent_paths
from memoryd.derivations import claim_number
from memoryd.index.embedder import HashingEmbedder
from memoryd.index.vectors import to_blob
from memoryd.ingest.staging import claim_hash
from memoryd.ingest.sweep import run_ingest_sweep
from memoryd.ops import erasure
from memoryd.ops.verification import run_verify
from memoryd.retention import api
from memoryd.retention.api import EraseRequest
from memoryd.retention.content import content_hash
from memoryd.retention.needles import VerifySubject, snippets
from memoryd.retention.state import retention_db_path
from memoryd.settings import Settings
from memoryd.store.db import Store, sqlite3
from memoryd.store.migrate import RETENTION
from tests.builders import Msg, SessionStoreBuilder
from tests.conftest import make_settings

USER = "tenant:default:user:nora"
SECRET = "Nora's courier is Blue Finch Logistics, depot on Kestrel Road"
NORA_TEXT = "Remember that the violet mongoose launch is on Friday at noon."
T0 = 1_790_000_000_000 + 41_000_777


@dataclass
class World:
    settings: Settings
    subject: VerifySubject
    child_id: str

    async def agent_sql(self, sql: str, *params: object) -> None:
        store = await Store.open(agent_paths(self.settings, "main").db_path)
        try:
            await store.write(lambda conn: conn.execute(sql, params), fence=None)
        finally:
            await store.close()

    async def retention_sql(self, sql: str, *params: object) -> None:
        store = await Store.open(retention_db_path(self.settings), schema=RETENTION)
        try:
            await store.write(lambda conn: conn.execute(sql, params), fence=None)
        finally:
            await store.close()

    def workspace_file(self, rel: str, text: str | None) -> None:
        path = self.settings.workspace_for("main") / rel
        if text is None:
            path.unlink()
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture
async def world(tmp_path, sessions_root, unique, redis) -> World:
    settings = make_settings(
        tmp_path,
        sessions_root,
        daemon={"host_id": f"test-{unique}"},
        index={"embedding": {"provider": "hashing"}},
    )
    SessionStoreBuilder(sessions_root, "main").add(
        "agent:main:dm:nora", "sess-nora-1", [Msg("user", NORA_TEXT)], participants=[{"actorId": "nora"}]
    )
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)
    await api.write_object(settings, redis, USER, SECRET, now=T0)
    child = await api.write_object(
        settings,
        redis,
        "tenant:default:user:omar",
        "omar used the same courier",
        provenance_parent=USER,
        now=T0 + 1,
    )
    request = EraseRequest(scope=USER)
    _, subject = await api.plan_erase(settings, request)
    receipt = await erasure.run_erase(settings, redis, request)
    assert receipt.verified, receipt.verification
    return World(settings, subject, child.object_id)


def _failing(verification, check: str) -> list[str]:
    result = next(c for c in verification.checks if c.name == check)
    assert not result.passed and result.count >= 1
    return result.locations


async def _plant_retention_row(w: World) -> Callable[[], Awaitable[None]]:
    await w.retention_sql(
        "INSERT INTO retention_objects(object_id, scope, content, content_hash, created_at) "
        "VALUES ('obj-plant', 'tenant:default:user:omar', ?, 'x', 1)",
        f"copied: {SECRET}",
    )
    return lambda: w.retention_sql("DELETE FROM retention_objects WHERE object_id = 'obj-plant'")


async def _plant_edge_hash(w: World) -> Callable[[], Awaitable[None]]:
    await w.retention_sql(
        "UPDATE retention_objects SET provenance_hash = ? WHERE object_id = ?",
        content_hash(SECRET)[:16],
        w.child_id,
    )
    return lambda: w.retention_sql(
        "UPDATE retention_objects SET provenance_hash = NULL WHERE object_id = ?", w.child_id
    )


async def _plant_edge_time(w: World) -> Callable[[], Awaitable[None]]:
    await w.retention_sql(
        "UPDATE retention_objects SET provenance_at = ? WHERE object_id = ?", T0, w.child_id
    )
    return lambda: w.retention_sql(
        "UPDATE retention_objects SET provenance_at = ? WHERE object_id = ?", T0 - T0 % 86_400_000, w.child_id
    )


async def _plant_memory_file(w: World) -> Callable[[], Awaitable[None]]:
    w.workspace_file("MEMORY.md", f"# Memory\n\n- {SECRET}\n")

    async def undo() -> None:
        w.workspace_file("MEMORY.md", None)

    return undo


async def _plant_corpus_line(w: World) -> Callable[[], Awaitable[None]]:
    rel = "memory/.dreams/session-corpus/2026-09-22.txt"
    w.workspace_file(rel, f"[main/sessions/main/sess-nora-1#L2] User: {NORA_TEXT}\n")

    async def undo() -> None:
        w.workspace_file(rel, None)

    return undo


async def _plant_staged_entry(w: World) -> Callable[[], Awaitable[None]]:
    await w.agent_sql(
        "INSERT INTO short_term_entries(entry_key, path, start_line, end_line, snippet, "
        "first_recalled_at, last_recalled_at, origin_class, observed_at) "
        "VALUES ('k-plant', 'memory/x.txt', 1, 1, ?, 1, 1, 'owner', 1)",
        f"User: {NORA_TEXT}",
    )
    return lambda: w.agent_sql("DELETE FROM short_term_entries WHERE entry_key = 'k-plant'")


async def _plant_claim_hash(w: World) -> Callable[[], Awaitable[None]]:
    await w.agent_sql(
        "INSERT INTO short_term_entries(entry_key, path, start_line, end_line, snippet, "
        "first_recalled_at, last_recalled_at, origin_class, observed_at, claim_hash) "
        "VALUES ('k-plant', 'memory/x.txt', 1, 1, 'unrelated words', 1, 1, 'owner', 1, ?)",
        claim_hash(NORA_TEXT),
    )
    return lambda: w.agent_sql("DELETE FROM short_term_entries WHERE entry_key = 'k-plant'")


async def _plant_claim_number(w: World) -> Callable[[], Awaitable[None]]:
    # The claim as an integer key (daemon/derivations.py claim_number), as a rowid and a column.
    await w.agent_sql("CREATE TABLE planted_claims (claim INTEGER PRIMARY KEY, again INTEGER) STRICT")
    number = claim_number(NORA_TEXT)
    await w.agent_sql("INSERT INTO planted_claims VALUES (?, ?)", number, number)
    return lambda: w.agent_sql("DROP TABLE planted_claims")


async def _plant_keyed_line(w: World) -> Callable[[], Awaitable[None]]:
    # An erased message's claim number left in the keyed lineage, in another session's line.
    await w.agent_sql("INSERT INTO ingest_sessions(session_no, session_id) VALUES (987, 'sess-other')")
    await w.agent_sql(
        "INSERT INTO ingest_lines(session_no, line_no, claim, origin_class, observed_at) "
        "VALUES (987, 1, ?, 'owner', 0)",
        claim_number(f"User: {NORA_TEXT}"),
    )

    async def undo() -> None:
        await w.agent_sql("DELETE FROM ingest_lines WHERE session_no = 987")
        await w.agent_sql("DELETE FROM ingest_sessions WHERE session_no = 987")

    return undo


async def _plant_keyed_session(w: World) -> Callable[[], Awaitable[None]]:
    # The erased session's id left as a session number's.
    await w.agent_sql("INSERT INTO ingest_sessions(session_no, session_id) VALUES (988, 'sess-nora-1')")
    return lambda: w.agent_sql("DELETE FROM ingest_sessions WHERE session_no = 988")


async def _plant_index_row(w: World) -> Callable[[], Awaitable[None]]:
    await w.agent_sql(
        "INSERT INTO memory_index_chunks(id, path, start_line, end_line, hash, model, text, updated_at) "
        "VALUES ('c-plant', 'MEMORY.md', 1, 2, 'h', 'fts-only', ?, 1)",
        SECRET,
    )
    return lambda: w.agent_sql("DELETE FROM memory_index_chunks WHERE id = 'c-plant'")


async def _plant_searched_text(w: World) -> Callable[[], Awaitable[None]]:
    # A chunk whose searched text (its text without marker lines) holds the erased words, with
    # its FTS row: the undo deletes the FTS row first, as forget does, while FTS5 can still read
    # the terms it must remove.
    await w.agent_sql(
        "INSERT INTO memory_index_chunks(rowid, id, path, start_line, end_line, hash, model, text, "
        "search_text, updated_at) VALUES (987653, 'c-plant', 'MEMORY.md', 1, 2, 'h', 'fts-only', "
        "'<!-- marker -->', ?, 1)",
        SECRET,
    )
    await w.agent_sql("INSERT INTO memory_index_chunks_fts(rowid, text) VALUES (987653, ?)", SECRET)

    async def undo() -> None:
        await w.agent_sql("DELETE FROM memory_index_chunks_fts WHERE rowid = 987653")
        await w.agent_sql("DELETE FROM memory_index_chunks WHERE id = 'c-plant'")

    return undo


async def _plant_cache_row(w: World) -> Callable[[], Awaitable[None]]:
    # The embedding cache is keyed by sha256 of the chunk text: the key alone confirms the text.
    await w.agent_sql(
        "INSERT INTO memory_embedding_cache(provider, model, provider_key, hash, embedding, updated_at) "
        "VALUES ('hashing', 'm', 'local', ?, x'00000000', 1)",
        hashlib.sha256(SECRET.encode()).hexdigest(),
    )
    return lambda: w.agent_sql("DELETE FROM memory_embedding_cache WHERE provider = 'hashing'")


async def _plant_preimage(w: World) -> Callable[[], Awaitable[None]]:
    await w.agent_sql(
        "INSERT INTO memory_backups(created_at, content, content_hash) VALUES (1, ?, 'h')",
        f"# Memory\n- {SECRET}\n",
    )
    return lambda: w.agent_sql("DELETE FROM memory_backups")


async def _plant_plain_record(w: World) -> Callable[[], Awaitable[None]]:
    await w.agent_sql(
        "INSERT INTO memory_session_tombstones(session_id, agent_id, reason, created_at) "
        "VALUES ('sess-nora-1', 'main', 'forgotten', 1)"
    )
    return lambda: w.agent_sql("DELETE FROM memory_session_tombstones WHERE session_id = 'sess-nora-1'")


async def _plant_participant(w: World) -> Callable[[], Awaitable[None]]:
    await w.agent_sql(
        "INSERT INTO session_participants(session_id, actor_id, namespace) VALUES ('sess-x', 'nora', '{}')"
    )
    return lambda: w.agent_sql("DELETE FROM session_participants WHERE session_id = 'sess-x'")


async def _plant_erased_sender(w: World) -> Callable[[], Awaitable[None]]:
    # The table holds keyed hashes only; a plain id there is a leak the verifier must see.
    await w.agent_sql(
        "INSERT INTO erased_senders(session_ref, sender_ref, created_at) VALUES ('hmac:x', 'nora', 0)"
    )
    return lambda: w.agent_sql("DELETE FROM erased_senders WHERE session_ref = 'hmac:x'")


PLANTS = {
    "retention_row": (_plant_retention_row, "derivability", "retention:retention_objects.content"),
    "provenance_hash": (_plant_edge_hash, "derivability", "retention:retention_objects.provenance_hash"),
    "provenance_sub_day_time": (
        _plant_edge_time,
        "derivability",
        "retention:retention_objects.provenance_at",
    ),
    "memory_file": (_plant_memory_file, "derivability", "agent main:workspace/MEMORY.md"),
    "corpus_line": (
        _plant_corpus_line,
        "derivability",
        "agent main:workspace/memory/.dreams/session-corpus/2026-09-22.txt",
    ),
    "staged_entry": (_plant_staged_entry, "derivability", "agent main:short_term_entries.snippet"),
    "staged_claim_hash": (_plant_claim_hash, "derivability", "agent main:short_term_entries.claim_hash"),
    "claim_number": (_plant_claim_number, "derivability", "agent main:planted_claims.claim"),
    "keyed_line_claim": (_plant_keyed_line, "derivability", "agent main:ingest_lines.claim"),
    "keyed_session_id": (_plant_keyed_session, "derivability", "agent main:ingest_sessions.session_id"),
    "index_row": (_plant_index_row, "derivability", "agent main:memory_index_chunks.text"),
    "searched_text": (_plant_searched_text, "derivability", "agent main:memory_index_chunks.search_text"),
    "cache_row": (_plant_cache_row, "derivability", "agent main:memory_embedding_cache.hash"),
    "preimage": (_plant_preimage, "derivability", "agent main:memory_backups.content"),
    "erased_sender": (_plant_erased_sender, "derivability", "agent main:erased_senders.sender_ref"),
    "recorded_participant": (
        _plant_participant,
        "derivability",
        "agent main:session_participants.actor_id",
    ),
    "plain_forgotten_record": (
        _plant_plain_record,
        "derivability",
        "agent main:memory_session_tombstones.session_id",
    ),
}


@pytest.mark.parametrize("kind", sorted(PLANTS))
async def test_the_verifier_fails_for_erased_data_planted_in_each_artifact_kind(
    world: World, redis, kind
) -> None:
    plant, check, location = PLANTS[kind]
    undo = await plant(world)
    failed = await run_verify(world.settings, redis, world.subject)
    assert not failed.verified
    assert location in _failing(failed, check)
    await undo()
    passed = await run_verify(world.settings, redis, world.subject)
    assert passed.verified, passed


async def test_the_verifier_finds_a_claim_number_in_the_raw_pages_as_well(world: World, redis) -> None:
    """Its stored bytes (a record's and a rowid's) are physical residue, whichever table holds it."""
    assert claim_number(NORA_TEXT) >= 1 << 35  # long enough for its byte forms
    undo = await _plant_claim_number(world)
    failed = await run_verify(world.settings, redis, world.subject)
    assert "agent main:planted_claims.again" in _failing(failed, "derivability")
    assert any(w.startswith("agent main:memory.sqlite") for w in _failing(failed, "physical"))
    await undo()
    assert (await run_verify(world.settings, redis, world.subject)).verified


async def test_a_sub_day_time_on_a_tombstoned_edge_fails_even_without_a_subject(world: World, redis) -> None:
    undo = await _plant_edge_time(world)
    failed = await run_verify(world.settings, redis)
    assert "retention:retention_objects: tombstoned provenance keeps a sub-day time" in _failing(
        failed, "provenance_invariant"
    )
    await undo()
    again = await run_verify(world.settings, redis)
    assert not again.failed and not again.verified  # derivability is skipped without a subject


async def test_the_verifier_fails_for_a_stored_embedding_of_an_erased_snippet(world: World, redis) -> None:
    snippet = snippets([SECRET])[0]
    vector = HashingEmbedder(world.settings.index.embedding.dims).embed_one(snippet)
    await world.agent_sql(
        "INSERT INTO memory_embedding_cache(provider, model, provider_key, hash, embedding, "
        "updated_at) VALUES ('hashing', 'm', 'local', 'opaque', ?, 1)",
        to_blob(vector),
    )
    failed = await run_verify(world.settings, redis, world.subject)
    assert "agent main:memory_embedding_cache.embedding" in _failing(failed, "embeddings")
    await world.agent_sql("DELETE FROM memory_embedding_cache WHERE hash = 'opaque'")
    assert (await run_verify(world.settings, redis, world.subject)).verified


# --- physical --------------------------------------------------------------------------------------

PHYSICAL = "zebra crossing physical proof 7781 under the old viaduct"


def _raw(path) -> bytes:
    data = b""
    for suffix in ("", "-wal"):
        try:
            data += (path.parent / (path.name + suffix)).read_bytes()
        except FileNotFoundError:
            pass
    return data


async def test_an_erasure_leaves_no_erased_byte_in_the_raw_files_even_with_a_reader_attached(
    settings, redis
) -> None:
    await api.write_object(settings, redis, USER, PHYSICAL, now=T0)
    db = retention_db_path(settings)
    # An idle reader keeps the WAL (and the pre-delete page images in it) from being folded
    # away when the writer closes: the state a busy daemon's store is in between compactions.
    reader = sqlite3.connect(str(db), isolation_level=None)
    try:
        reader.execute("SELECT count(*) FROM retention_objects").fetchone()  # attaches it to the WAL
        request = EraseRequest(scope=USER)
        _, subject = await api.plan_erase(settings, request)
        receipt = await erasure.run_erase(settings, redis, request, verify=False)
        assert receipt.state == "complete" and (await api.read_scope(settings, USER)).state == "missing"
        assert PHYSICAL.encode() not in _raw(db)  # gone from pages and WAL before any compaction

        verification = await run_verify(settings, redis, subject)

        physical = next(c for c in verification.checks if c.name == "physical")
        assert physical.passed and physical.count == 0 and "hash prefixes searched" in physical.note
        assert verification.verified
    finally:
        reader.close()


def _agent_db(w: World):
    return sqlite3.connect(str(agent_paths(w.settings, "main").db_path), isolation_level=None)


async def test_the_physical_check_sees_erased_bytes_left_in_free_pages(world: World, redis) -> None:
    conn = _agent_db(world)
    try:
        conn.execute("PRAGMA secure_delete = OFF")  # the fault: a delete that leaves its bytes
        conn.execute(
            "INSERT INTO memory_backups(created_at, content, content_hash) VALUES (1, ?, 'h')",
            (f"{NORA_TEXT}\n" * 400,),  # larger than a page: its overflow pages go to the freelist
        )
        conn.execute("DELETE FROM memory_backups")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()

    failed = await run_verify(world.settings, redis, world.subject)

    assert "agent main:memory.sqlite free page" in _failing(failed, "physical")
    assert (await run_verify(world.settings, redis, world.subject)).verified  # compacted by the first run


async def test_the_physical_check_sees_erased_bytes_left_in_wal_frames(world: World, redis) -> None:
    conn = _agent_db(world)
    try:
        conn.execute(
            "INSERT INTO memory_backups(created_at, content, content_hash) VALUES (1, ?, 'h')", (NORA_TEXT,)
        )
        conn.execute("DELETE FROM memory_backups")  # the row is gone; its frame stays in the WAL

        failed = await run_verify(world.settings, redis, world.subject)

        assert "agent main:memory.sqlite-wal WAL frame" in _failing(failed, "physical")
    finally:
        conn.close()


async def test_the_fts_check_sees_index_rows_whose_chunk_is_gone(world: World, redis) -> None:
    await world.agent_sql("INSERT INTO memory_index_chunks_fts(rowid, text) VALUES (987654, ?)", NORA_TEXT)
    failed = await run_verify(world.settings, redis, world.subject)
    assert "agent main:memory_index_chunks_fts: index rows without a chunk" in _failing(
        failed, "fts_segments"
    )
    # FTS5 reads a deleted row's terms from the chunks, which have none for this row: the
    # 'delete' command gives them.
    await world.agent_sql(
        "INSERT INTO memory_index_chunks_fts(memory_index_chunks_fts, rowid, text) VALUES ('delete', 987654, ?)",
        NORA_TEXT,
    )
    assert (await run_verify(world.settings, redis, world.subject)).verified


async def test_the_redis_check_sees_an_earlier_result_holding_the_erased_words(world: World, redis) -> None:
    key = f"arq:result:dream:plant-{world.settings.daemon.host_id}"
    await redis.set(key, orjson.dumps({"r": {"deep": {"promoted": [{"text": NORA_TEXT}]}}}), ex=60)
    try:
        failed = await run_verify(world.settings, redis, world.subject)
        assert "redis:arq:result" in _failing(failed, "redis")
    finally:
        await redis.delete(key)
    assert (await run_verify(world.settings, redis, world.subject)).verified


async def test_a_tombstone_that_is_not_an_opaque_token_fails_without_a_subject(world: World, redis) -> None:
    for fake in ("TOMBSTONE:nora", "TOMBSTONE:" + content_hash(SECRET)[:16]):
        await world.retention_sql(
            "UPDATE retention_objects SET provenance_parent = ? WHERE object_id = ?", fake, world.child_id
        )
        failed = await run_verify(world.settings, redis)
        if fake.endswith("nora"):
            assert "retention:retention_objects: tombstone is not an opaque random token" in _failing(
                failed, "provenance_invariant"
            )
        else:  # the right shape, but a hash prefix of the erased content: derivable
            with_subject = await run_verify(world.settings, redis, world.subject)
            assert "retention:retention_objects.provenance_parent" in _failing(with_subject, "derivability")
    await world.retention_sql(
        "UPDATE retention_objects SET provenance_parent = 'TOMBSTONE:0123456789abcdef' WHERE object_id = ?",
        world.child_id,
    )
    assert not (await run_verify(world.settings, redis)).failed


async def test_a_sub_day_time_of_an_erased_object_in_any_integer_column_fails(world: World, redis) -> None:
    await world.retention_sql(
        "UPDATE retention_scopes SET created_at = ? WHERE scope = 'tenant:default:user:omar'", T0
    )
    failed = await run_verify(world.settings, redis, world.subject)
    assert "retention:retention_scopes.created_at" in _failing(failed, "derivability")


async def test_the_physical_check_fails_while_the_text_is_still_stored(settings, redis) -> None:
    await api.write_object(settings, redis, "tenant:default:user:other", f"quoting: {PHYSICAL}")
    subject = VerifySubject(contents=(PHYSICAL,))
    verification = await run_verify(settings, redis, subject)
    assert "retention:retention.sqlite page" in _failing(verification, "physical")
    assert not verification.verified


async def test_verify_with_an_unknown_receipt_is_a_usage_error(settings, redis) -> None:
    from memoryd.errors import UsageError

    with pytest.raises(UsageError, match="no erasure receipt"):
        await run_verify(settings, redis, receipt_id="rcpt-missing")


async def test_the_verify_command_exits_1_when_a_check_fails_and_0_when_all_pass(
    world: World, redis, tmp_path
) -> None:
    import anyio

    from memoryd.cli import main

    cfg = tmp_path / "memoryd.toml"
    cfg.write_text(
        f'state_dir = "{world.settings.state_dir}"\nsessions_root = "{world.settings.sessions_root}"\n'
        f'redis_url = "{world.settings.redis_url}"\n'
    )
    undo = await _plant_edge_time(world)
    assert await anyio.to_thread.run_sync(main, ["--config", str(cfg), "verify", "--json"]) == 1
    await undo()
    assert await anyio.to_thread.run_sync(main, ["--config", str(cfg), "verify", "--json"]) == 0
