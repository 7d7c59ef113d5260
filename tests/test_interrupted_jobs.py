"""Jobs interrupted by a crash (issue 17, item 5): a `memoryd run` process SIGKILLed mid-forget
left the job `running` for the whole job timeout (an hour). Now the restarted worker retries
what its host was running at once, before any sweep of the agents runs, and a request sent
again while its job's only worker is dead gets a new run."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest

from memoryd.constants import HEARTBEATS_KEY, REQUEST_KEY, WORKER_ALIVE_KEY, WORKERS_KEY
from memoryd.forget.request import ForgetRequest
from memoryd.lock import WorkspaceLock
from memoryd.runtime.client import MemorydClient
from memoryd.runtime.hosts import route_value
from memoryd.runtime.wire import queue_name
from memoryd.settings import load_settings
from tests.builders import SessionStoreBuilder, exchange
from tests.daemon_harness import (
    DaemonProcess,
    NotifySocket,
    cleanup_redis,
    forgotten,
    wait_state,
    write_config,
)


@pytest.fixture
def world(tmp_path: Path, redis_url: str, unique: str):
    agent, host = f"a{unique}", f"h{unique}"
    sessions_root = tmp_path / "sessions"
    builder = SessionStoreBuilder(sessions_root, agent)
    builder.add(f"agent:{agent}:main", "s-kept", exchange("orchard"), participants=[{"actorId": "nora"}])
    builder.add(f"agent:{agent}:dm", "s-gone", exchange("lighthouse"), participants=[{"actorId": "zed"}])
    config = write_config(
        tmp_path / "memoryd.toml",
        state_dir=tmp_path / "state",
        sessions_root=sessions_root,
        redis_url=redis_url,
        host_id=host,
        grace_s=0.3,
    )
    yield agent, host, config, load_settings(config)
    cleanup_redis(redis_url, [host], [agent])


@pytest.mark.slow
async def test_a_forget_killed_mid_run_is_retried_at_restart_before_any_sweep(world, redis, tmp_path):
    agent, host, config, settings = world
    notify = NotifySocket(tmp_path / "n1.sock")
    first = DaemonProcess(config, notify, tmp_path / "d1.log").start()
    try:
        notify.wait_for("READY=1")
        request = ForgetRequest(agent=agent, participants=["zed"])
        async with MemorydClient.connect(settings) as client:
            # The test holds the workspace lease: the forget is running but cannot get past it.
            lock = WorkspaceLock(redis, settings.workspace_for(agent), wait_s=5)
            async with lock.hold():
                job = await client.enqueue_forget(request, request_id=f"killed-{host}")
                await wait_state(client, job.job_id, "running")
                first.kill()  # SIGKILL: no drain, no finally
            assert (await client.job(job.job_id)).state == "running"  # its in-progress key stays
            sweep = await client.enqueue_ingest(agent)

            notify2 = NotifySocket(tmp_path / "n2.sock")
            second = DaemonProcess(config, notify2, tmp_path / "d2.log").start()
            try:
                notify2.wait_for("READY=1")
                # The same request, sent again under its request id: the same job, run by the new worker.
                again = await client.enqueue_forget(request, request_id=f"killed-{host}")
                assert again.job_id == job.job_id
                started = time.monotonic()
                done = await client.wait(job.job_id, timeout_s=60)
                assert time.monotonic() - started < 60
                swept = await client.wait(sweep.job_id, timeout_s=60)
            finally:
                second.stop()
        assert done.state == "complete", done.error
        assert done.result is not None  # results name no session: the record below is the proof
        assert swept.state == "complete", swept.error
        # The forgotten records were written before the sweep could ingest the session again.
        assert swept.started_at is not None and done.finished_at is not None
        assert swept.started_at >= done.finished_at
        assert await forgotten(settings, agent, "s-gone")
    finally:
        first.kill()
        cleanup_redis(settings.redis_url, [host], [agent], [job.job_id, sweep.job_id])


async def test_a_request_sent_again_while_its_only_worker_is_dead_gets_a_new_run(world, redis):
    agent, host, _config, settings = world
    queue = queue_name(host)
    async with MemorydClient.connect(settings) as client:
        await redis.hset("memoryd:agents", agent, route_value(queue, settings.deployment, "store"))
        # The host is alive (a restarted daemon beats); the worker that took the job is not.
        await redis.hset(HEARTBEATS_KEY, host, f"{time.time():.3f}")
        job = await client.enqueue_ingest(agent, request_id=f"dead-worker-{host}")
        # What a worker SIGKILLed mid-job leaves: its record, its expired liveness, the job
        # in the queue and its in-progress key.
        dead = f"{host}:999999:dead"
        await redis.hset(WORKERS_KEY.format(queue=queue), dead, orjson.dumps({"node": "elsewhere", "pid": 1}))
        await redis.delete(WORKER_ALIVE_KEY.format(instance=dead))
        await redis.set(f"arq:in-progress:{job.job_id}", b"1", px=3_600_000)
        assert (await client.job(job.job_id, queue)).state == "running"

        again = await client.enqueue_ingest(agent, request_id=f"dead-worker-{host}")
        assert again.deduplicated and again.job_id == job.job_id
        assert (await client.job(job.job_id, queue)).state == "queued"  # the next worker runs it

        # A worker that is alive keeps its job.
        await redis.set(WORKER_ALIVE_KEY.format(instance=dead), b"1", px=60_000)
        await redis.set(f"arq:in-progress:{job.job_id}", b"1", px=3_600_000)
        await client.enqueue_ingest(agent, request_id=f"dead-worker-{host}")
        assert (await client.job(job.job_id, queue)).state == "running"
    await redis.hdel(HEARTBEATS_KEY, host)
    await redis.delete(
        WORKERS_KEY.format(queue=queue), WORKER_ALIVE_KEY.format(instance=dead), f"arq:job:{job.job_id}"
    )
    await redis.delete(
        f"arq:in-progress:{job.job_id}",
        f"arq:retry:{job.job_id}",
        queue,
        REQUEST_KEY.format(job_id=job.job_id),
    )


def test_which_workers_are_dead():
    from memoryd.runtime.interrupted import WorkerRecord, dead_workers

    records = [
        WorkerRecord("me", "n1", 10),
        WorkerRecord("alive-here", "n1", 11),
        WorkerRecord("gone-here", "n1", 12),  # its liveness key is still there: SIGKILLed just now
        WorkerRecord("my-pid-before", "n1", 10),  # a container's pid 1, restarted
        WorkerRecord("alive-elsewhere", "n2", 12),
        WorkerRecord("expired-elsewhere", "n2", 13),
        WorkerRecord("unreadable", None, None),
    ]
    alive = {r.instance: r.instance != "expired-elsewhere" for r in records}
    dead = dead_workers(records, alive, "n1", lambda pid: pid in (10, 11), "me", 10)
    assert dead == ["gone-here", "my-pid-before", "expired-elsewhere", "unreadable"]
