"""A dreaming sweep over a large staged pool in a running daemon: the grouping runs off the
event loop and the lock is held only to publish, so a forget enqueued meanwhile completes
while the dream is still running, and SIGTERM is acted on (issue 18, finding 3)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from bench.scenarios.dream_sweep import stage
from memoryd.agent_runtime import agent_runtime
from memoryd.forget.request import ForgetRequest
from memoryd.ops import dream as dream_op
from memoryd.runtime.client import MemorydClient
from memoryd.settings import load_settings
from tests.builders import SessionStoreBuilder, exchange
from tests.daemon_harness import (
    DaemonProcess,
    FailpointTrace,
    NotifySocket,
    cleanup_redis,
    forgotten,
    write_config,
)
from tests.polling import until

pytestmark = pytest.mark.slow  # a daemon process and a 20,000-entry pool

STAGED = 20_000


async def test_a_forget_during_a_large_dream_completes_before_it_and_sigterm_is_acted_on(
    tmp_path: Path, redis_url: str, unique: str
):
    agent, host = f"a{unique}", f"h{unique}"
    sessions_root = tmp_path / "sessions"
    builder = SessionStoreBuilder(sessions_root, agent)
    builder.add(f"agent:{agent}:main", "s-one", exchange("orchard"), chatType="direct")
    config = write_config(
        tmp_path / "memoryd.toml",
        state_dir=tmp_path / "state",
        sessions_root=sessions_root,
        redis_url=redis_url,
        host_id=host,
        grace_s=0.3,
    )
    settings = load_settings(config)
    async with agent_runtime(settings, agent, redis=False) as rt:
        db, workspace = Path(rt.paths.db_path), Path(rt.paths.workspace)
    stage(db, workspace, STAGED, int(time.time() * 1000), agent)

    trace = FailpointTrace(tmp_path / "trace")
    notify = NotifySocket(tmp_path / "notify.sock")
    daemon = DaemonProcess(config, notify, tmp_path / "daemon.log", env=trace.env).start()
    try:
        notify.wait_for("READY=1")
        assert daemon.proc is not None
        async with MemorydClient.connect(settings) as client:
            dream = await client.submit(dream_op.OP, {"agent": agent})
            await trace.wait_for("dream.select", {daemon.proc.pid}, timeout_s=60)

            started = time.monotonic()
            forget = await client.enqueue_forget(ForgetRequest(agent=agent, sessions=["s-one"]))
            done = await client.wait(forget.job_id, timeout_s=60)
            took = time.monotonic() - started
            dreaming = await client.job(dream.job_id)
            assert done.state == "complete", (done.error, daemon.log())
            assert dreaming.state == "running", "the dream ended before the forget: pool too small"
            assert took < 10, f"the forget took {took:.1f} s beside the dream"
            assert await forgotten(settings, agent, "s-one")

            # A second sweep (other phases, so another job) is stopped by SIGTERM mid-grouping.
            again = await client.submit(dream_op.OP, {"agent": agent, "phases": ["light"]})
            await until_second_select(trace, daemon.proc.pid)
            daemon.signal(signal.SIGTERM)
            assert daemon.wait(30) == 0, daemon.log()
            left = await client.job(again.job_id)
            assert left.state in ("queued", "complete"), left
    finally:
        daemon.kill()
        cleanup_redis(redis_url, [host], [agent])


async def until_second_select(trace: FailpointTrace, pid: int) -> None:
    def twice() -> bool:
        text = trace.path.read_text() if trace.path.exists() else ""
        return text.count(f"dream.select {pid}\n") >= 2

    await until(twice, "the second dream reaching dream.select", 60)
