"""The service's background loops on a running daemon.

* It serves the agents that appear under sessions_root after it started: a new agent
  directory, or one that was not a directory at the start (swapped for a symlink loop, then
  put back). Each is served within a few heartbeats: its store created, its route published,
  its jobs run, its sessions watched; no restart.
* A loop that fails on something it did not expect says so in one line and starts again; the
  daemon goes on serving."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memoryd.constants import HEARTBEAT_S
from memoryd.failpoints import ENV_VAR as FAILPOINTS_ENV
from memoryd.ops import ingest_sweep
from memoryd.runtime.client import MemorydClient
from memoryd.settings import Settings
from memoryd.store.short_term import COLUMNS
from tests.builders import SessionStoreBuilder, exchange
from tests.daemon_harness import (
    DaemonProcess,
    NotifySocket,
    cleanup_redis,
    host_record,
    start_daemon,
    stop_cleanly,
)
from tests.polling import until

pytestmark = pytest.mark.slow  # a daemon process


def _staged(settings, agent: str) -> str:
    import sqlite3

    db = settings.state_dir / "agents" / agent / "memory.sqlite"
    if not db.exists():
        return ""
    conn = sqlite3.connect(db)
    try:
        return " ".join(r[0] for r in conn.execute(f"SELECT {COLUMNS[4]} FROM short_term_entries"))
    finally:
        conn.close()


def _started(
    tmp_path: Path, root: Path, redis_url: str, host: str, env: dict[str, str] | None = None
) -> tuple[Settings, NotifySocket, DaemonProcess]:
    """A daemon over `root` with the scheduler on and sweeps an hour apart: what it stages comes
    from its live sweeps (the watch), not from an interval sweep."""
    return start_daemon(
        tmp_path, root, redis_url, host, env=env, schedule=True, extra="[ingest]\ninterval_s = 3600.0\n"
    )


async def test_agents_that_appear_after_the_start_are_served_without_a_restart(
    tmp_path: Path, redis_url: str, unique: str
):
    host = f"h{unique}"
    root = tmp_path / "sessions"
    first, later, restored = f"first{unique}", f"later{unique}", f"back{unique}"
    SessionStoreBuilder(root, first).add(f"agent:{first}:main", "s-1", exchange("orchard"), chatType="direct")
    # An agent directory that is a symlink loop at the start: not an agent then.
    hidden = tmp_path / "hidden"
    SessionStoreBuilder(hidden, restored).add(
        f"agent:{restored}:main", "s-3", exchange("lighthouse"), chatType="direct"
    )
    os.symlink(root / "agents" / "loop", root / "agents" / restored)
    os.symlink(root / "agents" / restored, root / "agents" / "loop")

    settings, notify, daemon = _started(tmp_path, root, redis_url, host)
    try:
        assert "serving 1 agent(s)" in notify.wait_for("READY=1", timeout_s=60)
        SessionStoreBuilder(root, later).add(
            f"agent:{later}:main", "s-2", exchange("quartermaster"), chatType="direct"
        )
        (root / "agents" / restored).unlink()
        (root / "agents" / "loop").unlink()
        os.rename(hidden / "agents" / restored, root / "agents" / restored)

        wait_s = 4 * HEARTBEAT_S
        for agent in (later, restored):
            await until(
                lambda a=agent: a in host_record(redis_url, host).get("agents", ""),
                f"{agent} in the host record",
                wait_s,
            )
        # Watched: the new agents' messages are staged by live sweeps (the interval is an hour).
        await until(lambda: "quartermaster" in _staged(settings, later), "the later agent staged", wait_s)
        await until(lambda: "lighthouse" in _staged(settings, restored), "the restored agent staged", wait_s)
        async with MemorydClient.connect(settings) as client:
            for agent in (first, later, restored):
                job = await client.submit(ingest_sweep.OP, {"agent": agent})
                report = await client.wait(job.job_id, timeout_s=30)
                assert report.state == "complete", (agent, report)
        log = daemon.log()
        assert f"agent {later}: found under sessions_root; served from now on" in log, log
        stop_cleanly(daemon)
    finally:
        daemon.kill()
        cleanup_redis(redis_url, [host], [first, later, restored])


async def test_a_loop_that_fails_unexpectedly_starts_again_and_the_daemon_serves_on(
    tmp_path: Path, redis_url: str, unique: str
):
    host = f"h{unique}"
    root = tmp_path / "sessions"
    agent = f"a{unique}"
    SessionStoreBuilder(root, agent).add(f"agent:{agent}:main", "s-1", exchange("orchard"), chatType="direct")
    # The live loop fails each time it would enqueue a sweep (at the watch's first report).
    settings, notify, daemon = _started(tmp_path, root, redis_url, host, env={FAILPOINTS_ENV: "live.enqueue"})
    try:
        notify.wait_for("READY=1", timeout_s=60)
        await until(lambda: "starting it again" in daemon.log(), "the loop's one line", 20)
        line = next(ln for ln in daemon.log().splitlines() if "starting it again" in ln)
        assert "live ingest stopped on FailpointTriggered at memoryd/runtime/live.py:" in line, line
        assert daemon.proc is not None and daemon.proc.poll() is None, daemon.log()
        async with MemorydClient.connect(settings) as client:
            job = await client.submit(ingest_sweep.OP, {"agent": agent})
            report = await client.wait(job.job_id, timeout_s=30)
            assert report.state == "complete", report
        stop_cleanly(daemon)
    finally:
        daemon.kill()
        cleanup_redis(redis_url, [host], [agent])


async def test_an_agent_whose_store_cannot_open_waits_alone_and_is_served_once_it_can(
    tmp_path: Path, redis_url: str, unique: str
):
    """A damaged store (or a full disk under it) keeps its agent out, in one line naming the
    file, and the daemon serves the others; once the store opens, the agent is served."""
    host = f"h{unique}"
    root = tmp_path / "sessions"
    good, bad = f"good{unique}", f"bad{unique}"
    SessionStoreBuilder(root, good).add(f"agent:{good}:main", "s-1", exchange("orchard"), chatType="direct")
    SessionStoreBuilder(root, bad).add(f"agent:{bad}:main", "s-2", exchange("lighthouse"), chatType="direct")
    broken = tmp_path / "state" / "agents" / bad / "memory.sqlite"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"not a database, " * 512)
    settings, notify, daemon = _started(tmp_path, root, redis_url, host)
    try:
        assert "serving 1 agent(s)" in notify.wait_for("READY=1", timeout_s=60)
        lines = [ln for ln in daemon.log().splitlines() if bad in ln and "not served" in ln]
        assert len(lines) == 1 and f"{broken}: cannot open database: file is not a database" in lines[0], (
            lines
        )
        async with MemorydClient.connect(settings) as client:
            job = await client.submit(ingest_sweep.OP, {"agent": good})
            assert (await client.wait(job.job_id, timeout_s=30)).state == "complete"
            # Its jobs are refused saying why, not only that this host does not serve it.
            job = await client.submit(ingest_sweep.OP, {"agent": bad})
            refused = await client.wait(job.job_id, timeout_s=30)
            assert refused.state == "failed" and refused.error is not None
            assert refused.error.startswith("AgentNotServed: ") and "until its store opens" in refused.error
            assert "file is not a database" in refused.error, refused.error
        broken.unlink()  # the operator moves the damaged file aside
        await until(
            lambda: "lighthouse" in _staged(settings, bad), "the agent served once its store opens", 20
        )
        stop_cleanly(daemon)
    finally:
        daemon.kill()
        cleanup_redis(redis_url, [host], [good, bad])


async def test_a_daemon_that_started_with_no_agent_watches_the_first_one_found(
    tmp_path: Path, redis_url: str, unique: str
):
    """Found by tools/chaos.py: with no agent served at the start (its store could not open),
    live ingestion had nothing to run and ended, so the agent found later was served but never
    watched ("This task group is not active")."""
    host = f"h{unique}"
    root = tmp_path / "sessions"
    (root / "agents").mkdir(parents=True)
    agent = f"first{unique}"
    settings, notify, daemon = _started(tmp_path, root, redis_url, host)
    try:
        assert "serving 0 agent(s)" in notify.wait_for("READY=1", timeout_s=60)
        SessionStoreBuilder(root, agent).add(
            f"agent:{agent}:main", "s-1", exchange("orchard"), chatType="direct"
        )
        await until(
            lambda: "orchard" in _staged(settings, agent), "the first agent staged live", 4 * HEARTBEAT_S
        )
        assert "not served yet" not in daemon.log(), daemon.log()
        stop_cleanly(daemon)
    finally:
        daemon.kill()
        cleanup_redis(redis_url, [host], [agent])
