"""The security surface: private modes for everything memoryd writes, JSON-only job payloads,
passwords kept out of messages, and no memory content or subject ids in logs or metric labels.
(Redis AUTH / ACL users / TLS: tests/test_security_redis.py. Symlinks: tests/test_fuzz_paths.py.)
"""

from __future__ import annotations

import ast
import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoryd.agent_runtime import agent_runtime
from memoryd.dreaming.promote import run_promote
from memoryd.dreaming.rank import PromotionGates
from memoryd.dreaming.sweep import run_dreaming
from memoryd.forget.request import ForgetRequest
from memoryd.forget.run import run_forget
from memoryd.index.sync import run_index_sync
from memoryd.ingest.sweep import run_ingest_sweep
from memoryd.ops import forget as forget_op
from memoryd.redis_conn import redact_url
from memoryd.runtime import metrics
from memoryd.runtime.client import MemorydClient
from memoryd.runtime.service import check_state_dir
from memoryd.runtime.wire import deserialize, queue_name, serialize
from memoryd.runtime.worker import worker_kwargs
from memoryd.settings import load_settings
from tests.builders import Msg, SessionStoreBuilder, conversation
from tests.conftest import make_settings
from tests.daemon_harness import cleanup_redis, start_daemon

FORGET = forget_op.OP.contract.name

REPO = Path(__file__).resolve().parent.parent
OPEN_GATES = PromotionGates(min_score=0, min_recall_count=0, min_unique_queries=0)


def _modes(root: Path) -> dict[str, int]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            out[str(p.relative_to(root))] = stat.S_IMODE(os.lstat(p).st_mode)
    return out


async def test_everything_the_pipeline_writes_is_private_even_under_a_loose_umask(
    tmp_path, sessions_root, redis, unique
):
    """Regression: `mkdir(parents=True, mode=0o700)` left every parent it created at 0755
    (state_dir/agents, the workspace, memory/, memory/.dreams)."""
    builder = SessionStoreBuilder(sessions_root, "main")
    builder.add("agent:main:main", "s1", conversation("orchard", "s1", 6))
    builder.add("agent:main:b", "s2", conversation("violet", "s2", 6))
    s = make_settings(
        tmp_path,
        sessions_root,
        daemon={"host_id": f"t-{unique}"},
        index={"sources": ["memory", "sessions"], "embedding": {"provider": "hashing"}},
    )
    old = os.umask(0o022)
    try:
        check_state_dir(s.state_dir)
        async with agent_runtime(s, "main", redis=redis) as rt:
            await run_ingest_sweep(rt)
            await run_dreaming(rt)
            await run_promote(rt, OPEN_GATES)
            await run_index_sync(rt, force=True)
            await run_forget(rt, ForgetRequest(agent="main", sessions=["s1"]))
            live = _modes(s.state_dir)  # WAL and shm exist while the store is open
    finally:
        os.umask(old)
    after = _modes(s.state_dir)
    assert stat.S_IMODE(os.stat(s.state_dir).st_mode) == 0o700
    for path, mode in {**live, **after}.items():
        is_dir = (s.state_dir / path).is_dir() if (s.state_dir / path).exists() else False
        assert mode == (0o700 if is_dir else 0o600), f"{path}: {oct(mode)}"
    assert any(p.endswith("memory.sqlite-wal") for p in live)
    assert any(p.startswith("agents/main/workspace/memory/.dreams/session-corpus/") for p in after)
    assert "agents/main/workspace/MEMORY.md" in after and "agents/main/forgotten.key" in after


def test_no_module_of_the_daemon_or_its_workers_can_unpickle():
    banned = {"pickle", "cPickle", "dill", "marshal", "shelve", "cloudpickle", "jsonpickle"}
    offenders = []
    for path in sorted((REPO / "daemon").rglob("*.py")) + sorted((REPO / "workers").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            offenders += [f"{path.relative_to(REPO)}: {n}" for n in names if n.split(".")[0] in banned]
    assert offenders == []


def test_the_worker_and_client_speak_json_only(tmp_path):
    kwargs = worker_kwargs(load_settings(None, state_dir=tmp_path), "q", {})
    assert kwargs["job_serializer"] is serialize and kwargs["job_deserializer"] is deserialize
    assert deserialize(serialize({"f": "forget", "a": [{"agent": "main"}]})) == {
        "f": "forget",
        "a": [{"agent": "main"}],
    }


async def test_an_enqueued_job_is_stored_in_redis_as_plain_json(settings, redis, unique):
    async with MemorydClient.connect(settings) as client:
        queue = queue_name(f"sec-{unique}")
        job = await client.enqueue(FORGET, {"agent": "main", "sessions": ["s1"]}, queue=queue)
    try:
        raw = await redis.get(f"arq:job:{job.job_id}")
        assert raw.startswith(b"{") and deserialize(raw)["a"] == [{"agent": "main", "sessions": ["s1"]}]
    finally:
        await redis.delete(f"arq:job:{job.job_id}", queue)


passwords = st.text(
    alphabet=st.characters(blacklist_characters="@/?#&:", blacklist_categories=("Cs", "Cc")),
    min_size=4,
    max_size=20,
).filter(lambda p: p.strip() == p and "*" not in p)


@settings(max_examples=200, deadline=None)
@given(
    password=passwords,
    user=st.sampled_from(["", "memoryd", "default"]),
    form=st.sampled_from(["creds", "query"]),
    scheme=st.sampled_from(["redis", "rediss", "unix"]),
)
def test_a_redis_password_never_survives_redaction(password, user, form, scheme):
    if form == "creds":
        url = f"{scheme}://{user}:{password}@127.0.0.1:6380/0"
    else:
        url = f"{scheme}://127.0.0.1:6380/0?ssl_cert_reqs=required&password={password}&db=1"
    shown = redact_url(url)
    assert password not in shown.replace("127.0.0.1:6380", "").replace(scheme, "").replace(user or "\0", "")
    assert "127.0.0.1:6380" in shown


def test_metric_labels_name_only_agents_families_states_and_reasons():
    # reason values are policy rule names the operator configured (hookExternalContentSource:gmail);
    # loop values are the daemon's own background loops (worker, scheduler, …); host values are
    # the operator's daemon.host_id names (memoryd_purges_waiting)
    allowed = {"agent", "family", "state", "outcome", "reason", "artifact", "decision", "loop", "host"}
    for collector in metrics.REGISTRY._collector_to_names:  # noqa: SLF001 - every registered metric
        labels = set(getattr(collector, "_labelnames", ()))
        assert labels <= allowed, f"{collector}: {labels - allowed}"


@pytest.mark.slow
async def test_the_daemon_log_holds_no_memory_content_and_no_subject_ids(tmp_path, redis_url, unique):
    agent, host = f"a{unique}", f"h{unique}"
    secret_word, secret_actor = f"lilac{unique}words", f"actor-{unique}-private"
    sessions_root = tmp_path / "sessions"
    builder = SessionStoreBuilder(sessions_root, agent)
    builder.add(
        f"agent:{agent}:main",
        f"sess-{unique}-one",
        [
            Msg("user", f"Remember that the {secret_word} code opens the shed."),
            Msg("assistant", f"Noted: the {secret_word} code opens the shed."),
        ],
        participants=[{"actorId": secret_actor}],
    )
    s, notify, daemon = start_daemon(tmp_path, sessions_root, redis_url, host, grace_s=0.5)
    job_ids = []
    try:
        notify.wait_for("READY=1")
        async with MemorydClient.connect(s) as client:
            ingest = await client.enqueue_ingest(agent)
            assert (await client.wait(ingest.job_id, timeout_s=60)).state == "complete"
            ok = await client.enqueue_forget(ForgetRequest(agent=agent, participants=[secret_actor]))
            done = await client.wait(ok.job_id, timeout_s=60)
            # Another tool enqueues a payload the model rejects; its error names the bad value.
            # (Sent after the forget, which deletes queued arguments naming what it forgot.)
            bad = await client.enqueue(
                FORGET, {"agent": agent, "sessions": [f"sess-{unique}-one/../x"]}, queue=queue_name(host)
            )
            job_ids += [ingest.job_id, ok.job_id, bad.job_id]
            failed = await client.wait(bad.job_id, timeout_s=60)
        assert done.state == "complete" and done.result["artifacts"]["shortTermEntries"] > 0
        assert failed.state == "failed" and f"sess-{unique}-one" in failed.error  # the caller gets the detail
    finally:
        assert daemon.stop() == 0
        notify.close()
        cleanup_redis(redis_url, [host], [agent], job_ids)
    log = daemon.log()
    assert "job" in log and "JobPayloadError" in log  # the failure is logged, by class
    # "the shed", not "shed": the daemon's own words ("published", "finished") hold the latter.
    for needle in (secret_word, secret_actor, f"sess-{unique}-one", "the shed"):
        assert needle not in log, f"{needle!r} leaked into the daemon log"


@pytest.mark.parametrize("bad", ["redis://u:hunter2@127.0.0.1:1/0", "redis://127.0.0.1:1/0?password=hunter2"])
async def test_an_unreachable_redis_error_names_the_url_without_its_password(bad):
    from memoryd.errors import OperationFailed
    from memoryd.redis_conn import connect_redis
    from memoryd.settings import load_settings

    with pytest.raises(OperationFailed) as err:
        await connect_redis(load_settings(None, redis_url=bad))
    assert "127.0.0.1:1" in str(err.value) and "hunter2" not in str(err.value)
