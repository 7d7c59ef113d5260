"""Jobs interrupted by a dead worker: found at once instead of after arq's in-progress timeout.

arq marks a running job with an in-progress key that lives `job_timeout_s` (an hour): a worker
SIGKILLed mid-job leaves its jobs `running` that long, and a request sent again is the same job,
still "running", doing nothing. So every worker records itself per queue (WORKERS_KEY: its node
and pid) and keeps a liveness key (WORKER_ALIVE_KEY) while it polls.

* A starting worker retries at once what a dead worker of its queue was running: a worker on
  this node whose pid is gone, or anywhere whose liveness key expired. Only when no other worker
  of the queue lives: in-progress keys do not say whose they are.
* A client sending a request again whose job is in progress while no worker of its queue is
  alive releases it, so the next worker to come up runs it.

The decision (`dead_workers`) is pure; the rest is the Redis part. The records hold a node
name and a pid, nothing of any job.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import orjson
from arq.constants import in_progress_key_prefix
from redis.asyncio import Redis

from memoryd.constants import WORKER_ALIVE_KEY, WORKER_ALIVE_TTL_S, WORKERS_KEY


@dataclass(frozen=True, slots=True)
class WorkerRecord:
    instance: str
    node: str | None  # None: a record that does not parse, which is dropped as dead
    pid: int | None


def this_node() -> str:
    return os.uname().nodename


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process took the pid: its liveness key decides
    return True


def parse_records(raw: Mapping[bytes, bytes]) -> list[WorkerRecord]:
    out = []
    for key, value in raw.items():
        instance = key.decode(errors="backslashreplace")
        try:
            data = orjson.loads(value)
            node, pid = data["node"], data["pid"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            out.append(WorkerRecord(instance, None, None))
            continue
        valid = isinstance(node, str) and type(pid) is int
        out.append(WorkerRecord(instance, node if valid else None, pid if valid else None))
    return out


def dead_workers(
    records: Iterable[WorkerRecord],
    alive: Mapping[str, bool],
    node: str,
    is_pid_alive: Callable[[int], bool],
    me: str | None,
    my_pid: int | None = None,
) -> list[str]:
    """The instances that are gone: unparsable, their liveness expired, or on this node with
    their process gone (a restart right after a SIGKILL sees its liveness key still there) or
    with this process's own pid (a container's restarted pid 1)."""
    dead = []
    for record in records:
        if record.instance == me:
            continue
        unknown = record.node is None or record.pid is None
        expired = not alive.get(record.instance, False)
        here = record.node == node
        reused = here and record.pid == my_pid
        if unknown or expired or reused or (here and not is_pid_alive(record.pid or 0)):
            dead.append(record.instance)
    return dead


async def _workers(redis: Redis, queue: str) -> tuple[list[WorkerRecord], dict[str, bool]]:
    records = parse_records(await redis.hgetall(WORKERS_KEY.format(queue=queue)))  # type: ignore[misc]
    async with redis.pipeline(transaction=False) as pipe:
        for record in records:
            pipe.exists(WORKER_ALIVE_KEY.format(instance=record.instance))
        found = await pipe.execute()
    return records, {r.instance: bool(n) for r, n in zip(records, found, strict=True)}


async def register(redis: Redis, queue: str, instance: str) -> None:
    record = orjson.dumps({"node": this_node(), "pid": os.getpid()}).decode()
    async with redis.pipeline(transaction=True) as pipe:
        pipe.hset(WORKERS_KEY.format(queue=queue), instance, record)
        pipe.set(WORKER_ALIVE_KEY.format(instance=instance), b"1", px=int(WORKER_ALIVE_TTL_S * 1000))
        await pipe.execute()


async def refresh(redis: Redis, instance: str) -> None:
    await redis.set(WORKER_ALIVE_KEY.format(instance=instance), b"1", px=int(WORKER_ALIVE_TTL_S * 1000))


async def unregister(redis: Redis, queue: str, instance: str) -> None:
    async with redis.pipeline(transaction=True) as pipe:
        pipe.hdel(WORKERS_KEY.format(queue=queue), instance)
        pipe.delete(WORKER_ALIVE_KEY.format(instance=instance))
        await pipe.execute()


async def _in_progress(redis: Redis, queue: str) -> list[str]:
    members = [m.decode(errors="backslashreplace") for m in await redis.zrange(queue, 0, -1)]
    async with redis.pipeline(transaction=False) as pipe:
        for job_id in members:
            pipe.exists(in_progress_key_prefix + job_id)
        found = await pipe.execute()
    return [job_id for job_id, n in zip(members, found, strict=True) if n]


async def recover(redis: Redis, queue: str, me: str, running: Iterable[str]) -> list[str]:
    """At a worker's start: the queue's jobs that died with their worker, made startable again
    (their in-progress keys deleted); the dead workers' records removed. `running` are the jobs
    this worker itself still runs (a main() restarted after a lost Redis)."""
    records, alive = await _workers(redis, queue)
    dead = dead_workers(records, alive, this_node(), pid_alive, me, os.getpid())
    if dead:
        await redis.hdel(WORKERS_KEY.format(queue=queue), *dead)  # type: ignore[misc]
    if any(r.instance not in dead and r.instance != me for r in records):
        return []  # another worker of the queue lives: its in-progress jobs are its own
    mine = set(running)
    orphans = [job_id for job_id in await _in_progress(redis, queue) if job_id not in mine]
    if orphans:
        await redis.delete(*(in_progress_key_prefix + job_id for job_id in orphans))
    return orphans


async def release_if_orphaned(redis: Redis, queue: str, job_id: str) -> bool:
    """A request sent again: if its job is in progress and no worker of its queue is alive,
    make it startable again. True when it was released."""
    key = in_progress_key_prefix + job_id
    if not await redis.exists(key):
        return False
    records, alive = await _workers(redis, queue)
    if not records or any(alive.values()):
        return False  # a worker that lives (or one that never recorded itself) may run it
    return bool(await redis.delete(key))
