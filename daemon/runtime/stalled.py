"""Purges waiting on a host that is not alive: what `memoryd status`, `memoryd jobs` and the
`memoryd_purges_waiting` gauge show.

A purge sent with `--queue-anyway`, or queued before its host stopped, waits in that host's queue
until the host is back; nothing runs it meanwhile. Its job record never expires (docs/jobs.md),
so it is not lost, but it must be seen. The decision (`stalled`) is pure; `read_stalled` reads
the queues and heartbeats from Redis: queue members and record functions only, never payloads.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping

import orjson
from arq.constants import job_key_prefix
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel
from redis.asyncio import Redis

from memoryd.constants import HEARTBEATS_KEY, QUEUE_PREFIX
from memoryd.job_ids import parse_job_id
from memoryd.ops.registry import OPS
from memoryd.runtime.hosts import host_of_queue, parse_heartbeat

PURGES = frozenset(op.contract.name for op in OPS if op.contract.purge)
SCAN_COUNT = 500


class StalledPurges(BaseModel):
    """One queue whose host is not alive, and the purges waiting in it."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    queue: str
    host: str
    host_state: str  # "its host 'h1' stopped 3 min ago"
    purges: dict[str, int]  # family -> jobs waiting

    @property
    def total(self) -> int:
        return sum(self.purges.values())

    def line(self) -> str:
        each = ", ".join(f"{family} {n}" for family, n in sorted(self.purges.items()))
        return f"{self.total} purge(s) waiting on queue {self.queue} ({each}): {self.host_state}"


def stalled(
    queues: Mapping[str, list[str]], beats: Mapping[str, bytes | str | None], now: float
) -> list[StalledPurges]:
    """`queues`: each queue's waiting purges' families; `beats`: heartbeats by host."""
    out = []
    for queue, families in sorted(queues.items()):
        if not families:
            continue
        host = host_of_queue(queue)
        heartbeat = parse_heartbeat(host, beats.get(host))
        if heartbeat.alive(now):
            continue
        out.append(
            StalledPurges(
                queue=queue, host=host, host_state=heartbeat.silence(now), purges=dict(Counter(families))
            )
        )
    return out


async def _families(redis: Redis, members: list[bytes]) -> list[str]:
    """The purge families among a queue's members: from the id memoryd built, else (another
    tool's id) from the record's function."""
    out: list[str] = []
    unknown: list[bytes] = []
    for member in members:
        family = parse_job_id(member.decode(errors="replace")).family
        if family in PURGES:
            out.append(family)
        elif family not in {op.contract.name for op in OPS}:
            unknown.append(member)
    for start in range(0, len(unknown), SCAN_COUNT):
        batch = unknown[start : start + SCAN_COUNT]
        records = await redis.mget([job_key_prefix.encode() + m for m in batch])
        for raw in records:
            try:
                function = orjson.loads(raw).get("f") if raw else None
            except (orjson.JSONDecodeError, AttributeError):
                function = None
            if function in PURGES:
                out.append(function)
    return out


async def read_stalled(redis: Redis, now: float | None = None) -> list[StalledPurges]:
    """Every host queue in Redis whose host is not alive and that holds purges."""
    queues: dict[str, list[str]] = {}
    async for raw_key in redis.scan_iter(match=QUEUE_PREFIX + "*", count=SCAN_COUNT, _type="zset"):
        key = raw_key.decode(errors="replace")
        members: list[bytes] = await redis.zrange(key, 0, -1)
        queues[key] = await _families(redis, members)
    raw_beats = await redis.hgetall(HEARTBEATS_KEY)  # type: ignore[misc]
    beats = {k.decode(errors="replace"): v for k, v in raw_beats.items()}
    return stalled(queues, beats, time.time() if now is None else now)
