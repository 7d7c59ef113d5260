"""A few rounds of the fault campaign (tools/chaos.py), so the runner and its invariant checks
stay working: `memoryd run` under SIGKILL and Redis restarts, with forgets in flight, ends with
every forget and user-scope erase complete and no violation. The full campaign: `python -m tools.chaos --rounds 200`."""

from __future__ import annotations

import gc
import os
import random
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tools.chaos import main
from tools.chaos_files import Tmpfs

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")


@pytest.mark.slow
def test_a_short_fault_campaign_keeps_every_invariant(capsys):
    code = main(
        [
            "--rounds",
            "5",
            "--seconds",
            "0.4",
            "--seed",
            "5",
            "--job-timeout",
            "2",
            "--forget-rate",
            "0.8",
            "--erase-rate",
            "0.6",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    rows = {
        line.split("|")[1].strip(): line.split("|")[2].strip()
        for line in out.splitlines()
        if line.startswith("| ") and "measure" not in line
    }
    assert rows["rounds"] == "5" and rows["violations"] == "0"
    assert int(rows["daemon kills (SIGKILL)"]) + int(rows["Redis restarts (nosave)"]) >= 2
    assert int(rows["invariant checks"]) >= 8
    assert int(rows["forget jobs completed"]) == int(rows["forget jobs enqueued"]) >= 2
    # Erasures ride the same faults: each ends in a complete, verified receipt (no hold is placed).
    assert int(rows["erase jobs completed (receipt complete)"]) == int(rows["erase jobs enqueued"]) >= 1


def test_the_invariant_checks_catch_what_is_planted(tmp_path):
    """A check that cannot fail proves nothing: plant each fault the checks look for."""
    from tools.chaos import AGENT, KEEPERS, Observed, World, judge_corpus, judge_store, scan_workspace, token

    ws = tmp_path / "ws"
    (ws / "memory" / ".dreams" / "session-corpus").mkdir(parents=True)
    (ws / "MEMORY.md").write_text(f"- {token('s01')} came back\n")
    keeper = KEEPERS[0]
    (ws / "memory" / ".dreams" / "session-corpus" / "2026-01-01.txt").write_text(
        f"[{AGENT}/sessions/{AGENT}/{keeper}#L1] kept\n"
    )
    scan = scan_workspace(ws, {"s01"})
    assert scan.found == ["MEMORY.md: holds text of forgotten session s01"]
    assert scan.corpus_lines[keeper] == 1

    obs = Observed(fence=10, tombstones={"s02"}, origins={keeper: 3}, corpus={keeper: 2})
    facts = {
        "leaks": ["fts: 1 rows matching x"],
        "cache": set(),
        "tombstones": {"s01"},
        "fence": 9,
        "origins": {keeper: 1},
        "hashes": {},
        "keeper_claims": set(),
    }
    found = judge_store(facts, {"s01"}, obs, scan.memory_md)
    assert found == [
        "fts: 1 rows matching x",
        "forgotten records lost: ['s02']",
        "stored fence went backwards: 10 -> 9",
        f"collateral loss: origin rows of {keeper} 3 -> 1",
    ]
    world = World(tmp_path / "world", random.Random(1))
    assert judge_corpus(scan, obs, world, final=False) == [
        f"collateral loss: corpus lines of {keeper} 2 -> 1"
    ]
    assert f"expected state: 2 messages of {keeper} never staged" in judge_corpus(
        scan, obs, world, final=True
    )


# --- regressions of bugs the campaign found ------------------------------------------------------


async def test_a_job_enqueued_again_while_it_runs_after_redis_lost_its_keys_runs_once(redis, unique):
    """Found by tools/chaos.py: Redis restarted without persistence while a forget ran, the client
    enqueued the (lost) job again, and the same worker started a second copy of it; the copies'
    bookkeeping collided and one failed with `KeyError: 'forget:<id>'`."""
    import anyio
    from arq.connections import ArqRedis
    from arq.jobs import Job
    from arq.worker import func
    from redis.asyncio import ConnectionPool

    from memoryd.runtime.wire import deserialize, serialize
    from memoryd.runtime.worker import MemorydWorker
    from tests.conftest import REDIS_URL

    runs: list[dict] = []
    started, release = anyio.Event(), anyio.Event()

    async def slow(ctx, payload):
        runs.append(payload)
        started.set()
        await release.wait()
        return {"ok": True}

    queue = f"memoryd:queue:chaos-{unique}"
    job_id = f"slow:{unique}"
    pool = ArqRedis(
        ConnectionPool.from_url(REDIS_URL), job_serializer=serialize, job_deserializer=deserialize
    )
    worker = MemorydWorker(
        functions=[func(slow, name="slow")],
        queue_name=queue,
        redis_pool=pool,
        poll_delay=0.01,
        handle_signals=False,
        job_serializer=serialize,
        job_deserializer=deserialize,
        keep_result=60,
        ctx={},
    )
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.main)
            await pool.enqueue_job("slow", {"n": 1}, _job_id=job_id, _queue_name=queue)
            with anyio.fail_after(10):
                await started.wait()
            # What a restart without persistence leaves: no job, no in-progress key; the client
            # (tools/chaos.py, or any caller polling `not_found`) enqueues the same job again.
            await redis.delete(f"arq:in-progress:{job_id}", f"arq:job:{job_id}")
            await redis.zrem(queue, job_id)
            assert await pool.enqueue_job("slow", {"n": 1}, _job_id=job_id, _queue_name=queue) is not None
            await anyio.sleep(0.3)  # many polls
            assert len(runs) == 1  # the running copy is not started twice
            release.set()
            for _ in range(1000):  # up to 10 s
                if await redis.exists(f"arq:result:{job_id}"):
                    break
                await anyio.sleep(0.01)
            info = await Job(job_id, pool, _deserializer=deserialize).result_info()
            assert info is not None and info.success and info.result == {"ok": True}
            await anyio.sleep(0.2)
            assert len(runs) == 1 and await redis.zscore(queue, job_id) is None
            tg.cancel_scope.cancel()
    finally:
        await worker.close()
        await redis.delete(f"arq:result:{job_id}", f"arq:job:{job_id}", queue, f"{queue}:health-check")


async def test_an_ingest_sweep_after_an_erasure_writes_no_checkpoint_naming_the_erased_session(
    tmp_path, sessions_root, unique, redis
):
    """Found by tools/chaos.py (erase receipts failing verification at
    `ingest_checkpoints.session_id`): the sweep after an erasure wrote an excluded `forgotten`
    checkpoint for the erased session, putting its id back in clear next to its `hmac:` record."""
    from memoryd.agent_runtime import agent_runtime
    from memoryd.ingest.sweep import run_ingest_sweep
    from memoryd.ops import erasure
    from memoryd.ops.verification import run_verify
    from memoryd.retention.api import EraseRequest
    from memoryd.retention.needles import VerifySubject
    from tests.builders import Msg
    from tests.conftest import make_settings
    from tests.erase_world import add_two_users

    settings = make_settings(tmp_path, sessions_root, daemon={"host_id": f"test-{unique}"})
    b = add_two_users(sessions_root, acknowledged=False)
    async with agent_runtime(settings, "main", redis=redis) as rt:
        assert (await run_ingest_sweep(rt)).messages_staged == 2
    receipt = await erasure.run_erase(settings, redis, EraseRequest(scope="tenant:default:user:nora"))
    assert receipt.state == "complete" and receipt.verified, receipt

    b.append("sess-nora-1", [Msg("assistant", "noted: the violet mongoose")], start_index=1)
    async with agent_runtime(settings, "main", redis=redis) as rt:
        again = await run_ingest_sweep(rt)
        rows = await rt.require_store().read(
            lambda conn: conn.execute("SELECT session_id, excluded_reason FROM ingest_checkpoints").fetchall()
        )
    assert again.messages_staged == 0 and again.sessions_excluded.get("forgotten") == 1  # still excluded
    assert rows == [("sess-omar-1", None)]  # omar's checkpoint stays; none names the erased session
    verification = await run_verify(settings, redis, VerifySubject(ids=("sess-nora-1",)))
    assert verification.verified, verification


async def test_forgetting_an_erased_session_again_adds_no_plain_forgotten_record(
    tmp_path, sessions_root, unique, redis
):
    """Found by tools/chaos.py (erase receipts failing verification at
    `memory_session_tombstones.session_id`): a forget naming a session an erasure had already
    recorded as `hmac:` only added a plain record beside it, putting the erased id back in clear."""
    from memoryd.agent_runtime import agent_runtime
    from memoryd.forget.request import ForgetRequest
    from memoryd.forget.run import run_forget
    from memoryd.ingest.sweep import run_ingest_sweep
    from memoryd.ops import erasure
    from memoryd.ops.verification import run_verify
    from memoryd.retention.api import EraseRequest
    from memoryd.retention.needles import VerifySubject
    from memoryd.store.tombstones import forgotten_ids, hashed_session_ref
    from tests.conftest import make_settings
    from tests.erase_world import add_two_users

    settings = make_settings(tmp_path, sessions_root, daemon={"host_id": f"test-{unique}"})
    add_two_users(sessions_root, acknowledged=False)
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)
    assert (await erasure.run_erase(settings, redis, EraseRequest(scope="tenant:default:user:nora"))).verified

    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_forget(rt, ForgetRequest(agent="main", sessions=["sess-nora-1", "sess-omar-1"]))
        secret = rt.secret()
        store = rt.require_store()
        records = {
            s
            for (s,) in await store.read(
                lambda conn: conn.execute("SELECT session_id FROM memory_session_tombstones").fetchall()
            )
        }
        forgotten = await store.read(forgotten_ids, ["sess-nora-1", "sess-omar-1"], secret)
    assert records == {hashed_session_ref(secret, "sess-nora-1"), "sess-omar-1"}  # omar's is new, and plain
    assert forgotten == {"sess-nora-1", "sess-omar-1"}
    assert (await run_verify(settings, redis, VerifySubject(ids=("sess-nora-1",)))).verified


async def test_a_purge_of_redis_values_whose_server_went_away_fails_as_a_redis_outage(tmp_path):
    """Found by tools/chaos.py (a forget failed with a raw `ConnectionError: Connection closed by
    server.`): Redis restarted after the forget's purge, while it deleted earlier job arguments and
    results naming the forgotten sessions; the error was not memoryd's transient OperationFailed.
    The erasure's purge and its verifier's Redis check read the same values."""
    from memoryd.errors import OperationFailed
    from memoryd.redis_conn import connect_redis
    from memoryd.redis_values import purge_naming, scan_values
    from memoryd.settings import load_settings
    from tools.chaos import PrivateRedis

    server = PrivateRedis(tmp_path / "gone").start()
    try:
        redis = await connect_redis(load_settings(None, redis_url=server.url))
        await redis.set("arq:result:forget:x", b'{"r":"s01"}')
        server.shutdown_nosave()
        with pytest.raises(OperationFailed, match="Redis unavailable"):
            await purge_naming(redis, lambda value: "s01" in value)
        with pytest.raises(OperationFailed, match="Redis unavailable"):
            _ = [key async for key, _strings in scan_values(redis)]
        await redis.aclose()
    finally:
        server.stop()


@pytest.mark.slow
async def test_a_forget_cuts_off_the_corpus_lines_of_an_ingest_that_died_before_committing(
    tmp_path, redis_url, unique
):
    """Found by tools/chaos.py (two copies of a kept session's corpus lines): an ingest appended
    its batch to the corpus and was killed before the batch committed; a forget of another session
    rewrote that day file, carrying the uncommitted lines into the new file, where the next sweep's
    cut-back (which leaves a replaced file alone) could not find them; that sweep staged the
    lines again, so the corpus held them twice."""
    import signal
    import sqlite3

    from memoryd.constants import CORPUS_RELATIVE_DIR
    from memoryd.failpoints import STOP_ENV_VAR, TRACE_ENV_VAR
    from memoryd.settings import load_settings
    from tests.builders import Msg, SessionStoreBuilder, conversation
    from tests.daemon_harness import FailpointTrace, cleanup_redis, run_cli, start_cli, write_config

    agent = f"a{unique}"
    builder = SessionStoreBuilder(tmp_path / "sessions", agent)
    builder.add(
        f"agent:{agent}:main", "s-kept", conversation("orchard", "kept"), participants=[{"actorId": "nora"}]
    )
    builder.add(
        f"agent:{agent}:dm", "s-gone", conversation("lighthouse", "gone"), participants=[{"actorId": "zed"}]
    )
    config = write_config(
        tmp_path / "memoryd.toml",
        state_dir=tmp_path / "state",
        sessions_root=builder.root,
        redis_url=redis_url,
        host_id=f"h{unique}",
        lock_wait_s=30,
    )
    config.write_text(config.read_text().replace("[lock]\n", "[lock]\nttl_ms = 1500\n"))
    settings = load_settings(config)
    corpus_dir = settings.workspace_for(agent) / CORPUS_RELATIVE_DIR
    try:
        assert run_cli(config, "ingest", "--agent", agent).returncode == 0
        builder.append(
            "s-kept",
            [Msg("user", f"Remember the harbour ledger entry {i} for the kept team.") for i in range(3)],
            start_index=4,
        )
        trace = FailpointTrace(tmp_path / "trace")
        ingest = start_cli(
            config,
            "ingest",
            "--agent",
            agent,
            env={TRACE_ENV_VAR: str(trace.path), STOP_ENV_VAR: "ingest.corpus.appended"},
        )
        try:
            await trace.wait_for("ingest.corpus.appended", {ingest.pid}, timeout_s=60)
        finally:
            ingest.send_signal(signal.SIGKILL)  # it dies between its append and its commit
            ingest.wait(10)
        with sqlite3.connect(settings.state_dir / "agents" / agent / "memory.sqlite") as conn:
            assert conn.execute("SELECT count(*) FROM corpus_appends").fetchone()[0] == 1
        forget = run_cli(config, "forget", "--agent", agent, "--participant", "zed")
        assert forget.returncode == 0, forget.stderr
        again = run_cli(config, "ingest", "--agent", agent)
        assert again.returncode == 0, again.stderr
        lines = [line for p in sorted(corpus_dir.glob("*.txt")) for line in p.read_text().splitlines()]
        ledger = [line for line in lines if "harbour ledger" in line]
        assert len(ledger) == 3 and len(set(lines)) == len(lines), lines
        assert not [line for line in lines if "lighthouse" in line]
    finally:
        cleanup_redis(redis_url, [], [agent])


@pytest.mark.parametrize(
    "replacement", ["fifo", "symlink_fifo", "symlink_outside", "symlink_loop", "dev_zero"]
)
@pytest.mark.parametrize("target", ["transcript", "sessions.json", "sessions_dir", "agent_dir"])
def test_a_swapped_session_file_is_hostile_and_comes_back_as_it_was(tmp_path, target, replacement):
    import os
    import stat

    from tools.chaos import AGENT, World
    from tools.chaos_files import PLANTED, Swap, target_path

    world = World(tmp_path / "world", random.Random(1))
    path = target_path(world.sessions_root, AGENT, target, "s03")
    before = sorted(p.read_bytes() for p in ([path] if path.is_file() else path.rglob("*.json*")))
    swap = Swap.make(path, replacement, tmp_path / "work", 0)
    mode = os.lstat(path).st_mode
    if replacement == "fifo":
        assert stat.S_ISFIFO(mode)
    else:
        assert stat.S_ISLNK(mode)
    if replacement == "symlink_outside":  # a planted copy outside sessions_root
        assert not os.path.realpath(path).startswith(str(world.sessions_root))
        copies = [path] if not path.is_dir() else list(path.rglob("*.json*"))
        assert any(PLANTED in p.read_text() for p in copies)
    if replacement == "symlink_loop":
        with pytest.raises(OSError):
            os.stat(path)
    swap.restore()
    assert sorted(p.read_bytes() for p in ([path] if path.is_file() else path.rglob("*.json*"))) == before


def test_the_new_invariant_checks_catch_what_is_planted(tmp_path):
    """Planted text in the state directory, a corpus line appended twice, an orphan line, a line
    cited twice, a citation of a line that is gone: each is found."""
    from collections import Counter

    from tools.chaos import AGENT, KEEPERS, Observed, World, judge_citations, judge_corpus, scan_workspace
    from tools.chaos_files import PLANTED, planted_in

    state = tmp_path / "state"
    (state / "agents" / AGENT).mkdir(parents=True)
    (state / "agents" / AGENT / "memory.sqlite-wal").write_bytes(b"\0\0" + PLANTED.encode() + b"\0")
    assert planted_in(state) == [f"agents/{AGENT}/memory.sqlite-wal"]

    ws = tmp_path / "ws"
    corpus = ws / "memory" / ".dreams" / "session-corpus"
    corpus.mkdir(parents=True)
    keeper = KEEPERS[0]
    line = f"[{AGENT}/sessions/{AGENT}/{keeper}#L2] User: kept"
    (corpus / "2026-01-01.txt").write_text(
        f"{line}\n{line}\n[{AGENT}/sessions/{AGENT}/{keeper}#L3] User: lone\n"
    )
    scan = scan_workspace(ws, set())
    world = World(tmp_path / "world", random.Random(1))
    found = judge_corpus(scan, Observed(), world, final=False)
    assert found == [f"corpus: 1 transcript lines appended more than once (first: {line.split('] ')[0]}])"]
    # Only lines a staged entry cites count toward "never fewer": the uncommitted one may go.
    lost = judge_corpus(scan, Observed(corpus={keeper: 3}), world, False, Counter({"User: kept": 1}))
    assert f"collateral loss: corpus lines of {keeper} 3 -> 2" in lost
    assert not [
        f
        for f in judge_corpus(scan, Observed(corpus={keeper: 2}), world, False, Counter({"User: kept": 1}))
        if "collateral" in f
    ]
    checked, cites = judge_citations(scan, {"corpus_snippets": Counter({"User: kept": 2, "User: gone": 1})})
    assert checked == 3
    assert cites == [
        "corpus: 1 lines no staged entry cites (orphans)",
        "corpus: 1 lines cited by more than one staged entry",
        "staged entries: 1 cite corpus lines that are gone",
    ]


def test_the_campaign_refuses_a_tmpfs_without_root_in_one_line(monkeypatch):
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    assert Tmpfs.refusal() == (
        "--tmpfs-mb needs root (it mounts a tmpfs on the state directory); running without the disk-full fault"
    )


async def test_an_ingest_whose_lease_redis_lost_to_another_holder_appends_nothing(
    tmp_path, sessions_root, unique, redis
):
    """Found by tools/chaos.py (a transcript line twice in the corpus after a Redis restart):
    Redis lost the lease key while an ingest held it, another job of the daemon took the lease
    at once, and the first ingest, not yet told (its next renewal was up to a third of the ttl
    away), appended its batch to the corpus beside the new holder's; its commit was fenced off,
    but its lines, no longer the file's tail, could not be cut back, and its retry appended
    them again. An append now first confirms, in Redis, that the lease is still its own."""
    import redis as sync_redis

    from memoryd.agent_runtime import agent_runtime
    from memoryd.constants import CORPUS_RELATIVE_DIR, LOCK_KEY
    from memoryd.errors import LockLost
    from memoryd.failpoints import on_failpoint
    from memoryd.ingest.sweep import run_ingest_sweep
    from memoryd.lock import workspace_key
    from tests.conftest import REDIS_URL, make_settings
    from tests.erase_world import add_two_users

    settings = make_settings(tmp_path, sessions_root, daemon={"host_id": f"test-{unique}"})
    add_two_users(sessions_root)
    thief = sync_redis.Redis.from_url(REDIS_URL)
    key = LOCK_KEY.format(workspace=workspace_key(settings.workspace_for("main")))

    def redis_lost_the_lease() -> None:
        # What a restart without persistence and another job's acquisition leave behind.
        thief.set(key, "another-holder:1#0", px=3000)

    try:
        async with agent_runtime(settings, "main", redis=redis) as rt:
            with on_failpoint("ingest.corpus.reserved", redis_lost_the_lease), pytest.raises(LockLost):
                await run_ingest_sweep(rt)
        corpus = settings.workspace_for("main") / CORPUS_RELATIVE_DIR
        assert not any(p.read_text() for p in corpus.glob("*.txt")), "appended under another holder's lease"
    finally:
        thief.delete(key)
        thief.close()


@pytest.mark.slow
async def test_two_sweeps_that_read_the_same_new_lines_stage_them_once(tmp_path, redis_url, unique):
    """Found by tools/chaos.py (whole batches twice in the corpus, the store consistent): two
    sweeps of one agent (a scheduled one and a crashed one's retry) read the same new lines
    outside the lock; the first committed them, the second appended them to the corpus again
    (its staging upsert hid it in the store). Under the lock a batch now drops lines staged
    since it read them."""
    import signal

    from memoryd.constants import CORPUS_RELATIVE_DIR
    from memoryd.failpoints import STOP_ENV_VAR, TRACE_ENV_VAR
    from memoryd.settings import load_settings
    from tests.builders import SessionStoreBuilder, conversation
    from tests.daemon_harness import FailpointTrace, cleanup_redis, run_cli, start_cli, write_config

    agent = f"a{unique}"
    builder = SessionStoreBuilder(tmp_path / "sessions", agent)
    builder.add(
        f"agent:{agent}:main", "s-kept", conversation("orchard", "kept"), participants=[{"actorId": "nora"}]
    )
    config = write_config(
        tmp_path / "memoryd.toml",
        state_dir=tmp_path / "state",
        sessions_root=builder.root,
        redis_url=redis_url,
        host_id=f"h{unique}",
        lock_wait_s=30,
    )
    settings = load_settings(config)
    trace = FailpointTrace(tmp_path / "trace")
    first = start_cli(
        config,
        "ingest",
        "--agent",
        agent,
        env={TRACE_ENV_VAR: str(trace.path), STOP_ENV_VAR: "ingest.scan.open"},
    )
    try:
        await trace.wait_for("ingest.scan.open", {first.pid}, timeout_s=60)  # reading, no lock held
        second = run_cli(config, "ingest", "--agent", agent)
        assert second.returncode == 0, second.stderr
        first.send_signal(signal.SIGCONT)
        _out, err = first.communicate(timeout=60)
        assert first.returncode == 0, err
        corpus = settings.workspace_for(agent) / CORPUS_RELATIVE_DIR
        lines = [line for p in sorted(corpus.glob("*.txt")) for line in p.read_text().splitlines()]
        assert len(lines) == 4 and len(set(lines)) == 4, lines
    finally:
        if first.poll() is None:
            first.kill()
        cleanup_redis(redis_url, [], [agent])


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_campaign_on_a_tmpfs_unmounts_it_when_stopped_by_sigterm(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from tests.daemon_harness import REPO

    def ours() -> list[str]:
        return [line for line in Path("/proc/mounts").read_text().splitlines() if str(tmp_path) in line]

    campaign = subprocess.Popen(
        [sys.executable, "-m", "tools.chaos", "--rounds", "500", "--tmpfs-mb", "16"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp_path)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not ours() and time.monotonic() < deadline and campaign.poll() is None:
            time.sleep(0.1)
        assert ours() and ours()[0].split()[2] == "tmpfs", "the state directory was not mounted"
        time.sleep(2)  # a round or two in
        campaign.send_signal(signal.SIGTERM)
        campaign.wait(120)
    finally:
        if campaign.poll() is None:
            campaign.kill()
            campaign.wait(10)
    assert campaign.returncode == 128 + signal.SIGTERM
    assert ours() == []  # unmounted on the way out
    left = []  # and its daemon and Redis stopped (they are started under tmp_path)
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if str(tmp_path) in cmdline.read_bytes().decode(errors="replace"):
                left.append(cmdline.parent.name)
        except OSError:
            continue
    assert left == []


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_cli_command_on_a_full_disk_prints_one_line(tmp_path, redis_url):
    """Found by tools/chaos.py --tmpfs-mb (a CLI forget on the full disk): the store's connect
    failed ("disk I/O error" in its first PRAGMA), the command printed its one-line error, and
    then aiosqlite's thread, still answering, printed `RuntimeError: Event loop is closed`
    tracebacks after it."""
    from tests.daemon_harness import run_cli
    from tools.chaos import AGENT, World, write_config

    world = World(tmp_path / "world", random.Random(1))
    config = tmp_path / "memoryd.toml"
    write_config(config, tmp_path / "state", world.sessions_root, redis_url)
    with _small_disk(tmp_path / "state") as disk:
        assert run_cli(config, "ingest", "--agent", AGENT).returncode == 0
        world.append("s01", 2)
        disk.fill()
        for args in (("forget", "--agent", AGENT, "--session", "s01"), ("ingest", "--agent", AGENT)):
            done = run_cli(config, *args)
            assert done.returncode == 1, done.stdout
            assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
            # The line says what to do, however SQLite put it ("disk I/O error" on a full tmpfs).
            assert "free space" in done.stderr, done.stderr


@pytest.mark.slow
async def test_a_forget_after_an_ingest_died_before_appending_prints_nothing_extra(
    tmp_path, redis_url, unique
):
    """Found by tools/chaos.py (a CLI forget on the full disk printed two lines): the forget's
    cut-off of a dead ingest's pending append, which had appended nothing, logged a warning on
    stderr beside the command's own output."""
    import signal

    from memoryd.failpoints import STOP_ENV_VAR, TRACE_ENV_VAR
    from tests.builders import SessionStoreBuilder, conversation
    from tests.daemon_harness import FailpointTrace, cleanup_redis, run_cli, start_cli, write_config

    agent = f"a{unique}"
    builder = SessionStoreBuilder(tmp_path / "sessions", agent)
    builder.add(
        f"agent:{agent}:dm", "s-gone", conversation("lighthouse", "gone"), participants=[{"actorId": "zed"}]
    )
    config = write_config(
        tmp_path / "memoryd.toml",
        state_dir=tmp_path / "state",
        sessions_root=builder.root,
        redis_url=redis_url,
        host_id=f"h{unique}",
        lock_wait_s=30,
    )
    config.write_text(config.read_text().replace("[lock]\n", "[lock]\nttl_ms = 1500\n"))
    trace = FailpointTrace(tmp_path / "trace")
    ingest = start_cli(
        config,
        "ingest",
        "--agent",
        agent,
        env={TRACE_ENV_VAR: str(trace.path), STOP_ENV_VAR: "ingest.corpus.reserved"},
    )
    try:
        await trace.wait_for("ingest.corpus.reserved", {ingest.pid}, timeout_s=60)
    finally:
        ingest.send_signal(signal.SIGKILL)  # dies with its append reserved, not written
        ingest.wait(10)
    try:
        forget = run_cli(config, "forget", "--agent", agent, "--session", "s-gone")
        assert forget.returncode == 0 and forget.stderr == "", forget.stderr
    finally:
        cleanup_redis(redis_url, [], [agent])


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
async def test_a_store_open_that_fails_on_a_full_disk_leaves_no_file_of_it_open(tmp_path):
    """Found by tools/chaos.py (a store unreadable for a minute, then staged rows lost): an open
    whose first PRAGMA failed on the full disk left its SQLite connection to the garbage
    collector, holding the WAL and -shm files. Once another process's last close had removed
    those files, this process's next connections shared the stale shared-memory index of the
    leaked one: "disk I/O error" or "malformed" on open, and commits into a deleted WAL."""
    from memoryd.errors import OperationFailed
    from memoryd.store.db import Store

    db = tmp_path / "state" / "memory.sqlite"
    with _small_disk(tmp_path / "state") as disk:
        store = await Store.open(db)
        await store.close()
        disk.fill()
        gc.disable()  # as between two collections of a long-running process
        try:
            failed = 0
            for _ in range(3):
                try:
                    opened = await Store.open(db)
                except OperationFailed:
                    failed += 1
                    continue
                await opened.close()
            assert failed, "the open did not fail on the full disk"
            held = [
                target
                for fd in os.listdir("/proc/self/fd")
                if (target := _fd_target(fd)) is not None and target.startswith(str(db))
            ]
        finally:
            gc.enable()
        assert held == [], held


def _fd_target(fd: str) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


@contextmanager
def _small_disk(path: Path) -> Iterator[Tmpfs]:
    """A 16 MiB tmpfs mounted on `path` (root only), freed and unmounted afterwards."""
    disk = Tmpfs(path, 16)
    disk.mount()
    try:
        yield disk
    finally:
        disk.free()
        disk.unmount()
