"""memoryd's and arq's values in Redis, as what forget and erase must reach.

Redis is outside the stores, yet holds what jobs carried: their arguments (`arq:job:<id>`,
a forget's session ids, an erasure's scope) and their results (`arq:result:<id>`, the reports
the CLI prints). A result is content-free by contract; one kept from before that contract, or
a queued job's arguments, may still name a subject. Two uses:

* `scan_values` — every value under memoryd's and arq's prefixes, for the verifier;
* `purge_naming` — delete earlier job arguments and results that name a subject (an erasure's
  needles), except erasure requests themselves (they must name their subject to run, and
  their stored results drop the arguments: daemon/runtime/wire.py), and except every pending
  purge's job record (a queued, deferred or running forget, erase or expire, on any host's
  queue): it names what it is still to purge, and deleting it would drop that purge.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import orjson
from arq.constants import in_progress_key_prefix, job_key_prefix, result_key_prefix
from redis.asyncio import Redis
from redis.exceptions import RedisError

from daemon.constants import REDIS_PREFIX
from daemon.errors import OperationFailed

PREFIXES = ("arq:", REDIS_PREFIX)
PURGEABLE = (job_key_prefix, result_key_prefix)
ERASE_FAMILY = "erase"  # the erase job family's name (daemon/ops/erase.py)
# The purge families (Op.purge in daemon/ops/): this layer cannot import the registry, and
# tests/test_pending_purges.py holds the two equal.
PURGE_FAMILIES = frozenset({"forget", ERASE_FAMILY, "expire", "retention_sweep"})
SCAN_COUNT = 500


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


def is_erasure_request(key: str) -> bool:
    return any(key.startswith(f"{prefix}{ERASE_FAMILY}:") for prefix in PURGEABLE)


def is_pending_purge(key: str, parts: list[bytes]) -> bool:
    """A job record (`arq:job:<id>`: the job is queued, deferred or running) of a purge. Read
    from the record's function (`f`), not its id: another tool names its jobs as it likes."""
    if not key.startswith(job_key_prefix) or len(parts) != 1:
        return False
    try:
        record = orjson.loads(parts[0])
    except orjson.JSONDecodeError:
        return False
    return isinstance(record, dict) and record.get("f") in PURGE_FAMILIES


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


async def _keys(redis: Redis, prefixes: tuple[str, ...]) -> list[str]:
    keys: list[str] = []
    for prefix in prefixes:
        keys += [
            k.decode("utf-8", "replace") async for k in redis.scan_iter(match=f"{prefix}*", count=SCAN_COUNT)
        ]
    return keys


async def _fetch(redis: Redis, keys: list[str]) -> list[list[bytes]]:
    """Each key's members, fields and values, in two pipelined round trips per batch (a type,
    then the read that type needs): a host keeps thousands of results."""
    out: list[list[bytes]] = []
    for start in range(0, len(keys), SCAN_COUNT):
        batch = keys[start : start + SCAN_COUNT]
        async with redis.pipeline(transaction=False) as pipe:
            for key in batch:
                pipe.type(key)
            kinds = [k.decode() if isinstance(k, bytes) else str(k) for k in await pipe.execute()]
        async with redis.pipeline(transaction=False) as pipe:
            for key, kind in zip(batch, kinds, strict=True):
                _read(pipe, key, kind)
            values = await pipe.execute()
        for kind, value in zip(kinds, values, strict=True):
            out.append(_parts(kind, value))
    return out


def _read(pipe: Any, key: str, kind: str) -> None:
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
        return list(value)
    return []


def _strings_of(key: str, parts: list[bytes]) -> list[str]:
    return [key] + [s for p in parts if isinstance(p, bytes) for s in _strings(p)]


MayHold = Callable[[str], bool]  # a cheap test of a value's raw text: False = skip opening it


def _raw_text(key: str, parts: list[bytes]) -> str:
    return "\n".join([key, *(p.decode("utf-8", "replace") for p in parts if isinstance(p, bytes))])


async def scan_values(redis: Redis, may_hold: MayHold | None = None) -> AsyncIterator[tuple[str, list[str]]]:
    """(key, the strings it holds: its name, and every member, field and value, JSON opened)
    under memoryd's and arq's prefixes; with `may_hold`, only the values it lets through."""
    with _outage():
        keys = await _keys(redis, PREFIXES)
        fetched = await _fetch(redis, keys)
    for key, parts in zip(keys, fetched, strict=True):
        if may_hold is None or may_hold(_raw_text(key, parts)):
            yield key, _strings_of(key, parts)


async def _running(redis: Redis) -> set[str]:
    """The job keys of jobs being run now (arq's in-progress marker is set)."""
    marks = await _keys(redis, (in_progress_key_prefix,))
    return {job_key_prefix + m.removeprefix(in_progress_key_prefix) for m in marks}


async def purgeable_keys(redis: Redis, *, spare_running: bool = False) -> list[str]:
    """The job argument and result keys a purge looks into: erasure requests aside, and with
    `spare_running` the arguments of jobs being run."""
    with _outage():
        spared = await _running(redis) if spare_running else set()
        return [k for k in await _keys(redis, PURGEABLE) if not is_erasure_request(k) and k not in spared]


async def keys_naming(
    redis: Redis,
    names_subject: Callable[[str], bool],
    may_hold: MayHold | None = None,
    *,
    spare_running: bool = False,
) -> list[str]:
    """The keys `purge_naming` would delete now."""
    keys = await purgeable_keys(redis, spare_running=spare_running)
    with _outage():
        fetched = await _fetch(redis, keys)
    return [
        key
        for key, parts in zip(keys, fetched, strict=True)
        if not is_pending_purge(key, parts)
        and (may_hold is None or may_hold(_raw_text(key, parts)))
        and any(names_subject(s) for s in _strings_of(key, parts))
    ]


async def purge_naming(
    redis: Redis,
    names_subject: Callable[[str], bool],
    may_hold: MayHold | None = None,
    *,
    spare_running: bool = False,
) -> int:
    """Delete job arguments and results any of whose strings `names_subject` (erasure requests
    and pending purges aside, and with `spare_running` the arguments of jobs being run); the
    number deleted.
    `may_hold` skips values that cannot (a cheap superset test)."""
    with _outage():
        doomed = await keys_naming(redis, names_subject, may_hold, spare_running=spare_running)
        for start in range(0, len(doomed), SCAN_COUNT):
            await redis.delete(*doomed[start : start + SCAN_COUNT])
    return len(doomed)
