"""The parallel scan (ingest.workers): the same rows, corpus bytes and checkpoints as the serial
sweep, its scratch files gone after the merge, and the cases where it must stay serial."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from daemon.agent_runtime import agent_runtime
from daemon.agents import agent_paths
from daemon.ingest import parallel
from daemon.ingest import sweep as sweep_module
from daemon.ingest.parallel import plan_tasks, use_workers
from daemon.ingest.report import IngestReport
from daemon.ingest.sweep import run_ingest_sweep
from daemon.settings import Settings
from tests.builders import DAY_MS, Msg, SessionStoreBuilder, conversation
from tests.conftest import make_settings

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
        out[table] = sorted(rows, key=repr)
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
    monkeypatch.setattr(parallel, "INGEST_FLUSH_MESSAGES", 7)
    monkeypatch.setattr(sweep_module, "INGEST_FLUSH_MESSAGES", 7)


@pytest.mark.usefixtures("small_pool_settings")
async def test_workers_stage_the_same_rows_corpus_and_checkpoints_as_the_serial_sweep(
    tmp_path: Path, store_builder: SessionStoreBuilder, redis: Redis, unique: str
) -> None:
    build_history(store_builder)
    serial = settings_for(tmp_path, store_builder.root, unique, "serial", 1)
    pooled = settings_for(tmp_path, store_builder.root, unique, "pooled", 2)

    first = [await sweep(serial, redis), await sweep(pooled, redis)]
    assert first[0] == first[1]
    assert first[0].messages_staged > 3 * 7  # several batches, sessions split between them
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
    assert use_workers(2, big, 10**9, 10**9, path_source=True, erased_senders=False)
    assert not use_workers(1, big, 10**9, 10**9, path_source=True, erased_senders=False)
    assert not use_workers(2, [4_000, 3_000], 10**9, 10**9, path_source=True, erased_senders=False)
    # A cap that could cut a session short (the reference's 80 per file, 240 per sweep) keeps it serial.
    assert not use_workers(2, big, 80, 240, path_source=True, erased_senders=False)
    assert not use_workers(2, big, 10**9, 1_000_000, path_source=True, erased_senders=False)
    assert not use_workers(2, big, 10**9, 10**9, path_source=False, erased_senders=False)
    assert not use_workers(2, big, 10**9, 10**9, path_source=True, erased_senders=True)


def test_tasks_are_consecutive_runs_covering_every_session() -> None:
    sizes = [100, 5_000, 20, 20, 20, 900, 3]
    for workers in (1, 2, 4):
        tasks = plan_tasks(sizes, workers, 1_000)
        assert [i for t in tasks for i in t] == list(range(len(sizes)))
        assert all(len(t) for t in tasks)
