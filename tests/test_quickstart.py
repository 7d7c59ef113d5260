"""The README's first command: deploy/quickstart.sh writes the example store and starts a daemon
that ingests it; a tool that speaks only Redis (docs/jobs.md) gets a forget report from it; SIGTERM
stops it cleanly. Setup itself (venv, install, Redis) is exercised by .ci/run."""

from __future__ import annotations

import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis as redis_sync

from memoryd.runtime.hosts import parse_route
from tests.daemon_harness import cleanup_redis

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _read_until(proc: subprocess.Popen[str], patterns: list[str], timeout_s: float) -> str:
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None
    sel.register(proc.stdout, selectors.EVENT_READ)
    seen = ""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not all(re.search(p, seen) for p in patterns):
        if sel.select(timeout=0.2):
            line = proc.stdout.readline()
            if not line:
                break
            seen += line
    return seen


@pytest.mark.slow
def test_quickstart_runs_a_daemon_that_ingests_the_example_store_and_answers_raw_jobs(
    tmp_path: Path, redis_url: str, unique: str
) -> None:
    host = f"test-qs-{unique}"
    env = {
        **os.environ,
        "MEMORYD_DEMO_DIR": str(tmp_path / "demo"),
        "MEMORYD_REDIS_URL": redis_url,
        "MEMORYD_DAEMON__HOST_ID": host,
        "MEMORYD_DAEMON__METRICS_LISTEN": f"127.0.0.1:{_free_port()}",
        # Sweep every second: scheduled job ids are per agent and interval slot, and another
        # run of this test in the same slot (same Redis, same demo agent names) would own the slot.
        "MEMORYD_INGEST__INTERVAL_S": "1",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("MEMORYD_CONFIG", None)
    proc = subprocess.Popen(
        ["bash", "deploy/quickstart.sh", "--skip-setup"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        swept = [rf"job ingest_sweep:{agent}:\S+ ingest_sweep complete" for agent in ("main", "ops")]
        log = _read_until(proc, swept, 60)
        assert "writing the example session store" in log, log
        assert (tmp_path / "demo" / "memoryd.toml").is_file()
        assert all(re.search(p, log) for p in swept), log

        # docs/jobs.md's Redis-only client, run as written against this daemon.
        r = redis_sync.Redis.from_url(redis_url)
        route = parse_route(r.hget("memoryd:agents", "main"))  # the route this daemon published
        assert route is not None and route.queue == f"memoryd:queue:{host}"
        jobs_md = (ROOT / "docs" / "jobs.md").read_text()
        code = re.search(r"<!-- example: raw-client -->\n```python\n(.*?)```", jobs_md, re.S)
        assert code
        example = subprocess.run(
            [sys.executable, "-c", code[1]], env=env, capture_output=True, text=True, timeout=60
        )
        assert example.returncode == 0, example.stderr
        # The stored result is content-free: counts, no session ids (docs/jobs.md, Results).
        assert example.stdout.startswith('ok {"agentId": "main", "dryRun": true, "sessionIds": []')
    finally:
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=30)[0]
        # Its routes go with it: they name this run's stores, which no later run serves.
        cleanup_redis(redis_url, [host], ["main", "ops"])
    assert proc.returncode == 0, rest
    assert "stopped" in rest
