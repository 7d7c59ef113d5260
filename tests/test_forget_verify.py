"""`memoryd forget --verify`: after a real purge the retention verifier runs over the forgotten
sessions' content and its result follows `refusals` in the report; it can fail, and a dry run
with --verify is a usage error."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import anyio
import pytest
import redis as sync_redis

from memoryd.cli import main
from memoryd.constants import AGENT_OWNER_KEY, HEARTBEATS_KEY
from memoryd.runtime.client import JobReport, MemorydClient
from memoryd.runtime.hosts import route_value
from memoryd.runtime.wire import queue_name
from memoryd.settings import load_settings
from tests.builders import Msg, SessionStoreBuilder
from tests.conftest import REDIS_URL
from tests.daemon_harness import cleanup_redis
from tests.worker_harness import run_jobs

NORA_TEXT = "Remember that the violet mongoose launch is on Friday at noon."
OMAR_TEXT = "Remember that the orchard rota changes every Monday morning."


@pytest.fixture
def config(tmp_path: Path, sessions_root: Path, unique: str) -> Path:
    b = SessionStoreBuilder(sessions_root, "main")
    b.add(
        "agent:main:dm:nora",
        "sess-nora-1",
        [Msg("user", NORA_TEXT)],
        participants=[{"actorId": "nora"}],
        chatType="direct",
    )
    b.add(
        "agent:main:dm:omar",
        "sess-omar-1",
        [Msg("user", OMAR_TEXT)],
        participants=[{"actorId": "omar"}],
        chatType="direct",
    )
    path = tmp_path / "memoryd.toml"
    path.write_text(
        f'state_dir = "{tmp_path / "state"}"\nsessions_root = "{sessions_root}"\n'
        f'redis_url = "{REDIS_URL}"\n\n[daemon]\nhost_id = "test-{unique}"\n\n'
        '[index]\nsources = ["memory", "sessions"]\n\n'
        "[dreaming]\nmin_score = 0\nmin_recall_count = 0\nmin_unique_queries = 0\n"
    )
    return path


def run(capsys: pytest.CaptureFixture[str], config: Path, *args: str, code: int = 0) -> dict:
    assert main(["--config", str(config), *args, "--json"]) == code
    return json.loads(capsys.readouterr().out)


def derive_everything(capsys: pytest.CaptureFixture[str], config: Path) -> Path:
    run(capsys, config, "ingest", "--agent", "main")
    promoted = run(capsys, config, "dream", "--agent", "main")["deep"]["promoted"]
    assert any("violet mongoose" in p["text"] for p in promoted)
    run(capsys, config, "index", "--agent", "main")
    memory = load_settings(config).workspace_for("main") / "MEMORY.md"
    assert "violet mongoose" in memory.read_text()
    return memory


def test_forget_verify_reports_verified_after_purging_an_ingested_promoted_indexed_session(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    memory = derive_everything(capsys, config)

    out = run(capsys, config, "forget", "--agent", "main", "--session", "sess-nora-1", "--verify")

    assert list(out)[-3:] == ["refusals", "counts", "verification"]
    a = out["artifacts"]
    assert a["memoryEntries"] >= 1 and a["indexChunks"] >= 1 and a["shortTermEntries"] >= 1
    assert a["sessionCorpusLines"] >= 1
    v = out["verification"]
    assert v["verified"] is True, v
    assert {c["name"] for c in v["checks"]} >= {"derivability", "physical"}
    assert all(c["status"] == "passed" for c in v["checks"])
    assert "violet mongoose" not in memory.read_text() and "orchard rota" in memory.read_text()


def test_a_fresh_verify_fails_when_the_forgotten_text_is_planted_back_into_memory(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    memory = derive_everything(capsys, config)
    first = run(capsys, config, "forget", "--agent", "main", "--session", "sess-nora-1", "--verify")
    assert first["verification"]["verified"] is True

    memory.write_text(memory.read_text() + f"\n- {NORA_TEXT}\n")
    again = run(capsys, config, "forget", "--agent", "main", "--session", "sess-nora-1", "--verify", code=1)

    v = again["verification"]
    assert v["verified"] is False
    derivability = next(c for c in v["checks"] if c["name"] == "derivability")
    assert derivability["status"] == "failed" and derivability["count"] >= 1
    assert any("MEMORY.md" in loc for loc in derivability["locations"])


def test_forget_without_verify_keeps_the_reference_fields_only(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, config, "ingest", "--agent", "main")
    out = run(capsys, config, "forget", "--agent", "main", "--session", "sess-nora-1")
    assert list(out)[-2:] == ["refusals", "counts"] and "verification" not in out


def test_verify_with_dry_run_is_a_usage_error_and_changes_nothing(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, config, "ingest", "--agent", "main")
    code = main(
        [
            "--config",
            str(config),
            "forget",
            "--agent",
            "main",
            "--session",
            "sess-nora-1",
            "--dry-run",
            "--verify",
            "--json",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "--verify" in err and "--dry-run" in err
    preview = run(capsys, config, "forget", "--agent", "main", "--session", "sess-nora-1", "--dry-run")
    assert preview["artifacts"]["shortTermEntries"] == 1  # still there: nothing was purged


SHARED = "Remember that the standup moves to ten on Mondays from now on."


def test_forget_verify_passes_a_clean_purge_whose_text_other_sessions_and_agents_still_hold(
    config: Path, sessions_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b = SessionStoreBuilder(sessions_root, "main")
    b.entries = json.loads((b.dir / "sessions.json").read_text())
    b.add(
        "agent:main:dm:nora",
        "sess-nora-1",
        [Msg("user", NORA_TEXT), Msg("user", SHARED)],
        participants=[{"actorId": "nora"}],
    )
    b.add(
        "agent:main:dm:omar",
        "sess-omar-1",
        [Msg("user", OMAR_TEXT), Msg("user", SHARED)],
        participants=[{"actorId": "omar"}],
    )
    # Another agent that heard nora say the same: its memory is not this forget's business.
    SessionStoreBuilder(sessions_root, "peer").add(
        "agent:peer:dm:nora", "sess-peer-1", [Msg("user", NORA_TEXT)], participants=[{"actorId": "nora"}]
    )
    for agent in ("main", "peer"):
        run(capsys, config, "ingest", "--agent", agent)

    out = run(capsys, config, "forget", "--agent", "main", "--session", "sess-nora-1", "--verify")

    assert out["verification"]["verified"] is True, out["verification"]
    corpus = load_settings(config).workspace_for("main") / "memory" / ".dreams" / "session-corpus"
    text = "".join(p.read_text() for p in corpus.glob("*.txt"))
    assert SHARED in text and NORA_TEXT not in text  # omar's line stays; nora's is gone


def test_verify_with_a_dry_run_or_single_facts_is_refused_by_the_request_itself():
    """One validation path: the CLI, `enqueue` and a raw job from another tool get the same line."""
    from memoryd.errors import JobPayloadError
    from memoryd.ops import forget as forget_op

    with pytest.raises(JobPayloadError, match=r"^forget: verify: --verify cannot be combined with --dry-run"):
        forget_op.OP.contract.parse(
            {"agent": "main", "sessions": ["sess-nora-1"], "dry_run": True, "verify": True}
        )
    with pytest.raises(JobPayloadError, match=r"^forget: verify: --verify checks forgotten sessions"):
        forget_op.OP.contract.parse({"agent": "main", "entries": ["memory:claim:ab"], "verify": True})
    assert forget_op.OP.contract.parse({"agent": "main", "sessions": ["s"], "verify": True}).verify is True


def test_enqueue_forget_verify_with_dry_run_exits_2_and_enqueues_nothing(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["enqueue", "forget", "--agent", "main", "--session", "sess-nora-1", "--verify", "--dry-run"]
    assert main(["--config", str(config), *args]) == 2
    assert "--verify cannot be combined with --dry-run" in capsys.readouterr().err


async def _forget_job(settings, job_ids: list[str], payload: dict) -> JobReport:
    queue = queue_name(settings.daemon.host_id)
    async with MemorydClient.connect(settings) as client:
        job = await client.enqueue("forget", payload, queue=queue)
        job_ids.append(job.job_id)
        await run_jobs(settings, queue)
        return await client.job(job.job_id, queue=queue)


def _stored_results(job_ids: list[str]) -> list[bytes]:
    r = sync_redis.Redis.from_url(REDIS_URL)
    try:
        return [r.get(f"arq:result:{job_id}") or b"" for job_id in job_ids]
    finally:
        r.close()


def test_a_forget_job_with_verify_carries_the_verification_and_its_stored_result_names_nothing(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A `forget` job with `verify` runs the verifier after its purge, as the foreground command
    does; its result in Redis carries the verification, but no memory text, session id or
    workspace path (a file may be named after the subject)."""
    memory = derive_everything(capsys, config)
    settings = load_settings(config)
    job_ids: list[str] = []
    payload = {"agent": "main", "sessions": ["sess-nora-1"], "verify": True}
    try:
        first = anyio.run(_forget_job, settings, job_ids, payload)
        assert first.state == "complete", first.error
        assert first.result is not None and first.result["verification"]["verified"] is True
        assert first.result["counts"]["sessionsRecordedForgotten"] == 1 and first.exit_code() == 0

        # The forgotten text planted back, in a file named after the session: the verifier fails.
        named = memory.parent / "memory" / "sess-nora-1.md"
        named.write_text(f"- {NORA_TEXT}\n")
        again = anyio.run(_forget_job, settings, job_ids, payload)
        assert again.state == "complete" and again.result is not None
        v = again.result["verification"]
        assert v["verified"] is False and again.exit_code() == 1
        derivability = next(c for c in v["checks"] if c["name"] == "derivability")
        assert derivability["status"] == "failed"
        assert derivability["locations"] == ["agent main:workspace file"]
        for raw in _stored_results(job_ids):
            assert raw and b"sess-nora-1" not in raw and b"violet mongoose" not in raw
    finally:
        cleanup_redis(REDIS_URL, [settings.daemon.host_id], [], job_ids)


def test_enqueue_forget_verify_wait_prints_the_verification_and_exits_as_the_direct_command(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`memoryd enqueue forget --verify` is the job twin of `memoryd forget --verify`: `--wait`
    reads the job's result through the report model and prints the same lines."""
    derive_everything(capsys, config)
    settings = load_settings(config)
    host, queue = settings.daemon.host_id, queue_name(settings.daemon.host_id)
    r = sync_redis.Redis.from_url(REDIS_URL)
    r.hset(AGENT_OWNER_KEY, "main", route_value(queue, settings.deployment, "store"))
    r.hset(HEARTBEATS_KEY, host, f"{time.time():.3f}")
    r.close()
    args = ["enqueue", "forget", "--agent", "main", "--session", "sess-nora-1", "--verify"]
    done: list[int] = []
    job_ids: list[str] = []

    def enqueue_and_wait() -> None:
        done.append(main(["--config", str(config), *args, "--wait", "--timeout", "60"]))

    try:
        waiter = threading.Thread(target=enqueue_and_wait)
        waiter.start()
        deadline = time.monotonic() + 30
        while not job_ids and time.monotonic() < deadline:
            r = sync_redis.Redis.from_url(REDIS_URL)
            job_ids += [m.decode() for m in r.zrange(queue, 0, -1)]
            r.close()
            time.sleep(0.05)
        anyio.run(run_jobs, settings, queue)
        waiter.join(60)
        assert done == [0]
        out = capsys.readouterr().out
        assert "Verified: yes (every check passed)" in out and "Check derivability: passed" in out
        assert "recorded 1 session as forgotten" in out
    finally:
        cleanup_redis(REDIS_URL, [host], ["main"], job_ids)
