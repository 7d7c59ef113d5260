"""`memoryd run` as a real subprocess on real Redis: READY on our notify socket, jobs from other
processes, SIGTERM drain (finish within the grace, or back to the queue for the next start),
refusal to start, SIGHUP reload, metrics."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import anyio
import httpx
import pytest

from memoryd.forget.request import ForgetRequest
from memoryd.lock import WorkspaceLock
from memoryd.runtime.client import MemorydClient
from memoryd.settings import load_settings
from tests.builders import SessionStoreBuilder, exchange
from tests.daemon_harness import (
    DaemonProcess,
    NotifySocket,
    cleanup_redis,
    forgotten,
    host_record,
    run_cli,
    wait_state,
    write_config,
)

pytestmark = pytest.mark.slow  # runs memoryd as processes


@pytest.fixture
def world(tmp_path: Path, redis_url: str, unique: str):
    agent = f"a{unique}"
    host = f"h{unique}"
    sessions_root = tmp_path / "sessions"
    builder = SessionStoreBuilder(sessions_root, agent)
    builder.add(
        f"agent:{agent}:main",
        "s-one",
        exchange("orchard"),
        chatType="direct",
        participants=[{"actorId": "nora"}],
    )
    builder.add(
        f"agent:{agent}:signal:direct:omar",
        "s-two",
        exchange("lighthouse"),
        chatType="direct",
        participants=[{"actorId": "omar"}],
    )
    config = write_config(
        tmp_path / "memoryd.toml",
        state_dir=tmp_path / "state",
        sessions_root=sessions_root,
        redis_url=redis_url,
        host_id=host,
        grace_s=0.3,
    )
    settings = load_settings(config)
    hosts = [host]
    daemons: list[DaemonProcess] = []

    class World:
        pass

    w = World()
    w.agent, w.host, w.config, w.settings, w.tmp, w.hosts, w.daemons = (
        agent,
        host,
        config,
        settings,
        tmp_path,
        hosts,
        daemons,
    )
    w.redis_url = redis_url

    def daemon(
        config: Path | None = None, notify: NotifySocket | None = None, name: str = "d"
    ) -> DaemonProcess:
        d = DaemonProcess(config or w.config, notify, tmp_path / f"{name}-{len(daemons)}.log").start()
        daemons.append(d)
        return d

    w.daemon = daemon
    yield w
    for d in daemons:
        d.kill()
    cleanup_redis(redis_url, hosts, [agent])


async def test_forget_from_another_process_then_sigterm_mid_job_leaves_it_for_the_restart(world, redis):
    notify = NotifySocket(world.tmp / "notify.sock")
    daemon = world.daemon(notify=notify)
    ready = notify.wait_for("READY=1")
    assert "STATUS=serving 1 agent(s)" in ready

    # Another process (the CLI, through memoryd.runtime.client) enqueues a forget and waits for the report.
    done = run_cli(
        world.config, "enqueue", "forget", "--agent", world.agent, "--session", "s-one", "--wait", "--json"
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["agentId"] == world.agent and report["dryRun"] is False
    assert report["sessionIds"] == []  # a stored result names no session (daemon/stored_form.py)
    assert await forgotten(world.settings, world.agent, "s-one")

    # Mid-job SIGTERM: we hold the workspace lock, so the purge is running but cannot finish.
    async with MemorydClient.connect(world.settings) as client:
        lock = WorkspaceLock(redis, world.settings.workspace_for(world.agent), wait_s=5)
        async with lock.hold():
            job = await client.enqueue_forget(ForgetRequest(agent=world.agent, sessions=["s-two"]))
            await wait_state(client, job.job_id, "running")
            daemon.signal(signal.SIGTERM)
            assert daemon.wait(30) == 0, daemon.log()
            assert "STOPPING=1" in notify.wait_for("STOPPING=1")
            left = await client.job(job.job_id)
            assert left.state == "queued" and left.tries == 1  # back in the queue, not failed
        assert not await forgotten(world.settings, world.agent, "s-two")
        assert host_record(world.redis_url, world.host)["state"] == "stopped"

        notify2 = NotifySocket(world.tmp / "notify2.sock")
        world.daemon(notify=notify2)
        notify2.wait_for("READY=1")
        final = await client.wait(job.job_id, timeout_s=30)
    assert final.state == "complete", final.error
    assert final.tries == 2
    assert final.result is not None and final.result["dryRun"] is False
    assert await forgotten(world.settings, world.agent, "s-two")
    assert "returned to the queue for retry" in daemon.log()


async def test_sigterm_lets_the_running_job_finish_within_the_grace(world, redis, tmp_path):
    config = write_config(
        tmp_path / "grace.toml",
        state_dir=tmp_path / "state",
        sessions_root=tmp_path / "sessions",
        redis_url=world.redis_url,
        host_id=world.host,
        grace_s=20,
    )
    notify = NotifySocket(tmp_path / "n.sock")
    daemon = world.daemon(config, notify)
    notify.wait_for("READY=1")
    async with MemorydClient.connect(world.settings) as client:
        lock = WorkspaceLock(redis, world.settings.workspace_for(world.agent), wait_s=5)
        async with lock.hold():
            job = await client.enqueue_forget(ForgetRequest(agent=world.agent, sessions=["s-two"]))
            await wait_state(client, job.job_id, "running")
            daemon.signal(signal.SIGTERM)
            stopping = notify.wait_for("STOPPING=1")
            assert "EXTEND_TIMEOUT_USEC=" in stopping
            await anyio.sleep(0.3)
            assert daemon.proc.poll() is None  # still draining: the job is given its grace
        assert daemon.wait(30) == 0
        finished = await client.job(job.job_id)
    assert finished.state == "complete" and finished.tries == 1
    assert await forgotten(world.settings, world.agent, "s-two")


def test_daemon_refuses_to_start_without_redis_in_one_line(world, tmp_path):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = write_config(
        tmp_path / "noredis.toml",
        state_dir=tmp_path / "state",
        sessions_root=tmp_path / "sessions",
        redis_url=f"redis://127.0.0.1:{port}/0",
        host_id=world.host,
    )
    notify = NotifySocket(tmp_path / "n.sock")
    daemon = world.daemon(config, notify)
    assert daemon.wait(30) == 1
    lines = daemon.log().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memoryd: error: redis_url redis://127.0.0.1:")
    assert "cannot reach Redis" in lines[0]
    assert not any("READY=1" in m for m in notify.messages)


def test_daemon_refuses_to_start_on_an_unusable_state_dir_in_one_line(world, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the state directory should be")
    config = write_config(
        tmp_path / "badstate.toml",
        state_dir=blocker,
        sessions_root=tmp_path / "sessions",
        redis_url=world.redis_url,
        host_id=world.host,
    )
    daemon = world.daemon(config, None)
    assert daemon.wait(30) == 1
    lines = daemon.log().strip().splitlines()
    # The errno text depends on which call trips first (mkdir or open); the line names the key and path.
    assert len(lines) == 1 and lines[0].startswith(f"memoryd: error: state_dir {blocker} is unusable (")


def test_sighup_reloads_the_admission_policy(world, tmp_path):
    notify = NotifySocket(tmp_path / "n.sock")
    daemon = world.daemon(notify=notify)
    notify.wait_for("READY=1")
    # Caught from READY on: systemd may send SIGHUP as soon as it reads READY, and SIGHUP's
    # default action would end the process.
    status = Path(f"/proc/{daemon.proc.pid}/status").read_text()
    caught = int(next(line for line in status.splitlines() if line.startswith("SigCgt:")).split()[1], 16)
    assert caught & (1 << (signal.SIGHUP - 1))
    assert host_record(world.redis_url, world.host)["policy_reloaded_at"] == ""
    text = world.config.read_text() + '\n[memory_policy.exclude_sessions]\nchannels = ["signal"]\n'
    world.config.write_text(text)
    daemon.signal(signal.SIGHUP)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and "admission policy reloaded" not in daemon.log():
        time.sleep(0.05)
    assert "admission policy reloaded (0 hook sources, 1 channels, 0 chat types excluded)" in daemon.log()
    assert daemon.proc.poll() is None  # a reload is not a restart
    assert daemon.stop() == 0


async def test_metrics_count_jobs_and_redis_state(world, tmp_path):
    notify = NotifySocket(tmp_path / "n.sock", abstract=True)  # systemd may hand us an abstract socket
    daemon = world.daemon(notify=notify)
    notify.wait_for("READY=1")
    port = int(host_record(world.redis_url, world.host)["metrics_port"])
    async with MemorydClient.connect(world.settings) as client:
        for dry_run in (True, False):  # a preview is a job, not a purge
            request = ForgetRequest(agent=world.agent, sessions=["s-one"], dry_run=dry_run)
            job = await client.enqueue_forget(request)
            assert (await client.wait(job.job_id, timeout_s=30)).state == "complete"
    async with httpx.AsyncClient() as http:
        body = (await http.get(f"http://127.0.0.1:{port}/metrics", timeout=5)).text
    assert "memoryd_up 1.0" in body
    assert "memoryd_redis_up 1.0" in body
    assert 'memoryd_jobs_total{family="forget",outcome="complete"} 2.0' in body
    assert 'memoryd_purges_total{family="forget",outcome="complete"} 1.0' in body
    assert "s-one" not in body and "nora" not in body  # no session or person ids in labels
    assert daemon.stop() == 0
