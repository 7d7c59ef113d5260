"""True reports: a forget's stored result carries its counts, `enqueue forget --wait` prints them
and nothing it did not measure; jobs given up without running are counted; `memoryd jobs` lists
a broken record as one line and the rest as usual. Real Redis, real stores, the CLI."""

from __future__ import annotations

import json
import time

import anyio
from redis.asyncio import Redis

from memoryd.constants import AGENT_OWNER_KEY, HEARTBEATS_KEY
from memoryd.runtime.hosts import route_value
from memoryd.runtime.wire import queue_name
from tests.builders import SessionStoreBuilder, conversation
from tests.conftest import REDIS_URL
from tests.daemon_harness import cleanup_redis, run_cli, start_cli, write_config
from tests.worker_harness import run_jobs

AGENT = "main"


async def test_enqueue_forget_wait_prints_the_counts_the_purge_measured(tmp_path, settings, redis, redis_url):
    """Before: "recorded 0 sessions as forgotten; removed 0 memory entries" after a forget of two
    sessions with staged entries (the stored result's lists are emptied, and the CLI counted them)."""
    host = settings.daemon.host_id
    queue = queue_name(host)
    builder = SessionStoreBuilder(settings.sessions_root, AGENT)
    for sid in ("omar-1", "omar-2"):
        builder.add(f"agent:main:{sid}", sid, conversation("tram", sid), participants=[{"actorId": "omar"}])
    builder.add("agent:main:other", "other-1", conversation("ferry", "other-1"))
    cfg = write_config(
        tmp_path / "c.toml",
        state_dir=settings.state_dir,
        sessions_root=settings.sessions_root,
        redis_url=redis_url,
        host_id=host,
    )
    assert run_cli(cfg, "ingest", "--agent", AGENT).returncode == 0
    preview = run_cli(cfg, "forget", "--agent", AGENT, "--participant", "omar", "--dry-run", "--json")
    planned = json.loads(preview.stdout)
    entries = planned["counts"]["entriesRemoved"]
    assert planned["counts"]["sessionsMatched"] == 2 and entries > 0

    await redis.hset(AGENT_OWNER_KEY, AGENT, route_value(queue, settings.deployment, "store"))
    await redis.hset(HEARTBEATS_KEY, host, f"{time.time():.3f}")
    waiting = start_cli(
        cfg, "enqueue", "forget", "--agent", AGENT, "--participant", "omar", "--wait", "--timeout", "60"
    )
    r = Redis.from_url(redis_url)
    try:
        with anyio.fail_after(60):
            while await r.zcard(queue) == 0:
                assert waiting.poll() is None, waiting.communicate()
                await anyio.sleep(0.05)
        await run_jobs(settings, queue)
        out, err = await anyio.to_thread.run_sync(waiting.communicate, 60)
    finally:
        waiting.kill()
        await r.aclose()
        cleanup_redis(redis_url, [host], [AGENT])
    assert waiting.returncode == 0, err
    assert "Source sessions: 2\n" in out
    assert f"Deleted entries: {entries}\n" in out
    assert f"Done: recorded 2 sessions as forgotten; removed {entries} memory entries" in out
    assert "omar" not in out  # the stored result names nobody


async def test_memoryd_jobs_lists_a_wrong_type_result_key_as_one_line_and_the_rest(
    tmp_path, settings, redis, redis_url, unique
):
    """Before: `memoryd jobs` died on WRONGTYPE (a traceback) when any `arq:result:*` key was a hash."""
    from memoryd.runtime.client import MemorydClient

    host = settings.daemon.host_id
    queue = queue_name(host)
    cfg = write_config(
        tmp_path / "c.toml",
        state_dir=settings.state_dir,
        sessions_root=settings.sessions_root,
        redis_url=redis_url,
        host_id=host,
    )
    broken = f"forget:broken-{unique}"
    await redis.hset(f"arq:result:{broken}", "oops", "1")
    await redis.hset(AGENT_OWNER_KEY, AGENT, route_value(queue, settings.deployment, "store"))
    await redis.hset(HEARTBEATS_KEY, host, f"{time.time():.3f}")
    try:
        async with MemorydClient.connect(settings) as client:
            ok = await client.enqueue_forget({"agent": AGENT, "sessions": ["s1"], "dry_run": True})
            await run_jobs(settings, queue)
        listed = run_cli(cfg, "jobs")
        assert listed.returncode == 0, listed.stderr
        assert "Traceback" not in listed.stderr
        [line] = [x for x in listed.stdout.splitlines() if broken in x]
        assert "JobRecordError: job record unreadable (its key holds another Redis type" in line
        assert any(ok.job_id in x and "complete" in x for x in listed.stdout.splitlines())
        as_json = json.loads(run_cli(cfg, "jobs", "--json").stdout)
        assert {j["jobId"] for j in as_json} >= {broken, ok.job_id}
    finally:
        await redis.delete(f"arq:result:{broken}")
        cleanup_redis(redis_url, [host], [AGENT], [ok.job_id])


async def test_jobs_given_up_without_running_are_counted_by_family_and_error(settings, redis, unique):
    """A pickled job (arq's default, refused) and a job out of tries: neither ran its function,
    and before neither was counted anywhere."""
    import pickle

    from memoryd.runtime import metrics

    queue = queue_name(settings.daemon.host_id)

    def count(family: str, error: str) -> float:
        return (
            metrics.REGISTRY.get_sample_value(
                "memoryd_jobs_not_run_total", {"family": family, "reason": error}
            )
            or 0.0
        )

    pickled, tired = f"forget:pickled-{unique}", f"forget:tired-{unique}"
    before_unreadable = count("forget", "DeserializationError")
    before_tired = count("forget", "JobExecutionFailed")
    now_ms = int(time.time() * 1000)
    raw = pickle.dumps({"t": 1, "f": "forget", "a": [{"agent": AGENT}], "k": {}, "et": now_ms})
    await redis.set(f"arq:job:{pickled}", raw)
    record = {"t": 99, "f": "forget", "a": [{"agent": AGENT, "sessions": ["s1"]}], "k": {}, "et": now_ms}
    await redis.set(f"arq:job:{tired}", json.dumps(record))
    await redis.zadd(queue, {pickled: now_ms, tired: now_ms})
    try:
        await run_jobs(settings, queue)
    finally:
        cleanup_redis(REDIS_URL, [settings.daemon.host_id], [], [pickled, tired])
    assert count("forget", "DeserializationError") == before_unreadable + 1
    assert count("forget", "JobExecutionFailed") == before_tired + 1
