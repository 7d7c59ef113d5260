"""A running daemon and agents whose files are not what they should be (issue 18, findings 4,
5, 6, 9): a FIFO, `/dev/zero`, a symlink loop or a symlink out of sessions_root as
sessions.json, `sessions/` as a regular file or a symlink out of the root, an OpenClaw
database that is a FIFO, an agent directory that is a symlink. Each agent's job fails with one
line naming the file, nothing outside the root is read, and the daemon (its gauges included)
keeps serving the other agents and stops on SIGTERM."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from memoryd.ops import ingest_sweep
from memoryd.runtime.client import MemorydClient
from memoryd.store.short_term import COLUMNS
from tests.builders import SessionStoreBuilder, exchange
from tests.daemon_harness import cleanup_redis, start_daemon, stop_cleanly
from tests.polling import until

pytestmark = pytest.mark.slow  # a daemon process

SECRET = "outsidesecretword"


def _outside_sessions(outside: Path, agent: str) -> Path:
    """A valid sessions directory outside sessions_root whose text must never be staged."""
    builder = SessionStoreBuilder(outside, agent)
    builder.add(f"agent:{agent}:main", "s-out", exchange(SECRET), chatType="direct")
    return builder.dir


def _fifo(d: Path, outside: Path) -> None:
    os.mkfifo(d / "sessions.json")


def _dev_zero(d: Path, outside: Path) -> None:
    os.symlink("/dev/zero", d / "sessions.json")


def _loop(d: Path, outside: Path) -> None:
    os.symlink(d / "other.json", d / "sessions.json")
    os.symlink(d / "sessions.json", d / "other.json")


def _sessions_is_a_file(d: Path, outside: Path) -> None:
    d.rmdir()
    d.write_text("{}")


def _json_out_of_root(d: Path, outside: Path) -> None:
    real = _outside_sessions(outside, "json-out")
    (d / "s-out.jsonl").write_bytes((real / "s-out.jsonl").read_bytes())
    os.symlink(real / "sessions.json", d / "sessions.json")


def _dir_out_of_root(d: Path, outside: Path) -> None:
    d.rmdir()
    os.symlink(_outside_sessions(outside, "dir-out"), d)


def _openclaw_fifo(d: Path, outside: Path) -> None:
    d.rmdir()
    (d.parent / "agent").mkdir()
    os.mkfifo(d.parent / "agent" / "openclaw-agent.sqlite")


BAD: dict[str, tuple[Callable[[Path, Path], None], str]] = {
    "fifo": (_fifo, "sessions.json: is a FIFO"),
    "zero": (_dev_zero, "sessions.json: is a symlink"),
    "loop": (_loop, "sessions.json: is a symlink"),
    "notdir": (_sessions_is_a_file, "not a directory"),
    "json-out": (_json_out_of_root, "sessions.json: is a symlink"),
    "dir-out": (_dir_out_of_root, "is a symlink"),
    "oc-fifo": (_openclaw_fifo, "openclaw-agent.sqlite"),
}


def _staged_texts(settings, agent: str) -> list[str]:
    db = settings.state_dir / "agents" / agent / "memory.sqlite"
    if not db.exists():
        return []
    import sqlite3

    conn = sqlite3.connect(db)
    try:
        return [r[0] for r in conn.execute(f"SELECT {COLUMNS[4]} FROM short_term_entries")]
    finally:
        conn.close()


async def test_agents_with_unreadable_files_fail_alone_and_the_daemon_keeps_serving(
    tmp_path: Path, redis_url: str, unique: str
):
    host = f"h{unique}"
    root, outside = tmp_path / "sessions", tmp_path / "outside"
    good = f"good{unique}"
    SessionStoreBuilder(root, good).add(f"agent:{good}:main", "s-one", exchange("orchard"), chatType="direct")
    bad = {}
    for name, (make, _) in BAD.items():
        agent = f"{name}{unique}"
        builder = SessionStoreBuilder(root, agent)
        make(builder.dir, outside)
        bad[name] = agent
    # An agent directory that is a symlink out of the root is not served at all.
    linked = f"linked{unique}"
    os.symlink(_outside_sessions(outside, linked).parent, root / "agents" / linked)

    settings, notify, daemon = start_daemon(tmp_path, root, redis_url, host)
    agents = [good, linked, *bad.values()]
    try:
        ready = notify.wait_for("READY=1", timeout_s=60)
        assert f"serving {len(agents) - 1} agent(s)" in ready  # not the symlinked one
        async with MemorydClient.connect(settings) as client:
            for name, agent in bad.items():
                job = await client.submit(ingest_sweep.OP, {"agent": agent})
                report = await client.wait(job.job_id, timeout_s=30)
                assert report.state == "failed", (name, report)
                assert report.error is not None and BAD[name][1] in report.error, (name, report.error)
                assert "\n" not in report.error
                assert not any(SECRET in t for t in _staged_texts(settings, agent))
            job = await client.submit(ingest_sweep.OP, {"agent": good})
            report = await client.wait(job.job_id, timeout_s=30)
            assert report.state == "complete", report
            assert any("orchard" in t for t in _staged_texts(settings, good))
        assert daemon.proc is not None and daemon.proc.poll() is None, daemon.log()
        # The gauges went over every agent, counted each bad one in one line and carried on.
        for agent in bad.values():
            await until(
                lambda a=agent: f"agent {a}: 1 file(s)" in daemon.log(), f"the gauge line of {agent}", 30
            )
        stop_cleanly(daemon)
    finally:
        daemon.kill()
        cleanup_redis(redis_url, [host], agents)
