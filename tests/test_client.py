"""memoryd.runtime.client and `memoryd enqueue` / `memoryd jobs` / `memoryd status`: routing by the
published owner, request validation before enqueue, deduplication of identical requests."""

from __future__ import annotations

import json
import time

import pytest
from redis.asyncio import Redis

from memoryd.constants import AGENT_OWNER_KEY, HEARTBEATS_KEY
from memoryd.errors import UsageError
from memoryd.forget.request import ForgetRequest
from memoryd.ops import erase as erase_op
from memoryd.runtime.client import MemorydClient
from memoryd.runtime.hosts import route_value
from memoryd.runtime.wire import queue_name
from tests.daemon_harness import cleanup_redis, run_cli, start_cli, write_config


@pytest.fixture
async def routed(settings, redis, redis_url, unique):
    """An agent published as owned by this test's host queue (as a running daemon would)."""
    agent, queue = f"a{unique}", queue_name(settings.daemon.host_id)
    await redis.hset(AGENT_OWNER_KEY, agent, route_value(queue, settings.deployment, "store"))
    await redis.hset(HEARTBEATS_KEY, settings.daemon.host_id, f"{time.time():.3f}")
    job_ids: list[str] = []
    yield agent, queue, job_ids
    cleanup_redis(redis_url, [settings.daemon.host_id], [agent], job_ids)


async def test_a_job_goes_to_the_queue_of_the_host_that_owns_the_agent(settings, routed, redis):
    agent, queue, job_ids = routed
    async with MemorydClient.connect(settings) as client:
        job = await client.enqueue_forget(ForgetRequest(agent=agent, sessions=["s1"]))
        job_ids.append(job.job_id)
    assert job.queue == queue and not job.deduplicated
    assert await redis.zscore(queue, job.job_id) is not None


async def test_an_unknown_agent_fails_clearly_naming_the_served_agents(settings, routed, redis):
    agent, queue, _ = routed
    async with MemorydClient.connect(settings) as client:
        with pytest.raises(
            UsageError, match=r"agent 'nobody-\w+' is not served by any host \(served: "
        ) as err:
            await client.enqueue_forget({"agent": f"nobody-{agent}", "sessions": ["s1"]})
    served = str(err.value).split("(served: ", 1)[1].split(")", 1)[0].split(", ")
    assert agent in served  # a typo is seen at once against the names that exist
    assert await redis.zcard(queue) == 0


async def test_identical_requests_are_two_jobs_and_a_request_id_makes_them_one(settings, routed, redis):
    agent, queue, job_ids = routed
    async with MemorydClient.connect(settings) as client:
        first = await client.enqueue_forget({"agent": agent, "participants": ["omar"], "sessions": ["s1"]})
        second = await client.enqueue_forget({"sessions": ["s1"], "participants": ["omar"], "agent": agent})
        # Field order does not matter: the request id's record keys the validated, canonical payload.
        third = await client.enqueue_forget(
            {"agent": agent, "participants": ["omar"], "sessions": ["s1"]}, request_id=f"again-{agent}"
        )
        fourth = await client.enqueue_forget(
            {"sessions": ["s1"], "participants": ["omar"], "agent": agent}, request_id=f"again-{agent}"
        )
        job_ids.extend([first.job_id, second.job_id, third.job_id])
    assert second.job_id != first.job_id and not second.deduplicated
    assert fourth.job_id == third.job_id and fourth.deduplicated
    assert await redis.zcard(queue) == 3


async def test_a_bad_request_is_refused_by_the_client_before_enqueue(settings, routed, redis):
    agent, queue, _ = routed
    async with MemorydClient.connect(settings) as client:
        with pytest.raises(UsageError, match="memory forget requires a session"):
            await client.enqueue_forget({"agent": agent})
        with pytest.raises(UsageError, match="forget: colour: unknown field"):
            await client.enqueue_forget({"agent": agent, "sessions": ["s1"], "colour": "red"})
    assert await redis.zcard(queue) == 0


async def test_waiting_for_an_unknown_job_fails_clearly(settings):
    from memoryd.errors import OperationFailed

    async with MemorydClient.connect(settings) as client:
        with pytest.raises(OperationFailed, match="job forget:nope: not found"):
            await client.wait("forget:nope", timeout_s=1)


@pytest.mark.slow
def test_enqueue_cli_validates_like_the_direct_command_and_enqueues_nothing_when_bad(
    tmp_path, routed, redis_url, settings
):
    agent, queue, job_ids = routed
    cfg = write_config(
        tmp_path / "c.toml",
        state_dir=tmp_path / "state",
        sessions_root=tmp_path / "sessions",
        redis_url=redis_url,
        host_id=settings.daemon.host_id,
    )
    bad = run_cli(cfg, "enqueue", "forget", "--agent", agent)
    assert bad.returncode == 2
    assert "requires a session, hook source, or participant selector" in bad.stderr
    unknown = run_cli(cfg, "enqueue", "forget", "--agent", "nobody-x", "--session", "s1")
    assert unknown.returncode == 2, unknown.stderr
    assert "agent 'nobody-x' is not served by any host (served: " in unknown.stderr
    assert agent in unknown.stderr and "Traceback" not in unknown.stderr

    import redis as sync_redis

    r = sync_redis.Redis.from_url(redis_url)
    assert r.zcard(queue) == 0
    ok = run_cli(cfg, "enqueue", "forget", "--agent", agent, "--session", "s1", "--json")
    assert ok.returncode == 0, ok.stderr
    job = json.loads(ok.stdout)
    job_ids.append(job["jobId"])
    assert job["queue"] == queue and job["function"] == "forget" and job["deduplicated"] is False
    assert r.zcard(queue) == 1

    listed = run_cli(cfg, "jobs", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [(j["jobId"], j["state"]) for j in json.loads(listed.stdout)] == [(job["jobId"], "queued")]
    r.close()


@pytest.mark.slow
def test_status_json_works_without_a_daemon(tmp_path, redis_url, unique):
    from tests.builders import Msg, SessionStoreBuilder

    agent = f"a{unique}"
    SessionStoreBuilder(tmp_path / "sessions", agent).add(
        "k1", "s1", [Msg("user", "hello there, remember this")]
    )
    cfg = write_config(
        tmp_path / "c.toml",
        state_dir=tmp_path / "state",
        sessions_root=tmp_path / "sessions",
        redis_url=redis_url,
        host_id=f"h{unique}",
    )
    out = run_cli(cfg, "status", "--json")
    assert out.returncode == 0, out.stderr
    status = json.loads(out.stdout)
    assert status["daemon"]["running"] is False and status["daemon"]["redis"] == "ok"
    [row] = status["agents"]
    assert row["agent"] == agent and row["sessions"] == 1 and row["lag"] == 1  # never swept
    assert row["lastSweepAt"] is None and row["lockHolder"] is None and row["queue"] is None


async def test_an_erase_is_validated_before_enqueue_and_its_job_record_waits_until_it_runs(
    settings, routed, redis
):
    agent, queue, job_ids = routed
    async with MemorydClient.connect(settings) as client:
        with pytest.raises(UsageError, match="scope: 'no-such-kind:x'"):
            await client.enqueue_erase({"scope": "no-such-kind:x"})
        job = await client.enqueue_erase({"scope": "tenant:t:user:u1", "dry_run": True}, queue=queue)
        job_ids.append(job.job_id)
    assert job.queue == queue
    assert await redis.pttl(f"arq:job:{job.job_id}") == -1  # a purge never expires unrun


async def test_an_erase_refused_by_a_hold_exits_3_whether_run_directly_or_enqueued_and_waited_for(
    tmp_path, settings, redis_url
):
    """The same request has the same exit code and message however it is sent: a refused
    erasure is a receipt (the job completes), and `enqueue erase --wait` exits 3 on it too."""
    import anyio

    from tests.worker_harness import run_jobs

    host = settings.daemon.host_id
    queue = queue_name(host)
    cfg = write_config(
        tmp_path / "c.toml",
        state_dir=settings.state_dir,
        sessions_root=settings.sessions_root,
        redis_url=redis_url,
        host_id=host,
    )
    scope = f"tenant:t:user:held-{host}"
    wrote = run_cli(cfg, "mem", "write", "--scope", scope, "--content", "a note under a legal hold")
    held = run_cli(cfg, "hold", "add", "--scope", scope, "--reason", "case 12")
    assert wrote.returncode == held.returncode == 0, wrote.stderr + held.stderr
    direct = run_cli(cfg, "erase", "--scope", scope)
    assert direct.returncode == 3, direct.stderr
    assert "erasure refused: 1 item(s) under legal hold" in direct.stderr

    waiting = start_cli(
        cfg,
        "enqueue",
        "erase",
        "--scope",
        scope,
        "--queue",
        queue,
        "--queue-anyway",  # no daemon: the jobs are run below, in this process
        "--wait",
        "--timeout",
        "60",
        "--json",
    )
    r = Redis.from_url(redis_url)
    try:
        with anyio.fail_after(60):
            while await r.zcard(queue) == 0:  # the CLI has enqueued it and waits
                assert waiting.poll() is None, waiting.communicate()
                await anyio.sleep(0.05)
        await run_jobs(settings, queue)
        out, err = await anyio.to_thread.run_sync(waiting.communicate, 60)
        assert waiting.returncode == 3, err
        assert json.loads(out)["state"] == "refused"  # the receipt is printed either way
        assert direct.stderr.splitlines()[-1] in err  # with the direct command's message
    finally:
        waiting.kill()
        await r.aclose()
        cleanup_redis(redis_url, [host], [])


@pytest.mark.parametrize(
    ("error", "code"),
    [
        ("JobPayloadError", 2),
        ("AgentNotServed", 2),
        ("ConfigError", 2),
        ("LockTimeout", 3),
        ("RefusedError", 3),
        ("FencedOut", 1),
        ("JobExecutionFailed", 1),  # arq's own (max tries exceeded): not ours, a failure
    ],
)
def test_a_failed_jobs_exit_code_follows_the_error_hierarchy(error, code):
    from memoryd.errors import exit_code_of

    assert exit_code_of(error) == code


def test_every_operation_with_a_command_can_be_enqueued_with_the_same_flags():
    import click

    from memoryd.cli import cli, load_all
    from memoryd.ops.registry import OPS

    load_all()
    enqueue = cli.commands["enqueue"]
    assert isinstance(enqueue, click.Group)
    for op in OPS:
        if op.contract.command is None:
            continue
        # --verify: forget only; --until-done: a foreground ingest (the daemon follows a backlog itself)
        direct = {p.name for p in cli.commands[op.contract.command].params} - {"verify", "until_done"}
        queued = {p.name for p in enqueue.commands[op.contract.command].params}
        assert direct <= queued, f"enqueue {op.contract.command} lacks {sorted(direct - queued)}"


def test_a_bad_backfill_is_refused_before_enqueue_with_the_direct_commands_message(
    tmp_path, redis_url, settings
):
    cfg = write_config(
        tmp_path / "c.toml",
        state_dir=tmp_path / "state",
        sessions_root=tmp_path / "sessions",
        redis_url=redis_url,
        host_id=settings.daemon.host_id,
    )
    (tmp_path / "sessions" / "agents" / "main" / "sessions").mkdir(parents=True)  # a known agent
    direct = run_cli(cfg, "backfill", "--agent", "main", "--from", "2026-11-02", "--to", "2026-11-01")
    queued = run_cli(
        cfg, "enqueue", "backfill", "--agent", "main", "--from", "2026-11-02", "--to", "2026-11-01"
    )
    assert direct.returncode == queued.returncode == 2
    assert (
        direct.stderr
        == queued.stderr
        == "memoryd: error: backfill: from_day: 2026-11-02 is after to_day 2026-11-01\n"
    )


async def test_an_erase_job_id_says_nothing_of_its_subject_and_its_result_keeps_no_arguments(
    settings, routed, redis
):
    """A job id hashed from the payload would confirm a guessed scope (an oracle); a result
    holding the payload would keep the scope in Redis after the erasure. Neither may."""
    from memoryd.job_ids import request_job_id
    from tests.worker_harness import run_jobs

    agent, queue, job_ids = routed
    request = {"scope": "tenant:t:user:u-oracle", "dry_run": True}
    async with MemorydClient.connect(settings) as client:
        first = await client.enqueue_erase(request, queue=queue)
        again = await client.enqueue_erase(request, queue=queue)
        job_ids += [first.job_id, again.job_id]
        assert (
            first.job_id != again.job_id and not again.deduplicated
        )  # each request runs, and says what it did
        payload = erase_op.OP.contract.payload(erase_op.OP.contract.parse(request))
        assert first.job_id != request_job_id("erase", payload)
        await run_jobs(settings, queue)
        done = await client.wait(first.job_id, timeout_s=30)
    assert done.state == "complete" and done.result is not None
    stored = await redis.get(f"arq:result:{first.job_id}")
    assert stored is not None and b"u-oracle" not in stored


async def test_enqueue_wait_prints_the_direct_commands_human_report(tmp_path, settings, routed, redis_url):
    import anyio

    from tests.worker_harness import run_jobs

    agent, queue, job_ids = routed
    cfg = write_config(
        tmp_path / "c.toml",
        state_dir=settings.state_dir,
        sessions_root=settings.sessions_root,
        redis_url=redis_url,
        host_id=settings.daemon.host_id,
    )
    waiting = start_cli(
        cfg, "enqueue", "ingest", "--agent", agent, "--request-id", agent, "--wait", "--timeout", "60"
    )
    r = Redis.from_url(redis_url)
    try:
        with anyio.fail_after(60):
            while await r.zcard(queue) == 0:
                assert waiting.poll() is None, waiting.communicate()
                await anyio.sleep(0.05)
        await run_jobs(settings, queue, agents=frozenset({agent}))
        out, err = await anyio.to_thread.run_sync(waiting.communicate, 60)
    finally:
        waiting.kill()
        await r.aclose()
    assert waiting.returncode == 0, err
    assert out.startswith(f"agent {agent}: 0 sessions seen, 0 scanned"), out
    assert "messages staged: 0" in out and "{" not in out


async def test_a_deduplicated_request_says_how_long_the_earlier_one_stands_and_how_to_force(
    tmp_path, settings, routed, redis_url
):
    from tests.worker_harness import run_jobs

    agent, queue, job_ids = routed
    cfg = write_config(
        tmp_path / "c.toml",
        state_dir=settings.state_dir,
        sessions_root=settings.sessions_root,
        redis_url=redis_url,
        host_id=settings.daemon.host_id,
    )
    send = ("enqueue", "ingest", "--agent", agent, "--request-id", f"r-{agent}")
    first = run_cli(cfg, *send)
    job_ids.append(first.stdout.strip())
    queued = run_cli(cfg, *send)
    assert queued.returncode == 0
    assert queued.stdout.startswith(
        f"{first.stdout.strip()} (deduplicated: this request id's job is still queued or running"
    )
    await run_jobs(settings, queue, agents=frozenset({agent}))
    done = run_cli(cfg, *send)
    assert (
        "(deduplicated: this request id's job ran already; its result stands for another 23 h 59 min"
        in (done.stdout)
        or "stands for another 24 h" in done.stdout
    ), done.stdout
    assert "pass a new --request-id to run it again" in done.stdout
    other = run_cli(cfg, "enqueue", "ingest", "--agent", agent)  # no request id: a job of its own
    assert other.returncode == 0 and "deduplicated" not in other.stdout
    job_ids.append(other.stdout.strip())


async def test_a_job_for_an_agent_whose_host_is_silent_is_refused_unless_queued_anyway(
    tmp_path, settings, routed, redis, redis_url
):
    agent, queue, job_ids = routed
    host = settings.daemon.host_id
    cfg = write_config(
        tmp_path / "c.toml",
        state_dir=settings.state_dir,
        sessions_root=settings.sessions_root,
        redis_url=redis_url,
        host_id=host,
    )
    await redis.hset(HEARTBEATS_KEY, host, f"{time.time() - 95:.3f}")
    silent = run_cli(cfg, "enqueue", "ingest", "--agent", agent)
    assert silent.returncode == 1
    assert silent.stderr.startswith(
        f"memoryd: error: agent '{agent}': its host '{host}' has been silent for 9"
    )
    assert "--queue-anyway" in silent.stderr and "Traceback" not in silent.stderr
    assert await redis.zcard(queue) == 0
    await redis.hset(HEARTBEATS_KEY, host, f"stopped {time.time() - 30:.3f}")
    stopped = run_cli(cfg, "enqueue", "ingest", "--agent", agent)
    assert stopped.returncode == 1 and f"its host '{host}' stopped 3" in stopped.stderr
    anyway = run_cli(cfg, "enqueue", "ingest", "--agent", agent, "--queue-anyway")
    assert anyway.returncode == 0, anyway.stderr
    job_ids.append(anyway.stdout.split()[0])
    assert await redis.zcard(queue) == 1


@pytest.mark.slow
def test_enqueue_of_a_mistyped_agent_names_the_agents_the_local_config_knows(
    tmp_path, routed, redis_url, settings
):
    """`memoryd enqueue … --agent mian` on a host whose sessions root lists agents: the typo is
    named against those (exit 2), not reported as a missing daemon; nothing is queued."""
    from tests.builders import Msg, SessionStoreBuilder

    agent, queue, job_ids = routed
    for name in ("main", "ops"):
        SessionStoreBuilder(tmp_path / "sessions", name).add("k1", "s1", [Msg("user", "hello there")])
    cfg = write_config(
        tmp_path / "c.toml",
        state_dir=tmp_path / "state",
        sessions_root=tmp_path / "sessions",
        redis_url=redis_url,
        host_id=settings.daemon.host_id,
    )
    typo = run_cli(cfg, "enqueue", "ingest", "--agent", "mian")
    assert typo.returncode == 2, typo.stderr
    assert (
        f"agent 'mian' not found under sessions_root {tmp_path / 'sessions'} (known: main, ops)"
        in typo.stderr
    )
    assert "Traceback" not in typo.stderr
    # An agent another host serves is still sent there, though this config does not list it.
    routed_ok = run_cli(cfg, "enqueue", "forget", "--agent", agent, "--session", "s1", "--json")
    assert routed_ok.returncode == 0, routed_ok.stderr
    job = json.loads(routed_ok.stdout)
    job_ids.append(job["jobId"])
    assert job["queue"] == queue


@pytest.mark.parametrize("read", ["status", "info"])
async def test_a_job_that_finishes_while_it_is_read_is_reported_with_its_result(
    settings, routed, redis, monkeypatch, read
):
    """Found by tools/chaos.py (an erase "complete" with no receipt): `job` read no result yet,
    then the job's status once it had finished: complete, and no result (`status`); or, one read
    earlier, no job record, which goes as the result is stored: not found (`info`). The result
    is read again in both cases."""
    from arq.jobs import Job

    from tests.worker_harness import run_jobs

    agent, queue, job_ids = routed
    real_read = getattr(Job, read)

    async def finishing_meanwhile(self):  # the worker runs the job between the two reads
        monkeypatch.setattr(Job, read, real_read)
        await run_jobs(settings, queue, frozenset({agent}))
        return await real_read(self)

    async with MemorydClient.connect(settings) as client:
        job = await client.enqueue_forget(ForgetRequest(agent=agent, sessions=["s1"], dry_run=True))
        job_ids.append(job.job_id)
        monkeypatch.setattr(Job, read, finishing_meanwhile)
        report = await client.job(job.job_id, queue=queue)
    assert report.state == "complete"
    assert report.result is not None and report.finished_at is not None


async def test_a_job_that_finishes_while_wait_reads_it_is_reported_with_its_result(
    settings, routed, redis, monkeypatch
):
    """`wait` without the job's queue: arq's default queue does not hold the job, so a pending
    job reads as not found there and its record tells it apart; a job that finished between the
    two reads (its record goes as its result is stored) was said to be "not found"."""
    from arq.jobs import Job

    from tests.worker_harness import run_jobs

    agent, queue, job_ids = routed
    real_info = Job.info

    async def finishing_meanwhile(self):  # the worker runs the job inside arq's info()
        monkeypatch.setattr(Job, "info", real_info)
        real_result_info = Job.result_info

        async def result_then_run(job):
            found = await real_result_info(job)
            monkeypatch.setattr(Job, "result_info", real_result_info)
            await run_jobs(settings, queue, frozenset({agent}))
            return found

        monkeypatch.setattr(Job, "result_info", result_then_run)
        return await real_info(self)

    async with MemorydClient.connect(settings) as client:
        job = await client.enqueue_forget(ForgetRequest(agent=agent, sessions=["s1"], dry_run=True))
        job_ids.append(job.job_id)
        monkeypatch.setattr(Job, "info", finishing_meanwhile)
        report = await client.wait(job.job_id, timeout_s=30)
    assert report.state == "complete"
    assert report.result is not None and report.finished_at is not None
