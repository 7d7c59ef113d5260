"""Forget job round trip through Redis: enqueue a `forget` job (a preview of the target session,
so every repetition does the same work) and await its result, against a no-op arq job round
trip with the same polls plus the same forget run in-process. Target: job <= no-op + in-process.

The worker is memoryd's own arq configuration (workers.settings) running in this process.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from typing import Any

from bench.baselines import noop
from bench.runner import Context, Row, at_most, entry_point_missing, info, not_available, run_async
from bench.scenarios._common import CONTEXT, FORGET, FORGET_REQUEST, INGEST, entry, sweep_agents

NAME = "forget_job"
AGENT = "main"
RESULT_POLL_S = 0.005  # what a tuned client polls (reference/perf-limits.md: 10 ms worker, 5 ms result)
TRIPS_PER_REP = 5


def missing() -> str | None:
    return entry_point_missing(CONTEXT, INGEST, FORGET, FORGET_REQUEST, "workers.settings:worker_kwargs")


async def _round_trips(settings: Any, payload: dict[str, Any] | None, reps: int, warmup: int
                       ) -> tuple[list[float], list[float], list[float]]:
    from arq import create_pool
    from arq.connections import RedisSettings
    from arq.worker import Worker, func

    from daemon.jobs import deserialize, serialize

    queue = f"memoryd:bench:{uuid.uuid4().hex[:8]}"
    pool = await create_pool(RedisSettings.from_dsn(settings.redis_url), job_serializer=serialize,
                             job_deserializer=deserialize)
    functions: list[Any] = [func(noop, name="bench_noop", keep_result=60)]
    ctx: dict[str, Any] = {"settings": settings, "redis": pool, "host_id": settings.daemon.host_id}
    if payload is not None:
        from workers.settings import worker_kwargs

        kwargs = worker_kwargs(settings, queue, ctx)
        kwargs["functions"] = list(kwargs["functions"]) + functions
        kwargs["keep_result"] = 60
    else:
        kwargs = {"functions": functions, "queue_name": queue, "handle_signals": False,
                  "poll_delay": settings.daemon.poll_delay_s, "job_serializer": serialize,
                  "job_deserializer": deserialize, "ctx": ctx, "log_results": False}
    worker = Worker(redis_pool=pool, burst=False, **kwargs)
    task = asyncio.create_task(worker.async_run())

    async def trip(name: str, *args: Any) -> float:
        t0 = time.perf_counter()
        job = await pool.enqueue_job(name, *args, _job_id=uuid.uuid4().hex, _queue_name=queue)
        assert job is not None
        result = await job.result(poll_delay=RESULT_POLL_S, timeout=120)
        if isinstance(result, dict) and "error" in result and "message" in result:
            raise RuntimeError(f"{name} job failed: {result['message']}")
        return time.perf_counter() - t0

    async def inproc() -> float:
        from daemon.context import agent_runtime

        request = entry(FORGET_REQUEST).model_validate(payload)
        t0 = time.perf_counter()
        async with agent_runtime(settings, AGENT, readonly=True, redis=False) as rt:
            await entry(FORGET)(rt, request)
        return time.perf_counter() - t0

    noops: list[float] = []
    jobs: list[float] = []
    local: list[float] = []
    try:
        for rep in range(warmup + reps):
            n, j, p = [], [], []
            for _ in range(TRIPS_PER_REP):
                n.append(await trip("bench_noop"))
                if payload is not None:
                    j.append(await trip("forget", payload))
                    p.append(await inproc())
            if rep >= warmup:
                noops.append(statistics.median(n))
                if payload is not None:
                    jobs.append(statistics.median(j))
                    local.append(statistics.median(p))
    finally:
        await worker.close()
        task.cancel()
        try:
            await task
        except BaseException:  # noqa: S110 - the worker task ends by cancellation
            pass
        await pool.aclose()
    return noops, jobs, local


def run(ctx: Context) -> list[Row]:
    settings = ctx.settings(ctx.scratch("state"))
    figure = "forget job round trip (preview, ~100 rows)"
    reason = missing()
    if reason:
        noops, _, _ = run_async(_round_trips, settings, None, ctx.reps, ctx.warmup)
        return [info(NAME, "baseline: no-op arq job round trip (worker poll 10 ms, result poll 5 ms)", "s",
                     noops),
                not_available(NAME, figure, reason)]
    run_async(sweep_agents, settings, [AGENT])
    target = ctx.corpus.manifest.targets[AGENT]
    payload = {"agent": AGENT, "sessions": [target], "dry_run": True}
    noops, jobs, local = run_async(_round_trips, settings, payload, ctx.reps, ctx.warmup)
    baseline = [a + b for a, b in zip(noops, local, strict=True)]
    return [at_most(NAME, figure, "s", jobs, baseline, 1.0, note="baseline: no-op job round trip + the same "
                    "forget in-process"),
            info(NAME, "  no-op arq job round trip", "s", noops),
            info(NAME, "  the same forget in-process", "s", local)]
