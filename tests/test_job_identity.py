"""Job identity: no job id is derived from a payload. A request runs each time it is sent; a
caller's request id makes a request sent again one job, answered by its queued, running or
successful run only (a failure runs again), and refuses another payload under it. Real Redis,
real stores, the daemon's own worker."""

from __future__ import annotations

import dataclasses
import hashlib
import re
import time

import orjson
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from memoryd.constants import AGENT_OWNER_KEY, HEARTBEATS_KEY, REQUEST_KEY
from memoryd.errors import UsageError
from memoryd.job_ids import (
    LIVE,
    OTHER,
    RANDOM,
    REQUEST,
    SCHEDULED,
    canonical_json,
    live_job_id,
    parse_job_id,
    random_job_id,
    request_job_id,
    scheduled_job_id,
)
from memoryd.ops import forget as forget_op
from memoryd.ops.registry import OPS
from memoryd.redis_values import is_erasure_request
from memoryd.runtime.client import MemorydClient
from memoryd.runtime.hosts import parse_route, route_value
from memoryd.runtime.wire import queue_name
from tests.builders import Msg, SessionStoreBuilder
from tests.conftest import REDIS_URL
from tests.daemon_harness import cleanup_redis, forgotten, run_cli, write_config
from tests.worker_harness import run_jobs

AGENT = "main"


@pytest.fixture
async def owned(settings, redis, redis_url):
    """Agent `main`, published as owned by this test's host (alive), and its session store."""
    queue = queue_name(settings.daemon.host_id)
    await redis.hset(AGENT_OWNER_KEY, AGENT, route_value(queue, settings.deployment, "store"))
    await redis.hset(HEARTBEATS_KEY, settings.daemon.host_id, f"{time.time():.3f}")
    builder = SessionStoreBuilder(settings.sessions_root, AGENT)
    job_ids: list[str] = []
    yield queue, builder, job_ids
    cleanup_redis(redis_url, [settings.daemon.host_id], [AGENT], job_ids)


def _omar_session(builder: SessionStoreBuilder, sid: str) -> None:
    builder.add(
        f"agent:main:{sid}",
        sid,
        [Msg("user", f"Omar's note in {sid}: the tram ledger balances on the ninth stop.")],
        participants=[{"actorId": "omar"}],
    )


async def test_the_same_forget_sent_again_after_a_new_session_arrives_runs_again_and_forgets_it(
    settings, owned
):
    """Before: the id hashed the payload, so the second send was answered by the first run's
    report and the new session of the participant was never forgotten."""
    queue, builder, job_ids = owned
    request = {"agent": AGENT, "participants": ["omar"]}
    _omar_session(builder, "omar-1")
    async with MemorydClient.connect(settings) as client:
        first = await client.enqueue_forget(request)
        job_ids.append(first.job_id)
        await run_jobs(settings, queue)
        assert (await client.wait(first.job_id, timeout_s=30)).state == "complete"
        _omar_session(builder, "omar-2")  # a new session of the participant arrives
        again = await client.enqueue_forget(request)
        job_ids.append(again.job_id)
        assert not again.deduplicated and again.job_id != first.job_id
        await run_jobs(settings, queue)
        assert (await client.wait(again.job_id, timeout_s=30)).state == "complete"
    assert await forgotten(settings, AGENT, "omar-1")
    assert await forgotten(settings, AGENT, "omar-2")


async def test_a_failed_forget_sent_again_with_the_same_request_id_runs_again(settings, owned, unique):
    queue, builder, job_ids = owned
    _omar_session(builder, "omar-1")
    request = {"agent": AGENT, "sessions": ["omar-1"]}
    async with MemorydClient.connect(settings) as client:
        first = await client.enqueue_forget(request, request_id=f"ticket-{unique}")
        job_ids.append(first.job_id)
        # The agent is away and not found again in time: AgentNotServed.
        away = dataclasses.replace(settings, daemon=dataclasses.replace(settings.daemon, agent_wait_s=0))
        await run_jobs(away, queue, agents=frozenset())
        failed = await client.wait(first.job_id, timeout_s=30)
        assert failed.state == "failed" and (failed.error or "").startswith("AgentNotServed")
        again = await client.enqueue_forget(request, request_id=f"ticket-{unique}")
        assert again.job_id == first.job_id and not again.deduplicated  # a failure answers nothing
        await run_jobs(settings, queue)
        assert (await client.wait(again.job_id, timeout_s=30)).state == "complete"
        # A success does answer it: the same request id is one job from now on.
        third = await client.enqueue_forget(request, request_id=f"ticket-{unique}")
        assert third.job_id == first.job_id and third.deduplicated
    assert await forgotten(settings, AGENT, "omar-1")


async def test_a_request_id_answers_its_queued_run_and_refuses_another_payload(
    settings, owned, unique, redis
):
    queue, builder, job_ids = owned
    async with MemorydClient.connect(settings) as client:
        first = await client.enqueue_forget({"agent": AGENT, "sessions": ["s1"]}, request_id=f"r-{unique}")
        job_ids.append(first.job_id)
        # The same request (fields in another order) under the same id: one job.
        same = await client.enqueue_forget({"sessions": ["s1"], "agent": AGENT}, request_id=f"r-{unique}")
        assert same.job_id == first.job_id and same.deduplicated
        with pytest.raises(
            UsageError, match=rf"request id 'r-{unique}': already used for another forget request"
        ):
            await client.enqueue_forget({"agent": AGENT, "sessions": ["s2"]}, request_id=f"r-{unique}")
    assert await redis.zcard(queue) == 1


async def test_the_cli_refuses_a_request_id_sent_with_another_payload_in_one_line(
    tmp_path, settings, owned, redis_url, unique
):
    queue, builder, job_ids = owned
    cfg = write_config(
        tmp_path / "c.toml",
        state_dir=settings.state_dir,
        sessions_root=settings.sessions_root,
        redis_url=redis_url,
        host_id=settings.daemon.host_id,
    )
    sent = run_cli(
        cfg, "enqueue", "forget", "--agent", AGENT, "--session", "s1", "--request-id", f"t-{unique}"
    )
    assert sent.returncode == 0, sent.stderr
    job_ids.append(sent.stdout.split()[0])
    other = run_cli(
        cfg, "enqueue", "forget", "--agent", AGENT, "--session", "s2", "--request-id", f"t-{unique}"
    )
    assert other.returncode == 2
    assert other.stderr.count("\n") == 1 and "Traceback" not in other.stderr
    assert f"request id 't-{unique}': already used for another forget request" in other.stderr


async def test_no_job_id_or_key_name_or_stored_value_is_derived_from_the_payload(
    settings, owned, unique, redis
):
    """Before: `forget:<sha256 of the canonical payload>`, which confirms a guessed payload."""
    queue, builder, job_ids = owned
    payload = forget_op.OP.contract.payload(
        forget_op.OP.contract.parse({"agent": AGENT, "sessions": ["s-oracle"]})
    )
    digests = {
        hashlib.sha256(canonical_json(form)).hexdigest()[:32]
        for form in (
            [forget_op.OP.contract.name, payload, None],
            [forget_op.OP.contract.name, payload, f"r-{unique}"],
            payload,
        )
    }
    before = set(await redis.keys("*"))
    async with MemorydClient.connect(settings) as client:
        a = await client.enqueue_forget(payload)
        b = await client.enqueue_forget(payload)
        c = await client.enqueue_forget(payload, request_id=f"r-{unique}")
        job_ids += [a.job_id, b.job_id, c.job_id]
    assert a.job_id != b.job_id and not b.deduplicated  # each request runs
    assert parse_job_id(a.job_id).kind == RANDOM and parse_job_id(c.job_id).kind == REQUEST
    new = set(await redis.keys("*")) - before
    values = [await redis.get(k) for k in new if await redis.type(k) == b"string"]
    for digest in digests:
        assert not any(digest.encode() in k for k in new)
        assert not any(v is not None and digest.encode() in v for v in values)
    assert await redis.get(REQUEST_KEY.format(job_id=c.job_id)) is not None


@pytest.mark.parametrize("bad", ["", " padded ", "tab\there", "x" * 129])
async def test_a_malformed_request_id_is_refused_before_anything_is_sent(settings, owned, redis, bad):
    queue, builder, job_ids = owned
    async with MemorydClient.connect(settings) as client:
        with pytest.raises(UsageError, match="request id .*: must be 1-128 printable characters"):
            await client.enqueue_forget({"agent": AGENT, "sessions": ["s1"]}, request_id=bad)
    assert await redis.zcard(queue) == 0


_names = st.sampled_from([op.contract.name for op in OPS])
_agents = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.-]{0,40}\Z")


_deployments = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", fullmatch=True)  # daemon.deployment_id


@given(
    name=_names,
    agent=_agents,
    slot=st.integers(0, 10**12),
    request_id=st.text(min_size=1, max_size=128),
    deployment=_deployments,
    other=_deployments,
)
def test_every_job_id_memoryd_builds_parses_back_to_its_family_and_kind(
    name, agent, slot, request_id, deployment, other
):
    assume(deployment != other)
    assert parse_job_id(random_job_id(name)) == parse_job_id(random_job_id(name))
    assert (parse_job_id(random_job_id(name)).family, parse_job_id(random_job_id(name)).kind) == (
        name,
        RANDOM,
    )
    req = parse_job_id(request_job_id(name, request_id))
    assert (req.family, req.kind, req.agent) == (name, REQUEST, None)
    assert request_id not in request_job_id(name, request_id).split(":", 1)[1] or len(request_id) < 3
    sched = parse_job_id(scheduled_job_id(name, agent, slot, deployment))
    assert (sched.family, sched.kind, sched.agent) == (name, SCHEDULED, agent)
    # Another deployment's run of the same agent in the same slot is another job.
    assert scheduled_job_id(name, agent, slot, deployment) != scheduled_job_id(name, agent, slot, other)
    live = parse_job_id(live_job_id(name, agent))
    assert (live.family, live.kind, live.agent) == (name, LIVE, agent)


@given(
    name=_names, tail=st.one_of(st.text(max_size=80), st.from_regex(r"(req:)?[0-9a-f]{32}", fullmatch=True))
)
def test_only_memoryds_own_erasure_ids_are_erasure_requests(name, tail):
    """The Redis purge and the verifier leave alone an erasure's record by its id alone: one of
    memoryd's own forms (random, or a request id's), never any id that merely starts `erase:`."""
    own = re.fullmatch(r"(req:)?[0-9a-f]{32}", tail) is not None
    for prefix in ("arq:job:", "arq:result:"):
        assert is_erasure_request(f"{prefix}erase:{tail}".encode("utf-8", "surrogateescape")) is own
        assert is_erasure_request(f"{prefix}{name}:{tail}") is (own and name == "erase")
    assert is_erasure_request(f"memoryd:erasure:{tail}") is False
    assert is_erasure_request(f"arq:job:{random_job_id('erase')}")


@given(job_id=st.text(max_size=80))
def test_any_other_tools_job_id_parses_without_error(job_id):
    parsed = parse_job_id(job_id)
    assert parsed.family == job_id.split(":", 1)[0]
    assert parsed.kind in (RANDOM, REQUEST, SCHEDULED, LIVE, OTHER)


def test_the_request_record_holds_no_payload_text():
    from memoryd.runtime.wire import request_fingerprint

    payload = {"agent": AGENT, "sessions": ["s-secret-session"]}
    fingerprint = request_fingerprint("r-1", "forget", payload)
    assert b"s-secret-session" not in fingerprint.encode()
    assert fingerprint != hashlib.sha256(orjson.dumps(payload)).hexdigest()
    assert fingerprint != request_fingerprint("r-2", "forget", payload)  # keyed by the request id


async def test_arqs_own_client_with_the_documented_json_settings_gets_a_forget_run(settings, owned):
    """docs/jobs.md: arq's client with JSON job_serializer/job_deserializer (arq pickles by
    default, which memoryd refuses) and a persisted job key."""
    import json
    import uuid

    from arq.connections import RedisSettings, create_pool
    from arq.jobs import Job

    queue, builder, job_ids = owned
    redis = await create_pool(
        RedisSettings.from_dsn(settings.redis_url),
        job_serializer=lambda data: json.dumps(data).encode(),
        job_deserializer=json.loads,
    )
    try:
        routed = parse_route(await redis.hget(AGENT_OWNER_KEY, AGENT)).queue
        job_id = f"forget:{uuid.uuid4().hex}"
        job_ids.append(job_id)
        await redis.enqueue_job(
            "forget",
            {"agent": AGENT, "sessions": ["s1"], "dry_run": True},
            _job_id=job_id,
            _queue_name=routed,
        )
        await redis.persist(f"arq:job:{job_id}")
        assert await redis.pttl(f"arq:job:{job_id}") == -1
        await run_jobs(settings, queue)
        result = await Job(job_id, redis, _queue_name=routed, _deserializer=json.loads).result(timeout=30)
    finally:
        await redis.aclose()
    assert result["dryRun"] is True and result["sessionIds"] == []


async def test_a_request_sent_again_after_a_failover_runs_on_the_live_host(settings, owned, redis, unique):
    """Before: the retry was answered by the job stuck on the dead host's queue, which nothing ran."""
    queue, builder, job_ids = owned
    _omar_session(builder, "omar-1")
    dead_host = f"dead-{unique}"
    dead = queue_name(dead_host)
    await redis.hset(HEARTBEATS_KEY, dead_host, f"stopped {time.time() - 60:.3f}")
    await redis.hset(AGENT_OWNER_KEY, AGENT, route_value(dead, settings.deployment, "store"))
    request = {"agent": AGENT, "sessions": ["omar-1"]}
    try:
        async with MemorydClient.connect(settings) as client:
            first = await client.enqueue_forget(request, request_id=f"fo-{unique}", queue_anyway=True)
            job_ids.append(first.job_id)
            assert first.queue == dead
            await redis.hset(
                AGENT_OWNER_KEY, AGENT, route_value(queue, settings.deployment, "store")
            )  # the agent's route moves to a live host
            again = await client.enqueue_forget(request, request_id=f"fo-{unique}")
            assert again.job_id == first.job_id and again.queue == queue
            assert await redis.zscore(queue, first.job_id) is not None
            assert await redis.zscore(dead, first.job_id) is None
            await run_jobs(settings, queue)
            assert (await client.wait(first.job_id, queue=queue, timeout_s=30)).state == "complete"
    finally:
        cleanup_redis(REDIS_URL, [dead_host], [])
    assert await forgotten(settings, AGENT, "omar-1")


async def test_a_request_ids_record_lives_while_its_job_waits_then_as_long_as_its_result(
    settings, owned, redis, unique
):
    queue, builder, job_ids = owned
    async with MemorydClient.connect(settings) as client:
        job = await client.enqueue_forget(
            {"agent": AGENT, "sessions": ["s1"], "dry_run": True}, request_id=f"l-{unique}"
        )
        job_ids.append(job.job_id)
        record = REQUEST_KEY.format(job_id=job.job_id)
        assert await redis.pttl(record) == -1  # no expiry while it waits
        await run_jobs(settings, queue)
        assert (await client.wait(job.job_id, timeout_s=30)).state == "complete"
    result_ttl = await redis.pttl(f"arq:result:{job.job_id}")
    assert 0 < await redis.pttl(record) <= settings.daemon.keep_result_s * 1000
    assert abs(await redis.pttl(record) - result_ttl) < 5_000
