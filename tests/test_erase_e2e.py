"""Issue 16's acceptance: a user who is the second participant of a group chat, and whose other
session was reset into an archive after ingestion, is erased through `memoryd enqueue erase
--wait` against a running daemon that has run scheduled ingest, dreaming and index jobs (index
over memory and sessions, hashing embedder). Afterwards no file, table, raw database byte or
Redis value holds any of her words, the other users' direct sessions are intact, and the group
chat (whose turns name their senders) goes on for its other participant without her turns."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
import redis as sync_redis

from memoryd.runtime.wire import queue_name
from memoryd.settings import load_settings
from memoryd.store.engine import sqlite3
from tests.daemon_harness import DaemonProcess, NotifySocket, cleanup_redis, run_cli, write_config
from tests.erase_world import (
    NADIA_WORDS,
    OLGA_DIRECT_TEXT,
    OLGA_GROUP_TEXT,
    OMAR_TEXT,
    add_group_world,
    reset_nadias_session,
)
from tests.polling import until

NADIA = "tenant:default:user:nadia"
SCHEDULE = """
[ingest]
interval_s = 1

[index]
interval_s = {index_interval}
sources = ["memory", "sessions"]

[index.embedding]
provider = "hashing"

[dreaming]
enabled = {dreaming}
interval_s = 1
min_score = 0
min_recall_count = 0
min_unique_queries = 0
"""


def _config(tmp_path: Path, sessions_root: Path, redis_url: str, host: str, *, dreaming: bool) -> Path:
    cfg = write_config(
        tmp_path / f"memoryd-{'dream' if dreaming else 'quiet'}.toml",
        state_dir=tmp_path / "state",
        sessions_root=sessions_root,
        redis_url=redis_url,
        host_id=host,
        # While the erasure runs, index results (which still list the session paths they skip or
        # remove) are not written beside it: the second daemon indexes at start and on request.
        extra=SCHEDULE.format(dreaming=str(dreaming).lower(), index_interval=1 if dreaming else 3600),
    )
    cfg.write_text(cfg.read_text().replace("schedule = false", "schedule = true"))
    return cfg


def _rows(db: Path, sql: str) -> list[tuple]:
    if not db.exists():
        return []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.OperationalError:
        return []  # not created yet
    finally:
        conn.close()


def _files_holding(root: Path, words: tuple[str, ...]) -> list[str]:
    found = []
    for dirpath, _, names in os.walk(root):
        for name in names:
            data = (Path(dirpath) / name).read_bytes().lower()
            found += [f"{Path(dirpath, name).relative_to(root)}: {w}" for w in words if w.encode() in data]
    return found


def _redis_holding(redis_url: str, words: tuple[str, ...]) -> list[str]:
    r = sync_redis.Redis.from_url(redis_url)
    found = []
    try:
        for key in r.scan_iter(count=500):
            kind = r.type(key).decode()
            if kind == "string":
                values = [r.get(key) or b""]
            elif kind == "hash":
                values = [v for pair in r.hgetall(key).items() for v in pair]
            elif kind == "list":
                values = r.lrange(key, 0, -1)
            elif kind == "zset":
                values = r.zrange(key, 0, -1)
            else:
                values = list(r.smembers(key)) if kind == "set" else []
            blob = b"\n".join([key, *values]).lower()
            found += [f"{key.decode()}: {w}" for w in words if w.encode() in blob]
    finally:
        r.close()
    return found


@pytest.mark.slow
async def test_a_group_chats_second_participant_is_erased_everywhere_through_a_running_daemon(
    tmp_path: Path, sessions_root: Path, redis_url: str, unique: str
) -> None:
    host = f"test-e2e-{unique}"
    builder = add_group_world(sessions_root)
    dreaming = _config(tmp_path, sessions_root, redis_url, host, dreaming=True)
    settings = load_settings(dreaming)
    workspace = settings.workspace_for("main")
    db = settings.state_dir / "agents" / "main" / "memory.sqlite"
    notify = NotifySocket(tmp_path / "n.sock")
    daemons: list[DaemonProcess] = []
    try:
        # 1. Scheduled ingest, dreaming and index jobs derive memory from every session.
        first = DaemonProcess(dreaming, notify, tmp_path / "first.log").start()
        daemons.append(first)

        def derived() -> bool:
            memory = workspace / "MEMORY.md"
            promoted = memory.exists() and "saffron kayak" in memory.read_text()
            indexed = _rows(db, "SELECT count(*) FROM memory_index_chunks WHERE session_id = 'sess-nadia-1'")
            return promoted and bool(indexed and indexed[0][0])

        await until(derived, "her words promoted into MEMORY.md and her session indexed", 180, every_s=0.2)
        assert first.stop() == 0, first.log()
        memory_before = (workspace / "MEMORY.md").read_text()

        # 2. Her direct session is reset into an archive; a daemon keeps sweeping and indexing.
        reset_nadias_session(builder)
        quiet = _config(tmp_path, sessions_root, redis_url, host, dreaming=False)
        # Its own socket: the first daemon's READY, never read, must not stand for the second's.
        notify.close()
        notify = NotifySocket(tmp_path / "n2.sock")
        second = DaemonProcess(quiet, notify, tmp_path / "second.log").start()
        daemons.append(second)
        notify.wait_for("READY=1", 60)

        def indexed_at_start() -> bool:
            # Its own log: results of index runs in Redis may be another test's (agent `main`).
            return re.search(r"job index_sync:main:\S+ index_sync complete", second.log()) is not None

        await until(indexed_at_start, "the second daemon's first index run", 60, every_s=0.1)

        # 3. The erasure, sent as a job and waited for.
        queue = queue_name(host)
        sent = run_cli(
            quiet,
            "enqueue",
            "erase",
            "--scope",
            NADIA,
            "--queue",
            queue,
            "--wait",
            "--timeout",
            "240",
            "--json",
            timeout=300,
        )
        assert sent.returncode == 0, sent.stderr + second.log()
        receipt = json.loads(sent.stdout)
        receipt = receipt.get("result", receipt)
        assert receipt["state"] == "complete" and receipt["verified"] is True, receipt["verification"]
        artifacts = receipt["artifacts"]
        # The group's turns name their senders: only hers go, olga's are read again.
        assert artifacts["sharedSessionsSeparated"] == 1 and artifacts["sessions"] >= 2, artifacts

        # 4. Sweeps and an index run after it bring nothing back.
        after = int(time.time())

        def swept_since() -> bool:
            r = sync_redis.Redis.from_url(redis_url)
            try:
                keys = r.scan_iter(match=b"arq:result:ingest_sweep:main:sched:*")
                return any(int(k.rsplit(b":", 1)[1]) > after + 1 for k in keys)
            finally:
                r.close()

        await until(swept_since, "an ingest sweep after the erasure", 120, every_s=0.2)
        index = run_cli(quiet, "enqueue", "index", "--agent", "main", "--wait", "--timeout", "120", "--json")
        assert index.returncode == 0, index.stderr
        assert second.stop() == 0, second.log()

        # 5. Nothing of her words anywhere memoryd keeps data: files (stores and their WAL
        # included, so every table and raw byte), the workspace, and Redis.
        assert _files_holding(settings.state_dir, NADIA_WORDS) == []
        assert _files_holding(workspace, NADIA_WORDS) == []
        assert _redis_holding(redis_url, NADIA_WORDS) == []
        # Olga's and omar's own sessions are intact.
        corpus = "".join(p.read_text() for p in (workspace / "memory").rglob("*.txt"))
        assert OLGA_DIRECT_TEXT in corpus and OMAR_TEXT in corpus
        assert OLGA_GROUP_TEXT in corpus  # the group goes on for olga
        memory_after = (workspace / "MEMORY.md").read_text()
        for text in (OLGA_DIRECT_TEXT, OMAR_TEXT):
            assert (text in memory_before) <= (text in memory_after)
        assert _rows(db, "SELECT count(*) FROM session_participants WHERE actor_id = 'nadia'") == [(0,)]
    finally:
        for d in daemons:
            d.kill()
        notify.close()
        cleanup_redis(redis_url, [host], ["main"])
