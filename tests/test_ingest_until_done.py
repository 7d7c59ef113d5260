"""A large backlog: `memoryd ingest --until-done` sweeps until nothing is left (one sweep stages
at most ingest.max_messages_per_sweep messages), with a progress bar on a terminal; and the
daemon's backlog gauge says what `memoryd status` says as lag, whoever ran the last sweep."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from memoryd.cli import main
from tests.builders import SessionStoreBuilder, conversation
from tests.conftest import REDIS_URL
from tests.daemon_harness import REPO, cleanup_redis, host_record, start_daemon, stop_cleanly
from tests.polling import until

SESSIONS = 5  # four messages each, two a sweep: a backlog of several sweeps


@pytest.fixture
def config(tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder) -> Path:
    for i in range(SESSIONS):
        store_builder.add(
            f"agent:main:s{i}", f"s-{i}", conversation(f"topic{i}", f"s-{i}"), chatType="direct"
        )
    path = tmp_path / "memoryd.toml"
    path.write_text(
        f'state_dir = "{tmp_path / "state"}"\nsessions_root = "{sessions_root}"\n'
        f'redis_url = "{REDIS_URL}"\n[ingest]\nmax_messages_per_sweep = 8\n'
    )
    return path


def _json(capsys: pytest.CaptureFixture[str], config: Path, *args: str) -> dict:
    capsys.readouterr()
    assert main(["--config", str(config), *args, "--json"]) == 0, args
    return json.loads(capsys.readouterr().out)


def test_one_sweep_leaves_a_backlog_and_until_done_empties_it(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _json(capsys, config, "ingest", "--agent", "main")
    assert first["sessionsDeferred"] > 0
    report = _json(capsys, config, "ingest", "--agent", "main", "--until-done")
    assert report["sessionsDeferred"] == 0 and report["sessionsCapped"] == 0
    assert first["messagesStaged"] + report["messagesStaged"] == 4 * SESSIONS
    assert _json(capsys, config, "status", "--agent", "main")["agents"][0]["lag"] == 0


def test_until_done_draws_a_progress_bar_on_a_terminal(config: Path) -> None:
    primary, secondary = os.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "memoryd.cli", "--config", str(config), "ingest", "--agent", "main"]
            + ["--until-done"],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "120", "TERM": "xterm"},
            stdout=subprocess.PIPE,
            stderr=secondary,
            timeout=120,
        )
        os.close(secondary)
        secondary = -1
        drawn = b""
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        if secondary >= 0:
            os.close(secondary)
        os.close(primary)
    assert proc.returncode == 0
    assert re.search(rb"backlog.*\d+/\d+", drawn), drawn[-2000:]
    assert b"0 deferred" in proc.stdout


async def test_the_backlog_gauge_is_the_lag_status_shows(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, unique: str
) -> None:
    for i in range(SESSIONS):
        store_builder.add(
            f"agent:main:s{i}", f"s-{i}", conversation(f"topic{i}", f"s-{i}"), chatType="direct"
        )
    host = f"test-{unique}"
    # No schedule: no sweep runs in the daemon, as when a foreground `memoryd ingest` ran elsewhere.
    _settings, notify, daemon = start_daemon(tmp_path, sessions_root, REDIS_URL, host)
    try:
        notify.wait_for("READY=1")
        url = f"http://127.0.0.1:{host_record(REDIS_URL, host)['metrics_port']}/metrics"
        gauge = re.compile(r'^memoryd_ingest_backlog_sessions\{agent="main"\} ([0-9.]+)$', re.M)

        def backlog() -> float | None:
            found = gauge.search(httpx.get(url, timeout=5).text)
            return None if found is None else float(found.group(1))

        await until(lambda: backlog() == float(SESSIONS), "the backlog gauge at the lag", 20, every_s=0.2)
        stop_cleanly(daemon)
    finally:
        daemon.kill()
        notify.close()
        cleanup_redis(REDIS_URL, [host], ["main"])
