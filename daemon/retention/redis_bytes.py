"""Every key of the deployment's Redis database, read as bytes, for the verifier.

The verifier claims to read every key *name* and every value of the database memoryd uses, not
only those under its own prefixes: a key name is read as the bytes Redis holds (a name that is
not UTF-8 is never replaced by another name), and so is every member, field and value. A JSON
document is opened too, so a string escaped inside it is read as the string it holds.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.exceptions import RedisError

from memoryd.errors import OperationFailed
from memoryd.redis_values import PURGEABLE, is_erasure_request, is_pending_purge

SCAN_COUNT = 500


def _opened(raw: bytes) -> list[bytes]:
    """The strings a JSON document holds (its keys and string values), as UTF-8; none else."""
    if raw[:1] not in (b"{", b"["):
        return []
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return []
    out: list[bytes] = []
    stack: list[Any] = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item.encode("utf-8", "surrogatepass"))
        elif isinstance(item, dict):
            out += [str(k).encode("utf-8", "surrogatepass") for k in item]
            stack += item.values()
        elif isinstance(item, list):
            stack += item
    return out


def _parts(kind: bytes, value: Any) -> list[bytes]:
    if kind == b"string":
        return [value] if isinstance(value, bytes) else []
    if kind == b"hash" and isinstance(value, dict):
        return [p for pair in value.items() for p in pair]
    if kind == b"stream" and isinstance(value, list):
        return [p for _, fields in value for pair in fields.items() for p in pair]
    if kind in (b"list", b"set", b"zset") and value:
        return list(value)
    return []


def _read(pipe: Any, key: bytes, kind: bytes) -> None:
    if kind == b"string":
        pipe.get(key)
    elif kind == b"hash":
        pipe.hgetall(key)
    elif kind == b"list":
        pipe.lrange(key, 0, -1)
    elif kind == b"set":
        pipe.smembers(key)
    elif kind == b"zset":
        pipe.zrange(key, 0, -1)
    elif kind == b"stream":
        pipe.xrange(key)
    else:  # gone meanwhile
        pipe.exists(key)


async def every_key(redis: Redis, match: bytes | None = None) -> AsyncIterator[tuple[bytes, list[bytes]]]:
    """(a key's name, its values and the strings JSON values hold), for every key (or those
    `match` selects), as bytes."""
    with _outage():
        keys = [k async for k in redis.scan_iter(match=match, count=SCAN_COUNT)]
    for start in range(0, len(keys), SCAN_COUNT):
        batch = [k if isinstance(k, bytes) else str(k).encode() for k in keys[start : start + SCAN_COUNT]]
        with _outage():
            async with redis.pipeline(transaction=False) as pipe:
                for key in batch:
                    pipe.type(key)
                kinds = [k if isinstance(k, bytes) else str(k).encode() for k in await pipe.execute()]
            async with redis.pipeline(transaction=False) as pipe:
                for key, kind in zip(batch, kinds, strict=True):
                    _read(pipe, key, kind)
                values = await pipe.execute()
        for key, kind, value in zip(batch, kinds, values, strict=True):
            parts = [p for p in _parts(kind, value) if isinstance(p, bytes)]
            yield key, parts + [s for p in parts for s in _opened(p)]


async def purge_naming_bytes(redis: Redis, names_subject: Callable[[bytes], bool]) -> int:
    """Delete job arguments and results whose name or any value `names_subject`, by the name's
    bytes (a name that is not UTF-8 included), erasure requests aside; the number deleted.
    daemon/redis_values.py purge_naming reads names as text: this reaches what it cannot."""
    doomed: list[bytes] = []
    for prefix in PURGEABLE:
        async for key, values in every_key(redis, prefix.encode() + b"*"):
            if is_erasure_request(key.decode("utf-8", "replace")) or is_pending_purge(key, values[:1]):
                continue  # an erasure request names its subject; no purge deletes another
            if any(names_subject(v) for v in (key, *values)):
                doomed.append(key)
    with _outage():
        for start in range(0, len(doomed), SCAN_COUNT):
            await redis.delete(*doomed[start : start + SCAN_COUNT])
    return len(doomed)


@contextmanager
def _outage() -> Iterator[None]:
    try:
        yield
    except RedisError as exc:
        raise OperationFailed(
            f"Redis keys as bytes: Redis unavailable: {exc}; rerun the verification or erasure"
        ) from exc
