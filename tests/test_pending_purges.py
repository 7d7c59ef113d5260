"""A pending purge is never lost: no purge deletes another purge's queued job record (even one
naming what it purged), a purge's job record does not expire before it runs, and a purge sent
to a queue no live host serves is refused, naming the hosts that are alive, unless the caller
asks to leave it queued. Real Redis, real stores, the daemon's own worker, the CLI."""

from __future__ import annotations

import time

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memoryd.constants import AGENT_OWNER_KEY, HEARTBEATS_KEY
from memoryd.ops import forget as forget_op
from memoryd.ops.execute import run_locally
from memoryd.ops.registry import OPS
from memoryd.redis_values import PURGE_FAMILIES
from memoryd.runtime.client import MemorydClient
from memoryd.runtime.hosts import route_value
from memoryd.runtime.wire import queue_name
from tests.builders import Msg, SessionStoreBuilder
from tests.daemon_harness import cleanup_redis, forgotten, run_cli, write_config
from tests.worker_harness import run_jobs

AGENT = "main"


@pytest.fixture
async def owned(settings, redis, redis_url):
    queue = queue_name(settings.daemon.host_id)
    await redis.hset(AGENT_OWNER_KEY, AGENT, route_value(queue, settings.deployment, "store"))
    await redis.hset(HEARTBEATS_KEY, settings.daemon.host_id, f"{time.time():.3f}")
    builder = SessionStoreBuilder(settings.sessions_root, AGENT)
    job_ids: list[str] = []
    yield queue, builder, job_ids
    cleanup_redis(redis_url, [settings.daemon.host_id], [AGENT], job_ids)


def _session(builder: SessionStoreBuilder, sid: str) -> None:
    builder.add(f"agent:main:{sid}", sid, [Msg("user", f"In {sid} the quokka ledger balances on tram nine.")])


def test_the_purge_families_are_the_registrys():
    assert {op.contract.name for op in OPS if op.contract.purge} == PURGE_FAMILIES


async def test_a_forget_does_not_delete_a_queued_forget_naming_the_same_session(settings, owned, redis):
    """Forget B {x, y} is queued; forget A {x} completes. Before: A's purge of Redis values
    deleted B's job record because it names x, B failed `job expired` and y was never forgotten."""
    queue, builder, job_ids = owned
    _session(builder, "sess-x")
    _session(builder, "sess-y")
    async with MemorydClient.connect(settings) as client:
        b = await client.enqueue_forget({"agent": AGENT, "sessions": ["sess-x", "sess-y"]})
        job_ids.append(b.job_id)
        # A runs in the foreground (as `memoryd forget` does), with B still queued.
        await run_locally(
            forget_op.OP, settings, forget_op.OP.contract.parse({"agent": AGENT, "sessions": ["sess-x"]})
        )
        assert await forgotten(settings, AGENT, "sess-x")
        raw = await redis.get(f"arq:job:{b.job_id}")
        assert raw is not None, "forget A deleted queued forget B"
        assert orjson.loads(raw)["a"][0]["sessions"] == ["sess-x", "sess-y"]
        await run_jobs(settings, queue)
        done = await client.wait(b.job_id, timeout_s=30)
    assert done.state == "complete", done.error
    assert await forgotten(settings, AGENT, "sess-y")


def _purge_by_text(redis, needle: str):
    from memoryd.redis_values import purge_naming

    return purge_naming(redis, lambda v: needle in v)


def _purge_by_bytes(redis, needle: str):
    from memoryd.retention.redis_bytes import purge_naming_bytes

    return purge_naming_bytes(redis, lambda v: needle.encode() in v)


@pytest.mark.parametrize("purge", [_purge_by_text, _purge_by_bytes], ids=["text", "bytes"])
async def test_a_purge_of_redis_values_spares_every_pending_purge_but_not_other_jobs(
    settings, owned, redis, purge
):
    """Whatever names the job, whichever queue it waits on: a pending forget, erase or expire
    record stays; a queued sweep naming the session goes. Both ways an erasure purges Redis
    (names as text, names as bytes) keep to it."""
    queue, builder, job_ids = owned
    needle = f"sess-{settings.daemon.host_id}"
    planted = {}
    # A broken record's function may be any JSON: it names no family, and the purge goes on.
    for family in (*sorted(PURGE_FAMILIES), "ingest_sweep", "dream", {"forget": 1}, ["erase"], 7, None):
        job_id = f"other-tool-{orjson.dumps(family).decode()}-{needle}"
        job_ids.append(job_id)
        record = {"t": 1, "f": family, "a": [{"agent": AGENT, "note": needle}], "k": {}, "et": 1}
        await redis.set(f"arq:job:{job_id}", orjson.dumps(record))
        planted[job_id] = (
            family in PURGE_FAMILIES if isinstance(family, str) else False,
            f"arq:job:{job_id}",
        )
    await purge(redis, needle)
    for job_id, (kept, key) in planted.items():
        assert bool(await redis.exists(key)) == kept, job_id


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


@given(
    record=json_values | st.dictionaries(st.just("f"), json_values | st.sampled_from(sorted(PURGE_FAMILIES)))
)
def test_any_json_record_is_a_pending_purge_only_when_its_function_is_a_purge_family(record) -> None:
    from memoryd.redis_values import is_pending_purge

    expected = isinstance(record, dict) and isinstance(record.get("f"), str) and record["f"] in PURGE_FAMILIES
    assert is_pending_purge(b"arq:job:x", [orjson.dumps(record)]) is expected


async def test_a_purge_job_record_waits_without_expiry(settings, owned, redis):
    queue, builder, job_ids = owned
    async with MemorydClient.connect(settings) as client:
        forget = await client.enqueue_forget({"agent": AGENT, "sessions": ["s1"]})
        sweep = await client.enqueue_ingest(AGENT)
        job_ids += [forget.job_id, sweep.job_id]
    assert await redis.pttl(f"arq:job:{forget.job_id}") == -1  # before: a day, then `job expired`
    assert 0 < await redis.pttl(f"arq:job:{sweep.job_id}") <= 86_400_000  # a sweep keeps arq's


async def test_a_purge_for_a_queue_no_live_host_serves_is_refused_naming_the_live_hosts(
    tmp_path, settings, owned, redis, redis_url, unique
):
    queue, builder, job_ids = owned
    host = settings.daemon.host_id
    alive = f"alive-{unique}"
    cfg = write_config(
        tmp_path / "c.toml",
        state_dir=settings.state_dir,
        sessions_root=settings.sessions_root,
        redis_url=redis_url,
        host_id=host,
    )
    await redis.hset(HEARTBEATS_KEY, host, f"stopped {time.time() - 30:.3f}")
    await redis.hset(HEARTBEATS_KEY, alive, f"{time.time():.3f}")
    try:
        for args in (
            ("erase", "--scope", f"tenant:t:user:u-{unique}", "--queue", queue),
            ("expire", "--queue", queue),
            ("forget", "--agent", AGENT, "--session", "s1"),
        ):
            refused = run_cli(cfg, "enqueue", *args)
            assert refused.returncode == 1, refused.stderr
            assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
            assert f"its host '{host}' stopped 3" in refused.stderr
            assert f"hosts alive: {alive}" in refused.stderr.split("(", 1)[1]
            assert "--queue-anyway" in refused.stderr
        assert await redis.zcard(queue) == 0
        kept = run_cli(
            cfg,
            "enqueue",
            "erase",
            "--scope",
            f"tenant:t:user:u-{unique}",
            "--queue",
            queue,
            "--queue-anyway",
        )
        assert kept.returncode == 0, kept.stderr
        job_ids.append(kept.stdout.split()[0])
        assert await redis.zcard(queue) == 1
        assert await redis.pttl(f"arq:job:{kept.stdout.split()[0]}") == -1
    finally:
        await redis.hdel(HEARTBEATS_KEY, alive)


async def test_a_purge_waiting_on_a_stopped_host_shows_in_jobs_and_status(
    tmp_path, settings, owned, redis, redis_url
):
    queue, builder, job_ids = owned
    host = settings.daemon.host_id
    cfg = write_config(
        tmp_path / "c.toml",
        state_dir=settings.state_dir,
        sessions_root=settings.sessions_root,
        redis_url=redis_url,
        host_id=host,
    )
    await redis.hset(HEARTBEATS_KEY, host, f"stopped {time.time() - 30:.3f}")
    kept = run_cli(cfg, "enqueue", "forget", "--agent", AGENT, "--session", "s1", "--queue-anyway")
    assert kept.returncode == 0, kept.stderr
    job_ids.append(kept.stdout.split()[0])

    jobs = run_cli(cfg, "jobs")
    assert jobs.returncode == 0, jobs.stderr
    [row] = [line for line in jobs.stdout.splitlines() if kept.stdout.split()[0] in line]
    assert "queued" in row and f"waiting: its host '{host}' stopped 3" in row
    status = run_cli(cfg, "status")
    assert status.returncode == 0, status.stderr
    assert "purges waiting on a host that is not alive:" in status.stdout
    assert f"1 purge(s) waiting on queue {queue} (forget 1): its host '{host}' stopped 3" in status.stdout
    as_json = orjson.loads(run_cli(cfg, "status", "--json").stdout)
    assert {"queue": queue, "host": host, "purges": {"forget": 1}}.items() <= as_json["stalledPurges"][
        0
    ].items()


def test_only_queues_of_hosts_not_alive_with_purges_are_stalled():
    from memoryd.runtime.stalled import stalled

    now = 1_000_000.0
    queues = {
        "memoryd:queue:up": ["forget"],
        "memoryd:queue:down": ["forget", "erase", "forget"],
        "memoryd:queue:never": ["expire"],
        "memoryd:queue:idle": [],
    }
    beats = {"up": f"{now - 1:.3f}", "down": f"stopped {now - 600:.3f}", "idle": f"stopped {now:.3f}"}
    found = {s.host: s for s in stalled(queues, beats, now)}
    assert set(found) == {"down", "never"}
    assert found["down"].purges == {"forget": 2, "erase": 1} and found["down"].total == 3
    assert found["never"].host_state == "its host 'never' has never sent a heartbeat"


async def test_the_verifiers_scan_leaves_out_a_pending_purge_and_sees_any_other_job_naming_the_subject(
    redis, unique
):
    """A queued forget naming an erased subject's session must stay (it is still to run) and is
    not residue; a queued sweep naming it is."""
    from memoryd.redis_values import scan_values

    needle = f"sess-{unique}"
    keys = {}
    for family in ("forget", "ingest_sweep"):
        key = f"arq:job:scan-{family}-{unique}"
        record = {"t": 1, "f": family, "a": [{"agent": AGENT, "sessions": [needle]}], "k": {}, "et": 1}
        await redis.set(key, orjson.dumps(record), px=600_000)
        keys[family] = key
    try:
        seen = {key async for key, strings in scan_values(redis) if needle in strings}
    finally:
        await redis.delete(*keys.values())
    assert seen == {keys["ingest_sweep"]}
