"""Crash at each step of an erasure, then rerun the same request: it converges to a complete,
verified erasure, and from the forget pipeline's mark on the erased session stays excluded
from admission throughout."""

from __future__ import annotations

import pytest

from daemon.agent_runtime import agent_runtime
from daemon.failpoints import ENV_VAR, FailpointTriggered
from daemon.ingest.sweep import run_ingest_sweep
from daemon.ops import erasure
from daemon.retention import api
from daemon.retention.api import EraseRequest
from daemon.store.tombstones import forgotten_ids
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
