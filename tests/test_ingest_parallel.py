"""The parallel scan (ingest.workers): the same rows, corpus bytes and checkpoints as the serial
sweep, its scratch files gone after the merge, and the cases where it must stay serial."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis

from memoryd.agent_runtime import agent_runtime
from memoryd.agents import agent_paths
from memoryd.constants import SNIPPET_MAX_CHARS, SNIPPET_MIN_CHARS
from memoryd.errors import OperationFailed
from memoryd.failpoints import on_failpoint
from memoryd.forget.request import ForgetRequest
from memoryd.forget.run import run_forget
from memoryd.ingest import parallel
from memoryd.ingest import sweep as sweep_module
from memoryd.ingest.parallel import plan_tasks, use_workers
from memoryd.ingest.report import IngestReport
from memoryd.ingest.sweep import run_ingest_sweep
from memoryd.ops.erasure import run_erase
from memoryd.retention.needles import VerifySubject
from memoryd.retention.request import EraseRequest
from memoryd.retention.verify import run_verify
from memoryd.sessions.transcript import Carry, export_line
from memoryd.settings import Settings, load_settings
from memoryd.store.scratch import CandRow, ensure_scratch_dir, remove_scratch, scratch_name, write_rows
from memoryd.utf16 import truncate_utf16, utf16_len
from tests.builders import DAY_MS, Msg, SessionStoreBuilder, conversation
from tests.conftest import REDIS_URL, make_settings
from tests.ingest_harness import batches_of, corpus_text

NO_CAPS = {"max_messages_per_sweep": 10**9, "max_messages_per_file": 10**9}
# Columns holding the sweep's own clock (each run has its own): compared as equal.
CLOCK_COLUMNS = {("short_term_entries", "first_recalled_at"), ("short_term_entries", "last_recalled_at")}
CLOCK_COLUMNS |= {("ingest_checkpoints", "updated_at")}
# Tables whose values are the run's and not the data's: the fence (a Redis counter of the
# workspace) and the checkpoint token (random).
OWN_TABLES = {"fence", "ingest_checkpoint_token"}


def settings_for(tmp_path: Path, sessions_root: Path, unique: str, name: str, workers: int) -> Settings:
    return make_settings(
        tmp_path / name,
        sessions_root,
        daemon={"host_id": f"test-{unique}-{name}"},
        ingest={**NO_CAPS, "workers": workers},
    )


async def sweep(settings: Settings, redis: Redis) -> IngestReport:
    async with agent_runtime(settings, "main", redis=redis) as rt:
        return await run_ingest_sweep(rt)


def dump(conn: Any) -> dict[str, list[tuple]]:
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "AND sql NOT LIKE 'CREATE VIRTUAL%' ORDER BY name"
        )
    ]
    out = {}
    for table in tables:
        if table in OWN_TABLES or "_fts" in table:
            continue
        cur = conn.execute(f"SELECT * FROM {table}")
        names = [d[0] for d in cur.description]
        rows = [
            tuple(None if (table, n) in CLOCK_COLUMNS else v for n, v in zip(names, row, strict=True))
            for row in cur.fetchall()
        ]
        if table == "store_meta":  # each store's own random id differs by design
            rows = [row for row in rows if row[0] != "store_id"]
        out[table] = sorted(rows, key=repr)
    if "ingest_lines" in out:  # session numbers follow each sweep's order: lines by session id
        del out["ingest_sessions"]
        out["ingest_lines"] = sorted(
            conn.execute(
                "SELECT s.session_id, s.session_key, l.line_no, l.claim, l.origin_class, l.observed_at, l.seen "
                "FROM ingest_lines l JOIN ingest_sessions s ON s.session_no = l.session_no"
            ).fetchall(),
            key=repr,
        )
    return out


async def state_of(settings: Settings) -> tuple[dict[str, list[tuple]], dict[str, bytes]]:
    async with agent_runtime(settings, "main", redis=False) as rt:
        rows = await rt.require_store().read(dump)
        corpus_dir = rt.paths.corpus_dir
    files = {p.name: p.read_bytes() for p in sorted(corpus_dir.glob("*.txt"))}
    return rows, files


def build_history(b: SessionStoreBuilder) -> None:
    """Sessions that exercise what the merge must get right: messages over two days (and a time
    going backwards), a claim repeated within a session on two days and across sessions, short
    lines that are not staged, and enough candidates to fill several small batches."""
    day2 = b.base_ms + DAY_MS
    for n in range(12):
        msgs = conversation(f"topic{n}", f"s{n:02d}", n=3 + n % 5)
        if n % 3 == 0:
            msgs.append(Msg("user", "Remember the shared deploy window is Friday.", ts=day2 + n))
            msgs.append(Msg("assistant", "ok"))  # too short to stage
        if n % 4 == 1:
            msgs.append(Msg("user", f"Late note for topic{n} written the next day.", ts=day2 + 5_000))
            msgs.append(Msg("user", f"Earlier note for topic{n} arriving after it.", ts=b.base_ms + 10))
            msgs.append(Msg("user", "Remember the shared deploy window is Friday.", ts=b.base_ms + 20))
        b.add(f"agent:main:s{n:02d}", f"s{n:02d}", msgs)


@pytest.fixture
def small_pool_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool for a test-sized history: no size floor, small tasks, batches of 7 candidates."""
    monkeypatch.setattr(parallel, "INGEST_PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "INGEST_TASK_BYTES", 600)
    batches_of(monkeypatch, 7)
    monkeypatch.setattr(sweep_module, "INGEST_SCRATCH_RECLAIM_BYTES", 0)  # merged rows are deleted too


@pytest.mark.usefixtures("small_pool_settings")
@pytest.mark.parametrize("growing", [False, True], ids=["fixed-batches", "batches-growing-with-the-store"])
async def test_workers_stage_the_same_rows_corpus_and_checkpoints_as_the_serial_sweep(
    tmp_path: Path,
    store_builder: SessionStoreBuilder,
    redis: Redis,
    unique: str,
    monkeypatch: pytest.MonkeyPatch,
    growing: bool,
) -> None:
    if growing:
        batches_of(monkeypatch, 3, 11, divisor=4)
    build_history(store_builder)
    serial = settings_for(tmp_path, store_builder.root, unique, "serial", 1)
    pooled = settings_for(tmp_path, store_builder.root, unique, "pooled", 2)

    commits: list[list[int]] = [[], []]
    first = []
    for n, each in enumerate((serial, pooled)):
        with on_failpoint("ingest.corpus.appended", lambda n=n: commits[n].append(1)):
            first.append(await sweep(each, redis))
    assert first[0] == first[1]
    assert first[0].messages_staged > 3 * 7  # several batches, sessions split between them
    # The same batches: as many commits, fewer as the batches grow.
    assert len(commits[0]) == len(commits[1])
    if growing:
        assert 1 < len(commits[0]) < first[0].messages_staged / 3
    assert agent_paths(pooled, "main").scratch_dir.is_dir()  # the pool ran
    assert list(agent_paths(pooled, "main").scratch_dir.iterdir()) == []  # and its files went
    assert not agent_paths(serial, "main").scratch_dir.exists()
    assert await state_of(serial) == await state_of(pooled)

    # Appends resume from the checkpoints, with the seen hashes stored by the first sweep.
    day3 = store_builder.base_ms + 2 * DAY_MS
    for n in (0, 1, 5):
        store_builder.append(
            f"s{n:02d}",
            [
                Msg("user", f"A new fact about topic{n} for the third day.", ts=day3),
                Msg("user", "Remember the shared deploy window is Friday.", ts=day3 + 1),
            ],
            start_index=40,
        )
    second = [await sweep(serial, redis), await sweep(pooled, redis)]
    assert second[0] == second[1] and second[0].messages_staged >= 3
    assert await state_of(serial) == await state_of(pooled)


def test_small_or_capped_sweeps_stay_serial() -> None:
    big = [600_000, 700_000]
    assert use_workers(2, big, 10**9, 10**9, path_source=True)
    assert not use_workers(1, big, 10**9, 10**9, path_source=True)
    assert not use_workers(2, [4_000, 3_000], 10**9, 10**9, path_source=True)
    # A cap that could cut a session short (the reference's 80 per file, 240 per sweep) keeps it serial.
    assert not use_workers(2, big, 80, 240, path_source=True)
    assert not use_workers(2, big, 10**9, 100_000, path_source=True)
    assert not use_workers(2, big, 50_000, 10**9, path_source=True)
    # A cap no session can reach (a candidate needs 12 bytes of its line) does not.
    assert use_workers(2, big, 700_000 // 12 + 2, 1_300_000 // 12 + 3, path_source=True)
    assert not use_workers(2, big, 10**9, 10**9, path_source=False)


def test_tasks_are_consecutive_runs_covering_every_session() -> None:
    sizes = [100, 5_000, 20, 20, 20, 900, 3]
    for workers in (1, 2, 4):
        tasks = plan_tasks(sizes, workers, 1_000)
        assert [i for t in tasks for i in t] == list(range(len(sizes)))
        assert all(len(t) for t in tasks)


# --- scratch files are an artifact forget, erase and the verifier reach --------------------------

NORA_TEXT = "Remember that the violet mongoose launch is on Friday at noon."
OMAR_TEXTS = tuple(str(m.text) for m in conversation("orchard", "omar"))


def plant_scratch(settings: Settings, text: str, pid: int) -> Path:
    """A scratch file as a sweep of process `pid` leaves it when killed before its merge."""
    scratch = agent_paths(settings, "main").scratch_dir
    ensure_scratch_dir(scratch)
    path = scratch / scratch_name(pid, "feed", 4242)
    row = CandRow(
        0, "sess-nora-1", None, 1, 1, "2026-01-01", 0, "memory/.dreams/session-corpus/2026-01-01.txt",
        "memory:claim:abc", text, "owner", "interactive", 1, "abc", "q", "h", f"[main/x#L1] {text}",
    )  # fmt: skip
    write_rows(path, [row])
    assert text.encode() in path.read_bytes()
    return path


@pytest.fixture
def nora_settings(tmp_path: Path, store_builder: SessionStoreBuilder, unique: str) -> Settings:
    store_builder.add(
        "agent:main:dm:nora", "sess-nora-1", [Msg("user", NORA_TEXT)], participants=[{"actorId": "nora"}]
    )
    store_builder.add(
        "agent:main:dm:omar",
        "sess-omar-1",
        conversation("orchard", "omar"),
        participants=[{"actorId": "omar"}],
    )
    return make_settings(tmp_path, store_builder.root, daemon={"host_id": f"test-{unique}"})


async def test_a_forget_removes_scratch_files_left_behind_and_verifies(
    nora_settings: Settings, redis: Redis
) -> None:
    await sweep(nora_settings, redis)
    planted = plant_scratch(nora_settings, NORA_TEXT, os.getpid())  # a live sweep's, even

    request = ForgetRequest(agent="main", sessions=["sess-nora-1"])
    async with agent_runtime(nora_settings, "main", redis=redis) as rt:
        await run_forget(rt, request)
    assert not planted.exists()
    verification = await run_verify(
        nora_settings,
        redis,
        # Omar's session survives and says "Remember that the …" too: not residue of Nora's.
        VerifySubject(contents=(NORA_TEXT,), shared=OMAR_TEXTS),
        embedder=None,
        agents=["main"],
    )
    assert verification.verified, verification


async def test_an_erasure_removes_scratch_files_and_its_receipt_verifies(
    nora_settings: Settings, redis: Redis
) -> None:
    await sweep(nora_settings, redis)
    planted = plant_scratch(nora_settings, NORA_TEXT, os.getpid())

    receipt = await run_erase(nora_settings, redis, EraseRequest(scope="tenant:default:user:nora"))
    assert not planted.exists()
    assert receipt.verified, receipt.verification


async def test_the_verifier_finds_forgotten_text_in_a_scratch_file(
    nora_settings: Settings, redis: Redis
) -> None:
    await sweep(nora_settings, redis)
    async with agent_runtime(nora_settings, "main", redis=redis) as rt:
        await run_forget(rt, ForgetRequest(agent="main", sessions=["sess-nora-1"]))
    subject = VerifySubject(contents=(NORA_TEXT,), shared=OMAR_TEXTS)  # Omar's session survives
    assert (await run_verify(nora_settings, redis, subject, embedder=None, agents=["main"])).verified

    planted = plant_scratch(nora_settings, NORA_TEXT, os.getpid())  # written after the purge
    verification = await run_verify(nora_settings, redis, subject, embedder=None, agents=["main"])
    assert not verification.verified
    physical = next(c for c in verification.checks if c.name == "physical")
    assert physical.status == "failed" and any(planted.name in loc for loc in physical.locations)


async def test_a_sweep_removes_scratch_files_of_a_dead_process_but_not_a_live_ones(
    nora_settings: Settings, redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead = await anyio.run_process([sys.executable, "-c", "import os; print(os.getpid())"])
    orphan = plant_scratch(nora_settings, NORA_TEXT, int(dead.stdout))
    live = plant_scratch(nora_settings, "text of a sweep still running here", os.getpid())
    monkeypatch.setattr(parallel, "INGEST_PARALLEL_MIN_BYTES", 0)
    pooled = dataclasses.replace(
        nora_settings, ingest=dataclasses.replace(nora_settings.ingest, **NO_CAPS, workers=2)
    )
    await sweep(pooled, redis)
    assert not orphan.exists() and live.exists()


@pytest.mark.slow
def test_a_sweep_killed_before_its_merge_leaves_scratch_that_the_next_sweep_removes(
    tmp_path: Path, store_builder: SessionStoreBuilder, unique: str
) -> None:
    """A real `memoryd ingest` with two workers, stopped once its first batch is reserved (the
    workers have written their rows) and SIGKILLed: its scratch files stay behind, holding memory
    text; the next sweep removes them and stages every message once."""
    for n in range(160):  # over the 1 MiB below which a sweep stays serial
        msgs = [
            Msg("user", f"Fact {i} of session {n}: " + "the lighthouse keeper logs tides " * 8)
            for i in range(16)
        ]
        store_builder.add(f"agent:main:s{n}", f"s{n:03d}", msgs)
    config = tmp_path / "memoryd.toml"
    config.write_text(
        f'state_dir = "{tmp_path / "state"}"\nsessions_root = "{store_builder.root}"\n'
        f'redis_url = "{REDIS_URL}"\n\n[daemon]\nhost_id = "test-{unique}"\n\n'
        "[lock]\nttl_ms = 1000\nwait_s = 30\n\n[ingest]\nworkers = 2\nmax_messages_per_sweep = 1000000000\nmax_messages_per_file = 1000000000\n"
    )
    trace = tmp_path / "trace"
    env = {
        **os.environ,
        "MEMORYD_FAILPOINT_STOP": "ingest.corpus.reserved",
        "MEMORYD_FAILPOINT_TRACE": str(trace),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "memoryd.cli", "--config", str(config), "ingest", "--agent", "main", "--json"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not (trace.exists() and "ingest.corpus.reserved" in trace.read_text()):
            assert proc.poll() is None and time.monotonic() < deadline, "the sweep never reached its merge"
            time.sleep(0.05)
        time.sleep(0.2)  # the SIGSTOP follows the trace line
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    settings = load_settings(config)
    scratch = agent_paths(settings, "main").scratch_dir
    left = [p for p in scratch.iterdir()]
    assert left and any(b"lighthouse keeper" in p.read_bytes() for p in left)

    report = run_sweep_cli(config)
    assert not any(p.exists() for p in left)
    assert report["messagesStaged"] == 160 * 16
    lines = corpus_text(settings)
    for n in (0, 159):
        assert lines.count(f"Fact 3 of session {n}:") == 1


def run_sweep_cli(config: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "memoryd.cli", "--config", str(config), "ingest", "--agent", "main", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.usefixtures("small_pool_settings")
async def test_a_pool_whose_worker_was_killed_is_replaced_by_the_next_sweep(
    tmp_path: Path, store_builder: SessionStoreBuilder, redis: Redis, unique: str
) -> None:
    build_history(store_builder)
    pooled = settings_for(tmp_path, store_builder.root, unique, "pooled", 2)
    serial = settings_for(tmp_path, store_builder.root, unique, "serial", 1)
    pool = parallel.scan_pool(2)
    pool.submit(os.getpid).result()  # its workers are up
    for pid in parallel.pool_pids()[:-1]:  # the workers, not their forkserver
        os.kill(pid, signal.SIGKILL)
    with pytest.raises(BrokenProcessPool):
        for _ in range(500):  # until the pool has seen a worker die
            pool.submit(os.getpid).result()
            await anyio.sleep(0.01)

    report = await sweep(pooled, redis)
    assert not report.errors and report == await sweep(serial, redis)
    assert parallel.scan_pool(2) is not pool
    assert await state_of(serial) == await state_of(pooled)


@pytest.mark.usefixtures("small_pool_settings")
async def test_a_batch_whose_scratch_file_went_before_its_merge_stages_nothing(
    tmp_path: Path, store_builder: SessionStoreBuilder, redis: Redis, unique: str
) -> None:
    """A purge removes every scratch file, a running sweep's too: that sweep fails in one line,
    stages nothing of the batch, and the next sweep stages it all."""
    build_history(store_builder)
    pooled = settings_for(tmp_path, store_builder.root, unique, "pooled", 2)
    serial = settings_for(tmp_path, store_builder.root, unique, "serial", 1)
    scratch = agent_paths(pooled, "main").scratch_dir

    def purge_scratch(kind: str, done: int, total: int) -> None:
        if kind == "sessions":  # results are in, their batch not merged yet
            remove_scratch(scratch)

    async with agent_runtime(pooled, "main", redis=redis) as rt:
        with pytest.raises(OperationFailed, match="scratch file of this sweep changed or went"):
            await run_ingest_sweep(rt, purge_scratch)
    rows, corpus = await state_of(pooled)
    assert rows["short_term_entries"] == [] and rows["ingest_lines"] == [] and corpus == {}

    assert await sweep(pooled, redis) == await sweep(serial, redis)
    assert await state_of(serial) == await state_of(pooled)


text_parts = st.lists(
    st.one_of(
        st.text(max_size=6),
        st.sampled_from([" ", "\t\n", "\u2028", "\U0001f600", "a", "é"]),
        st.dictionaries(st.just("type"), st.just("text")).map(lambda d: {**d, "text": "x"}),
    ),
    max_size=16,
)


@given(
    content=st.one_of(
        st.text(max_size=30),
        text_parts.map(
            lambda parts: [p if isinstance(p, dict) else {"type": "text", "text": p} for p in parts]
        ),
    ),
    role=st.sampled_from(["user", "assistant"]),
)
@settings(max_examples=400, deadline=None)
def test_a_staged_line_holds_at_least_the_snippet_minimum_in_bytes(content: Any, role: str) -> None:
    """What keeps the pool's cap check sound: a session cannot yield more candidates than its
    bytes over SNIPPET_MIN_CHARS (plus one)."""
    raw = json.dumps({"type": "message", "message": {"role": role, "content": content}}, ensure_ascii=False)
    for line in (raw.encode(), json.dumps(json.loads(raw)).encode()):  # raw UTF-8 and \\u-escaped
        result = export_line(line, 1, Carry(), SNIPPET_MAX_CHARS, None)
        if result is None or isinstance(result, str):
            continue
        snippet = truncate_utf16(result.text, SNIPPET_MAX_CHARS)
        if utf16_len(snippet) >= SNIPPET_MIN_CHARS:
            assert len(line) >= SNIPPET_MIN_CHARS


@pytest.mark.usefixtures("small_pool_settings")
async def test_lines_another_sweep_staged_while_the_workers_read_are_not_appended_twice(
    tmp_path: Path, store_builder: SessionStoreBuilder, redis: Redis, unique: str
) -> None:
    """Two sweeps of one agent: a serial one stages the history while the pooled one's results
    wait for their merge. The pooled merge drops what is staged since (as the serial commit
    does): every line once in the corpus, the rows of one sweep alone."""
    build_history(store_builder)
    pooled = settings_for(tmp_path, store_builder.root, unique, "pooled", 2)
    beside = dataclasses.replace(pooled, ingest=dataclasses.replace(pooled.ingest, workers=1))
    alone = settings_for(tmp_path, store_builder.root, unique, "alone", 1)
    ran: list[IngestReport] = []

    def sweep_beside(kind: str, done: int, total: int) -> None:
        if kind == "sessions" and not ran:  # results are in, their batch not merged yet

            async def go() -> None:
                async with Redis.from_url(REDIS_URL) as own:
                    ran.append(await sweep(beside, own))

            import threading

            thread = threading.Thread(target=anyio.run, args=(go,))
            thread.start()
            thread.join(60)

    async with agent_runtime(pooled, "main", redis=redis) as rt:
        await run_ingest_sweep(rt, sweep_beside)
    assert ran and ran[0].messages_staged > 0
    await sweep(alone, redis)
    rows, corpus = await state_of(pooled)
    want_rows, want_corpus = await state_of(alone)
    assert corpus == want_corpus
    assert rows["short_term_entries"] == want_rows["short_term_entries"]
    assert rows["ingest_lines"] == want_rows["ingest_lines"]
