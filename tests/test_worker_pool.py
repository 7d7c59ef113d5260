"""memoryd's worker keeps the agents' stores open between jobs: on a real worker over real
Redis (db 15) and real SQLite, jobs on one agent reuse its stores, an erasure (which compacts
the database) and later forgets on the same agent see each other's work, and a shutdown
closes every store the worker kept."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from memoryd.constants import QUEUE_BELL_KEY
from memoryd.ops import erase as erase_op
from memoryd.ops import forget as forget_op
from memoryd.ops import ingest_sweep as ingest_op
from memoryd.runtime.client import JobReport, MemorydClient
from memoryd.runtime.jobs import CACHES
from memoryd.runtime.served import SERVED, ServedAgents
from memoryd.runtime.service import arq_pool
from memoryd.runtime.wire import queue_name
from memoryd.runtime.worker import MemorydWorker, worker_kwargs
from memoryd.settings import Settings
from tests.conftest import make_settings
from tests.daemon_harness import cleanup_redis
from tests.erase_world import add_two_users

ERASE, FORGET, INGEST_SWEEP = (
    erase_op.OP.contract.name,
    forget_op.OP.contract.name,
    ingest_op.OP.contract.name,
)


def store_threads() -> int:
    """Live aiosqlite connection threads (one per open store)."""
    return sum("_connection_worker_thread" in t.name for t in threading.enumerate())


async def settled_store_threads() -> int:
    """store_threads() once it holds still: a closed store's thread ends just after the close."""
    last, steady = store_threads(), 0
    with anyio.fail_after(5):
        while steady < 3:
            await anyio.sleep(0.02)
            now = store_threads()
            steady, last = (steady + 1 if now == last else 0), now
    return last


@dataclass
class Served:
    settings: Settings
    worker: MemorydWorker
    task: asyncio.Task[None]
    queue: str
    job_ids: list[str] = field(default_factory=list)

    async def run(self, function: str, payload: dict[str, Any]) -> JobReport:
        async with MemorydClient.connect(self.settings) as client:
            job = await client.enqueue(function, payload, queue=self.queue)
            self.job_ids.append(job.job_id)
            report = await client.wait(job.job_id, timeout_s=60)
        assert report.state == "complete", report.error
        assert report.result is not None
        return report

    async def stop(self) -> None:
        if not self.task.done():
            self.task.cancel()  # as the service's drain ends the worker
            with pytest.raises(asyncio.CancelledError):
                await self.task


@pytest.fixture
async def served(tmp_path, sessions_root, unique, redis, redis_url) -> AsyncIterator[Served]:
    settings = make_settings(
        tmp_path, sessions_root, daemon={"host_id": f"test-{unique}", "poll_delay_s": 0.05}
    )
    add_two_users(sessions_root)
    queue = queue_name(settings.daemon.host_id)
    pool = arq_pool(settings, queue)
    ctx: dict[str, Any] = {
        "settings": settings,
        SERVED: ServedAgents(frozenset({"main"})),
        "host_id": settings.daemon.host_id,
    }
    worker = MemorydWorker(**worker_kwargs(settings, queue, ctx), redis_pool=pool)
    it = Served(settings, worker, asyncio.create_task(worker.main()), queue)
    try:
        yield it
    finally:
        await it.stop()
        await pool.aclose(close_connection_pool=True)
        await redis.delete(QUEUE_BELL_KEY.format(queue=queue))
        cleanup_redis(redis_url, [settings.daemon.host_id], [], it.job_ids)


async def test_jobs_on_one_agent_reuse_the_stores_the_worker_keeps_open(served):
    await served.run(INGEST_SWEEP, {"agent": "main"})
    previews = [
        await served.run(FORGET, {"agent": "main", "participants": [who], "dry_run": True})
        for who in ("nora", "nora", "omar")
    ]

    assert [p.result["artifacts"]["shortTermEntries"] for p in previews] == [2, 2, 2]
    assert previews[0].result == previews[1].result
    stores = served.worker.stores
    # One read-write store (the sweep), one read-only store (the previews), both still open.
    assert (stores.opened, stores.reused, stores.idle) == (2, 2, 2)


async def test_a_worker_shutdown_closes_every_store_it_kept_open(served):
    before = await settled_store_threads()
    await served.run(INGEST_SWEEP, {"agent": "main"})
    await served.run(FORGET, {"agent": "main", "sessions": ["sess-nora-1"], "dry_run": True})
    assert served.worker.stores.idle == 2
    assert await settled_store_threads() == before + 2

    await served.stop()

    assert served.worker.stores.idle == 0
    assert await settled_store_threads() == before  # nothing left to keep the process from exiting


async def test_the_worker_closes_stores_left_idle_past_the_limit(served):
    before = await settled_store_threads()
    await served.run(FORGET, {"agent": "main", "sessions": ["sess-nora-1"], "dry_run": True})
    await served.run(INGEST_SWEEP, {"agent": "main"})
    assert served.worker.stores.idle == 1  # the read-write one: there was no database for the preview
    assert await settled_store_threads() == before + 1
    served.worker.stores.idle_close_s = 0.2
    for _ in range(200):  # its poll loop (every 50 ms here) closes them
        if not served.worker.stores.idle:
            break
        await anyio.sleep(0.05)
    assert served.worker.stores.idle == 0
    assert await settled_store_threads() == before


async def test_an_erase_then_forgets_on_the_same_agent_work_with_the_pool(served):
    await served.run(INGEST_SWEEP, {"agent": "main"})
    before = await served.run(FORGET, {"agent": "main", "participants": ["nora"], "dry_run": True})
    assert before.result["artifacts"]["shortTermEntries"] == 2
    assert served.worker.stores.idle == 2  # open, idle, while the erasure rewrites the database

    erased = await served.run(ERASE, {"scope": "tenant:default:user:nora"})

    receipt = erased.result
    assert receipt["state"] == "complete" and receipt["artifacts"]["sessions"] == 1
    physical = next(c for c in receipt["verification"]["checks"] if c["name"] == "physical")
    assert (
        physical["status"] == "passed" and "blocked" not in physical["note"]
    )  # the idle stores held no reader
    assert receipt["verified"] is True, receipt["verification"]

    after = await served.run(FORGET, {"agent": "main", "participants": ["nora"], "dry_run": True})
    assert after.result["artifacts"]["shortTermEntries"] == 0  # the preview sees the erasure
    applied = await served.run(FORGET, {"agent": "main", "participants": ["omar"]})
    assert applied.result["artifacts"]["shortTermEntries"] == 2
    again = await served.run(FORGET, {"agent": "main", "participants": ["omar"], "dry_run": True})
    assert again.result["artifacts"]["shortTermEntries"] == 0
    assert served.worker.stores.idle == 2


async def test_the_jobs_of_a_worker_share_its_process_caches(served, monkeypatch):
    """A quiet re-sweep in the daemon reuses the listing, admission decisions and checkpoint
    stamps of the sweep before, because every job's runtime gets the worker's one caches object."""
    monkeypatch.setattr("memoryd.sessions.json_store.LISTING_SETTLED_NS", 0)  # the corpus is seconds old
    assert set(served.worker.caches.sizes().values()) <= {0}
    reports = [await served.run(INGEST_SWEEP, {"agent": "main"}) for _ in range(3)]
    assert served.worker.ctx[CACHES] is served.worker.caches
    assert served.worker.caches.sizes() == {"listings": 1, "decided": 1, "stamps": 1}
    assert reports[-1].result["sessionsUnchanged"] == 2
