"""The purge of Redis values reads bounded and off the event loop: keys are bytes (a name that is
not UTF-8 is deleted as it is), values over the cap are skipped unread and counted, and matching
runs on a worker thread. Real Redis."""

from __future__ import annotations

import threading
import uuid

import anyio
import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis

from memoryd.redis_values import VALUE_CAP_BYTES, purge_values, scan_values
from tests.conftest import REDIS_URL


def _result(text: str) -> bytes:
    return orjson.dumps({"s": True, "r": {"note": text}})


async def test_a_key_name_that_is_not_utf8_is_purged_as_it_is(redis):
    """Before: the name was decoded with replacement characters and DEL got another name."""
    needle = f"sess-{uuid.uuid4().hex}"
    key = b"arq:result:forget:\xff\xfe-" + uuid.uuid4().hex.encode()
    await redis.set(key, _result(needle), px=600_000)
    try:
        count = await purge_values(redis, lambda v: needle in v)
        assert count.matched == 1
        assert await redis.exists(key) == 0
    finally:
        await redis.delete(key)


async def test_values_over_the_cap_are_skipped_unread_and_counted(redis):
    needle = f"sess-{uuid.uuid4().hex}"
    tag = uuid.uuid4().hex
    big = [f"arq:job:forget-big-{tag}-{i}".encode() for i in range(2)]
    small = f"arq:result:small-{tag}".encode()
    for key in big:
        await redis.set(key, _result(needle + "x" * (VALUE_CAP_BYTES + 1)), px=600_000)
    await redis.set(small, _result(needle), px=600_000)
    seen: list[int] = []
    try:
        count = await purge_values(redis, lambda v: (seen.append(len(v)), needle in v)[1])
        assert (count.matched, count.skipped) >= (1, 2)
        assert await redis.exists(small) == 0
        assert await redis.exists(*big) == 2  # not a job memoryd accepted: left, and counted
        assert max(seen) < VALUE_CAP_BYTES  # never read, never matched
    finally:
        await redis.delete(small, *big)


async def test_values_are_matched_off_the_event_loop(redis):
    needle = f"sess-{uuid.uuid4().hex}"
    key = f"arq:result:loop-{uuid.uuid4().hex}"
    await redis.set(key, _result(needle), px=600_000)
    loop_thread = threading.get_ident()
    threads: set[int] = set()

    def names(value: str) -> bool:
        threads.add(threading.get_ident())
        return needle in value

    try:
        assert (await purge_values(redis, names)).matched == 1
        threads_scanned: set[int] = set()

        def may_hold(text: str) -> bool:
            threads_scanned.add(threading.get_ident())
            return False

        _ = [k async for k, _s in scan_values(redis, may_hold)]
    finally:
        await redis.delete(key)
    assert threads and loop_thread not in threads
    assert threads_scanned and loop_thread not in threads_scanned


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    suffix=st.binary(min_size=1, max_size=24),
    prefix=st.sampled_from([b"arq:job:", b"arq:result:"]),
    names_it=st.booleans(),
)
def test_any_key_name_under_the_purged_prefixes_is_purged_exactly_when_its_value_names_the_subject(
    suffix, prefix, names_it
):
    needle = f"sess-{uuid.uuid4().hex}"
    key = prefix + b"t-" + uuid.uuid4().hex.encode() + b"-" + suffix  # glob characters, colons, bytes
    record = {"t": 1, "f": "ingest_sweep", "a": [{"note": needle if names_it else "other"}], "k": {}, "et": 1}

    async def go() -> tuple[int, int]:
        redis = Redis.from_url(REDIS_URL)
        try:
            await redis.set(key, orjson.dumps(record), px=600_000)
            count = await purge_values(redis, lambda v: needle in v)
            left = int(await redis.exists(key))
            await redis.delete(key)
            return count.matched, left
        finally:
            await redis.aclose()

    matched, left = anyio.run(go)
    assert (matched, left) == ((1, 0) if names_it else (0, 1))
