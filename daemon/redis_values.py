"""memoryd's and arq's values in Redis, as what forget and erase must reach.

Redis is outside the stores, yet holds what jobs carried: their arguments (`arq:job:<id>`,
a forget's session ids, an erasure's scope) and their results (`arq:result:<id>`, the reports
the CLI prints). A result is content-free by contract; one kept from before that contract, or
a queued job's arguments, may still name a subject. Two uses:

* `scan_values` — every value under memoryd's and arq's prefixes, for the verifier (pending
  purges' job records aside: see below);
* `purge_naming` — delete earlier job arguments and results that name a subject (an erasure's
  needles), except erasure requests themselves (they must name their subject to run, and
  their stored results drop the arguments: daemon/runtime/wire.py), and except every pending
  purge's job record (a queued, deferred or running forget, erase or expire, on any host's
  queue): it names what it is still to purge, and deleting it would drop that purge.

Both read bounded: keys are scanned in batches of SCAN_COUNT, values are read in batches of at
most BATCH_BYTES, and each batch is matched on a worker thread, so a Redis full of large values
neither fills memory nor holds the event loop (the heartbeat, lease renewals, other jobs). A
purge skips, and counts, a string value over VALUE_CAP_BYTES: no job memoryd accepts is that
large (MAX_PAYLOAD_BYTES), so it is no job record of a memoryd request. The verifier skips
nothing. Key names are bytes throughout: a name that is not UTF-8 is read and deleted as it is.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import orjson
from arq.constants import in_progress_key_prefix, job_key_prefix, result_key_prefix
from redis.asyncio import Redis
from redis.exceptions import RedisError

from memoryd.constants import MAX_PAYLOAD_BYTES, REDIS_PREFIX
from memoryd.errors import OperationFailed
from memoryd.job_ids import RANDOM, REQUEST, parse_job_id

PREFIXES = ("arq:", REDIS_PREFIX)
PURGEABLE = (job_key_prefix, result_key_prefix)
ERASE_FAMILY = "erase"  # the erase job family's name (daemon/ops/erase.py)
# The purge families (Op.purge in daemon/ops/): this layer cannot import the registry, and
# tests/test_pending_purges.py holds the two equal.
PURGE_FAMILIES = frozenset({"forget", ERASE_FAMILY, "expire", "retention_sweep"})
SCAN_COUNT = 500
# A job record is its payload (at most MAX_PAYLOAD_BYTES) in arq's envelope (function, times, try):
# a string value larger than this is no job memoryd accepted; a purge skips it unread, counted.
VALUE_CAP_BYTES = MAX_PAYLOAD_BYTES + (64 << 10)
# Values read and matched at once: what a scan holds in memory, whatever Redis holds.
BATCH_BYTES = 8 << 20

log = logging.getLogger("memoryd.redis_values")


@contextmanager
def _outage() -> Iterator[None]:
    """Redis going away mid-read fails the forget or erase as any Redis outage does (a transient
    OperationFailed its caller reruns), never as a raw client error."""
    try:
        yield
    except RedisError as exc:
        raise OperationFailed(f"job values in Redis: Redis unavailable: {exc}; rerun the operation") from exc


def family_of(key: str) -> str:
    """`arq:result:dream:3f…` → `arq:result`; `memoryd:host:h1` → `memoryd:host` (no ids)."""
    parts = key.split(":")
    return ":".join(parts[:2])


def is_erasure_request(key: str | bytes) -> bool:
    """The job record or result of an erasure memoryd enqueued: its id is one of memoryd's own
    (random or a request id's, memoryd.job_ids), so another tool's job named `erase:…` is looked
    into like any other value."""
    name = key if isinstance(key, bytes) else key.encode("utf-8", "surrogateescape")
    for prefix in PURGEABLE:
        if name.startswith(prefix.encode()):
            job = parse_job_id(name[len(prefix) :].decode("utf-8", "replace"))
            return job.family == ERASE_FAMILY and job.kind in (RANDOM, REQUEST)
    return False


def is_pending_purge(key: str | bytes, parts: list[bytes]) -> bool:
    """A job record (`arq:job:<id>`: the job is queued, deferred or running) of a purge. Read
    from the record's function (`f`), not its id: another tool names its jobs as it likes."""
    name = key if isinstance(key, bytes) else key.encode("utf-8", "surrogateescape")
    if not name.startswith(job_key_prefix.encode()) or len(parts) != 1:
        return False
    try:
        record = orjson.loads(parts[0])
    except orjson.JSONDecodeError:
        return False
    # Any JSON may sit there (another tool's record, a broken one): only a string names a family.
    function = record.get("f") if isinstance(record, dict) else None
    return isinstance(function, str) and function in PURGE_FAMILIES


def _strings(raw: bytes) -> list[str]:
    """A stored value as the strings it holds: a JSON document's every key and string value
    (job data is JSON, daemon/runtime/wire.py), else the value decoded whole."""
    text = raw.decode("utf-8", "replace")
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return [text]
    out: list[str] = []
    stack: list[Any] = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            out += [str(k) for k in item]
            stack += item.values()
        elif isinstance(item, list):
            stack += item
    return out


@dataclass(frozen=True, slots=True)
class _Value:
    key: bytes  # as Redis holds it: deleted by these bytes, never by a decoded copy
    parts: list[bytes]  # its members, fields and values

    @property
    def name(self) -> str:
        return self.key.decode("utf-8", "replace")

    def raw_text(self) -> str:
        return "\n".join([self.name, *(p.decode("utf-8", "replace") for p in self.parts)])

    def strings(self) -> list[str]:
        return [self.name] + [s for p in self.parts for s in _strings(p)]


class _Reader:
    """Values under `prefixes`, in batches bounded by count and bytes; with `cap`, string values
    over it are skipped unread and counted in `skipped`."""

    def __init__(self, redis: Redis, prefixes: tuple[str, ...], cap: int | None):
        self.redis = redis
        self.prefixes = prefixes
        self.cap = cap
        self.skipped = 0

    async def key_batches(self) -> AsyncIterator[list[bytes]]:
        for prefix in self.prefixes:
            batch: list[bytes] = []
            async for key in self.redis.scan_iter(match=prefix.encode() + b"*", count=SCAN_COUNT):
                batch.append(key)
                if len(batch) >= SCAN_COUNT:
                    yield batch
                    batch = []
            if batch:
                yield batch

    async def batches(self, keep: Callable[[bytes], bool] | None = None) -> AsyncIterator[list[_Value]]:
        async for keys in self.key_batches():
            keys = [k for k in keys if keep is None or keep(k)]
            if not keys:
                continue
            async with self.redis.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.type(key)
                kinds = [k.decode() if isinstance(k, bytes) else str(k) for k in await pipe.execute()]
            async with self.redis.pipeline(transaction=False) as pipe:
                for key, kind in zip(keys, kinds, strict=True):
                    # Collections here are memoryd's own (queues, hosts, bells): ids, no payloads.
                    if kind == "string":
                        pipe.strlen(key)
                    else:
                        pipe.exists(key)
                sizes = [
                    int(n) if kind == "string" else 0
                    for n, kind in zip(await pipe.execute(), kinds, strict=True)
                ]
            todo: list[tuple[bytes, str]] = []
            budget = 0
            for key, kind, size in zip(keys, kinds, sizes, strict=True):
                if self.cap is not None and size > self.cap:
                    self.skipped += 1
                    continue
                if todo and budget + size > BATCH_BYTES:
                    yield await self._read(todo)
                    todo, budget = [], 0
                todo.append((key, kind))
                budget += size
            if todo:
                yield await self._read(todo)

    async def _read(self, todo: list[tuple[bytes, str]]) -> list[_Value]:
        async with self.redis.pipeline(transaction=False) as pipe:
            for key, kind in todo:
                _queue_read(pipe, key, kind)
            values = await pipe.execute()
        return [_Value(key, _parts(kind, value)) for (key, kind), value in zip(todo, values, strict=True)]


def _queue_read(pipe: Any, key: bytes, kind: str) -> None:
    if kind == "string":
        pipe.get(key)
    elif kind == "hash":
        pipe.hgetall(key)
    elif kind == "list":
        pipe.lrange(key, 0, -1)
    elif kind == "set":
        pipe.smembers(key)
    elif kind == "zset":
        pipe.zrange(key, 0, -1)
    else:  # gone meanwhile, or a type memoryd never writes
        pipe.exists(key)


def _parts(kind: str, value: Any) -> list[bytes]:
    if kind == "string":
        return [value] if isinstance(value, bytes) else []
    if kind == "hash" and isinstance(value, dict):
        return [p for pair in value.items() for p in pair]
    if kind in ("list", "set", "zset") and value:
        return [p for p in value if isinstance(p, bytes)]
    return []


MayHold = Callable[[str], bool]  # a cheap test of a value's raw text: False = skip opening it


def _opened(batch: list[_Value], may_hold: MayHold | None) -> list[tuple[str, list[str]]]:
    """(name, strings) of the values `may_hold` lets through, pending purges aside; run on a
    worker thread."""
    return [
        (v.name, v.strings())
        for v in batch
        if not is_pending_purge(v.key, v.parts) and (may_hold is None or may_hold(v.raw_text()))
    ]


async def scan_values(redis: Redis, may_hold: MayHold | None = None) -> AsyncIterator[tuple[str, list[str]]]:
    """(key, the strings it holds: its name, and every member, field and value, JSON opened)
    under memoryd's and arq's prefixes; with `may_hold`, only the values it lets through. Every
    value is read, however large (the verifier's coverage), a batch at a time. A pending purge's
    job record is not residue, as an erasure request is not: it must name what it is still to
    purge, and arq deletes it when the purge has run (its result keeps no arguments)."""
    reader = _Reader(redis, PREFIXES, cap=None)
    with _outage():
        async for batch in reader.batches():
            for item in await anyio.to_thread.run_sync(_opened, batch, may_hold):
                yield item


async def _running(redis: Redis) -> set[bytes]:
    """The job keys of jobs being run now (arq's in-progress marker is set)."""
    prefix = in_progress_key_prefix.encode()
    marks = [k async for k in redis.scan_iter(match=prefix + b"*", count=SCAN_COUNT)]
    return {job_key_prefix.encode() + m[len(prefix) :] for m in marks}


async def purgeable_keys(redis: Redis, *, spare_running: bool = False) -> list[bytes]:
    """The job argument and result keys a purge looks into: erasure requests aside, and with
    `spare_running` the arguments of jobs being run (names only; no value is read)."""
    with _outage():
        spared = await _running(redis) if spare_running else set()
        reader = _Reader(redis, PURGEABLE, cap=VALUE_CAP_BYTES)
        return [
            k
            async for keys in reader.key_batches()
            for k in keys
            if not is_erasure_request(k) and k not in spared
        ]


@dataclass(frozen=True, slots=True)
class PurgeCount:
    matched: int  # values naming the subject (deleted, by `purge_values`)
    skipped: int  # string values over VALUE_CAP_BYTES, left unread


def _matching(
    batch: list[_Value], names_subject: Callable[[str], bool], may_hold: MayHold | None
) -> list[bytes]:
    """Keys of the values naming the subject, pending purges aside; run on a worker thread."""
    return [
        v.key
        for v in batch
        if not is_pending_purge(v.key, v.parts)
        and (may_hold is None or may_hold(v.raw_text()))
        and any(names_subject(s) for s in v.strings())
    ]


async def _naming(
    redis: Redis,
    names_subject: Callable[[str], bool],
    may_hold: MayHold | None,
    *,
    spare_running: bool,
    delete: bool,
) -> tuple[list[bytes], int]:
    with _outage():
        spared = await _running(redis) if spare_running else set()
        reader = _Reader(redis, PURGEABLE, cap=VALUE_CAP_BYTES)
        found: list[bytes] = []
        async for batch in reader.batches(keep=lambda k: not is_erasure_request(k) and k not in spared):
            doomed = await anyio.to_thread.run_sync(_matching, batch, names_subject, may_hold)
            if delete and doomed:
                await redis.delete(*doomed)
            found += doomed
    if reader.skipped:
        log.warning(
            "%d job value(s) in Redis over %d bytes left unread by a purge", reader.skipped, VALUE_CAP_BYTES
        )
    return found, reader.skipped


async def keys_naming(
    redis: Redis,
    names_subject: Callable[[str], bool],
    may_hold: MayHold | None = None,
    *,
    spare_running: bool = False,
) -> list[bytes]:
    """The keys `purge_naming` would delete now."""
    found, _ = await _naming(redis, names_subject, may_hold, spare_running=spare_running, delete=False)
    return found


async def purge_values(
    redis: Redis,
    names_subject: Callable[[str], bool],
    may_hold: MayHold | None = None,
    *,
    spare_running: bool = False,
) -> PurgeCount:
    """Delete job arguments and results any of whose strings `names_subject` (erasure requests
    and pending purges aside, and with `spare_running` the arguments of jobs being run).
    `may_hold` skips values that cannot (a cheap superset test)."""
    found, skipped = await _naming(redis, names_subject, may_hold, spare_running=spare_running, delete=True)
    return PurgeCount(matched=len(found), skipped=skipped)


async def purge_naming(
    redis: Redis,
    names_subject: Callable[[str], bool],
    may_hold: MayHold | None = None,
    *,
    spare_running: bool = False,
) -> int:
    """`purge_values`, the number deleted."""
    return (await purge_values(redis, names_subject, may_hold, spare_running=spare_running)).matched
