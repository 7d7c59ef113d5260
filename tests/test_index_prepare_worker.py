"""A large index run prepares its files in a worker process while earlier groups publish; a
small one stays in-process. Real processes, real SQLite, real Redis: the worker's rows equal the
in-process run's, a worker killed with SIGKILL costs a warning and nothing else, the worker
leaves no file behind, and a forget after a worker run removes every row it wrote."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import anyio
import pytest

from memoryd.agent_runtime import agent_runtime
from memoryd.failpoints import STOP_ENV_VAR, TRACE_ENV_VAR
from memoryd.forget.request import ForgetRequest
from memoryd.forget.run import run_forget
from memoryd.index import prepare_worker, sync
from memoryd.index.sync import run_index_sync
from tests.builders import SessionStoreBuilder, conversation
from tests.conftest import index_settings

AGENT = "main"
SESSIONS = 12
WORKER = prepare_worker.WORKER_FAILPOINT


def _sessions(root: Path) -> None:
    builder = SessionStoreBuilder(root, AGENT)
    for i in range(SESSIONS):
        builder.add(f"agent:main:s{i}", f"sess-{i}", conversation(f"orchard{i}", f"sess-{i}", n=12))


def _settings(tmp_path: Path, root: Path, unique: str, name: str, provider: str = "hashing"):
    return index_settings(
        tmp_path / name,
        root,
        unique,
        sources=["memory", "sessions"],
        embedding={"provider": provider, "dims": 32},
    )


def _small_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Groups of one or two transcripts: a test-sized run is large enough for the worker."""
    monkeypatch.setattr(sync, "GROUP_BYTES", 2_000)
    monkeypatch.setattr(sync, "STREAMED_GROUP_BYTES", 2_000)


# With an embedder the groups publish one transaction each; FTS only, they share one.
PROVIDERS = pytest.mark.parametrize("provider", ["hashing", "none"])


def _rows(conn) -> dict[str, list]:
    return {
        "chunks": conn.execute(
            "SELECT id, path, source, start_line, end_line, hash, model, text, session_id "
            "FROM memory_index_chunks ORDER BY id"
        ).fetchall(),
        "fts": conn.execute(
            "SELECT c.id, f.text FROM memory_index_chunks_fts f JOIN memory_index_chunks c ON c.rowid = f.rowid "
            "ORDER BY c.id"
        ).fetchall(),
        "provenance": conn.execute(
            "SELECT * FROM memory_index_chunk_provenance ORDER BY chunk_id"
        ).fetchall(),
        "vectors": conn.execute(
            "SELECT c.id, v.embedding FROM memory_index_vectors v JOIN memory_index_chunks c "
            "ON c.rowid = v.chunk_rowid ORDER BY c.id"
        ).fetchall(),
        "cache": conn.execute("SELECT hash, embedding FROM memory_embedding_cache ORDER BY hash").fetchall(),
        "sources": conn.execute(
            "SELECT path, source, hash, mtime, size, session_id, model FROM memory_index_sources ORDER BY path"
        ).fetchall(),
    }


def _pids(trace: Path) -> set[int]:
    if not trace.exists():
        return set()
    return {int(line.split()[1]) for line in trace.read_text().splitlines() if line.split()[0] == WORKER}


async def _index(settings, redis):
    async with agent_runtime(settings, AGENT, redis=redis) as rt:
        report = await run_index_sync(rt)
        rows = await rt.require_store().read(_rows)
    return report, rows


@PROVIDERS
async def test_a_large_run_prepares_in_a_worker_process_and_publishes_the_same_rows(
    tmp_path, sessions_root, unique, redis, monkeypatch, provider
) -> None:
    _sessions(sessions_root)
    trace = tmp_path / "trace"
    monkeypatch.setenv(TRACE_ENV_VAR, str(trace))
    here_report, here = await _index(_settings(tmp_path, sessions_root, unique, "here", provider), redis)
    assert _pids(trace) == set()  # one group: nothing to overlap, no worker

    _small_groups(monkeypatch)
    report, rows = await _index(_settings(tmp_path, sessions_root, unique, "worker", provider), redis)
    pids = _pids(trace)
    assert pids and os.getpid() not in pids, "the groups were not prepared in another process"
    assert report.ok and report.warnings == []
    assert (report.files.indexed, report.chunks_written) == (
        here_report.files.indexed,
        here_report.chunks_written,
    )
    assert report.embeddings_computed == here_report.embeddings_computed
    assert rows == here and rows["chunks"]


async def test_a_small_live_run_stays_in_process(tmp_path, sessions_root, unique, redis, monkeypatch) -> None:
    _sessions(sessions_root)
    trace = tmp_path / "trace"
    monkeypatch.setenv(TRACE_ENV_VAR, str(trace))
    _small_groups(monkeypatch)
    settings = _settings(tmp_path, sessions_root, unique, "live")
    await _index(settings, redis)
    started = _pids(trace)
    SessionStoreBuilder(sessions_root, AGENT).add(
        "agent:main:new", "sess-new", conversation("lighthouse", "sess-new", n=12)
    )
    report, _ = await _index(settings, redis)
    assert report.files.indexed == 1
    assert _pids(trace) == started  # one changed transcript: prepared in this process


@PROVIDERS
async def test_a_worker_killed_mid_run_costs_a_warning_and_no_row(
    tmp_path, sessions_root, unique, redis, monkeypatch, provider
) -> None:
    _sessions(sessions_root)
    _, here = await _index(_settings(tmp_path, sessions_root, unique, "here", provider), redis)
    _small_groups(monkeypatch)
    trace = tmp_path / "trace"
    monkeypatch.setenv(TRACE_ENV_VAR, str(trace))
    monkeypatch.setenv(STOP_ENV_VAR, WORKER)  # the worker stops itself before its first group

    async def kill_the_worker() -> None:
        while not _pids(trace):  # noqa: ASYNC110 - another process writes the trace
            await anyio.sleep(0.01)
        (pid,) = _pids(trace)
        os.kill(pid, signal.SIGKILL)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(kill_the_worker)
            report, rows = await _index(_settings(tmp_path, sessions_root, unique, "killed", provider), redis)
    assert report.ok
    assert len(report.warnings) == 1 and "index preparation worker" in report.warnings[0]
    assert "exit code -9" in report.warnings[0] and "prepared in the main process" in report.warnings[0]
    assert rows == here


@PROVIDERS
async def test_a_worker_that_hangs_is_given_up_and_its_groups_prepared_here(
    tmp_path, sessions_root, unique, redis, monkeypatch, provider
) -> None:
    _sessions(sessions_root)
    _, here = await _index(_settings(tmp_path, sessions_root, unique, "here", provider), redis)
    _small_groups(monkeypatch)
    monkeypatch.setattr(prepare_worker, "WORKER_STALL_S", 0.5)
    monkeypatch.setenv(STOP_ENV_VAR, WORKER)  # stopped, it never sends a group
    with anyio.fail_after(60):
        report, rows = await _index(_settings(tmp_path, sessions_root, unique, "hung", provider), redis)
    assert report.ok and len(report.warnings) == 1
    assert "no group for" in report.warnings[0] and "prepared in the main process" in report.warnings[0]
    assert rows == here


async def test_the_worker_leaves_no_file_behind(tmp_path, sessions_root, unique, redis, monkeypatch) -> None:
    """Its results travel through a pipe: no scratch file holds memory text."""
    _sessions(sessions_root)
    here = _settings(tmp_path, sessions_root, unique, "here")
    await _index(here, redis)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr("tempfile.tempdir", None)
    _small_groups(monkeypatch)
    trace = tmp_path / "trace"
    monkeypatch.setenv(TRACE_ENV_VAR, str(trace))
    worker = _settings(tmp_path, sessions_root, unique, "worker")
    await _index(worker, redis)
    assert _pids(trace)
    assert list(scratch.iterdir()) == []

    def files(root: Path) -> set[str]:
        return {str(p.relative_to(root)) for p in root.rglob("*")}

    assert files(worker.state_dir) == files(here.state_dir)


@PROVIDERS
async def test_a_forget_after_a_worker_run_removes_every_row_of_the_session(
    tmp_path, sessions_root, unique, redis, monkeypatch, provider
) -> None:
    _sessions(sessions_root)
    _small_groups(monkeypatch)
    settings = _settings(tmp_path, sessions_root, unique, "forget", provider)
    _, rows = await _index(settings, redis)
    target = "sess-3"
    assert any(r[8] == target for r in rows["chunks"])
    async with agent_runtime(settings, AGENT, redis=redis) as rt:
        await run_forget(rt, ForgetRequest(agent=AGENT, sessions=[target]))
        after = await rt.require_store().read(_rows)
    word = "orchard3"
    assert not [r for r in after["chunks"] if r[8] == target or word in r[7]]
    assert not [r for r in after["fts"] if word in r[1]]
    gone = {r[0] for r in rows["chunks"] if r[8] == target}
    assert not [r for r in after["provenance"] if r[0] in gone]
    assert not [r for r in after["vectors"] if r[0] in gone]
    kept_hashes = {r[5] for r in after["chunks"]}
    target_hashes = {r[5] for r in rows["chunks"] if r[8] == target}
    assert not {h for h, _ in after["cache"]} & (target_hashes - kept_hashes)
    assert len(after["chunks"]) == len(rows["chunks"]) - len(gone)
