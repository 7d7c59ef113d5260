"""Forget against concurrent writers: lineage changing mid-apply, an ingestion sweep and an
index run in flight, and the whole pipeline run again after a purge. Real Redis lock, real
store, the real ingest / dreaming / index code."""

from __future__ import annotations

from pathlib import Path

import anyio

from memoryd.agent_runtime import agent_runtime
from memoryd.dreaming.backfill import BackfillRequest, run_backfill
from memoryd.dreaming.promote import run_promote
from memoryd.dreaming.rank import PromotionGates
from memoryd.dreaming.sweep import run_dreaming
from memoryd.failpoints import on_failpoint
from memoryd.forget.apply import apply_plan
from memoryd.forget.request import ForgetRequest
from memoryd.forget.run import forget, plan_for, run_forget
from memoryd.forget.select import Selectors, select_sessions
from memoryd.forget.snapshot import read_catalog
from memoryd.index.sync import prepare_index, publish_index, run_index_sync
from memoryd.ingest.sweep import run_ingest_sweep
from tests.builders import SessionStoreBuilder, conversation
from tests.conftest import make_settings
from tests.forget_world import ForgetWorld

WORD = "violet"  # only the target session talks about it
OPEN_GATES = PromotionGates(min_score=0, min_recall_count=0, min_unique_queries=0)


# --- lineage changing between planning and a transaction -----------------------------------------


async def test_a_lineage_change_after_planning_applies_nothing_and_the_replan_covers_it(
    settings, sessions_root, redis
):
    world = await ForgetWorld(settings, sessions_root).build()
    async with agent_runtime(settings, "main", redis=redis) as rt, rt.lock().hold() as lease:
        selectors = Selectors(("target",), (), ())
        catalog = await read_catalog(rt, selectors)
        selection = select_sessions(catalog.sessions, catalog.archives, selectors)
        plan = await plan_for(rt, catalog, selection)
        # another writer (another agent sharing the workspace) records a new entry of the session
        await rt.require_store().write(
            lambda conn: conn.execute(
                "INSERT INTO memory_entry_origins VALUES ('k-late', 'main', 'target', NULL, 'owner', 1)"
            ),
            fence=None,
        )
        (world.workspace / "MEMORY.md").write_text(
            world.read("MEMORY.md") + "<!-- memoryd-promotion:k-late -->\n- A late entry.\n"
        )
        outcome = await apply_plan(
            rt.require_store(), rt.paths.workspace, plan, lease.fence, tombstoned=False
        )
        assert not outcome.complete
    # nothing of the stale plan was applied
    assert world.read("memory/2026-08-25.md") is not None and "Session ID: target" in world.read(
        "memory/2026-08-25.md"
    )
    assert await world.query("SELECT count(*) FROM memory_index_chunks") == [(10,)]
    report = await forget(settings, ForgetRequest(agent="main", sessions=["target"]), redis=redis)
    assert "k-late" in report.entry_keys
    assert "A late entry." not in world.read("MEMORY.md")


async def test_the_apply_loop_replans_under_the_same_lock_when_lineage_moves(settings, sessions_root, redis):
    world = await ForgetWorld(settings, sessions_root).build()
    # A writer that records a new entry of the session right as the forgotten record lands (a
    # trigger, so it happens between planning and the purge transactions, every time).
    await world.sql(
        lambda conn: conn.execute(
            "CREATE TRIGGER late_writer AFTER INSERT ON memory_session_tombstones BEGIN "
            "INSERT INTO memory_entry_origins VALUES ('k-late', 'main', NEW.session_id, NULL, 'owner', 1); END"
        )
    )
    (world.workspace / "MEMORY.md").write_text(
        world.read("MEMORY.md") + "<!-- memoryd-promotion:k-late -->\n- A late entry.\n"
    )
    async with agent_runtime(settings, "main", redis=redis) as rt:
        report = await run_forget(rt, ForgetRequest(agent="main", sessions=["target"]))
    assert "k-late" in report.entry_keys  # the report is the re-plan's
    assert "A late entry." not in world.read("MEMORY.md")
    assert await world.query("SELECT count(*) FROM memory_entry_origins WHERE session_id = 'target'") == [
        (0,)
    ]
    assert await world.query("SELECT count(*) FROM memory_session_tombstones") == [(1,)]


# --- ingestion and indexing in flight ---------------------------------------------------------------


def _pipeline_settings(tmp_path: Path, sessions_root: Path, unique: str):
    return make_settings(
        tmp_path,
        sessions_root,
        daemon={"host_id": f"test-{unique}"},
        index={"sources": ["memory", "sessions"], "embedding": {"provider": "hashing"}},
    )


def _two_sessions(sessions_root: Path) -> SessionStoreBuilder:
    b = SessionStoreBuilder(sessions_root, "main")
    b.add("agent:main:main", "target", conversation(WORD, "target", 6), participants=[{"actorId": "nora"}])
    b.add("agent:main:other", "other", conversation("orchard", "other", 6))
    return b


async def target_chunk_hashes(settings) -> set[str]:
    """Content hashes (embedding-cache keys) of every indexed chunk holding target text."""
    async with agent_runtime(settings, "main", readonly=True, redis=False) as rt:
        rows = await rt.require_store().read(
            lambda conn: conn.execute(
                "SELECT hash FROM memory_index_chunks WHERE session_id = 'target' OR text LIKE ?",
                (f"%{WORD}%",),
            ).fetchall()
        )
    return {h for (h,) in rows}


async def assert_nothing_of_target(settings, target_hashes: set[str] = frozenset()) -> None:
    """No file, row, index entry or cached embedding of the target session; a preview finds
    nothing attributable (the embedding cache is agent-wide and refills with other content)."""
    ws = settings.workspace_for("main")
    for p in ws.rglob("*"):
        if p.is_file():
            text = p.read_text()
            assert WORD not in text, f"{p.relative_to(ws)} still holds target text"
            assert "sessions/main/target#" not in text
    async with agent_runtime(settings, "main", readonly=True, redis=False) as rt:
        store = rt.require_store()

        def rows(conn):
            return {
                "origins": conn.execute(
                    "SELECT count(*) FROM memory_entry_origins WHERE session_id = 'target'"
                ).fetchone()[0],
                "staged": conn.execute(
                    "SELECT count(*) FROM short_term_entries WHERE snippet LIKE ?", (f"%{WORD}%",)
                ).fetchone()[0],
                "chunks": conn.execute(
                    "SELECT count(*) FROM memory_index_chunks WHERE session_id = 'target' OR text LIKE ?",
                    (f"%{WORD}%",),
                ).fetchone()[0],
                "fts": conn.execute(
                    "SELECT count(*) FROM memory_index_chunks_fts WHERE memory_index_chunks_fts MATCH ?",
                    (WORD,),
                ).fetchone()[0],
                "tombstone": conn.execute(
                    "SELECT count(*) FROM memory_session_tombstones WHERE session_id = 'target'"
                ).fetchone()[0],
                "cached": sum(
                    conn.execute(
                        "SELECT count(*) FROM memory_embedding_cache WHERE hash = ?", (h,)
                    ).fetchone()[0]
                    for h in target_hashes
                ),
            }

        got = await store.read(rows)
    assert got == {"origins": 0, "staged": 0, "chunks": 0, "fts": 0, "tombstone": 1, "cached": 0}
    preview = await forget(settings, ForgetRequest(agent="main", sessions=["target"], dry_run=True))
    left = preview.artifacts.to_json()
    left.pop("embeddingCacheRows")
    assert sum(left.values()) == 0, left


async def test_a_session_forgotten_while_an_ingest_sweep_is_in_flight_is_never_staged(
    tmp_path, sessions_root, redis, unique
):
    settings = _pipeline_settings(tmp_path, sessions_root, unique)
    _two_sessions(sessions_root)
    held, go = anyio.Event(), anyio.Event()
    reports = {}

    async def purge_holding_the_lock() -> None:
        async with agent_runtime(settings, "main", redis=redis) as rt, rt.lock().hold():
            held.set()
            await go.wait()
            reports["forget"] = await run_forget(rt, ForgetRequest(agent="main", sessions=["target"]))

    async def sweep() -> None:
        async with agent_runtime(settings, "main", redis=redis) as rt:
            reports["ingest"] = await run_ingest_sweep(rt)

    with on_failpoint("lock.wait", go.set), anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(purge_holding_the_lock)
            await held.wait()
            tg.start_soon(sweep)  # scans outside the lock, then waits for it to commit: go
    # Parsed before the forget, dropped at commit, read again under the new exclusion set:
    assert reports["ingest"].sessions_excluded == {"forgotten": 1}
    assert reports["ingest"].messages_staged > 0  # the other session went through
    await assert_nothing_of_target(settings)


async def test_an_index_run_prepared_before_a_purge_cannot_publish_the_forgotten_session(
    tmp_path, sessions_root, redis, unique
):
    settings = _pipeline_settings(tmp_path, sessions_root, unique)
    _two_sessions(sessions_root)
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)
        await run_index_sync(rt, force=True)
    hashes = await target_chunk_hashes(settings)
    assert hashes
    async with agent_runtime(settings, "main", redis=redis) as rt:
        prepared = await prepare_index(rt, True, None)  # embedding done, not yet published
        await run_forget(rt, ForgetRequest(agent="main", sessions=["target"]))
        await publish_index(rt, prepared, None)
    await assert_nothing_of_target(settings, hashes)


async def test_after_a_purge_ingest_dream_backfill_and_index_force_restore_none_of_it(
    tmp_path, sessions_root, redis, unique
):
    settings = _pipeline_settings(tmp_path, sessions_root, unique)
    builder = _two_sessions(sessions_root)
    transcripts = {p.name: p.read_bytes() for p in builder.dir.iterdir()}
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)
        await run_dreaming(rt)
        await run_promote(rt, OPEN_GATES)
        await run_index_sync(rt, force=True)
    assert WORD in (settings.workspace_for("main") / "MEMORY.md").read_text()
    hashes = await target_chunk_hashes(settings)
    assert hashes

    report = await forget(settings, ForgetRequest(agent="main", participants=["nora"]), redis=redis)
    assert report.session_ids == ["target"] and report.artifacts.origin_rows > 0
    await assert_nothing_of_target(settings, hashes)

    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)
        await run_dreaming(rt)
        await run_promote(rt, OPEN_GATES)
        await run_backfill(rt, BackfillRequest(agent="main", mode="apply"))
        await run_promote(rt, OPEN_GATES)
        await run_index_sync(rt, force=True)
    await assert_nothing_of_target(settings, hashes)
    assert "orchard" in (settings.workspace_for("main") / "MEMORY.md").read_text()  # the pipeline did run
    assert {p.name: p.read_bytes() for p in builder.dir.iterdir()} == transcripts
