"""`memoryd ingest` and `memoryd index` on a terminal draw a progress bar with their rate
(messages/s, chunks/s) on stderr; on a pipe they draw nothing. Real processes on a pty."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.builders import SessionStoreBuilder, conversation
from tests.conftest import REDIS_URL

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def config(tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder) -> Path:
    for i in range(6):
        store_builder.add(f"agent:main:s{i}", f"s{i}", conversation(f"topic{i}", f"s{i}", 400))
    path = tmp_path / "memoryd.toml"
    path.write_text(
        f'state_dir = "{tmp_path / "state"}"\nsessions_root = "{sessions_root}"\nredis_url = "{REDIS_URL}"\n\n'
        "[ingest]\nmax_messages_per_sweep = 100000\nmax_messages_per_file = 100000\n\n"
        '[index]\nsources = ["memory", "sessions"]\n'
    )
    return path


def run_on_terminal(config: Path, *args: str) -> tuple[int, str, str]:
    """The command with stderr on a pty (a terminal, as a user's shell gives it), stdout piped."""
    leader, follower = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "160", "TERM": "xterm"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "memoryd.cli", "--config", str(config), *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=follower,
    )
    os.close(follower)
    drawn = bytearray()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the child closed its end
            break
        if not data:
            break
        drawn += data
    os.close(leader)
    out = proc.stdout.read().decode() if proc.stdout else ""
    return proc.wait(30), out, drawn.decode(errors="replace")


def test_ingest_and_index_on_a_terminal_show_their_rates(config: Path) -> None:
    code, out, drawn = run_on_terminal(config, "ingest", "--agent", "main")
    assert code == 0 and "messages staged: 2400" in out
    assert "messages/s" in drawn and "sessions" in drawn
    code, out, drawn = run_on_terminal(config, "index", "--agent", "main")
    assert code == 0
    assert "chunks/s" in drawn


def test_on_a_pipe_nothing_is_drawn(config: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "memoryd.cli", "--config", str(config), "ingest", "--agent", "main"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stderr == ""
