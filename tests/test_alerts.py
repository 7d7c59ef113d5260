"""deploy/alerts.yml fires when it should: a sweep that fails from the daemon's start has a
last-success gauge to go stale (set at start), and rules watch failed jobs and unreadable
session sources. promtool checks the file too where it is installed."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.builders import SessionStoreBuilder, conversation
from tests.conftest import REDIS_URL
from tests.daemon_harness import REPO, cleanup_redis, host_record, start_daemon, stop_cleanly
from tests.polling import until

ALERTS = REPO / "deploy" / "alerts.yml"


def _scrape(url: str) -> str:
    return httpx.get(url, timeout=5).text


def _rules() -> dict[str, str]:
    """alert name -> its expr (the file's one-line exprs)."""
    text = ALERTS.read_text()
    blocks = re.split(r"^\s*- alert:\s*", text, flags=re.M)[1:]
    out = {}
    for block in blocks:
        name = block.split("\n", 1)[0].strip()
        expr = re.search(r"^\s*expr:\s*(.+)$", block, re.M)
        assert expr, f"{name} has no expr"
        out[name] = expr.group(1)
    return out


def test_a_rule_watches_failed_jobs_of_every_family() -> None:
    exprs = list(_rules().values())
    assert any("memoryd_jobs_total" in e and 'outcome="failed"' in e and "purges" not in e for e in exprs), (
        exprs
    )


def test_a_rule_watches_unreadable_session_sources() -> None:
    assert any("memoryd_source_problems" in e for e in _rules().values())


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_promtool_accepts_the_rules() -> None:
    done = subprocess.run(["promtool", "check", "rules", str(ALERTS)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


async def test_the_last_sweep_gauge_exists_from_start_when_every_sweep_fails(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, unique: str
) -> None:
    store_builder.add("agent:main:main", "s-1", conversation("orchard", "s-1"), chatType="direct")
    host = f"test-{unique}"
    # Every ingest sweep fails at its last step: no sweep ever succeeds.
    env = {"MEMORYD_FAILPOINTS": "ingest.last_sweep.write"}
    _settings, notify, daemon = start_daemon(tmp_path, sessions_root, REDIS_URL, host, env=env, schedule=True)
    try:
        notify.wait_for("READY=1")
        url = f"http://127.0.0.1:{host_record(REDIS_URL, host)['metrics_port']}/metrics"
        failed = re.compile(r'^memoryd_jobs_total\{family="ingest_sweep",outcome="failed"\} ([0-9.]+)$', re.M)

        def sweeps_failed() -> bool:
            found = failed.search(_scrape(url))
            return found is not None and float(found.group(1)) > 0

        await until(sweeps_failed, "a failed ingest sweep", 30, every_s=0.2)
        body = _scrape(url)
        gauge = re.search(
            r'^memoryd_last_sweep_success_timestamp_seconds\{agent="main",family="ingest_sweep"\} ([0-9.e+]+)$',
            body,
            re.M,
        )
        assert gauge is not None, "no last-sweep gauge: MemorydIngestSweepStalled could never fire"
        assert float(gauge.group(1)) > 0
        stop_cleanly(daemon)
    finally:
        daemon.kill()
        notify.close()
        cleanup_redis(REDIS_URL, [host], ["main"])
