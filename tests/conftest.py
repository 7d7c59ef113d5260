"""Shared fixtures: real Redis (the server .ci/run starts), real SQLite files in temp dirs."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from daemon.settings import Settings, load_settings
from tests.builders import SessionStoreBuilder

REDIS_URL = os.environ.get("MEMORYD_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


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
