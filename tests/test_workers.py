"""Job functions on a real arq worker (in-process, burst mode) over real Redis and real stores:
payload validation before anything runs, JSON on the wire, idempotent reruns, erase TTLs."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from typing import Any

import anyio
import orjson
import pytest

from memoryd.failpoints import on_failpoint
from memoryd.job_ids import random_job_id
from memoryd.ops import erase as erase_op
from memoryd.ops import forget as forget_op
from memoryd.ops import ingest_sweep as ingest_op
from memoryd.runtime.client import MemorydClient
from memoryd.runtime.served import SERVED, ServedAgents
from memoryd.runtime.service import arq_pool
from memoryd.runtime.wire import queue_name
from memoryd.runtime.worker import MemorydWorker, worker_kwargs
from memoryd.settings import Settings
from tests.builders import Msg, SessionStoreBuilder
from tests.daemon_harness import REPO, cleanup_redis, write_config
from tests.polling import until
from tests.worker_harness import run_jobs

ERASE, FORGET, INGEST_SWEEP = (
    erase_op.OP.contract.name,
    forget_op.OP.contract.name,
    ingest_op.OP.contract.name,
)


@pytest.fixture
def world(settings: Settings, store_builder: SessionStoreBuilder, redis_url: str):
    store_builder.add(
        "agent:main:main",
        "s-one",
        [
            Msg("user", "Remember the orchard rota changes on Tuesdays."),
            Msg("assistant", "Noted: the orchard rota changes on Tuesdays."),
        ],
        chatType="direct",
        participants=[{"actorId": "nora"}],
    )
    queue = queue_name(settings.daemon.host_id)
    job_ids: list[str] = []
    yield settings, queue, job_ids
    cleanup_redis(redis_url, [settings.daemon.host_id], [], job_ids)


async def enqueue_and_run(
    settings: Settings, queue: str, job_ids: list[str], function: str, payload: Any, **kw: Any
):
    async with MemorydClient.connect(settings) as client:
        job = await client.enqueue(function, payload, queue=queue, **kw)
        job_ids.append(job.job_id)
        await run_jobs(settings, queue)
        return await client.job(job.job_id)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (
            {"agent": "main", "sessions": ["s-one"], "bogus": True},
            "JobPayloadError: forget: bogus: unknown field",
        ),
        (
            {"agent": "main", "sesions": ["s-one"]},
            "JobPayloadError: forget: sesions: unknown field (did you mean 'sessions'?)",
        ),
        (
            {"agent": "main"},
            "JobPayloadError: forget: memory forget requires a session, hook source, or participant",
        ),
        (
            {"agent": "../main", "sessions": ["s-one"]},
            "JobPayloadError: forget: agent: invalid agent id '../main'",
        ),
        (
            {"agent": "main", "sessions": ["a/b"]},
            "JobPayloadError: forget: sessions: invalid session id or key 'a/b'",
        ),
        (["main", "s-one"], "JobPayloadError: forget: payload must be a JSON object, got list"),
    ],
)
async def test_a_bad_forget_payload_fails_clearly_and_changes_nothing(world, payload, message):
    settings, queue, job_ids = world
    db_path = settings.state_dir / "agents" / "main" / "memory.sqlite"
    report = await enqueue_and_run(settings, queue, job_ids, FORGET, payload)
    assert report.state == "failed"
    assert report.error is not None and report.error.startswith(message)
    assert report.exit_code() == 2
    assert report.tries == 1  # a bad payload is not retried
    assert not db_path.exists()  # nothing ran: not even the store was opened
    assert not (settings.state_dir / "agents" / "main" / "workspace").exists()


async def test_a_job_for_an_agent_this_host_does_not_serve_is_refused(world):
    settings, queue, job_ids = world
    report = await enqueue_and_run(
        settings, queue, job_ids, FORGET, {"agent": "other", "sessions": ["s-one"]}
    )
    assert report.state == "failed"
    assert (
        report.error
        == f"AgentNotServed: forget: agent 'other' is not served by host {settings.daemon.host_id!r}"
    )
    assert not (settings.state_dir / "agents" / "other").exists()


async def test_unknown_fields_fail_the_sweep_jobs_too(world):
    settings, queue, job_ids = world
    report = await enqueue_and_run(settings, queue, job_ids, INGEST_SWEEP, {"agent": "main", "full": True})
    assert report.state == "failed"
    assert report.error == "JobPayloadError: ingest_sweep: full: unknown field"


async def test_a_rerun_of_the_same_forget_converges(world):
    settings, queue, job_ids = world
    payload = {"agent": "main", "sessions": ["s-one"]}
    first = await enqueue_and_run(settings, queue, job_ids, FORGET, payload)
    again = await enqueue_and_run(settings, queue, job_ids, FORGET, payload)
    assert first.state == again.state == "complete"
    assert first.result is not None and again.result is not None
    # A stored result names no session (daemon/stored_form.py): the counts say what each did.
    assert first.result["sessionIds"] == again.result["sessionIds"] == []
    assert first.result["artifacts"]["shortTermEntries"] == 0  # nothing was ingested yet
    assert first.result["artifacts"] == again.result["artifacts"]
    assert first.job_id != again.job_id


async def test_jobs_travel_as_json_never_pickle(world, redis):
    settings, queue, job_ids = world
    async with MemorydClient.connect(settings) as client:
        job = await client.enqueue(
            FORGET, {"agent": "main", "sessions": ["s-one"], "dry_run": True}, queue=queue
        )
        job_ids.append(job.job_id)
        raw = await redis.get(f"arq:job:{job.job_id}")
        assert orjson.loads(raw)["a"] == [{"agent": "main", "sessions": ["s-one"], "dry_run": True}]
        await run_jobs(settings, queue)
        result = orjson.loads(await redis.get(f"arq:result:{job.job_id}"))
    assert result["s"] is True and result["r"]["dryRun"] is True


async def test_an_erase_waits_unexpired_until_it_runs_and_its_result_keeps_the_erase_ttl(world, redis):
    settings, queue, job_ids = world
    ttl_ms = settings.retention.erase_result_ttl_s * 1000
    payload = {"scope": f"user:u-{settings.daemon.host_id}", "dry_run": True}
    async with MemorydClient.connect(settings) as client:
        job = await client.enqueue(ERASE, payload, queue=queue)
        job_ids.append(job.job_id)
        assert await redis.pttl(f"arq:job:{job.job_id}") == -1  # a purge never expires unrun
        await run_jobs(settings, queue)
        report = await client.job(job.job_id)
    assert report.state in ("complete", "failed")
    assert 0 < await redis.pttl(f"arq:result:{job.job_id}") <= ttl_ms
    assert await redis.exists(f"arq:job:{job.job_id}") == 0


async def test_an_erase_given_up_before_running_keeps_its_result_only_for_the_erase_ttl(world, redis):
    settings, queue, job_ids = world
    payload = {"scope": "user:u-given-up"}
    job_id = random_job_id(ERASE)
    job_ids.append(job_id)
    async with MemorydClient.connect(settings) as client:
        await client.redis.enqueue_job(ERASE, payload, _job_id=job_id, _queue_name=queue, _job_try=99)
        await run_jobs(settings, queue)
        report = await client.job(job_id)
    assert report.state == "failed" and "max 5 retries exceeded" in (report.error or "")
    assert 0 < await redis.pttl(f"arq:result:{job_id}") <= settings.retention.erase_result_ttl_s * 1000


# --- doorbells: the worker starts a rung job at once and rings when its result is stored ------


async def test_a_finished_job_rings_its_done_bell_after_its_result_is_stored(world, redis):
    from memoryd.constants import JOB_DONE_KEY

    settings, queue, job_ids = world
    ok = await enqueue_and_run(
        settings,
        queue,
        job_ids,
        FORGET,
        {"agent": "main", "sessions": ["s-one"], "dry_run": True},
    )
    bad = await enqueue_and_run(settings, queue, job_ids, FORGET, {"agent": "main", "bogus": 1})
    try:
        assert ok.state == "complete" and bad.state == "failed"
        for report in (ok, bad):  # failed jobs ring too: a waiting client must see the failure
            key = JOB_DONE_KEY.format(job_id=report.job_id)
            assert await redis.lrange(key, 0, -1) == [b"1"]
            assert 0 < await redis.ttl(key) <= 300  # an unpopped ring does not linger
    finally:
        await redis.delete(*(JOB_DONE_KEY.format(job_id=j) for j in job_ids))


async def test_wait_is_woken_by_the_done_bell_not_by_its_poll(world, redis):
    import anyio

    from memoryd.constants import JOB_DONE_KEY

    settings, queue, job_ids = world
    # Polls so slow that only the ring can end the wait within the test's deadline.
    async with MemorydClient.connect(settings, poll_delay_s=60) as client:
        job = await client.enqueue(
            FORGET,
            {"agent": "main", "sessions": ["s-one"], "dry_run": True},
            queue=queue,
        )
        job_ids.append(job.job_id)
        got = []

        async def waiter() -> None:
            got.append(await client.wait(job.job_id, timeout_s=60))

        idle = anyio.Event()
        with anyio.fail_after(20), on_failpoint("client.wait.idle", idle.set):
            async with anyio.create_task_group() as tg:
                tg.start_soon(waiter)
                await idle.wait()  # the waiter has polled once and blocks on the bell
                await run_jobs(settings, queue)
    assert got[0].state == "complete" and got[0].result is not None
    assert await redis.llen(JOB_DONE_KEY.format(job_id=job.job_id)) == 0  # the wait popped it


async def test_wait_still_completes_by_polling_when_no_bell_rings(world, redis):
    import anyio
    from arq.worker import Worker

    settings, queue, job_ids = world
    # arq's plain Worker rings nothing (a daemon without the bells): the poll must find it.
    pool = arq_pool(settings, queue)
    ctx: dict[str, Any] = {
        "settings": settings,
        SERVED: ServedAgents(frozenset({"main"})),
        "host_id": settings.daemon.host_id,
    }
    async with MemorydClient.connect(settings, poll_delay_s=0.05) as client:
        job = await client.enqueue(
            FORGET,
            {"agent": "main", "sessions": ["s-one"], "dry_run": True},
            queue=queue,
        )
        job_ids.append(job.job_id)
        got = []

        async def waiter() -> None:
            got.append(await client.wait(job.job_id, timeout_s=20))

        idle = anyio.Event()
        try:
            with anyio.fail_after(20), on_failpoint("client.wait.idle", idle.set):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(waiter)
                    await idle.wait()  # the waiter has polled once: only a later poll can find the result
                    await Worker(
                        **{**worker_kwargs(settings, queue, ctx), "burst": True}, redis_pool=pool
                    ).main()
        finally:
            await pool.aclose(close_connection_pool=True)
    assert got[0].state == "complete"


async def test_an_enqueue_rings_the_queue_bell_and_the_worker_starts_it_before_its_next_poll(world, redis):
    import asyncio

    import anyio

    from memoryd.constants import QUEUE_BELL_KEY

    settings, queue, job_ids = world
    # A worker that polls once a minute: only the queue bell can start the job in time.
    slow = dataclasses.replace(settings, daemon=dataclasses.replace(settings.daemon, poll_delay_s=60.0))
    pool = arq_pool(slow, queue)
    ctx: dict[str, Any] = {
        "settings": slow,
        SERVED: ServedAgents(frozenset({"main"})),
        "host_id": slow.daemon.host_id,
    }
    worker = MemorydWorker(**worker_kwargs(slow, queue, ctx), redis_pool=pool)
    task = asyncio.create_task(worker.main())
    try:
        # arq records its health check at the end of a poll: the first poll has found nothing,
        # and the worker waits for a minute or a ring.
        await until(lambda: redis.exists(f"{queue}:health-check"), "the worker's first poll")
        async with MemorydClient.connect(settings) as client:
            job = await client.enqueue(
                FORGET,
                {"agent": "main", "sessions": ["s-one"], "dry_run": True},
                queue=queue,
            )
            job_ids.append(job.job_id)
            with anyio.fail_after(20):
                report = await client.wait(job.job_id, timeout_s=20)
        assert report.state == "complete"
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await pool.aclose(close_connection_pool=True)
        await redis.delete(QUEUE_BELL_KEY.format(queue=queue))


def _run_arq_command(config, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "MEMORYD_CONFIG": str(config)}
    return subprocess.run(
        [sys.executable, "-m", "arq", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )


async def test_arqs_own_command_runs_the_registrys_jobs_from_the_worker_settings(world, tmp_path, redis_url):
    settings, queue, job_ids = world
    config = write_config(
        tmp_path / "c.toml",
        state_dir=settings.state_dir,
        sessions_root=settings.sessions_root,
        redis_url=redis_url,
        host_id=settings.daemon.host_id,
    )
    async with MemorydClient.connect(settings) as client:
        job = await client.enqueue(
            FORGET, {"agent": "main", "sessions": ["s-one"], "dry_run": True}, queue=queue
        )
        job_ids.append(job.job_id)
        ran = await anyio.to_thread.run_sync(
            _run_arq_command, config, "memoryd.workers.settings.WorkerSettings", "--burst"
        )
        assert ran.returncode == 0, ran.stderr
        report = await client.job(job.job_id)
    assert report.state == "complete" and report.result is not None
    assert report.result["dryRun"] is True and report.result["sessionIds"] == []  # the stored form
    assert "s-one" not in ran.stdout + ran.stderr  # arq's job lines (the payload) are kept out


def test_arqs_own_command_with_a_bad_config_ends_with_one_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("no_such_key = 1\n")
    ran = _run_arq_command(bad, "memoryd.workers.settings.WorkerSettings", "--burst")
    assert ran.returncode == 1
    assert ran.stderr.strip().splitlines() == [f"memoryd: error: {bad}: unknown key 'no_such_key'"]


async def test_the_job_list_shows_finished_jobs_through_arqs_job_api_and_skips_what_is_not_json(world, redis):
    settings, queue, job_ids = world
    foreign = f"arq:result:not-ours-{settings.daemon.host_id}"
    await redis.set(foreign, b"\x80\x04K\x01.", px=60_000)  # a pickle another tool left: never read
    try:
        done = await enqueue_and_run(
            settings,
            queue,
            job_ids,
            FORGET,
            {"agent": "main", "sessions": ["s-one"], "dry_run": True},
        )
        async with MemorydClient.connect(settings) as client:
            listed = await client.list_jobs(queue)
            waited = await client.wait(done.job_id, queue=queue, timeout_s=5)
    finally:
        await redis.delete(foreign)
    [row] = [j for j in listed if j.job_id == done.job_id]
    assert row == done == waited
    assert row.state == "complete" and row.queue == queue and row.tries == 1
    assert row.enqueued_at and row.started_at and row.finished_at and row.result["dryRun"] is True


def _results_quoting(raw_results: dict[str, bytes], needles: tuple[str, ...]) -> list[str]:
    """The job ids whose stored result quotes any of `needles` (JSON-escaped or not)."""
    quoted = []
    for job_id, raw in raw_results.items():
        text = raw.decode("utf-8", "replace")
        if any(n in text or orjson.dumps(n).decode()[1:-1] in text for n in needles):
            quoted.append(job_id)
    return quoted


MEMORY_TEXT = ("orchard rota changes", "on Tuesdays")


async def test_no_operations_result_in_redis_quotes_memory_text(world, redis):
    """DESIGN §6: a result is stored in Redis, outside what forget and erase reach, so no
    operation's report may carry memory text; the registry declares it (and none may)."""
    from memoryd.ops.registry import OPS

    settings, queue, job_ids = world
    payloads = {
        "ingest_sweep": {"agent": "main"},
        "dream": {"agent": "main"},
        "index_sync": {"agent": "main"},
        "backfill": {"agent": "main"},
        "forget": {"agent": "main", "participants": ["nora"], "dry_run": True},
        "erase": {"scope": "tenant:default:user:nora", "dry_run": True},
        "expire": {},
        "retention_sweep": {},
    }
    assert set(payloads) == {op.contract.name for op in OPS}  # every operation is run here
    assert not any(op.policy.result_may_carry_memory_text for op in OPS)
    raw: dict[str, bytes] = {}
    reports: dict[str, dict[str, Any]] = {}
    async with MemorydClient.connect(settings) as client:
        purge = {"agent": "main", "participants": ["nora"], "verify": True}  # and its verifier's run
        for name, payload in [*payloads.items(), ("forget", purge)]:
            job = await client.enqueue(name, payload, queue=queue)
            job_ids.append(job.job_id)
            await run_jobs(settings, queue)
            report = await client.job(job.job_id)
            assert report.state == "complete" and report.result is not None, (name, report.error)
            raw[job.job_id] = await redis.get(f"arq:result:{job.job_id}")
            reports[name] = report.result
    # The text was there to quote: staged, indexed, then purged by the last forget.
    assert (
        reports["ingest_sweep"]["messagesStaged"] > 0
        and reports["forget"]["artifacts"]["shortTermEntries"] > 0
        and reports["forget"]["verification"]["checks"]
    )
    assert _results_quoting(raw, MEMORY_TEXT) == []


def test_the_memory_text_check_finds_text_planted_in_a_result():
    planted = {"forget:x": orjson.dumps({"r": {"snippet": "Remember the orchard rota changes on Tuesdays."}})}
    assert _results_quoting(planted, MEMORY_TEXT) == ["forget:x"]


def test_only_sqlites_file_and_disk_errors_are_storage_problems(tmp_path):
    from memoryd.store.engine import sqlite3, storage_problem

    conn = sqlite3.connect(tmp_path / "small.sqlite")
    conn.execute("PRAGMA max_page_count = 2")
    conn.execute("CREATE TABLE t (v TEXT)")
    with pytest.raises(sqlite3.OperationalError) as full:
        conn.execute("INSERT INTO t VALUES (?)", ("x" * 100_000,))
    assert storage_problem(full.value) == (
        "database: database or disk is full; free space or fix the file, then run again"
    )
    with pytest.raises(sqlite3.OperationalError) as statement:
        conn.execute("SELECT nope FROM t")
    assert storage_problem(statement.value) is None  # a bug, not the environment
    conn.close()
