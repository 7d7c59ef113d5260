"""memoryd's arq worker in a process of its own, for job round-trip scenarios: the enqueueing
client then runs in another process, as a real caller does.

    python -m bench.arq_worker     # stdin: one JSON line {"settings": {...}, "queue": "..."}

The worker is memoryd's own (memoryd.runtime.worker: MemorydWorker, its functions and polls) plus
the `bench_noop` job. It prints `ready` once it polls the queue and stops when stdin closes,
so it never outlives the scenario that started it.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import orjson

from bench.baselines import noop
from memoryd.allocator import tune_allocator

NOOP = "bench_noop"


async def serve(settings_data: dict[str, Any], queue: str) -> None:
    from arq import create_pool
    from arq.connections import RedisSettings
    from arq.worker import func

    from memoryd.runtime.wire import deserialize, serialize
    from memoryd.runtime.worker import MemorydWorker, worker_kwargs
    from memoryd.settings import load_settings

    settings = load_settings(None, **settings_data)
    pool = await create_pool(
        RedisSettings.from_dsn(settings.redis_url), job_serializer=serialize, job_deserializer=deserialize
    )
    ctx: dict[str, Any] = {"settings": settings, "redis": pool, "host_id": settings.daemon.host_id}
    kwargs = worker_kwargs(settings, queue, ctx)
    kwargs["functions"] = [
        *kwargs["functions"],
        func(noop, name=NOOP, keep_result=settings.daemon.keep_result_s),
    ]
    worker = MemorydWorker(redis_pool=pool, burst=False, **kwargs)
    task = asyncio.create_task(worker.async_run())
    print("ready", flush=True)
    try:
        # Blocks until the scenario closes stdin (or exits).
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    finally:
        await worker.close()
        task.cancel()
        try:
            await task
        except BaseException:  # noqa: S110 - the worker task ends by cancellation
            pass
        await pool.aclose()


def start(settings_data: dict[str, Any], queue: str) -> subprocess.Popen[str]:
    """Start the worker process and wait until it polls `queue`."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.arq_worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(orjson.dumps({"settings": settings_data, "queue": queue}).decode() + "\n")
    proc.stdin.flush()
    line = proc.stdout.readline().strip()
    if line != "ready":
        proc.kill()
        raise RuntimeError(f"bench worker did not start (said {line!r}, exit {proc.wait()})")
    return proc


def stop(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def main() -> int:
    config = orjson.loads(sys.stdin.readline())
    asyncio.run(serve(config["settings"], config["queue"]))
    return 0


if __name__ == "__main__":
    tune_allocator()  # the same memory profile as the memoryd entry point
    sys.exit(main())
