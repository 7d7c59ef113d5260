"""An FTS-only index run publishes its groups as they are prepared, in shared transactions
(daemon/index/streaming.py). Real SQLite, real Redis: the rows equal those of a run published
in one piece, a transaction closes at its size and the next takes the rest, and a run whose
preparation fails part-way commits nothing of its open transaction and raises the failure
itself."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from memoryd.agent_runtime import agent_runtime
from memoryd.index import prepare_worker, publish, streaming, sync
from memoryd.index.sync import run_index_sync
from tests.builders import SessionStoreBuilder, conversation
from tests.conftest import index_settings

AGENT = "main"
SESSIONS = 10


def _sessions(root: Path) -> None:
    builder = SessionStoreBuilder(root, AGENT)
    for i in range(SESSIONS):
        builder.add(f"agent:main:s{i}", f"sess-{i}", conversation(f"harbour{i}", f"sess-{i}", n=12))


def _settings(tmp_path: Path, root: Path, unique: str, name: str):
    return index_settings(tmp_path / name, root, unique, sources=["memory", "sessions"])


def _rows(conn) -> dict[str, list]:
    return {
        "chunks": conn.execute(
            "SELECT rowid, id, path, source, start_line, end_line, hash, model, text, session_id "
            "FROM memory_index_chunks ORDER BY rowid"
        ).fetchall(),
        "fts": conn.execute("SELECT id, sz FROM memory_index_chunks_fts_docsize ORDER BY id").fetchall(),
        "provenance": conn.execute(
            "SELECT * FROM memory_index_chunk_provenance ORDER BY chunk_id"
        ).fetchall(),
        "sources": conn.execute(
            "SELECT path, source, hash, mtime, size, session_id, model FROM memory_index_sources ORDER BY path"
        ).fetchall(),
    }


async def _index(settings, redis):
    async with agent_runtime(settings, AGENT, redis=redis) as rt:
        report = await run_index_sync(rt)
        rows = await rt.require_store().read(_rows)
    return report, rows


def _groups_of_one_transcript(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each transcript its own group, prepared in this process (no worker below 1 MiB)."""
    monkeypatch.setattr(sync, "STREAMED_GROUP_BYTES", 1)


async def test_groups_published_as_they_come_give_the_rows_of_one_group(
    tmp_path, sessions_root, unique, redis, monkeypatch
) -> None:
    _sessions(sessions_root)
    whole_report, whole = await _index(_settings(tmp_path, sessions_root, unique, "whole"), redis)
    _groups_of_one_transcript(monkeypatch)
    report, rows = await _index(_settings(tmp_path, sessions_root, unique, "streamed"), redis)
    assert report.ok and report.files.indexed == whole_report.files.indexed == SESSIONS
    assert report.chunks_written == whole_report.chunks_written
    assert rows == whole and rows["chunks"]


async def test_a_transaction_closes_at_its_size_and_the_next_takes_the_rest(
    tmp_path, sessions_root, unique, redis, monkeypatch
) -> None:
    _sessions(sessions_root)
    _, whole = await _index(_settings(tmp_path, sessions_root, unique, "whole"), redis)
    _groups_of_one_transcript(monkeypatch)
    monkeypatch.setattr(sync, "STREAM_TXN_CHUNKS", 3)  # a transcript or two per transaction
    seen: list[tuple[str, int, int]] = []
    settings = _settings(tmp_path, sessions_root, unique, "small-txns")
    async with agent_runtime(settings, AGENT, redis=redis) as rt:
        before = await rt.require_store().read(
            lambda conn: conn.execute("SELECT revision FROM memory_index_state").fetchone()[0]
        )
        report = await run_index_sync(
            rt, progress=lambda phase, done, total: seen.append((phase, done, total))
        )
        rows = await rt.require_store().read(_rows)
        after = await rt.require_store().read(
            lambda conn: conn.execute("SELECT revision FROM memory_index_state").fetchone()[0]
        )
    assert report.ok and rows == whole
    published = [done for phase, done, _ in seen if phase == "publish"]
    assert published[-1] == len(whole["chunks"]) and len(set(published)) > 2  # progress per commit
    # Each commit bumps the revision once besides its source rows' triggers: several commits.
    assert after - before - SESSIONS > 2


async def test_a_preparation_that_fails_part_way_commits_nothing_of_the_open_transaction(
    tmp_path, sessions_root, unique, redis, monkeypatch
) -> None:
    _sessions(sessions_root)
    _groups_of_one_transcript(monkeypatch)
    prepare = prepare_worker._prepare
    calls = []

    def failing(work, group, on_file=None):
        calls.append(group)
        if len(calls) == 4:
            raise RuntimeError("preparation broke")
        return prepare(work, group, on_file)

    monkeypatch.setattr(prepare_worker, "_prepare", failing)
    settings = _settings(tmp_path, sessions_root, unique, "failed")
    with pytest.raises(RuntimeError, match="preparation broke"):
        await _index(settings, redis)
    assert len(calls) == 4
    monkeypatch.setattr(prepare_worker, "_prepare", prepare)
    async with agent_runtime(settings, AGENT, redis=redis) as rt:
        rows = await rt.require_store().read(_rows)
    assert rows == {"chunks": [], "fts": [], "provenance": [], "sources": []}


async def test_a_run_cancelled_mid_stream_rolls_back_and_leaves_the_store_usable(
    tmp_path, sessions_root, unique, redis, monkeypatch
) -> None:
    _sessions(sessions_root)
    _groups_of_one_transcript(monkeypatch)
    prepare = prepare_worker._prepare

    def slow(work, group, on_file=None):
        time.sleep(0.05)  # on preparation's thread: the open transaction waits for the next group
        return prepare(work, group, on_file)

    monkeypatch.setattr(prepare_worker, "_prepare", slow)
    settings = _settings(tmp_path, sessions_root, unique, "cancelled")
    async with agent_runtime(settings, AGENT, redis=redis) as rt:
        with anyio.move_on_after(0.25) as scope:
            await run_index_sync(rt)
        assert scope.cancelled_caught
        with anyio.fail_after(10):  # the store's thread is free again
            rows = await rt.require_store().read(_rows)
        assert rows == {"chunks": [], "fts": [], "provenance": [], "sources": []}
        monkeypatch.setattr(prepare_worker, "_prepare", prepare)
        report = await run_index_sync(rt)
    assert report.ok and report.files.indexed == SESSIONS


async def test_preparation_waits_while_publication_lags(
    tmp_path, sessions_root, unique, redis, monkeypatch
) -> None:
    """At most MAX_WAITING groups wait for the store's thread: a large first sync does not hold
    most of its prepared text in memory while publication catches up."""
    _sessions(sessions_root)
    _groups_of_one_transcript(monkeypatch)
    monkeypatch.setattr(streaming, "MAX_WAITING", 1)
    prepared: list[int] = []
    published: list[int] = []
    lead: list[int] = []
    prepare, publish_batch = prepare_worker._prepare, publish._publish_batch

    def counting_prepare(work, group, on_file=None):
        lead.append(len(prepared) - len(published))
        prepared.append(1)
        return prepare(work, group, on_file)

    def slow_publish(conn, batch, ctx):
        time.sleep(0.03)  # on the store's thread: publication lags preparation
        published.append(1)
        return publish_batch(conn, batch, ctx)

    monkeypatch.setattr(prepare_worker, "_prepare", counting_prepare)
    monkeypatch.setattr(publish, "_publish_batch", slow_publish)
    report, _ = await _index(_settings(tmp_path, sessions_root, unique, "lagging"), redis)
    assert report.ok and len(prepared) == SESSIONS
    # One group published, one waiting, one in the event loop's hand: never all ten ahead.
    assert max(lead) <= 3, lead
