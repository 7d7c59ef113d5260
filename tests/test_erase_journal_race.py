"""Two runs of one erasure, the first stopped (SIGSTOP) past its lease (issue: IntegrityError on
erasure_journal.target_ref): the first run stops with its key file written and its journal row
not yet, the second takes the lease and stops before its own journal write, the first resumes
and writes its row, then dies. The second must adopt that surviving entry, not insert a second
one for the same target, and finish complete and verified, leaving no entry and no key file."""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path

import pytest

from memoryd.agent_runtime import agent_runtime
from memoryd.constants import ERASURE_JOURNAL_DIR
from memoryd.failpoints import ENV_VAR, STOP_ENV_VAR, TRACE_ENV_VAR, FailpointTriggered
from memoryd.ingest.sweep import run_ingest_sweep
from memoryd.ops import erasure
from memoryd.retention import api
from memoryd.retention.api import EraseRequest
from memoryd.retention.state import retention_db_path
from memoryd.settings import load_settings
from tests.builders import SessionStoreBuilder, conversation
from tests.daemon_harness import FailpointTrace, cleanup_redis, run_cli, start_cli, write_config
from tests.erase_world import build_world

USER = "tenant:default:user:nora"


@pytest.fixture
def world(tmp_path: Path, redis_url: str, unique: str):
    agent = f"a{unique}"
    sessions_root = tmp_path / "sessions"
    builder = SessionStoreBuilder(sessions_root, agent)
    builder.add(
        f"agent:{agent}:main",
        "s-nora",
        conversation("lighthouse", "nora"),
        participants=[{"actorId": "nora"}],
    )
    builder.add(
        f"agent:{agent}:dm", "s-zed", conversation("orchard", "zed"), participants=[{"actorId": "zed"}]
    )
    config = write_config(
        tmp_path / "memoryd.toml",
        state_dir=tmp_path / "state",
        sessions_root=sessions_root,
        redis_url=redis_url,
        host_id=f"h{unique}",
        lock_wait_s=30,
    )
    config.write_text(config.read_text().replace("[lock]\n", "[lock]\nttl_ms = 1500\n"))
    yield agent, config, load_settings(config)
    cleanup_redis(redis_url, [], [agent])


def _journal_rows(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT count(*) FROM erasure_journal").fetchone()[0])


@pytest.mark.slow
async def test_a_rerun_adopts_the_entry_a_run_stopped_past_its_lease_wrote_meanwhile(world, tmp_path):
    agent, config, settings = world
    ingest = run_cli(config, "ingest", "--agent", agent)
    assert ingest.returncode == 0, ingest.stderr
    trace = FailpointTrace(tmp_path / "trace")
    # The first run stops between its key file and its journal row, and dies right after the row.
    first = start_cli(
        config,
        "erase",
        "--scope",
        USER,
        "--json",
        env={TRACE_ENV_VAR: str(trace.path), STOP_ENV_VAR: "erase.journal", ENV_VAR: "erase.retention"},
    )
    second = None
    try:
        await trace.wait_for("erase.journal", {first.pid}, timeout_s=60)
        # Its lease (1.5 s) expires while it is stopped; the second run takes it and stops at the
        # same step, after loading the journal (nothing readable yet) and before its own write.
        second = start_cli(
            config,
            "erase",
            "--scope",
            USER,
            "--json",
            env={TRACE_ENV_VAR: str(trace.path), STOP_ENV_VAR: "erase.journal"},
        )
        await trace.wait_for("erase.journal", {second.pid}, timeout_s=60)
        first.send_signal(signal.SIGCONT)
        first.communicate(timeout=60)
        assert first.returncode != 0
        second.send_signal(signal.SIGCONT)
        out, err = second.communicate(timeout=60)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
    assert "IntegrityError" not in err, err
    assert second.returncode == 0, err
    receipt = json.loads(out)
    assert receipt["state"] == "complete" and receipt["verified"], receipt

    # Nothing of the journal outlives the receipt: no row, no key file.
    assert _journal_rows(retention_db_path(settings)) == 0
    keys = settings.state_dir / ERASURE_JOURNAL_DIR
    assert not keys.exists() or list(keys.glob("*.key")) == []
    # A rerun converges: verified, erasing nothing more.
    again = json.loads(run_cli(config, "erase", "--scope", USER, "--json").stdout)
    assert again["state"] == "complete" and again["verified"] and not again["resumed"], again
    assert again["artifacts"]["sessions"] == 0, again


async def test_a_rerun_adopts_an_entry_whose_key_file_is_gone_and_its_receipt_says_the_needles_were_lost(
    tmp_path, sessions_root, unique, redis, monkeypatch
):
    """An entry can outlive its key file (lost with a disk; before the sweep ran under the fence,
    a run stopped past its lease could unlink a newer run's key): the rerun adopts it, finishes,
    and drops it. Its receipt does not claim full verification: the needles journaled before the
    crash are gone, so a `journal` check says `skipped`, and so does every later run of the same
    entry (another crash after the rerun journaled again under a new key)."""
    settings = build_world(tmp_path, sessions_root, unique)
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)
    await api.write_object(settings, redis, USER, "nora keeps her spare key under the blue planter")
    monkeypatch.setenv(ENV_VAR, "erase.retention")
    with pytest.raises(FailpointTriggered):
        await erasure.run_erase(settings, redis, EraseRequest(scope=USER))
    monkeypatch.delenv(ENV_VAR)
    for key in (settings.state_dir / ERASURE_JOURNAL_DIR).glob("*.key"):
        key.unlink()
    assert _journal_rows(retention_db_path(settings)) == 1
    monkeypatch.setenv(ENV_VAR, "erase.retention")  # the rerun crashes too, after journaling again
    with pytest.raises(FailpointTriggered):
        await erasure.run_erase(settings, redis, EraseRequest(scope=USER))
    monkeypatch.delenv(ENV_VAR)
    assert len(list((settings.state_dir / ERASURE_JOURNAL_DIR).glob("*.key"))) == 1

    receipt = await erasure.run_erase(settings, redis, EraseRequest(scope=USER))
    assert receipt.state == "complete" and receipt.resumed, receipt
    assert not receipt.verified and receipt.verification is not None
    checks = {c.name: c for c in receipt.verification.checks}
    assert checks["journal"].status == "skipped" and "lost its key" in checks["journal"].note
    assert all(c.passed for name, c in checks.items() if name != "journal"), receipt.verification
    stored = (await api.list_receipts(settings)).receipts
    assert [r.verified for r in stored] == [False]  # the stored receipt says so too
    assert _journal_rows(retention_db_path(settings)) == 0
    assert list((settings.state_dir / ERASURE_JOURNAL_DIR).glob("*.key")) == []
