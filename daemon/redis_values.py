"""memoryd's and arq's values in Redis, as what forget and erase must reach.

Redis is outside the stores, yet holds what jobs carried: their arguments (`arq:job:<id>`,
a forget's session ids, an erasure's scope) and their results (`arq:result:<id>`, the reports
the CLI prints). A result is content-free by contract; one kept from before that contract, or
a queued job's arguments, may still name a subject. Two uses:

* `scan_values` — every value under memoryd's and arq's prefixes, for the verifier;
* `purge_naming` — delete earlier job arguments and results that name a subject (an erasure's
  needles), except erasure requests themselves (they must name their subject to run, and
  their stored results drop the arguments: daemon/runtime/wire.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
from arq.constants import job_key_prefix, result_key_prefix
from redis.asyncio import Redis

from daemon.constants import REDIS_PREFIX

PREFIXES = ("arq:", REDIS_PREFIX)
PURGEABLE = (job_key_prefix, result_key_prefix)
ERASE_FAMILY = "erase"  # the erase job family's name (daemon/ops/erase.py)
SCAN_COUNT = 500


def family_of(key: str) -> str:
    """`arq:result:dream:3f…` → `arq:result`; `memoryd:host:h1` → `memoryd:host` (no ids)."""
    parts = key.split(":")
    return ":".join(parts[:2])


def is_erasure_request(key: str) -> bool:
    return any(key.startswith(f"{prefix}{ERASE_FAMILY}:") for prefix in PURGEABLE)


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


async def _value_strings(redis: Redis, key: str) -> list[str]:
    kind = (await redis.type(key)).decode()
    parts: list[bytes] = []
    if kind == "string":
        value = await redis.get(key)
        parts = [value] if value is not None else []
    elif kind == "hash":
        for field, value in (await redis.hgetall(key)).items():  # type: ignore[misc]
            parts += [field, value]
    elif kind == "list":
        parts = list(await redis.lrange(key, 0, -1))  # type: ignore[misc]
    elif kind == "set":
        parts = list(await redis.smembers(key))  # type: ignore[misc]
    elif kind == "zset":
        parts = list(await redis.zrange(key, 0, -1))
    return [key] + [s for p in parts if isinstance(p, bytes) for s in _strings(p)]


async def scan_values(redis: Redis) -> AsyncIterator[tuple[str, list[str]]]:
    """(key, the strings it holds: its name, and every member, field and value, JSON opened)
    under memoryd's and arq's prefixes."""
    for prefix in PREFIXES:
        async for key in redis.scan_iter(match=f"{prefix}*", count=SCAN_COUNT):
            name = key.decode("utf-8", "replace")
            yield name, await _value_strings(redis, name)


async def purge_naming(redis: Redis, names_subject: Callable[[str], bool]) -> int:
    """Delete job arguments and results any of whose strings `names_subject` (erasure requests
    aside); the number deleted."""
    doomed: list[str] = []
    for prefix in PURGEABLE:
        async for key in redis.scan_iter(match=f"{prefix}*", count=SCAN_COUNT):
            name = key.decode("utf-8", "replace")
            if is_erasure_request(name):
                continue
            if any(names_subject(s) for s in await _value_strings(redis, name)):
                doomed.append(name)
    if doomed:
        await redis.delete(*doomed)
    return len(doomed)
