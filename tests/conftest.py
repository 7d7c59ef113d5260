"""Shared fixtures: real Redis (the server .ci/run starts), real SQLite files in temp dirs."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis as sync_redis
from redis.asyncio import Redis

from memoryd.constants import FENCE_KEY
from memoryd.settings import Settings, load_settings
from tests.builders import SessionStoreBuilder

REDIS_URL = os.environ.get("MEMORYD_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
# The tests name their Redis in their configs; an operator's MEMORYD_REDIS_URL (which memoryd
# takes over a config's redis_url) must not send them elsewhere.
os.environ.pop("MEMORYD_REDIS_URL", None)
FENCE_PATTERN = FENCE_KEY.format(workspace="*")


@pytest.fixture(autouse=True)
def _no_keys_left_without_expiry(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test, the Redis keys it made that would never expire: the fencing counters of
    the workspaces it locked (the lock keeps them forever, by design; removing one is safe, the
    next holder starts above the store's own token) and every key named after its `unique` id
    (a host's queue, workers, records). Test runs leave none behind."""
    # Asked for before the test runs: it is torn down before this fixture is.
    unique = request.getfixturevalue("unique") if "unique" in request.fixturenames else None
    client = sync_redis.Redis.from_url(REDIS_URL)
    try:
        fences = set(client.scan_iter(match=FENCE_PATTERN, count=1000))
        yield
        keys = set(client.scan_iter(match=FENCE_PATTERN, count=1000)) - fences
        if unique is not None:
            keys |= set(client.scan_iter(match=f"*{unique}*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


@pytest.fixture
def redis_url() -> str:
    return REDIS_URL


@pytest.fixture
async def redis() -> Redis:
    client = Redis.from_url(REDIS_URL)
    try:
        await client.ping()
    except Exception as exc:  # pragma: no cover - .ci/run starts Redis before the tests
        pytest.fail(f"tests need Redis at {REDIS_URL}: {exc}")
    yield client
    await client.aclose()


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:10]


@pytest.fixture
def sessions_root(tmp_path: Path) -> Path:
    root = tmp_path / "sessions"
    root.mkdir()
    return root


@pytest.fixture
def store_builder(sessions_root: Path) -> SessionStoreBuilder:
    return SessionStoreBuilder(sessions_root, "main")


def make_settings(tmp_path: Path, sessions_root: Path, **overrides) -> Settings:
    data = {"state_dir": tmp_path / "state", "sessions_root": sessions_root, "redis_url": REDIS_URL}
    data.update(overrides)
    return load_settings(None, **data)


def index_settings(tmp_path: Path, sessions_root: Path, unique: str, **index: Any) -> Settings:
    """Settings for the index tests: agent `main` with its workspace at tmp_path/ws, `index` keys."""
    return make_settings(
        tmp_path,
        sessions_root,
        daemon={"host_id": f"test-{unique}"},
        agents={"main": {"workspace": str(tmp_path / "ws")}},
        index=index,
    )


@pytest.fixture
def settings(tmp_path: Path, sessions_root: Path, unique: str) -> Settings:
    return make_settings(tmp_path, sessions_root, daemon={"host_id": f"test-{unique}"})
