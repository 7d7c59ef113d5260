"""Crash at each step of an erasure, then rerun the same request: it converges to a complete,
verified erasure, and from the forget pipeline's mark on the erased session stays excluded
from admission throughout."""

from __future__ import annotations

import dataclasses

import pytest

from memoryd.agent_runtime import agent_runtime
from memoryd.failpoints import ENV_VAR, FailpointTriggered
from memoryd.ingest.sweep import run_ingest_sweep
from memoryd.ops import erasure
from memoryd.retention import api
from memoryd.retention.api import EraseRequest
from memoryd.store.tombstones import forgotten_ids
from tests.erase_world import build_world

USER = "tenant:default:user:nora"


def _plain_records(conn):
    return [
        r[0]
        for r in conn.execute(
            "SELECT session_id FROM memory_session_tombstones WHERE session_id NOT LIKE 'hmac:%'"
        )
    ]


# (failpoint, whether the session is already a forgotten one when the crash happens)
STEPS = [
    ("erase.retention", False),
    ("erase.forget", False),
    ("forget.corpus", True),  # inside the forget pipeline, after its forgotten records
    ("erase.hash_records", True),
    ("erase.receipt", True),
]


@pytest.mark.parametrize(("step", "excluded"), STEPS)
async def test_a_crash_at_each_step_converges_on_rerun(
    tmp_path, sessions_root, unique, redis, monkeypatch, step, excluded
) -> None:
    settings = build_world(tmp_path, sessions_root, unique)
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)
    await api.write_object(settings, redis, USER, "nora keeps her spare key under the blue planter")
    await api.write_object(
        settings, redis, "tenant:default:user:omar", "omar knows where the key is", provenance_parent=USER
    )

    monkeypatch.setenv(ENV_VAR, step)
    with pytest.raises(FailpointTriggered):
        await erasure.run_erase(settings, redis, EraseRequest(scope=USER))
    async with agent_runtime(settings, "main", redis=redis) as rt:
        gone = await rt.require_store().read(forgotten_ids, ["sess-nora-1"], rt.secret())
    assert (gone == {"sess-nora-1"}) is excluded

    monkeypatch.delenv(ENV_VAR)
    receipt = await erasure.run_erase(settings, redis, EraseRequest(scope=USER))
    assert receipt.state == "complete" and receipt.verified, receipt.verification
    async with agent_runtime(settings, "main", redis=redis) as rt:
        store = rt.require_store()
        assert await store.read(_plain_records) == []
        assert await store.read(forgotten_ids, ["sess-nora-1"], rt.secret()) == {"sess-nora-1"}
    omar = (await api.read_scope(settings, "tenant:default:user:omar")).objects[0]
    assert omar.provenance is not None and omar.provenance.parent_state == "erased"
    assert [r.state for r in (await api.list_receipts(settings)).receipts] == ["complete"]


# --- the needles survive the crash (issue 16 item 4) ---------------------------------------------

SECRET = "nora keeps her spare key under the blue planter"


async def _world_with_a_quoting_child(tmp_path, sessions_root, unique, redis, **overrides):
    """Nora's object, and omar's object that cites it and quotes it word for word: residue no
    lineage removes (the rewrite keeps a provenance child's content), which a verifier must see."""
    settings = build_world(tmp_path, sessions_root, unique)
    if overrides:
        settings = dataclasses.replace(settings, **overrides)
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)
    await api.write_object(settings, redis, USER, SECRET)
    await api.write_object(
        settings, redis, "tenant:default:user:omar", f"omar repeats: {SECRET}", provenance_parent=USER
    )
    return settings


def _journal_state(settings) -> tuple[int, int]:
    import sqlite3

    conn = sqlite3.connect(str(settings.state_dir / "retention.sqlite"))
    try:
        rows = conn.execute("SELECT count(*) FROM erasure_journal").fetchone()[0]
    finally:
        conn.close()
    keys = len(list((settings.state_dir / "erasure-journal").glob("*.key")))
    return rows, keys


@pytest.mark.parametrize("step", [s for s, _ in STEPS])
async def test_a_rerun_after_a_crash_verifies_against_the_journaled_needles(
    tmp_path, sessions_root, unique, redis, monkeypatch, step
) -> None:
    settings = await _world_with_a_quoting_child(tmp_path, sessions_root, unique, redis)
    monkeypatch.setenv(ENV_VAR, step)
    with pytest.raises(FailpointTriggered):
        await erasure.run_erase(settings, redis, EraseRequest(scope=USER))
    assert _journal_state(settings) == (1, 1)  # sealed needles and their key, pending

    monkeypatch.delenv(ENV_VAR)
    receipt = await erasure.run_erase(settings, redis, EraseRequest(scope=USER))

    assert receipt.state == "complete" and receipt.resumed
    assert not receipt.verified  # the erased text is gone from its source, yet still quoted
    derivability = next(c for c in receipt.verification.checks if c.name == "derivability")  # type: ignore[union-attr]
    assert "retention:retention_objects.content" in derivability.locations
    assert _journal_state(settings) == (0, 0)  # destroyed with the receipt


async def test_a_real_sigkill_mid_erasure_leaves_needles_the_rerun_verifies_with(
    tmp_path, sessions_root, unique, redis
) -> None:
    from memoryd.settings import LockSettings
    from tests.daemon_harness import FailpointTrace, start_cli

    # A short lease: the killed holder's retention lease lapses within seconds.
    lock = LockSettings(ttl_ms=1500, wait_s=30)
    settings = await _world_with_a_quoting_child(tmp_path, sessions_root, unique, redis, lock=lock)
    cfg = tmp_path / "memoryd.toml"
    cfg.write_text(
        f'state_dir = "{settings.state_dir}"\nsessions_root = "{settings.sessions_root}"\n'
        f'redis_url = "{settings.redis_url}"\n\n[daemon]\nhost_id = "{settings.daemon.host_id}"\n\n'
        "[lock]\nttl_ms = 1500\nwait_s = 30\n\n"
        '[index]\nsources = ["memory", "sessions"]\n\n[index.embedding]\nprovider = "hashing"\n'
    )
    trace = FailpointTrace(tmp_path / "trace")
    # Holding the agent's lock stops the erasure after its retention step, before its forget.
    async with agent_runtime(settings, "main", redis=redis) as rt, rt.lock().hold():
        import os
        import signal

        os.environ.update(trace.env)
        try:
            proc = start_cli(cfg, "erase", "--scope", USER, "--json")
        finally:
            os.environ.pop(next(iter(trace.env)))
        try:
            await trace.wait_for("lock.wait", {proc.pid}, timeout_s=60)
            assert (await api.read_scope(settings, USER)).state == "missing"  # its content is gone
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(30)
        finally:
            proc.kill()
    assert _journal_state(settings) == (1, 1)

    receipt = await erasure.run_erase(settings, redis, EraseRequest(scope=USER))

    assert receipt.state == "complete" and receipt.resumed and not receipt.verified
    assert receipt.artifacts.sessions == 1  # this run did the forget the killed one never reached
    assert _journal_state(settings) == (0, 0)
