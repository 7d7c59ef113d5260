"""Routes belong to a deployment: a route names the deployment and the agent's store as well as
the host. Another deployment never takes it, a host takes an agent over only with its store, a
client never sends along another deployment's route, and a job for an agent this host's route
names waits while the agent is found again. Real Redis, real stores, the daemon's own worker."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import anyio
import pytest

from memoryd.constants import AGENT_OWNER_KEY, HEARTBEATS_KEY
from memoryd.errors import ConfigError
from memoryd.ops import forget as forget_op
from memoryd.runtime.client import MemorydClient, OtherDeployment
from memoryd.runtime.hosts import (
    ALIVE,
    OTHER_DEPLOYMENT,
    OTHER_STORE,
    KeptRoute,
    claim_routes,
    parse_route,
    route_value,
)
from memoryd.runtime.served import SERVED, ServedAgents
from memoryd.runtime.service import arq_pool, migrate_store
from memoryd.runtime.wire import queue_name
from memoryd.runtime.worker import MemorydWorker, worker_kwargs
from memoryd.settings import Settings
from memoryd.store.migrate import AGENT
from tests.builders import SessionStoreBuilder, exchange
from tests.conftest import make_settings
from tests.daemon_harness import cleanup_redis, forgotten, wait_state

FORGET = forget_op.OP.contract.name


async def _claim(
    redis,
    agents: dict[str, str],
    host: str,
    deployment: str,
    now: float,
    *,
    held: bool = False,
    beat: str | None = None,
) -> dict[str, KeptRoute]:
    return await claim_routes(
        redis,
        queue=queue_name(host),
        host=host,
        beat=beat or f"{now:.3f}",
        now_s=now,
        deployment=deployment,
        held=held,
        stores=agents,
    )


async def _route(redis, agent: str):
    return parse_route(await redis.hget(AGENT_OWNER_KEY, agent))


async def test_another_deployment_never_takes_a_route_and_a_host_takes_one_only_with_its_store(
    redis, redis_url, unique
) -> None:
    a, b, c = f"h{unique}-a", f"h{unique}-b", f"h{unique}-c"
    agent = f"x{unique}"
    now = time.time()
    try:
        assert await _claim(redis, {agent: "store-1"}, a, "blue", now) == {}
        route = await _route(redis, agent)
        assert (route.queue, route.deployment, route.store) == (queue_name(a), "blue", "store-1")
        await _claim(redis, {}, a, "blue", now, beat=f"stopped {now:.3f}")  # a stops
        # Another deployment with an agent of the same name: a stopped host's route stays.
        kept = await _claim(redis, {agent: "store-9"}, b, "green", now + 1)
        assert kept == {agent: KeptRoute(a, OTHER_DEPLOYMENT, "blue")}
        # A host of the same deployment serving another store of the agent: it stays too.
        kept = await _claim(redis, {agent: "store-2"}, c, "blue", now + 1)
        assert kept == {agent: KeptRoute(a, OTHER_STORE, "blue")}
        assert (await _route(redis, agent)).queue == queue_name(a)
        # The same store (shared storage, a failover pair) is taken over.
        assert await _claim(redis, {agent: "store-1"}, c, "blue", now + 2) == {}
        assert (await _route(redis, agent)).queue == queue_name(c)
        # While c is alive, a's restart leaves it with c.
        kept = await _claim(redis, {agent: "store-1"}, a, "blue", now + 3)
        assert kept == {agent: KeptRoute(c, ALIVE, "blue")}
    finally:
        cleanup_redis(redis_url, [a, b, c], [agent])


async def test_a_served_agents_route_forged_for_another_deployment_is_taken_back(
    redis, redis_url, unique
) -> None:
    a, evil = f"h{unique}-a", f"h{unique}-evil"
    agent = f"x{unique}"
    now = time.time()
    try:
        await _claim(redis, {agent: "store-1"}, a, "blue", now)
        # Two HSETs: a route to another queue, and a heartbeat that makes its host look alive.
        await redis.hset(AGENT_OWNER_KEY, agent, route_value(queue_name(evil), "red", "store-1"))
        await redis.hset(HEARTBEATS_KEY, evil, f"{now:.3f}")
        # The serving host's next beat (held) takes it back; a legacy own route is republished.
        assert await _claim(redis, {agent: "store-1"}, a, "blue", now + 1, held=True) == {}
        assert (await _route(redis, agent)).queue == queue_name(a)
        await redis.hset(AGENT_OWNER_KEY, agent, queue_name(a))  # as an older memoryd wrote it
        assert await _claim(redis, {agent: "store-1"}, a, "blue", now + 2) == {}
        assert (await _route(redis, agent)).deployment == "blue"
    finally:
        cleanup_redis(redis_url, [a, evil], [agent])


async def test_the_client_never_sends_along_another_deployments_route(
    tmp_path: Path, redis, redis_url, unique
) -> None:
    """A forged (or another deployment's) route to a live host's queue: refused in one line,
    nothing enqueued there."""
    agent, evil = f"x{unique}", f"h{unique}-evil"
    settings = make_settings(
        tmp_path, tmp_path, daemon={"host_id": f"h{unique}", "deployment_id": f"blue-{unique}"}
    )
    await redis.hset(AGENT_OWNER_KEY, agent, route_value(queue_name(evil), f"red-{unique}", "s"))
    await redis.hset(HEARTBEATS_KEY, evil, f"{time.time():.3f}")
    try:
        async with MemorydClient.connect(settings) as client:
            with pytest.raises(OtherDeployment) as refused:
                await client.submit(forget_op.OP, {"agent": agent, "sessions": ["s1"]})
            message = str(refused.value)
            assert "\n" not in message
            assert f"of deployment 'red-{unique}', not this config's 'blue-{unique}'" in message
            assert "daemon.deployment_id" in message
            await redis.hset(AGENT_OWNER_KEY, agent, queue_name(evil))  # a bare queue: no deployment
            with pytest.raises(OtherDeployment, match="no deployment"):
                await client.submit(forget_op.OP, {"agent": agent, "sessions": ["s1"]})
            await redis.hset(AGENT_OWNER_KEY, agent, "{not json")
            with pytest.raises(OtherDeployment, match="is not a route"):
                await client.submit(forget_op.OP, {"agent": agent, "sessions": ["s1"]})
        assert await redis.zcard(queue_name(evil)) == 0
    finally:
        cleanup_redis(redis_url, [evil], [agent])


def test_the_deployment_id_defaults_to_one_per_state_directory(tmp_path: Path) -> None:
    one = make_settings(tmp_path, tmp_path)
    same = make_settings(tmp_path, tmp_path / "other")
    other = make_settings(tmp_path, tmp_path, state_dir=tmp_path / "state-2")
    assert one.deployment == same.deployment != other.deployment
    assert one.deployment.startswith("state-")
    assert make_settings(tmp_path, tmp_path, daemon={"deployment_id": "prod"}).deployment == "prod"
    with pytest.raises(ConfigError, match="daemon.deployment_id") as bad:
        make_settings(tmp_path, tmp_path, daemon={"deployment_id": "two words"})
    assert "\n" not in str(bad.value)


async def test_a_store_keeps_the_id_it_was_given_and_another_store_has_its_own(tmp_path: Path) -> None:
    first = await migrate_store(tmp_path / "a" / "memory.sqlite", AGENT)
    assert first is not None and len(first) == 32
    assert await migrate_store(tmp_path / "a" / "memory.sqlite", AGENT) == first
    assert await migrate_store(tmp_path / "b" / "memory.sqlite", AGENT) != first


def _with_wait(settings: Settings, wait_s: float) -> Settings:
    return dataclasses.replace(settings, daemon=dataclasses.replace(settings.daemon, agent_wait_s=wait_s))


async def _run_worker(settings: Settings, ctx: dict, queue: str) -> None:
    pool = arq_pool(settings, queue)
    worker = MemorydWorker(**{**worker_kwargs(settings, queue, ctx), "burst": True}, redis_pool=pool)
    try:
        await worker.main()
    finally:
        await pool.aclose(close_connection_pool=True)


@pytest.mark.parametrize("found", [True, False])
async def test_a_job_for_an_agent_routed_here_waits_while_it_is_found_again(
    settings: Settings, redis, redis_url, unique, found: bool
) -> None:
    """Before: a forget queued while its agent's directory was away at a start failed for good
    with AgentNotServed. Now it waits (bounded) for the heartbeat that serves the agent again."""
    agent, host = f"a{unique}", settings.daemon.host_id
    queue = queue_name(host)
    SessionStoreBuilder(settings.sessions_root, agent).add("k-one", "s-one", exchange("orchard"))
    settings = _with_wait(settings, 30.0 if found else 0.5)
    await redis.hset(AGENT_OWNER_KEY, agent, route_value(queue, settings.deployment, "s"))
    await redis.hset(HEARTBEATS_KEY, host, f"{time.time():.3f}")
    served = ServedAgents()
    ctx: dict = {"settings": settings, SERVED: served, "host_id": host}
    try:
        async with MemorydClient.connect(settings) as client:
            job = await client.submit(forget_op.OP, {"agent": agent, "sessions": ["s-one"]})
            async with anyio.create_task_group() as tg:
                tg.start_soon(_run_worker, settings, ctx, queue)
                if found:
                    await wait_state(client, job.job_id, "running")  # started, and waits
                    served.agents = frozenset({agent})  # as the service's heartbeat does
            report = await client.wait(job.job_id, queue=queue, timeout_s=30)
        if found:
            assert report.state == "complete"
            assert await forgotten(settings, agent, "s-one")
        else:
            assert report.state == "failed"
            assert report.error == (
                f"AgentNotServed: {FORGET}: agent '{agent}' is routed to host '{host}' but was not "
                "found there within daemon.agent_wait_s (0.5 s); check its directory under "
                "sessions_root, then send the job again"
            )
    finally:
        cleanup_redis(redis_url, [host], [agent], [job.job_id])


async def test_a_job_for_an_agent_routed_elsewhere_fails_at_once(
    settings: Settings, redis, redis_url, unique
):
    agent, host = f"a{unique}", settings.daemon.host_id
    queue = queue_name(host)
    await redis.hset(AGENT_OWNER_KEY, agent, route_value(queue_name("elsewhere"), settings.deployment, "s"))
    await redis.hset(HEARTBEATS_KEY, host, f"{time.time():.3f}")
    try:
        async with MemorydClient.connect(settings) as client:
            job = await client.enqueue(FORGET, {"agent": agent, "sessions": ["s-one"]}, queue=queue)
            # A wait would outlast the test's timeout: it fails at once instead.
            waiting = _with_wait(settings, 3600.0)
            await _run_worker(waiting, {"settings": waiting, SERVED: ServedAgents(), "host_id": host}, queue)
            report = await client.wait(job.job_id, queue=queue, timeout_s=30)
        assert report.error == f"AgentNotServed: {FORGET}: agent '{agent}' is not served by host '{host}'"
    finally:
        cleanup_redis(redis_url, [host], [agent], [job.job_id])
