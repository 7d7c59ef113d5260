"""Fenced file writes (issue 18, items 2 and 11): an ingest stopped (SIGSTOP) past its lease
while a forget of one of its sessions runs must not append that session's lines to the corpus
when it resumes; a failed batch commit leaves no corpus lines behind it."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from memoryd.constants import CORPUS_RELATIVE_DIR
from memoryd.failpoints import STOP_ENV_VAR, TRACE_ENV_VAR
from memoryd.settings import load_settings
from tests.builders import Msg, SessionStoreBuilder, conversation
from tests.daemon_harness import REPO, FailpointTrace, cleanup_redis, run_cli, start_cli, write_config


def _corpus_text(workspace: Path) -> str:
    corpus = workspace / CORPUS_RELATIVE_DIR
    return "".join(p.read_text() for p in sorted(corpus.glob("*.txt"))) if corpus.exists() else ""


@pytest.fixture
def world(tmp_path: Path, redis_url: str, unique: str):
    agent = f"a{unique}"
    sessions_root = tmp_path / "sessions"
    builder = SessionStoreBuilder(sessions_root, agent)
    builder.add(
        f"agent:{agent}:main", "s-kept", conversation("orchard", "kept"), participants=[{"actorId": "nora"}]
    )
    builder.add(
        f"agent:{agent}:dm", "s-gone", conversation("lighthouse", "gone"), participants=[{"actorId": "zed"}]
    )
    config = write_config(
        tmp_path / "memoryd.toml",
        state_dir=tmp_path / "state",
        sessions_root=sessions_root,
        redis_url=redis_url,
        host_id=f"h{unique}",
        extra="",
        lock_wait_s=30,
    )
    config.write_text(config.read_text().replace("[lock]\n", "[lock]\nttl_ms = 1500\n"))
    yield agent, config, load_settings(config)
    cleanup_redis(redis_url, [], [agent])


@pytest.mark.slow
@pytest.mark.parametrize("stop_at", ["ingest.corpus.reserved", "ingest.corpus.write"])
async def test_an_ingest_stopped_past_its_lease_writes_nothing_of_a_session_forgotten_meanwhile(
    world, tmp_path, stop_at
):
    agent, config, settings = world
    trace = FailpointTrace(tmp_path / "trace")
    env = {TRACE_ENV_VAR: str(trace.path), STOP_ENV_VAR: stop_at}
    ingest = start_cli(config, "ingest", "--agent", agent, env=env)
    try:
        await trace.wait_for(stop_at, {ingest.pid}, timeout_s=60)  # it stops itself there
        # Its lease (1.5 s) expires while it is stopped; the forget takes the lock and purges.
        forget = run_cli(config, "forget", "--agent", agent, "--participant", "zed")
        assert forget.returncode == 0, forget.stderr
        assert "lighthouse" not in _corpus_text(settings.workspace_for(agent))
        ingest.send_signal(signal.SIGCONT)
        out, err = ingest.communicate(timeout=60)
    finally:
        if ingest.poll() is None:
            ingest.kill()
    assert ingest.returncode != 0, out  # its lease was lost: it says so, in one line
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "lock" in err
    corpus = _corpus_text(settings.workspace_for(agent))
    assert "lighthouse" not in corpus  # nothing of the forgotten session came back

    # The next sweep stages the kept session once, the forgotten one not at all.
    again = run_cli(config, "ingest", "--agent", agent)
    assert again.returncode == 0, again.stderr
    corpus = _corpus_text(settings.workspace_for(agent))
    assert "lighthouse" not in corpus
    kept_lines = [line for line in corpus.splitlines() if "orchard" in line]
    assert kept_lines and len(kept_lines) == len(set(kept_lines))


def _limit_file_size(limit: int):  # type: ignore[no-untyped-def]
    def apply() -> None:
        # A full disk for this process: writes past `limit` bytes fail (EFBIG), no SIGXFSZ.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


@pytest.mark.slow
def test_a_sweep_on_a_full_disk_fails_in_one_line_and_its_retry_leaves_no_duplicates(world, tmp_path):
    agent, config, settings = world
    first = run_cli(config, "ingest", "--agent", agent)
    assert first.returncode == 0, first.stderr
    builder = SessionStoreBuilder(settings.sessions_root, agent)
    builder.entries = json.loads((builder.dir / "sessions.json").read_text())
    long = [Msg("user", f"Remember the harbour ledger entry {i}: " + "tide " * 60) for i in range(400)]
    builder.append("s-kept", long, start_index=4)
    full = subprocess.run(
        [sys.executable, "-m", "memoryd.cli", "--config", str(config), "ingest", "--agent", agent],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limit_file_size(96 * 1024),
    )
    assert full.returncode == 1, full.stdout
    assert "Traceback" not in full.stderr and len(full.stderr.strip().splitlines()) == 1, full.stderr
    ledger: list[str] = []
    for _ in range(10):  # a sweep stages a capped number of lines per transcript
        retry = run_cli(config, "ingest", "--agent", agent)
        assert retry.returncode == 0, retry.stderr
        lines = _corpus_text(settings.workspace_for(agent)).splitlines()
        ledger = [line for line in lines if "harbour ledger" in line]
        if len(ledger) >= 400:
            break
    assert len(ledger) == 400 and len(set(ledger)) == 400


@pytest.mark.slow
async def test_an_ingest_killed_between_its_append_and_its_commit_leaves_no_duplicates(world, tmp_path):
    """SIGKILL after the corpus append, before the batch commit: the next sweep cuts the
    uncommitted lines off before it appends them again (one recoverable unit)."""
    agent, config, settings = world
    trace = FailpointTrace(tmp_path / "trace")
    env = {TRACE_ENV_VAR: str(trace.path), STOP_ENV_VAR: "ingest.corpus.appended"}
    ingest = start_cli(config, "ingest", "--agent", agent, env=env)
    try:
        await trace.wait_for("ingest.corpus.appended", {ingest.pid}, timeout_s=60)
        assert "orchard" in _corpus_text(settings.workspace_for(agent))  # appended, not committed
        ingest.kill()
        ingest.communicate(timeout=30)
    finally:
        if ingest.poll() is None:
            ingest.kill()
    again = run_cli(config, "ingest", "--agent", agent)
    assert again.returncode == 0, again.stderr
    lines = _corpus_text(settings.workspace_for(agent)).splitlines()
    assert lines and len(lines) == len(set(lines)), lines
    assert any("orchard" in line for line in lines) and any("lighthouse" in line for line in lines)


DAILY_NOTE = """# 2026-11-30

- Session ID: s-gone; lighthouse planning
  - the lighthouse rota
- Session ID: s-kept; orchard planning
  - the orchard budget
"""


@pytest.mark.slow
async def test_a_forget_stopped_past_its_lease_before_a_daily_note_write_writes_nothing(world, tmp_path):
    """The daily-note write the fault campaign cannot reach (its workspace has no daily note):
    a forget stopped right before rewriting one, past its lease, while another forget took the
    lock and the agent added to the note, must not write its stale copy over them."""
    agent, config, settings = world
    note = settings.workspace_for(agent) / "memory" / "2026-11-30.md"
    note.parent.mkdir(parents=True, exist_ok=True)
    note.write_text(DAILY_NOTE)
    trace = FailpointTrace(tmp_path / "trace")
    env = {TRACE_ENV_VAR: str(trace.path), STOP_ENV_VAR: "file.commit.daily_note"}
    stale = start_cli(config, "forget", "--agent", agent, "--session", "s-gone", env=env)
    try:
        await trace.wait_for("file.commit.daily_note", {stale.pid}, timeout_s=60)
        # Its lease (1.5 s) expires while it is stopped; another forget takes the lock.
        other = run_cli(config, "forget", "--agent", agent, "--session", "s-kept")
        assert other.returncode == 0, other.stderr
        with note.open("a") as fh:  # and the agent goes on writing its daily note
            fh.write("- Session ID: s-later; quartermaster notes\n  - the quartermaster list\n")
        stale.send_signal(signal.SIGCONT)
        out, err = stale.communicate(timeout=60)
    finally:
        if stale.poll() is None:
            stale.kill()
    assert stale.returncode != 0, out  # it lost its lease: refused, in one line
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "lock" in err
    assert "quartermaster" in note.read_text()  # its stale copy was not written

    again = run_cli(config, "forget", "--agent", agent, "--session", "s-gone")
    assert again.returncode == 0, again.stderr
    text = note.read_text()
    assert "lighthouse" not in text and "orchard" not in text and "quartermaster" in text
