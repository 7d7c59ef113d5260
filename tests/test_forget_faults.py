"""Failures at each apply stage (reference §7.11): the forgotten records stay in force, a rerun
with the same selectors converges to the state of a clean purge, and a preview afterwards
finds nothing left.

Real failures where they can be made: SQLite triggers that abort the stage's statements (the
reference's own fault tests attach such triggers), and files changed under the purge. The
failpoints (`MEMORYD_FAILPOINTS`) cover every named stage boundary as well.
"""

from __future__ import annotations

import pytest

from memoryd.agent_runtime import agent_runtime
from memoryd.errors import OperationFailed, WriteConflict
from memoryd.failpoints import ENV_VAR, FailpointTriggered
from memoryd.forget.apply import apply_plan
from memoryd.forget.request import ForgetRequest
from memoryd.forget.run import forget, plan_for
from memoryd.forget.select import Selectors, select_sessions
from memoryd.forget.snapshot import read_catalog
from tests.forget_world import (
    CORPUS_MIXED,
    CORPUS_TARGET_ONLY,
    DAILY_MD_AFTER,
    DREAMS_MD_AFTER,
    MEMORY_MD_AFTER,
    ForgetWorld,
)
from tests.lineage import SEEN

ZERO = {
    "memoryFiles": 0,
    "memoryEntries": 0,
    "memoryLines": 0,
    "sessionCorpusFiles": 0,
    "sessionCorpusLines": 0,
    "indexChunks": 0,
    "indexSources": 0,
    "ftsRows": 0,
    "vectorRows": 0,
    "embeddingCacheRows": 0,
    "shortTermEntries": 0,
    "seenHashScopes": 0,
    "backups": 0,
    "originRows": 0,
}

STATE_SQL = {
    "origins": "SELECT entry_key, session_id FROM memory_entry_origins ORDER BY 1, 2",
    "chunks": "SELECT path FROM memory_index_chunks ORDER BY 1",
    "fts": "SELECT id FROM memory_index_chunks_fts_docsize ORDER BY 1",  # the index's rows
    "vectors": "SELECT chunk_rowid FROM memory_index_vectors ORDER BY 1",
    "sources": "SELECT path, source FROM memory_index_sources ORDER BY 1, 2",
    "cache": "SELECT count(*) FROM memory_embedding_cache",
    "staged": "SELECT entry_key FROM short_term_entries ORDER BY 1",
    "signals": "SELECT entry_key FROM phase_signals ORDER BY 1",
    "checkpoints": "SELECT state_key FROM ingest_checkpoints ORDER BY 1",
    "seen": f"SELECT scope, hash FROM {SEEN} ORDER BY 1, 2",
    "backups": "SELECT content FROM memory_backups ORDER BY id",
    "tombstones": "SELECT session_id, reason FROM memory_session_tombstones ORDER BY 1",
}
FILES = ["MEMORY.md", "DREAMS.md", "memory/2026-08-25.md", "USER.md", CORPUS_MIXED, CORPUS_TARGET_ONLY]


@pytest.fixture
async def world(settings, sessions_root) -> ForgetWorld:
    return await ForgetWorld(settings, sessions_root).build()


async def state_of(world: ForgetWorld) -> dict:
    out = {name: await world.query(sql) for name, sql in STATE_SQL.items()}
    out["files"] = {rel: world.read(rel) for rel in FILES}
    return out


@pytest.fixture
async def clean_state(tmp_path_factory, redis, unique) -> dict:
    """The state a clean, uninterrupted purge of "target" leaves, built in a separate world."""
    from tests.conftest import make_settings

    base = tmp_path_factory.mktemp("clean")
    root = base / "sessions"
    root.mkdir()
    w = await ForgetWorld(make_settings(base, root), root).build()
    await forget(w.settings, ForgetRequest(agent="main", sessions=["target"]), redis=redis)
    return await state_of(w)


async def purge(world: ForgetWorld, redis):
    return await forget(world.settings, ForgetRequest(agent="main", sessions=["target"]), redis=redis)


async def assert_converges(world: ForgetWorld, redis, clean_state: dict) -> None:
    # the forgotten record is in force right after the failure
    assert await world.query("SELECT session_id, reason FROM memory_session_tombstones") == [
        ("target", "forgotten")
    ]
    await purge(world, redis)
    after = await state_of(world)
    assert after == clean_state
    preview = await forget(world.settings, ForgetRequest(agent="main", sessions=["target"], dry_run=True))
    assert preview.artifacts.to_json() == ZERO


async def add_trigger(world: ForgetWorld, table: str, event: str) -> None:
    await world.sql(
        lambda conn: conn.execute(
            f"CREATE TRIGGER fault_{table} BEFORE {event} ON {table} BEGIN SELECT RAISE(ABORT, 'injected fault'); END"
        )
    )


async def drop_trigger(world: ForgetWorld, table: str) -> None:
    await world.sql(lambda conn: conn.execute(f"DROP TRIGGER fault_{table}"))


@pytest.mark.parametrize(
    ("table", "event", "stage"),
    [
        ("memory_index_chunks", "DELETE", "index purge"),
        ("short_term_entries", "DELETE", "state purge"),
        ("memory_backups", "UPDATE", "state purge"),  # rewrite preimages
        ("memory_entry_origins", "DELETE", "origin purge"),
    ],
)
async def test_a_storage_failure_at_a_stage_leaves_the_exclusion_and_a_rerun_converges(
    world, redis, clean_state, table, event, stage
):
    await add_trigger(world, table, event)
    with pytest.raises(OperationFailed, match=f"{stage} failed: injected fault"):
        await purge(world, redis)
    await drop_trigger(world, table)
    await assert_converges(world, redis, clean_state)


async def test_an_origin_failure_leaves_origins_as_evidence_for_the_rerun(world, redis):
    await add_trigger(world, "memory_entry_origins", "DELETE")
    with pytest.raises(OperationFailed):
        await purge(world, redis)
    # every file and derived row is clean, but the lineage still names the remaining work
    assert world.read("MEMORY.md") == MEMORY_MD_AFTER
    rows = await world.query("SELECT entry_key FROM memory_entry_origins WHERE session_id = 'target'")
    assert sorted(rows) == [("k-mixed",), ("k-target",)]


async def test_a_failure_before_the_forgotten_records_applies_nothing(world, redis):
    await add_trigger(world, "memory_session_tombstones", "INSERT")
    before = await state_of(world)
    with pytest.raises(OperationFailed, match="nothing was removed"):
        await purge(world, redis)
    assert await state_of(world) == before


async def _plan_under_lock(world: ForgetWorld, redis, mutate) -> None:
    """Plan under the lock, let `mutate` change a file, then apply that stale plan."""
    async with agent_runtime(world.settings, "main", redis=redis) as rt, rt.lock().hold() as lease:
        selectors = Selectors(("target",), (), ())
        catalog = await read_catalog(rt, selectors)
        selection = select_sessions(catalog.sessions, catalog.archives, selectors)
        plan = await plan_for(rt, catalog, selection)
        mutate()
        await apply_plan(rt.require_store(), rt.paths.workspace, plan, lease.fence, tombstoned=False)


async def test_a_memory_file_changed_under_the_purge_fails_it_and_the_rerun_keeps_the_edit(world, redis):
    edit = "- a line the user added meanwhile\n"

    def user_edits_diary() -> None:
        (world.workspace / "DREAMS.md").write_text(world.read("DREAMS.md") + edit)

    with pytest.raises(
        WriteConflict, match="DREAMS.md changed before the memory forget rewrite could commit"
    ):
        await _plan_under_lock(world, redis, user_edits_diary)
    assert world.read("MEMORY.md") == MEMORY_MD_AFTER  # files before it were committed
    assert await world.query("SELECT count(*) FROM memory_session_tombstones") == [(1,)]
    await purge(world, redis)
    assert world.read("DREAMS.md") == DREAMS_MD_AFTER + edit
    assert world.read("memory/2026-08-25.md") == DAILY_MD_AFTER
    preview = await forget(world.settings, ForgetRequest(agent="main", sessions=["target"], dry_run=True))
    assert preview.artifacts.to_json() == ZERO


async def test_a_corpus_file_changed_under_the_purge_fails_it_and_the_rerun_converges(
    world, redis, clean_state
):
    appended = "[main/sessions/main/target#L9] User: Appended by an external writer.\n"

    def writer_appends() -> None:
        with (world.workspace / CORPUS_MIXED).open("a") as fh:
            fh.write(appended)

    with pytest.raises(WriteConflict, match="changed before the memory forget rewrite could commit"):
        await _plan_under_lock(world, redis, writer_appends)
    # corpus and origins are still the evidence of what is left
    assert "sessions/main/target#L2" in world.read(CORPUS_MIXED)
    assert await world.query("SELECT count(*) FROM memory_entry_origins WHERE session_id = 'target'") == [
        (2,)
    ]
    await assert_converges(world, redis, clean_state)


@pytest.mark.parametrize(
    "stage",
    [
        "forget.index",
        "forget.state",
        "forget.preimages",
        "forget.memory_files",
        "forget.corpus",
        "forget.origins",
    ],
)
async def test_a_failpoint_at_each_stage_leaves_the_exclusion_and_a_rerun_converges(
    world, redis, clean_state, monkeypatch, stage
):
    monkeypatch.setenv(ENV_VAR, stage)
    with pytest.raises(FailpointTriggered):
        await purge(world, redis)
    monkeypatch.delenv(ENV_VAR)
    await assert_converges(world, redis, clean_state)
