"""The daemon's parts on their own: the scheduler's plan and its Redis side, the status
summary, the notify protocol, job ids and the JSON wire format."""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import threading
from pathlib import Path

import orjson
import pytest

from memoryd.job_ids import request_job_id
from memoryd.ops import dream as dream_op
from memoryd.ops import index_sync as index_op
from memoryd.ops import ingest_sweep as ingest_op
from memoryd.ops import retention_sweep as retention_sweep_op
from memoryd.runtime.scheduler import Schedule, Scheduler, due, schedules
from memoryd.runtime.sdnotify import Notifier, watchdog_interval_s
from memoryd.runtime.service import arq_pool
from memoryd.runtime.status import summarize
from memoryd.runtime.wire import deserialize, serialize
from memoryd.store.checkpoints import CheckpointSummary
from tests.daemon_harness import cleanup_redis

DREAM, INDEX_SYNC, INGEST_SWEEP, RETENTION_SWEEP = (
    dream_op.OP.contract.name,
    index_op.OP.contract.name,
    ingest_op.OP.contract.name,
    retention_sweep_op.OP.contract.name,
)

PLAN = (
    Schedule(INGEST_SWEEP, 300),
    Schedule(INDEX_SYNC, 60),
    Schedule(RETENTION_SWEEP, 3600, per_agent=False),
)


def test_every_schedule_is_due_at_start_with_ids_naming_family_target_and_slot():
    items = due(1000.0, PLAN, ["b", "a"], "host1", "d", {})
    assert [i.job_id for i in items] == [
        "ingest_sweep:a:sched:d:3",
        "ingest_sweep:b:sched:d:3",
        "index_sync:a:sched:d:16",
        "index_sync:b:sched:d:16",
        "retention_sweep:host1:sched:d:0",
    ]
    assert items[-1].agent is None  # host-wide
    assert items[0].previous_job_id == "ingest_sweep:a:sched:d:2"


def test_nothing_is_due_again_within_a_slot_and_everything_in_the_next():
    first = due(1000.0, PLAN, ["a"], "h", "d", {})
    done = {(i.job, i.agent or "h"): i.slot for i in first}
    assert due(1019.0, PLAN, ["a"], "h", "d", done) == []
    later = due(1201.0, PLAN, ["a"], "h", "d", done)
    assert [i.job_id for i in later] == ["ingest_sweep:a:sched:d:4", "index_sync:a:sched:d:20"]
    assert later[0].previous_job_id == "ingest_sweep:a:sched:d:3"


def test_dreaming_is_scheduled_only_when_enabled(settings):
    assert DREAM in [s.job for s in schedules(settings)]
    off = dataclasses.replace(settings, dreaming=dataclasses.replace(settings.dreaming, enabled=False))
    assert DREAM not in [s.job for s in schedules(off)]


async def test_the_scheduler_does_not_pile_up_sweeps_while_one_is_pending(settings, redis, redis_url, unique):
    queue = f"memoryd:queue:sched-{unique}"
    pool = arq_pool(settings, queue)
    plan = (Schedule(INGEST_SWEEP, 100),)
    try:
        scheduler = Scheduler(pool, queue, "h", "d")
        assert await scheduler.tick(1000.0, plan, ["a"]) == ["ingest_sweep:a:sched:d:10"]
        assert await scheduler.tick(1050.0, plan, ["a"]) == []  # same slot
        assert await scheduler.tick(1100.0, plan, ["a"]) == []  # next slot, but slot 10 still queued
        await pool.zrem(queue, "ingest_sweep:a:sched:d:10")
        await pool.delete("arq:job:ingest_sweep:a:sched:d:10")
        assert await scheduler.tick(1100.0, plan, ["a"]) == ["ingest_sweep:a:sched:d:11"]
        # A restarted daemon (fresh scheduler) in the same slot enqueues nothing new.
        assert await Scheduler(pool, queue, "h", "d").tick(1150.0, plan, ["a"]) == []
        assert await pool.zcard(queue) == 1
    finally:
        await pool.delete(queue, "arq:job:ingest_sweep:a:sched:d:11", "arq:job:ingest_sweep:a:sched:d:10")
        await pool.aclose(close_connection_pool=True)
        cleanup_redis(redis_url, [], [])


async def test_two_deployments_on_one_redis_each_schedule_their_agent_of_the_same_name(
    settings, redis, redis_url, unique
):
    """A scheduled id names the deployment: another deployment's run of its agent `a` in the same
    slot is not taken for this one's (arq enqueues no job whose id has a record or a result)."""
    queues = [f"memoryd:queue:sched-{d}-{unique}" for d in ("a", "b")]
    pools = [arq_pool(settings, q) for q in queues]
    plan = (Schedule(INGEST_SWEEP, 100),)
    try:
        first = await Scheduler(pools[0], queues[0], "ha", f"dep-a-{unique}").tick(1000.0, plan, ["a"])
        second = await Scheduler(pools[1], queues[1], "hb", f"dep-b-{unique}").tick(1000.0, plan, ["a"])
        assert len(first) == len(second) == 1 and first != second
        assert [await pool.zcard(q) for pool, q in zip(pools, queues, strict=True)] == [1, 1]
    finally:
        for pool, q in zip(pools, queues, strict=True):
            await pool.delete(q, *(f"arq:job:ingest_sweep:a:sched:dep-{d}-{unique}:10" for d in "ab"))
            await pool.aclose(close_connection_pool=True)


async def test_the_scheduler_keeps_its_cadence_after_the_clock_steps_back(settings, redis, redis_url, unique):
    """The wall clock steps back 10 minutes: slots keep coming at the interval by the monotonic
    clock, with ids never used before, instead of stopping until the clock passes the last one."""
    queue = f"memoryd:queue:sched-back-{unique}"
    pool = arq_pool(settings, queue)
    plan = (Schedule(INGEST_SWEEP, 100),)
    ids = [f"ingest_sweep:a:sched:d:{n}" for n in (10, 11, 12)]
    try:
        scheduler = Scheduler(pool, queue, "h", "d")
        assert await scheduler.tick(1000.0, plan, ["a"], mono_s=50.0) == [ids[0]]
        await pool.zrem(queue, ids[0])  # it ran
        await pool.delete(f"arq:job:{ids[0]}")
        assert await scheduler.tick(400.0, plan, ["a"], mono_s=151.0) == [ids[1]]  # 10 minutes back
        await pool.zrem(queue, ids[1])
        await pool.delete(f"arq:job:{ids[1]}")
        assert await scheduler.tick(450.0, plan, ["a"], mono_s=201.0) == []  # within that interval
        assert await scheduler.tick(500.0, plan, ["a"], mono_s=252.0) == [ids[2]]
    finally:
        await pool.delete(queue, *(f"arq:job:{i}" for i in ids))
        await pool.aclose(close_connection_pool=True)
        cleanup_redis(redis_url, [], [])


def _row(sid: str, mtime: int, size: int, reason: str | None = None, at: int = 1) -> CheckpointSummary:
    return CheckpointSummary(sid, mtime, size, reason, at)


def test_status_counts_admitted_excluded_by_reason_and_lag():
    rows = [
        _row("s1", 10, 100, at=5),
        _row("s2", 10, 100, "channel:signal", at=7),
        _row("s3", 10, 100, "hookExternalContentSource:webhook", at=6),
        _row("s4", 10, 100, at=3),
    ]
    live = {"s1": (10, 100), "s2": (11, 120), "s3": (10, 100), "s4": (10, 150), "s5": (1, 1), "s6": None}
    policy = {"s2": "channel:signal", "s3": "hookExternalContentSource:webhook"}
    summary = summarize(rows, live, kept_out=policy)
    assert summary.live == 6
    assert summary.admitted == 4  # every live session is admitted or excluded, swept or not
    assert summary.excluded == {"channel:signal": 1, "hookExternalContentSource:webhook": 1}
    # s4 changed, s5 never swept; s2 changed but the policy keeps it out; s6 has no transcript.
    assert summary.lag == 2
    assert summary.last_sweep_ms == 7
    # A session the policy kept out and now admits is read by the next sweep.
    assert summarize(rows, live, kept_out={"s2": "channel:signal"}).lag == 3
    assert summarize(rows, live, kept_out=policy, last_sweep_ms=42).last_sweep_ms == 42


def test_a_purged_session_without_a_checkpoint_still_counts_as_excluded():
    rows = [_row("s1", 10, 100)]  # s2's checkpoint went with its purge
    summary = summarize(rows, {"s1": (10, 100), "s2": (10, 100)}, kept_out={"s2": "forgotten"})
    assert (summary.admitted, summary.excluded, summary.lag) == (1, {"forgotten": 1}, 0)


def test_the_newest_checkpoint_of_a_session_wins():
    rows = [_row("s1", 10, 100, "channel:x", at=1), _row("s1", 12, 130, None, at=9)]
    summary = summarize(rows, {"s1": (12, 130)})
    assert (summary.admitted, summary.excluded, summary.lag) == (1, {}, 0)


@pytest.mark.parametrize("abstract", [False, True])
def test_notifier_speaks_the_sd_notify_protocol(tmp_path: Path, abstract: bool):
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if abstract:
        receiver.bind(b"\0memoryd-notify-" + tmp_path.name.encode())
        address = "@memoryd-notify-" + tmp_path.name
    else:
        receiver.bind(str(tmp_path / "notify"))
        address = str(tmp_path / "notify")
    receiver.settimeout(2)
    n = Notifier(address)
    assert n.ready("serving")
    assert receiver.recv(4096).decode().split("\n")[:2] == ["READY=1", "STATUS=serving"]
    n.watchdog()
    assert receiver.recv(4096) == b"WATCHDOG=1"
    n.stopping("draining", 12.5)
    assert receiver.recv(4096).decode().split("\n") == [
        "STOPPING=1",
        "STATUS=draining",
        "EXTEND_TIMEOUT_USEC=12500000",
    ]
    n.close()
    receiver.close()


def test_notifier_never_waits_for_a_receiver_that_stopped_reading(tmp_path: Path, caplog):
    """A full notify queue must not stop the daemon's event loop (its heartbeat, its lease
    renewals): the notifications it has no room for are dropped, said once, and delivery
    resumes when the receiver reads again."""
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(str(tmp_path / "notify"))
    n = Notifier(str(tmp_path / "notify"))
    sent: list[bool] = []
    # In a thread, so that a notifier that blocks fails this test instead of hanging it.
    sender = threading.Thread(
        target=lambda: sent.extend(n.status(f"beat {i}") for i in range(200)), daemon=True
    )
    sender.start()
    sender.join(5)
    assert not sender.is_alive(), "the notifier blocked on a receiver that does not read"
    assert sent[0] and not sent[-1] and n.dropped == sent.count(False) > 0
    assert sum("not reading" in r.getMessage() for r in caplog.records) == 1
    receiver.setblocking(False)
    delivered = []
    with contextlib.suppress(BlockingIOError):
        while True:
            delivered.append(receiver.recv(4096))
    assert len(delivered) == sent.count(True) and delivered[0] == b"STATUS=beat 0"
    assert n.status("back") and n.dropped == 0
    assert receiver.recv(4096) == b"STATUS=back"
    n.close()
    receiver.close()


def test_notifier_without_a_socket_is_a_no_op(monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert not Notifier().enabled
    assert Notifier().ready("x") is False


def test_watchdog_pings_at_half_the_configured_interval(monkeypatch):
    import os

    monkeypatch.setenv("WATCHDOG_USEC", "20000000")
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
    assert watchdog_interval_s() == 10.0
    monkeypatch.setenv("WATCHDOG_PID", "1")  # meant for another process
    assert watchdog_interval_s() is None


def test_a_request_ids_job_id_is_one_per_request_id_and_payloads_plain_json():
    a = request_job_id("forget", "r-1")
    assert a == request_job_id("forget", "r-1")
    assert a != request_job_id("forget", "r-2") and a != request_job_id("ingest_sweep", "r-1")
    raw = serialize({"r": ValueError("payload.x: unknown field"), "a": ({"k": 1},)})
    # A result keeps no arguments (they may name sessions or people); a job keeps them to run.
    assert orjson.loads(raw) == {
        "r": {"error": "ValueError", "message": "payload.x: unknown field"},
        "a": [],
        "k": {},
    }
    assert orjson.loads(serialize({"f": "forget", "a": ({"k": 1},)})) == {"f": "forget", "a": [{"k": 1}]}
    assert deserialize(raw)["a"] == []
    with pytest.raises(ValueError):
        deserialize(b"[1, 2]")


async def _claim(
    redis, agents: list[str], host: str, now: float, *, beat: str | None = None
) -> dict[str, str]:
    """A claim of one deployment's host whose agents' stores are the same ones everywhere (shared
    storage): the rules of liveness alone (tests/test_deployment_routes.py has the others)."""
    from memoryd.runtime.hosts import claim_routes
    from memoryd.runtime.wire import queue_name

    kept = await claim_routes(
        redis,
        queue=queue_name(host),
        host=host,
        beat=beat or f"{now:.3f}",
        now_s=now,
        deployment="deployment",
        held=False,
        stores={agent: f"store-of-{agent}" for agent in agents},
    )
    return {agent: route.host for agent, route in kept.items()}


async def _owners(redis, agents: list[str]) -> list[str | None]:
    from memoryd.constants import AGENT_OWNER_KEY
    from memoryd.runtime.hosts import parse_route

    return [
        None if (r := parse_route(raw)) is None else r.queue
        for raw in await redis.hmget(AGENT_OWNER_KEY, agents)
    ]


async def test_a_route_claim_keeps_a_live_hosts_routes_and_takes_a_stopped_or_silent_ones(
    redis, redis_url, unique
) -> None:
    import time

    from memoryd.constants import AGENT_OWNER_KEY, HEARTBEATS_KEY, HOST_KEY_TTL_S
    from memoryd.runtime.hosts import route_value
    from memoryd.runtime.wire import queue_name

    a, b, c = f"h{unique}-a", f"h{unique}-b", f"h{unique}-c"
    agents = [f"x{unique}-1", f"x{unique}-2", f"x{unique}-3"]
    now = time.time()
    try:
        assert await _claim(redis, agents[:1], a, now) == {}  # nobody held it
        await redis.hset(
            AGENT_OWNER_KEY, agents[1], route_value(queue_name(b), "deployment", f"store-of-{agents[1]}")
        )
        await redis.hset(HEARTBEATS_KEY, b, f"stopped {now - 1:.3f}")  # b stopped cleanly
        await redis.hset(
            AGENT_OWNER_KEY, agents[2], route_value(queue_name(c), "deployment", f"store-of-{agents[2]}")
        )
        await redis.hset(HEARTBEATS_KEY, c, f"{now - HOST_KEY_TTL_S - 1:.3f}")  # c fell silent
        assert await _claim(redis, agents, a, now) == {}  # its own, b's and c's are a's now
        owners = await _owners(redis, agents)
        assert owners == [queue_name(a)] * 3
        assert (await redis.hget(HEARTBEATS_KEY, a)).decode() == f"{now:.3f}"  # beaten in the same step
        # Another host claiming the same agents now finds a live: it gets none of them.
        assert await _claim(redis, agents, b, now + 1) == dict.fromkeys(agents, a)
        assert await _owners(redis, agents) == owners
        # Once a says it stopped, the next claim takes them over.
        await _claim(redis, [], a, now + 2, beat=f"stopped {now + 2:.3f}")
        assert await _claim(redis, agents, b, now + 3) == {}
        assert await _owners(redis, agents) == [queue_name(b)] * 3
    finally:
        cleanup_redis(redis_url, [a, b, c], agents)
