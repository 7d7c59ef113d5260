"""A job can only fail itself: job records another tool (or a fault) left broken in Redis get
a failed result and leave the queue, while the daemon (a real `memoryd run` process on real
Redis) stays up and keeps running good jobs; `memoryd jobs` lists them, one line each."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest

from memoryd.runtime.client import MemorydClient
from memoryd.runtime.wire import queue_name
from memoryd.settings import load_settings
from tests.builders import SessionStoreBuilder, exchange
from tests.daemon_harness import DaemonProcess, NotifySocket, cleanup_redis, run_cli, write_config
from tests.polling import until

pytestmark = pytest.mark.slow  # runs memoryd as a process

GOOD = {"f": "ingest_sweep", "a": [{"agent": "x"}], "k": {}, "t": None, "et": 1}
# Each one made arq's run_job or start_jobs raise, which ended the worker (issue 18, item 1).
BROKEN_RECORDS: dict[str, bytes] = {
    "try-null-function-dict": orjson.dumps({**GOOD, "f": {}, "t": None}),
    "function-dict": orjson.dumps({**GOOD, "f": {}}),
    "try-string": orjson.dumps({**GOOD, "t": "5"}),
    "enqueued-null": orjson.dumps({**GOOD, "et": None}),
    "enqueued-string": orjson.dumps({**GOOD, "et": "x"}),
    "enqueued-huge": b'{"f":"ingest_sweep","a":[{"agent":"x"}],"k":{},"t":null,"et":1e30}',
    "args-object": orjson.dumps({**GOOD, "a": {"agent": "x"}}),
    "not-json": b"\xff\x00not json",
}


def _now_ms() -> int:
    return int(time.time() * 1000)


async def test_poisoned_jobs_fail_alone_and_the_daemon_stays_up(tmp_path: Path, redis, redis_url, unique):
    agent, host = f"a{unique}", f"h{unique}"
    queue = queue_name(host)
    sessions_root = tmp_path / "sessions"
    SessionStoreBuilder(sessions_root, agent).add(f"agent:{agent}:main", "s-one", exchange("orchard"))
    config = write_config(
        tmp_path / "memoryd.toml",
        state_dir=tmp_path / "state",
        sessions_root=sessions_root,
        redis_url=redis_url,
        host_id=host,
    )
    settings = load_settings(config)
    ids = [f"ingest_sweep:poison-{name}-{unique}" for name in BROKEN_RECORDS]
    minus_inf_id = f"ingest_sweep:poison-minus-inf-{unique}"
    not_utf8 = b"ingest_sweep:\xff\xfe-" + unique.encode()
    deferred_id = f"ingest_sweep:poison-deferred-{unique}"
    for job_id, raw in zip(ids, BROKEN_RECORDS.values(), strict=True):
        await redis.set(f"arq:job:{job_id}", raw)
        await redis.zadd(queue, {job_id: _now_ms()})
    await redis.set(f"arq:job:{minus_inf_id}", orjson.dumps({**GOOD, "a": [{"agent": agent}]}))
    await redis.zadd(queue, {minus_inf_id: float("-inf")})
    await redis.set(b"arq:job:" + not_utf8, orjson.dumps({**GOOD, "a": [{"agent": agent}]}))
    await redis.zadd(queue, {not_utf8: _now_ms()})
    # Deferred for an hour: still queued when `memoryd jobs` reads it.
    await redis.set(f"arq:job:{deferred_id}", BROKEN_RECORDS["enqueued-huge"])
    await redis.zadd(queue, {deferred_id: _now_ms() + 3_600_000})
    all_ids = [*ids, minus_inf_id, deferred_id]

    notify = NotifySocket(tmp_path / "notify.sock")
    daemon = DaemonProcess(config, notify, tmp_path / "d.log").start()
    try:
        notify.wait_for("READY=1")
        broken = [*ids, minus_inf_id]

        async def all_failed() -> bool:
            return await redis.exists(*[f"arq:result:{j}" for j in broken]) == len(broken)

        await until(all_failed, "a failed result for every broken job", 30)
        assert daemon.proc is not None and daemon.proc.poll() is None, daemon.log()
        for job_id in broken:
            assert await redis.zscore(queue, job_id) is None, job_id
            assert not await redis.exists(f"arq:in-progress:{job_id}"), job_id
            assert not await redis.exists(f"arq:job:{job_id}"), job_id
        assert await redis.zscore(queue, not_utf8) is None
        assert not await redis.exists(b"arq:in-progress:" + not_utf8)

        async with MemorydClient.connect(settings) as client:
            for job_id in broken:
                report = await client.job(job_id, queue)
                assert report.state == "failed", (job_id, report)
            good = await client.enqueue_ingest(agent)
            done = await client.wait(good.job_id, timeout_s=30)
        assert done.state == "complete", done.error
        assert daemon.proc.poll() is None, daemon.log()

        listing = run_cli(config, "jobs")
        assert listing.returncode == 0, listing.stderr
        assert "Traceback" not in listing.stdout + listing.stderr
        deferred_lines = [line for line in listing.stdout.splitlines() if deferred_id in line]
        assert len(deferred_lines) == 1 and "unreadable" in deferred_lines[0], listing.stdout
        assert "Traceback" not in daemon.log()
    finally:
        daemon.kill()
        cleanup_redis(redis_url, [host], [agent], all_ids)
        await redis.delete(b"arq:job:" + not_utf8, b"arq:result:" + not_utf8, b"arq:retry:" + not_utf8)
