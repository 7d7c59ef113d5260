"""A quiet re-sweep reuses what it decided from an idle agent's listing (order, state keys,
policy reasons), and that reuse never hides a change: a policy edit or a forgotten record
made while the listing stays the very same object still decides the next sweep."""

from __future__ import annotations

from pathlib import Path

import pytest
from redis.asyncio import Redis

from memoryd.agent_runtime import agent_runtime
from memoryd.caches import ProcessCaches
from memoryd.ingest.decided import DecidedListings
from memoryd.ingest.report import IngestReport
from memoryd.ingest.sweep import run_ingest_sweep
from memoryd.settings import Settings
from memoryd.store.db import sqlite3
from memoryd.store.tombstones import hashed_session_ref, record_tombstones
from tests.builders import SessionStoreBuilder, conversation
from tests.conftest import make_settings

POLICY = {"exclude_sessions": {"hook_external_content_sources": ["gmail"]}}


# What a worker keeps between its jobs; the sweeps of one test share it, as a worker's do.
CACHES = ProcessCaches()


@pytest.fixture(autouse=True)
def fresh_caches() -> None:
    CACHES.clear()


async def sweep(settings: Settings, redis: Redis) -> IngestReport:
    async with agent_runtime(settings, "main", redis=redis, caches=CACHES) as rt:
        return await run_ingest_sweep(rt)


@pytest.fixture(autouse=True)
def settled_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # The source keeps a listing only once sessions.json has been still for a while (its ctime
    # cannot be dated back); these tests do not wait that out.
    monkeypatch.setattr("memoryd.sessions.json_store.LISTING_SETTLED_NS", 0)


async def idle_listing(settings: Settings, redis: Redis) -> None:
    # Two sweeps over a settled file: the second marks the listing idle, so from here on the
    # source hands out the same object (the case the reuse is for).
    await sweep(settings, redis)
    await sweep(settings, redis)
    async with agent_runtime(settings, "main", redis=False, caches=CACHES) as rt:
        assert rt.sessions.list_sessions() is rt.sessions.list_sessions()


async def test_a_policy_edit_applies_to_the_next_sweep_of_an_unchanged_listing(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, redis: Redis
) -> None:
    store_builder.add("agent:main:main", "plain", conversation("lamp", "plain"))
    store_builder.add(
        "hook:gmail:1", "mail", conversation("invoice", "mail"), hookExternalContentSource="gmail"
    )
    open_settings = make_settings(tmp_path, sessions_root)
    strict_settings = make_settings(tmp_path, sessions_root, memory_policy=POLICY)
    await idle_listing(strict_settings, redis)

    strict = await sweep(strict_settings, redis)
    assert strict.sessions_excluded == {"hookExternalContentSource:gmail": 1} and strict.messages_staged == 0
    lifted = await sweep(open_settings, redis)
    assert lifted.sessions_excluded == {} and lifted.messages_staged == 4 and lifted.sessions_scanned == 1
    again = await sweep(strict_settings, redis)
    assert again.sessions_excluded == {"hookExternalContentSource:gmail": 1}
    assert again.sessions_unchanged == 1 and again.sessions_scanned == 0


async def test_a_session_forgotten_after_the_listing_went_idle_is_excluded_as_forgotten(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, redis: Redis
) -> None:
    settings = make_settings(tmp_path, sessions_root)
    store_builder.add("agent:main:main", "plain", conversation("lamp", "plain"))
    store_builder.add("agent:main:other", "erased", conversation("secret", "erased"))
    await idle_listing(settings, redis)
    quiet = await sweep(settings, redis)
    assert quiet.sessions_unchanged == 2 and quiet.sessions_excluded == {}

    async with agent_runtime(settings, "main", redis=False) as rt:
        ref = hashed_session_ref(rt.secret() or b"", "erased")
        await rt.require_store().write(record_tombstones, "main", [ref], 1, fence=None)
    after = await sweep(settings, redis)
    assert after.sessions_excluded == {"forgotten": 1} and after.sessions_unchanged == 1


def _raw(settings: Settings) -> sqlite3.Connection:  # type: ignore[name-defined]
    # Another process's connection: nothing of this process's caches sees its writes.
    return sqlite3.connect(
        str(settings.state_dir / "agents" / "main" / "memory.sqlite"), isolation_level=None
    )


def _token(settings: Settings) -> int:
    conn = _raw(settings)
    try:
        return int(conn.execute("SELECT token FROM ingest_checkpoint_token").fetchone()[0])
    finally:
        conn.close()


async def test_every_kind_of_checkpoint_write_replaces_the_token(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, redis: Redis
) -> None:
    settings = make_settings(tmp_path, sessions_root)
    store_builder.add("agent:main:main", "plain", conversation("lamp", "plain"))
    await sweep(settings, redis)
    tokens = [_token(settings)]
    conn = _raw(settings)
    for sql in (
        "UPDATE ingest_checkpoints SET updated_at = updated_at + 1",
        "INSERT INTO ingest_checkpoints SELECT 'x' || state_key, agent_id, session_id, session_key, "
        "session_path, mtime_ms, size, content_hash, line_count, last_content_line, at_end, carry, "
        "excluded_reason, updated_at FROM ingest_checkpoints",
        "DELETE FROM ingest_checkpoints WHERE state_key LIKE 'x%'",
    ):
        conn.execute(sql)
        tokens.append(_token(settings))
    conn.close()
    assert len(set(tokens)) == len(tokens)  # each write gave a new token
    await sweep(settings, redis)  # a quiet sweep writes no checkpoint
    assert _token(settings) == tokens[-1]


async def test_a_checkpoint_changed_by_another_process_is_read_again(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, redis: Redis
) -> None:
    settings = make_settings(tmp_path, sessions_root)
    store_builder.add("agent:main:main", "plain", conversation("lamp", "plain"))
    store_builder.add("agent:main:other", "second", conversation("desk", "second"))
    await idle_listing(settings, redis)
    quiet = await sweep(settings, redis)  # this process now holds the stamps of both sessions
    assert quiet.sessions_unchanged == 2 and quiet.sessions_scanned == 0

    conn = _raw(settings)
    conn.execute("DELETE FROM ingest_checkpoints WHERE session_id = 'second'")
    conn.close()
    after = await sweep(settings, redis)
    assert after.sessions_scanned == 1 and after.sessions_unchanged == 1
    assert after.messages_staged == 0  # its messages were staged before: the seen hashes hold


async def test_a_recreated_database_never_reuses_the_old_stamps(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, redis: Redis
) -> None:
    settings = make_settings(tmp_path, sessions_root)
    store_builder.add("agent:main:main", "plain", conversation("lamp", "plain"))
    await idle_listing(settings, redis)
    assert (await sweep(settings, redis)).sessions_unchanged == 1
    db = settings.state_dir / "agents" / "main" / "memory.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    fresh = await sweep(settings, redis)
    assert fresh.sessions_scanned == 1 and fresh.messages_staged == 4


async def test_a_listing_the_source_did_not_keep_leaves_no_decided_entry_behind(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, redis: Redis
) -> None:
    import gc

    settings = make_settings(tmp_path, sessions_root)
    store_builder.add("agent:main:main", "plain", conversation("lamp", "plain"))
    await sweep(settings, redis)  # a first read: the source keeps no listing yet
    gc.collect()
    assert "main" not in CACHES.part(DecidedListings)
    await idle_listing(settings, redis)  # now the source keeps it, and the decision with it
    assert "main" in CACHES.part(DecidedListings)
    assert CACHES.sizes() == {"listings": 1, "decided": 1, "stamps": 1}


async def test_a_one_shot_runtime_keeps_nothing_for_the_next_one(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, redis: Redis
) -> None:
    """Without the process's caches (a one-shot command), every sweep reads the listing and the
    checkpoint stamps again, and leaves nothing behind in the process."""
    settings = make_settings(tmp_path, sessions_root)
    store_builder.add("agent:main:main", "plain", conversation("lamp", "plain"))
    for _ in range(3):
        async with agent_runtime(settings, "main", redis=redis) as rt:
            report = await run_ingest_sweep(rt)
            assert rt.caches is not CACHES and rt.caches.sizes().get("listings", 0) == 0
    assert report.sessions_unchanged == 1
    assert CACHES.sizes() == {"listings": 0, "decided": 0, "stamps": 0}
