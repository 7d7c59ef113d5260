"""A daemon serving a few hundred agents fits systemd's `TasksMax=512` (systemd/memoryd.service):
its threads do not grow with the agents it serves (one watch for every agent's directories, a
bounded number of open stores), while every agent is ingested and watched.

A real daemon process over real Redis; the thread count is read from /proc."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import pytest

from memoryd.settings import load_settings
from tests.builders import Msg, SessionStoreBuilder, exchange
from tests.daemon_harness import DaemonProcess, NotifySocket, cleanup_redis, write_config
from tests.ingest_harness import corpus_text

pytestmark = pytest.mark.slow  # runs memoryd as a process, with 300 agents

AGENTS = 300
# Well below TasksMax=512, and far below one thread per agent: what the daemon needs whatever
# the number of agents — the main thread, anyio's I/O threads (40, and one for the watch),
# the watch's inotify thread, the idle stores (daemon.max_idle_stores, 32) and those of running
# jobs (daemon.max_jobs), the metrics server. (One watch per agent made it about 700.)
THREAD_BOUND = 128
CONFIG = "[ingest]\ninterval_s = 300\n\n[index]\ninterval_s = 300\n\n[dreaming]\nenabled = false\n"


def threads_of(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


@pytest.fixture
def many(tmp_path: Path, redis_url: str, unique: str):
    root = tmp_path / "sessions"
    agents = [f"m{unique}-{i:03d}" for i in range(AGENTS)]
    builders = {}
    for i, agent in enumerate(agents):
        b = SessionStoreBuilder(root, agent)
        b.add(f"agent:{agent}:main", "s-one", exchange(f"lantern{i:03d}"), chatType="direct")
        builders[agent] = b
    host = f"h{unique}"
    config = write_config(
        tmp_path / "memoryd.toml",
        state_dir=tmp_path / "state",
        sessions_root=root,
        redis_url=redis_url,
        host_id=host,
        schedule=True,
        extra=CONFIG,
    )
    notify = NotifySocket(tmp_path / "n.sock")
    daemon = DaemonProcess(config, notify, tmp_path / "daemon.log")
    yield load_settings(config), agents, builders, daemon, notify
    daemon.kill()
    notify.close()
    cleanup_redis(redis_url, [host], agents)


@pytest.mark.timeout(240)
async def test_a_daemon_serving_300_agents_stays_under_its_thread_bound_and_ingests_them_all(many):
    settings, agents, builders, daemon, notify = many
    daemon.start()
    notify.wait_for("READY=1", timeout_s=60)
    assert daemon.proc is not None
    pid = daemon.proc.pid
    most = threads_of(pid)

    def missing() -> list[int]:
        return [i for i, a in enumerate(agents) if f"lantern{i:03d}" not in corpus_text(settings, a)]

    deadline = time.monotonic() + 150
    left = missing()
    while left and time.monotonic() < deadline:
        most = max(most, threads_of(pid))
        await anyio.sleep(0.2)
        left = [i for i in left if f"lantern{i:03d}" not in corpus_text(settings, agents[i])]
    assert left == [], f"{len(left)} agents not ingested; log: {daemon.log()[-3000:]}"

    # Every agent is watched (one inotify instance per watch made those past ~128 fall back to
    # the interval sweeps): a message appended is staged within seconds, though the interval
    # sweeps are 300 s away.
    watched = (0, AGENTS // 2, AGENTS - 1)
    for i in watched:
        builders[agents[i]].append("s-one", [Msg("user", f"Remember the quillpost code {i:03d}.")], 2)
    deadline = time.monotonic() + 30
    unstaged = list(watched)
    while unstaged and time.monotonic() < deadline:
        most = max(most, threads_of(pid))
        await anyio.sleep(0.1)
        unstaged = [i for i in unstaged if f"quillpost code {i:03d}" not in corpus_text(settings, agents[i])]
    most = max(most, threads_of(pid))
    assert unstaged == [], f"appended messages of agents {unstaged} not staged within 30 s"
    assert most < THREAD_BOUND, f"{most} threads serving {AGENTS} agents"
    assert "Traceback" not in daemon.log()
