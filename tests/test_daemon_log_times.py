"""The daemon's log lines carry their time when nothing else adds it: outside journald
(JOURNAL_STREAM unset) each line starts with an ISO 8601 time; under journald, which stamps
every line itself, they do not."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REDIS_URL
from tests.daemon_harness import cleanup_redis, start_daemon, stop_cleanly

STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d INFO ")


@pytest.mark.parametrize(("journal", "stamped"), [(None, True), ("8:12345", False)])
def test_log_lines_carry_a_time_outside_journald(
    tmp_path: Path, sessions_root: Path, unique: str, journal: str | None, stamped: bool
) -> None:
    host = f"test-{unique}"
    env = {"JOURNAL_STREAM": journal} if journal else {"JOURNAL_STREAM": ""}
    _settings, notify, daemon = start_daemon(tmp_path, sessions_root, REDIS_URL, host, env=env)
    try:
        notify.wait_for("READY=1")
        stop_cleanly(daemon)
        lines = [line for line in daemon.log().splitlines() if line]
        assert lines and all(bool(STAMP.match(line)) == stamped for line in lines), lines
    finally:
        daemon.kill()
        notify.close()
        cleanup_redis(REDIS_URL, [host], [])
