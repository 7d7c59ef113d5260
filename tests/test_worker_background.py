"""Background jobs never take every worker slot: on a real daemon with two slots, two dream
sweeps held mid-run leave one slot free, so a forget and a live ingest sweep of an appended
message complete within seconds; the held-back dream waits in the queue and runs afterwards."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from memoryd.failpoints import HOLD_ENV_VAR, RELEASE_ENV_VAR
from memoryd.forget.request import ForgetRequest
from memoryd.ops import dream as dream_op
from memoryd.runtime.client import MemorydClient
from memoryd.runtime.wire import queue_name
from memoryd.settings import load_settings
from tests.daemon_harness import (
    DaemonProcess,
    FailpointTrace,
    NotifySocket,
    cleanup_redis,
    forgotten,
    wait_state,
    write_config,
)
from tests.live_harness import LIVE_CONFIG, World
from tests.polling import until

pytestmark = pytest.mark.slow  # a daemon process


@pytest.fixture
def world(tmp_path: Path, redis_url: str, unique: str):
    w = World(tmp_path, redis_url, unique, "")
    w.config = write_config(
        w.config,
        state_dir=tmp_path / "state",
        sessions_root=tmp_path / "sessions",
        redis_url=redis_url,
        host_id=w.host,
        schedule=True,
        max_jobs=2,
        extra=LIVE_CONFIG.format(sources="", caps=""),
    )
    w.settings = load_settings(w.config)
    yield w
    w.cleanup()


async def test_two_held_dreams_leave_a_slot_for_a_forget_and_a_live_sweep(world: World, tmp_path: Path):
    trace = FailpointTrace(tmp_path / "trace")
    release = tmp_path / "release"
    world.notify = NotifySocket(tmp_path / "n.sock")
    env = {**trace.env, HOLD_ENV_VAR: "dream.select", RELEASE_ENV_VAR: str(release)}
    world.daemon = DaemonProcess(world.config, world.notify, tmp_path / "daemon.log", env=env).start()
    world.notify.wait_for("READY=1", timeout_s=30)
    assert world.daemon.proc is not None
    pid = world.daemon.proc.pid
    await until(lambda: "orchard" in world.corpus(), "the first sweep", 30)

    async with MemorydClient.connect(world.settings) as client:
        # Two dream jobs (other phases, so two ids), each held once it reaches its grouping.
        first = await client.submit(dream_op.OP, {"agent": world.agent})
        second = await client.submit(dream_op.OP, {"agent": world.agent, "phases": ["light"]})
        await trace.wait_for("dream.select", {pid}, timeout_s=30)

        started = time.monotonic()
        forget = await client.enqueue_forget(ForgetRequest(agent=world.agent, sessions=["s-two"]))
        world.append("s-one", "Remember that the quincewood gate code changes on Fridays.")
        done = await client.wait(forget.job_id, timeout_s=15)
        assert done.state == "complete", (done.error, world.daemon.log())
        await until(lambda: "quincewood" in world.corpus(), "the appended message in the corpus", 10)
        took = time.monotonic() - started
        assert took < 10, f"the forget and the live sweep took {took:.1f} s beside two dreams"
        assert await forgotten(world.settings, world.agent, "s-two")

        states = {(await client.job(first.job_id)).state, (await client.job(second.job_id)).state}
        assert states == {"running", "queued"}, states
        text = trace.path.read_text()
        assert text.count(f"dream.select {pid}\n") == 1, "the second dream started beside the first"

        release.touch()  # the held dream ends; the queued one starts, is not held, and ends
        for job in (first, second):
            ended = await client.wait(job.job_id, timeout_s=30)
            assert ended.state == "complete", (ended.error, world.daemon.log())
            assert ended.tries == 1, "holding a dream back spent a try"
    cleanup_redis(world.redis_url, [], [], [first.job_id, second.job_id, forget.job_id])


async def test_a_forget_behind_a_page_of_held_back_dreams_still_starts(world: World, tmp_path: Path):
    # arq reads the first 100 ready jobs of a queue; 120 held-back dreams queued before the
    # forget fill that page, and the worker must read past them.
    release = tmp_path / "release"
    world.notify = NotifySocket(tmp_path / "n.sock")
    env = {
        **FailpointTrace(tmp_path / "trace").env,
        HOLD_ENV_VAR: "dream.select",
        RELEASE_ENV_VAR: str(release),
    }
    world.daemon = DaemonProcess(world.config, world.notify, tmp_path / "daemon.log", env=env).start()
    world.notify.wait_for("READY=1", timeout_s=30)
    await until(lambda: "orchard" in world.corpus(), "the first sweep", 30)

    queued: list[str] = []
    try:
        async with MemorydClient.connect(world.settings) as client:
            held = await client.submit(dream_op.OP, {"agent": world.agent})
            queued.append(held.job_id)
            await wait_state(client, held.job_id, "running")
            for i in range(120):  # agents this host does not serve: each fails at once when run
                job = await client.enqueue("dream", {"agent": f"x{i}"}, queue=queue_name(world.host))
                queued.append(job.job_id)
            forget = await client.enqueue_forget(ForgetRequest(agent=world.agent, sessions=["s-two"]))
            queued.append(forget.job_id)
            done = await client.wait(forget.job_id, timeout_s=10)
            assert done.state == "complete", (done.error, world.daemon.log())
            assert (await client.job(queued[-2])).state == "queued"
            release.touch()
            await client.wait(queued[-2], timeout_s=60)
    finally:
        cleanup_redis(world.redis_url, [], [], queued)
