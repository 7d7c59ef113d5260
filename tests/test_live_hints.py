"""Live hints: the watcher's changed sessions, kept in the daemon's memory, restrict a live sweep
and its index sync to those sessions; a job carries a generation number only, finds no hint in
another process or after a forget, and then considers every session. Real stores, real Redis,
the daemon's own worker in-process (the hints are this process's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memoryd.agent_runtime import agent_runtime
from memoryd.index.plan import IndexedSource, plan_sync
from memoryd.index.sources import FileStat, SessionRef
from memoryd.index.sync import run_index_sync
from memoryd.ingest.live_hints import LiveHints
from memoryd.ops import forget as forget_op
from memoryd.ops import ingest_sweep as ingest_op
from memoryd.runtime.client import MemorydClient
from memoryd.runtime.watch import changed_sessions
from memoryd.runtime.wire import queue_name
from memoryd.settings import Settings
from memoryd.store.index_sources import all_sources
from tests.builders import SessionStoreBuilder, exchange
from tests.conftest import index_settings
from tests.daemon_harness import cleanup_redis
from tests.ingest_harness import corpus_text
from tests.worker_harness import run_jobs

SWEEP = ingest_op.OP.contract.name


def test_a_hint_names_the_changed_sessions_and_any_other_change_means_all() -> None:
    hints = LiveHints()
    hints.note(SWEEP, "main", {"s-one"})
    hints.note(SWEEP, "main", {"s-two"})
    gen = hints.seal(SWEEP, "main")
    assert gen is not None and hints.lookup(gen) == {"s-one", "s-two"}
    assert hints.seal(SWEEP, "main") is None  # nothing noted since: the next job considers all
    hints.note(SWEEP, "main", {"s-one"})
    hints.note(SWEEP, "main", None)  # sessions.json changed too
    hints.note(SWEEP, "main", {"s-two"})
    assert hints.seal(SWEEP, "main") is None
    assert hints.finish(SWEEP, "main", gen) == {"s-one", "s-two"}
    assert hints.lookup(gen) is None  # finished: a late run of the job sweeps in full
    assert hints.lookup(None) is None and hints.lookup(12345) is None


def test_a_new_process_never_matches_an_earlier_ones_generation() -> None:
    before = LiveHints()
    before.note(SWEEP, "main", {"s-one"})
    old = before.seal(SWEEP, "main")
    after = LiveHints()
    after.note(SWEEP, "main", {"s-two"})
    assert old is not None and after.lookup(old) is None


def test_dropping_the_hints_leaves_no_session_id_and_turns_pending_ones_into_full_sweeps() -> None:
    hints = LiveHints()
    hints.note(SWEEP, "main", {"s-one"})
    gen = hints.seal(SWEEP, "main")
    hints.note(SWEEP, "main", {"s-two"})
    assert hints.held_ids() == {"s-one", "s-two"}
    hints.drop_all()
    assert hints.held_ids() == set()
    assert hints.lookup(gen) is None
    assert hints.seal(SWEEP, "main") is None  # the pending one: every session now


def test_only_live_transcripts_of_the_sessions_directory_name_sessions(tmp_path: Path) -> None:
    d = tmp_path / "agents" / "main" / "sessions"
    assert changed_sessions([f"{d}/s-one.jsonl", f"{d}/s-two.jsonl"], d) == {"s-one", "s-two"}
    for other in ("sessions.json", "s-one.jsonl.reset.2026-01-01T00-00-00.000Z", ".jsonl", "x.tmp"):
        assert changed_sessions([f"{d}/s-one.jsonl", f"{d}/{other}"], d) is None, other
    assert changed_sessions([f"{tmp_path}/elsewhere/s-one.jsonl"], d) is None
    assert changed_sessions([], d) is None


def _row(path: str, sid: str) -> IndexedSource:
    return IndexedSource(path, "sessions", "h", 1.0, 1, sid, "m")


def _ref(path: str, sid: str, size: int) -> Any:
    return SessionRef(path, sid, "interactive", None, FileStat(1.0, size), None)  # type: ignore[arg-type]


def test_a_live_index_plan_leaves_the_sessions_it_does_not_consider() -> None:
    indexed = {
        ("sessions/main/s-one", "sessions"): _row("sessions/main/s-one", "s-one"),
        ("sessions/main/s-two", "sessions"): _row("sessions/main/s-two", "s-two"),
        ("sessions/main/s-gone", "sessions"): _row("sessions/main/s-gone", "s-gone"),
    }
    refs = [_ref("sessions/main/s-one", "s-one", 2)]
    only = frozenset({"sessions/main/s-one", "sessions/main/s-gone"})
    plan = plan_sync([], refs, indexed, set(), "m", False, (), only)
    assert [r.path for r in plan.sessions] == ["sessions/main/s-one"]
    assert [n.path for n in plan.removals] == ["sessions/main/s-gone"]  # considered, and gone
    full = plan_sync([], refs, indexed, set(), "m", False)
    assert [n.path for n in full.removals] == ["sessions/main/s-gone", "sessions/main/s-two"]


@pytest.fixture
def world(settings: Settings, store_builder: SessionStoreBuilder, redis_url: str):
    store_builder.add("agent:main:one", "s-one", exchange("orchard"), chatType="direct")
    store_builder.add("agent:main:two", "s-two", exchange("harbour"), chatType="direct")
    queue = queue_name(settings.daemon.host_id)
    job_ids: list[str] = []
    yield settings, queue, job_ids
    cleanup_redis(redis_url, [settings.daemon.host_id], [], job_ids)


@pytest.fixture
def hints() -> LiveHints:
    """The worker's hints, as the service puts them in its context (memoryd.runtime.jobs.LIVE_HINTS)."""
    return LiveHints()


async def _run(
    settings: Settings, queue: str, job_ids: list[str], function: str, payload: Any, hints: LiveHints
) -> Any:
    async with MemorydClient.connect(settings) as client:
        job = await client.enqueue(function, payload, queue=queue)
        job_ids.append(job.job_id)
        await run_jobs(settings, queue, hints=hints)
        return await client.job(job.job_id)


async def test_a_live_sweep_job_reads_only_the_hinted_sessions_and_without_its_hint_all(world, hints):
    settings, queue, job_ids = world
    hints.note(SWEEP, "main", {"s-one"})
    gen = hints.seal(SWEEP, "main")
    done = await _run(settings, queue, job_ids, SWEEP, {"agent": "main", "live": gen}, hints)
    assert done.state == "complete"
    assert (done.result["sessionsScanned"], done.result["sessionsUnchanged"]) == (1, 0)
    assert "orchard" in corpus_text(settings) and "harbour" not in corpus_text(settings)
    assert hints.finish(SWEEP, "main", gen) == {"s-one"}
    # A generation this process holds no hint of (another process's, or one finished): all.
    again = await _run(settings, queue, job_ids, SWEEP, {"agent": "main", "live": gen + 1}, hints)
    assert (again.result["sessionsScanned"], again.result["sessionsUnchanged"]) == (1, 1)
    assert "harbour" in corpus_text(settings)


async def test_a_forget_job_drops_every_hint_naming_a_session(world, hints):
    settings, queue, job_ids = world
    hints.note(SWEEP, "main", {"s-one"})
    gen = hints.seal(SWEEP, "main")
    hints.note(SWEEP, "main", {"s-one", "s-two"})
    done = await _run(
        settings, queue, job_ids, forget_op.OP.contract.name, {"agent": "main", "sessions": ["s-one"]}, hints
    )
    assert done.state == "complete"
    assert hints.held_ids() == set()
    assert hints.lookup(gen) is None and hints.seal(SWEEP, "main") is None


async def test_a_live_index_sync_indexes_the_considered_sessions_and_keeps_the_others(
    redis, tmp_path, sessions_root, store_builder, unique
) -> None:
    settings = index_settings(tmp_path, sessions_root, unique, sources=["memory", "sessions"])
    store_builder.add("agent:main:one", "s-one", exchange("orchard"), chatType="direct")
    store_builder.add("agent:main:two", "s-two", exchange("harbour"), chatType="direct")
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_index_sync(rt)
        store_builder.append("s-one", exchange("quincewood"), 2)
        (store_builder.dir / "s-two.jsonl").unlink()  # a change the live sync does not consider
        report = await run_index_sync(rt, consider=frozenset({"s-one"}))
        assert (report.files.indexed, report.files.removed) == (1, 0)
        paths = {r.path for r in await rt.require_store().read(all_sources)}
        assert {"sessions/main/s-one", "sessions/main/s-two"} <= paths
        full = await run_index_sync(rt)
        assert full.files.removed == 1
        assert "sessions/main/s-two" not in {r.path for r in await rt.require_store().read(all_sources)}


async def test_a_live_index_sync_leaves_the_stale_mark_of_work_it_did_not_look_at(
    redis, tmp_path, sessions_root, store_builder, unique
) -> None:
    from memoryd.index.reset import RESET_REASON, reset_index
    from memoryd.store.index_state import read_dirty

    settings = index_settings(tmp_path, sessions_root, unique, sources=["memory", "sessions"])
    store_builder.add("agent:main:one", "s-one", exchange("orchard"), chatType="direct")
    store_builder.add("agent:main:two", "s-two", exchange("harbour"), chatType="direct")
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_index_sync(rt)
        await reset_index(rt)
        store_builder.append("s-one", exchange("quincewood"), 2)
        await run_index_sync(rt, consider=frozenset({"s-one"}))
        # s-two is not indexed again yet: search must still say the index is stale.
        assert await rt.require_store().read(read_dirty) == RESET_REASON
        await run_index_sync(rt)
        assert await rt.require_store().read(read_dirty) is None


def test_the_hints_live_in_the_workers_context_not_in_a_module_global() -> None:
    """Two services in one process (tests, tools) keep their own hints: the module holds none."""
    from memoryd.ingest import live_hints
    from memoryd.runtime.service import Service

    assert not [name for name, value in vars(live_hints).items() if isinstance(value, LiveHints)]
    settings = Settings()
    one, two = Service(settings, None), Service(settings, None)
    from memoryd.runtime.jobs import LIVE_HINTS

    assert one.ctx[LIVE_HINTS] is one.hints and two.ctx[LIVE_HINTS] is two.hints
    assert one.hints is not two.hints
