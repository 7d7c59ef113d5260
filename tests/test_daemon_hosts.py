"""Several daemons on one Redis, and a daemon whose Redis goes away and comes back."""

from __future__ import annotations

import re
import time
import urllib.request
from pathlib import Path

import anyio
import orjson
import pytest

from memoryd.constants import AGENT_OWNER_KEY, HEARTBEATS_KEY
from memoryd.forget.request import ForgetRequest
from memoryd.lock import WorkspaceLock
from memoryd.ops import forget as forget_op
from memoryd.runtime.client import MemorydClient
from memoryd.runtime.hosts import parse_route
from memoryd.runtime.wire import queue_name
from memoryd.settings import load_settings
from tests.builders import SessionStoreBuilder, exchange
from tests.daemon_harness import (
    DaemonProcess,
    FailpointTrace,
    NotifySocket,
    cleanup_redis,
    forgotten,
    host_record,
    run_cli,
    wait_state,
    write_config,
)
from tools.chaos import PrivateRedis

pytestmark = pytest.mark.slow  # runs memoryd as processes

FORGET = forget_op.OP.contract.name


def _metric(port: int, name: str) -> float:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    m = re.search(rf"^{re.escape(name)} (\S+)$", body, re.M)
    return float(m.group(1)) if m else 0.0


async def test_two_daemons_never_purge_one_workspace_at_the_same_time(
    tmp_path: Path, redis, redis_url, unique
):
    """Two hosts, each serving an agent of its own, configured onto one workspace: their
    purges take the same workspace lock. (One agent is never served by two live hosts.)"""
    agents, hosts = [f"a{unique}-1", f"a{unique}-2"], [f"h{unique}-1", f"h{unique}-2"]
    workspace = tmp_path / "shared-workspace"
    daemons: list[DaemonProcess] = []
    trace = FailpointTrace(tmp_path / "failpoints.trace")
    configs: list[Path] = []
    try:
        for i, (agent, host) in enumerate(zip(agents, hosts, strict=True)):
            sessions_root = tmp_path / f"sessions-{i}"
            builder = SessionStoreBuilder(sessions_root, agent)
            builder.add("k-one", "s-one", exchange("orchard"))
            builder.add("k-two", "s-two", exchange("lighthouse"))
            cfg = write_config(
                tmp_path / f"{host}.toml",
                state_dir=tmp_path / "state",
                sessions_root=sessions_root,
                redis_url=redis_url,
                host_id=host,
                extra=f'[agents."{agent}"]\nworkspace = "{workspace}"\n',
            )
            configs.append(cfg)
            notify = NotifySocket(tmp_path / f"n{i}.sock")
            daemons.append(DaemonProcess(cfg, notify, tmp_path / f"{host}.log", env=trace.env).start())
            notify.wait_for("READY=1")
        settings = [load_settings(cfg) for cfg in configs]
        assert settings[0].workspace_for(agents[0]) == settings[1].workspace_for(agents[1])
        ports = [int(host_record(redis_url, h)["metrics_port"]) for h in hosts]
        async with MemorydClient.connect(settings[0]) as client:
            lock = WorkspaceLock(redis, workspace, wait_s=5)
            async with lock.hold():
                jobs = [
                    await client.enqueue(
                        FORGET,
                        ForgetRequest(agent=agent, sessions=[sid]).model_dump(mode="json"),
                        queue=queue_name(host),
                    )
                    for agent, sid, host in zip(agents, ["s-one", "s-two"], hosts, strict=True)
                ]
                for job in jobs:
                    await wait_state(client, job.job_id, "running")
                await trace.wait_for("lock.wait", {d.proc.pid for d in daemons if d.proc is not None})
                waiting_since = time.monotonic()
                # Both purges are running, wait for our lock, and have removed nothing meanwhile.
                assert [(await client.job(j.job_id)).state for j in jobs] == ["running", "running"]
                assert not await forgotten(settings[0], agents[0], "s-one")
                assert not await forgotten(settings[1], agents[1], "s-two")
                held_while_waiting = time.monotonic() - waiting_since
            reports = [await client.wait(j.job_id, timeout_s=30) for j in jobs]
        assert [r.state for r in reports] == ["complete", "complete"]
        assert [r.queue for r in reports] == [queue_name(h) for h in hosts]
        assert await forgotten(settings[0], agents[0], "s-one")
        assert await forgotten(settings[1], agents[1], "s-two")
        # Each daemon took the workspace lock once, after waiting out our hold.
        for port in ports:
            assert _metric(port, 'memoryd_lock_wait_seconds_count{family="forget"}') == 1.0
            assert _metric(port, 'memoryd_lock_wait_seconds_sum{family="forget"}') >= held_while_waiting
        assert all(d.stop() == 0 for d in daemons)
    finally:
        for d in daemons:
            d.kill()
        cleanup_redis(redis_url, hosts, agents)


@pytest.mark.timeout(180)
async def test_two_deployments_restarted_while_the_other_enqueues_never_run_a_job_on_the_wrong_store(
    tmp_path: Path, redis, redis_url, unique
):
    """Two deployments (own state, own sessions) on one Redis, each with an agent of the same
    name and a session of the same id. Before: while the first host restarted, the second took
    the agent's route, and a forget sent through the first's config ran on the second's store.
    Now the route is the first deployment's for good: each is restarted while the other
    enqueues; every job sent through the first's config runs on its store, every one sent
    through the second's is refused in one line, and the second's store forgets nothing."""
    from memoryd.constants import HEARTBEAT_S
    from memoryd.runtime.client import OtherDeployment

    agent, hosts = f"a{unique}", [f"h{unique}-1", f"h{unique}-2"]
    daemons: list[DaemonProcess] = []
    configs: list[Path] = []
    job_ids: list[str] = []
    try:
        for i, host in enumerate(hosts):
            sessions_root = tmp_path / f"deploy-{i}" / "sessions"
            builder = SessionStoreBuilder(sessions_root, agent)
            for n in range(4):
                builder.add(f"k-{n}", f"s-{n}", exchange("orchard"))
            cfg = write_config(
                tmp_path / f"{host}.toml",
                state_dir=tmp_path / f"deploy-{i}" / "state",
                sessions_root=sessions_root,
                redis_url=redis_url,
                host_id=host,
            )
            configs.append(cfg)
            daemons.append(
                DaemonProcess(cfg, NotifySocket(tmp_path / f"n{i}.sock"), tmp_path / f"{host}.log")
            )
            daemons[i].start().notify.wait_for("READY=1")  # type: ignore[union-attr]
        first, second = (load_settings(cfg) for cfg in configs)
        assert first.deployment != second.deployment
        route = parse_route(await redis.hget(AGENT_OWNER_KEY, agent))
        assert (route.queue, route.deployment) == (queue_name(hosts[0]), first.deployment)
        assert (
            f"agent {agent}: its route names host {hosts[0]} of deployment {first.deployment}"
            in daemons[1].log()
        )
        refusals: list[str] = []

        async def send_through_second(stop: anyio.Event) -> None:
            async with MemorydClient.connect(second) as client:
                while not stop.is_set():
                    try:
                        job = await client.submit(
                            forget_op.OP, {"agent": agent, "sessions": ["s-0"]}, queue_anyway=True
                        )
                    except OtherDeployment as exc:
                        refusals.append(str(exc))
                    else:
                        job_ids.append(job.job_id)  # must not happen
                    await anyio.sleep(0.2)

        # The first deployment's host restarts, down for more than a heartbeat of the second's.
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(send_through_second, stop)
            assert daemons[0].stop() == 0
            await anyio.sleep(HEARTBEAT_S * 2)
            assert parse_route(await redis.hget(AGENT_OWNER_KEY, agent)).queue == queue_name(hosts[0])
            daemons[0] = DaemonProcess(configs[0], NotifySocket(tmp_path / "n0b.sock"), tmp_path / "h0b.log")
            daemons[0].start().notify.wait_for("READY=1")  # type: ignore[union-attr]
            stop.set()
        assert job_ids == [] and refusals
        assert all("\n" not in r and f"of deployment '{first.deployment}'" in r for r in refusals)

        # The second deployment's host restarts while the first's config enqueues forgets.
        sent = []
        async with MemorydClient.connect(first) as client:
            assert daemons[1].stop() == 0
            for n in range(1, 3):
                sent.append(await client.submit(forget_op.OP, {"agent": agent, "sessions": [f"s-{n}"]}))
            daemons[1] = DaemonProcess(configs[1], NotifySocket(tmp_path / "n1b.sock"), tmp_path / "h1b.log")
            daemons[1].start().notify.wait_for("READY=1")  # type: ignore[union-attr]
            sent.append(await client.submit(forget_op.OP, {"agent": agent, "sessions": ["s-3"]}))
            job_ids.extend(j.job_id for j in sent)
            assert {j.queue for j in sent} == {queue_name(hosts[0])}
            for job in sent:
                assert (await client.wait(job.job_id, timeout_s=30)).state == "complete"
        for n in range(1, 4):
            assert await forgotten(first, agent, f"s-{n}")
            assert not await forgotten(second, agent, f"s-{n}")  # never on the other store
        assert not await forgotten(second, agent, "s-0")
        assert parse_route(await redis.hget(AGENT_OWNER_KEY, agent)).deployment == first.deployment
        assert all(d.stop() == 0 for d in daemons)
    finally:
        for d in daemons:
            d.kill()
        cleanup_redis(redis_url, hosts, [agent], job_ids)


@pytest.fixture
def own_redis(tmp_path: Path):
    """A Redis server of this test's own on a free port, so the test may stop and restart it."""
    server = PrivateRedis(tmp_path / "redis").start()
    yield server
    server.stop()


async def test_daemon_survives_a_redis_restart_and_reports_it(tmp_path: Path, own_redis, unique):
    agent, host = f"a{unique}", f"h{unique}"
    sessions_root = tmp_path / "sessions"
    SessionStoreBuilder(sessions_root, agent).add("k-one", "s-one", exchange("orchard"))
    cfg = write_config(
        tmp_path / "d.toml",
        state_dir=tmp_path / "state",
        sessions_root=sessions_root,
        redis_url=own_redis.url,
        host_id=host,
        extra="",
    )
    cfg.write_text(cfg.read_text().replace("max_jobs = 4", "max_jobs = 4\nredis_retry_max_s = 0.5"))
    notify = NotifySocket(tmp_path / "n.sock")
    daemon = DaemonProcess(cfg, notify, tmp_path / "d.log").start()
    try:
        notify.wait_for("READY=1")
        own_redis.stop()
        assert "redis unreachable" in notify.wait_for("redis unreachable")
        assert daemon.proc.poll() is None  # it keeps running and retrying
        own_redis.start()
        settings = load_settings(cfg)
        for _ in range(200):  # the heartbeat republishes the host record within 5 s
            if host_record(own_redis.url, host).get("redis") == "ok":
                break
            await anyio.sleep(0.1)
        assert host_record(own_redis.url, host)["state"] == "running"
        async with MemorydClient.connect(settings) as client:  # the worker serves jobs again
            job = await client.enqueue_forget(ForgetRequest(agent=agent, sessions=["s-one"]))
            assert (await client.wait(job.job_id, timeout_s=30)).state == "complete"
        assert "Redis is back" in daemon.log()
        assert daemon.stop() == 0
    finally:
        daemon.kill()


def test_a_second_daemon_for_one_host_id_is_refused_until_the_first_is_gone(
    tmp_path: Path, redis_url, unique
):
    host = f"h{unique}"
    cfg = write_config(
        tmp_path / "m.toml",
        state_dir=tmp_path / "state",
        sessions_root=tmp_path / "sessions",
        redis_url=redis_url,
        host_id=host,
    )
    notify = NotifySocket(tmp_path / "n.sock")
    first = DaemonProcess(cfg, notify, tmp_path / "first.log").start()
    successor: DaemonProcess | None = None
    try:
        notify.wait_for("READY=1")
        assert first.proc is not None
        second = run_cli(cfg, "run", timeout=60)
        assert second.returncode == 1
        assert second.stderr.startswith(f"memoryd: error: host {host} already running, pid {first.proc.pid};")
        assert "Traceback" not in second.stderr
        first.kill()  # SIGKILL: its record still looks fresh, but its process is gone
        notify = NotifySocket(tmp_path / "n2.sock")
        successor = DaemonProcess(cfg, notify, tmp_path / "successor.log").start()
        notify.wait_for("READY=1")
        assert successor.stop() == 0
    finally:
        first.kill()
        if successor is not None:
            successor.kill()
        cleanup_redis(redis_url, [host], [])


@pytest.mark.timeout(120)
async def test_a_daemon_that_was_stalled_yields_a_route_another_host_took_meanwhile(
    tmp_path: Path, redis, redis_url, unique
):
    import signal

    from memoryd.constants import HOST_KEY_TTL_S
    from tests.polling import until

    agent, hosts = f"a{unique}", [f"h{unique}-1", f"h{unique}-2"]
    daemons: list[DaemonProcess] = []
    try:
        # A failover pair: one deployment whose hosts share its state (the agent's one store).
        sessions_root = tmp_path / "sessions"
        SessionStoreBuilder(sessions_root, agent).add("k-one", "s-one", exchange("orchard"))
        for i, host in enumerate(hosts):
            cfg = write_config(
                tmp_path / f"{host}.toml",
                state_dir=tmp_path / "state",
                sessions_root=sessions_root,
                redis_url=redis_url,
                host_id=host,
            )
            daemons.append(
                DaemonProcess(cfg, NotifySocket(tmp_path / f"n{i}.sock"), tmp_path / f"{host}.log")
            )
        first, second = daemons
        first.start()
        assert first.notify is not None
        first.notify.wait_for("READY=1")
        first.signal(signal.SIGSTOP)  # stalled: its heartbeat goes stale
        await anyio.sleep(HOST_KEY_TTL_S + 1)
        second.start()
        assert second.notify is not None
        second.notify.wait_for("READY=1")
        assert parse_route(await redis.hget(AGENT_OWNER_KEY, agent)).queue == queue_name(hosts[1])
        first.signal(signal.SIGCONT)

        async def yielded() -> bool:
            return "no longer served here" in first.log()

        await until(yielded, "the resumed daemon yielding the route", 30)
        assert f"agent {agent}: its route is now host {hosts[1]}'s" in first.log()
        await anyio.sleep(6)  # a heartbeat of each: the route stays with the live owner
        assert parse_route(await redis.hget(AGENT_OWNER_KEY, agent)).queue == queue_name(hosts[1])
        assert first.stop() == 0 and second.stop() == 0
    finally:
        for d in daemons:
            if d.proc is not None:
                d.proc.send_signal(signal.SIGCONT)
            d.kill()
        cleanup_redis(redis_url, hosts, [agent])


@pytest.mark.parametrize("attempt", range(3))
async def test_two_hosts_starting_together_never_both_claim_an_agents_route(
    tmp_path: Path, redis, redis_url, unique, attempt: int
):
    """Two deployments on one Redis, each with an agent of the same name, started at the same
    moment: the routes are claimed in one atomic step, so exactly one host serves the agent and
    the other refuses it, naming the winner."""
    agent, hosts = f"a{unique}", [f"h{unique}-1", f"h{unique}-2"]
    configs, notifies = [], []
    for i, host in enumerate(hosts):
        sessions_root = tmp_path / f"deploy-{i}" / "sessions"
        SessionStoreBuilder(sessions_root, agent).add("k-one", f"s-{i}", exchange("orchard"))
        configs.append(
            write_config(
                tmp_path / f"{host}.toml",
                state_dir=tmp_path / f"deploy-{i}" / "state",
                sessions_root=sessions_root,
                redis_url=redis_url,
                host_id=host,
            )
        )
        notifies.append(NotifySocket(tmp_path / f"n{i}.sock"))
    daemons = [
        DaemonProcess(cfg, notify, tmp_path / f"{host}.log")
        for cfg, notify, host in zip(configs, notifies, hosts, strict=True)
    ]
    try:
        for d in daemons:
            d.start()
        for notify in notifies:
            notify.wait_for("READY=1")
        owner = parse_route(await redis.hget(AGENT_OWNER_KEY, agent)).queue
        assert owner in {queue_name(h) for h in hosts}
        winner = 0 if owner == queue_name(hosts[0]) else 1
        loser = 1 - winner
        served = [orjson.loads(host_record(redis_url, h)["agents"]) for h in hosts]
        assert served[winner] == [agent] and served[loser] == []
        assert f"agent {agent}: its route names host {hosts[winner]} of deployment " in daemons[loser].log()
        assert all(d.stop() == 0 for d in daemons)
    finally:
        for d in daemons:
            d.kill()
        cleanup_redis(redis_url, hosts, [agent])


async def test_a_start_that_fails_after_claiming_its_routes_says_the_host_stopped(
    tmp_path: Path, redis, redis_url, unique
):
    """The route claim beats the heartbeat; a start that then fails (the metrics port is taken)
    must not leave a live-looking host behind: clients are refused at once, naming it stopped."""
    import socket

    agent, host = f"a{unique}", f"h{unique}"
    sessions_root = tmp_path / "sessions"
    SessionStoreBuilder(sessions_root, agent).add("k-one", "s-one", exchange("orchard"))
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    cfg = write_config(
        tmp_path / "d.toml",
        state_dir=tmp_path / "state",
        sessions_root=sessions_root,
        redis_url=redis_url,
        host_id=host,
    )
    cfg.write_text(cfg.read_text().replace('"127.0.0.1:0"', f'"127.0.0.1:{taken.getsockname()[1]}"'))
    daemon = DaemonProcess(cfg, None, tmp_path / "d.log").start()
    try:
        assert daemon.wait(60) == 1
        assert "daemon.metrics_listen" in daemon.log() and "Traceback" not in daemon.log()
        assert parse_route(await redis.hget(AGENT_OWNER_KEY, agent)).queue == queue_name(host)
        assert (await redis.hget(HEARTBEATS_KEY, host)).decode().startswith("stopped ")
        refused = run_cli(cfg, "enqueue", "ingest", "--agent", agent)
        assert refused.returncode == 1 and f"its host '{host}' stopped " in refused.stderr
    finally:
        taken.close()
        daemon.kill()
        cleanup_redis(redis_url, [host], [agent])
