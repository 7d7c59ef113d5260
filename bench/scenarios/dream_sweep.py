"""A full dreaming sweep (light, REM, deep) over N staged entries, against reading the same
staged entries back from the store in the same run, and the longest stall of the event loop
during the sweep. Targets (issues 18, 35): 20,000 staged entries in <= 30 s for varied and for
low-vocabulary text alike; the loop never stalls for more than a second (a forget enqueued
meanwhile would wait for it).

The entries are staged as ingestion stages them: a corpus line each in the workspace and a
row with its origin session in the agent's store. Their text is each kind of bench/corpus.py
`staged_texts` (`--text`, default both); a fifth of them restate an earlier entry with one word
changed, so the near-duplicate grouping has groups to find.

At the largest size, the grouping's quality against the exact join (`comparisons=None`) on the
same entries in light's order, at light's and REM's thresholds: the (entry, head) pairs the
exact join makes that the bounded grouping also makes, the groups it gives identically, and its
time against the exact join's.
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path
from typing import Any

import anyio

from bench.corpus import TEXTS, staged_texts
from bench.runner import TEXT_ENV, Context, Row, entry_point_missing, info, limit, not_available, run_async
from bench.scenarios._common import CONTEXT, entry

NAME = "dream_sweep"
AGENT = "main"
SWEEP = "memoryd.dreaming.sweep:run_dreaming"
READ_STAGED = "memoryd.dreaming.staged:read_staged"
SIZES = {"tiny": (200, 1_000), "small": (1_000, 4_000, 20_000)}
CEILING_S = {20_000: 30.0}
STALL_CEILING_S = 1.0
DAY_MS = 86_400_000
GROUPING = "memoryd.dreaming.selection:group_similar"
THRESHOLDS = (
    ("light", "dreaming.dedupe_similarity", True),
    ("REM", "memoryd.dreaming.rem:TRUTH_SIMILARITY", False),
)


def missing() -> str | None:
    return entry_point_missing(CONTEXT, SWEEP, READ_STAGED)


def text_kinds() -> list[str]:
    raw = os.environ.get(TEXT_ENV, ",".join(TEXTS))
    return [k for k in raw.split(",") if k in TEXTS]


def stage(db: Path, workspace: Path, n: int, now_ms: int, agent: str = AGENT, text: str = "varied") -> None:
    """Corpus lines and staged rows with origins, written with SQL as ingestion commits them."""
    from bench.baselines import connect
    from memoryd.store.short_term import COLUMNS

    rng = random.Random(n)
    texts = staged_texts(n, rng, text)
    day = time.strftime("%Y-%m-%d", time.gmtime(now_ms / 1000))
    rel = f"memory/.dreams/session-corpus/{day}.txt"
    corpus = workspace / rel
    corpus.parent.mkdir(parents=True, exist_ok=True)
    rows, origins, lines = [], [], []
    for i, text in enumerate(texts):
        session = f"s{i % 200}"
        lines.append(f"[{agent}/sessions/{agent}/{session}#L{i + 1}] {text}\n")
        key = f"memory:claim:{i:012x}"
        last = now_ms - rng.randrange(DAY_MS)
        signals = rng.randint(1, 6)
        rows.append(
            (key, rel, i + 1, i + 1, text, signals, 0, 0, 0.7 * signals, 0.9, last - 2 * DAY_MS, last,
             json.dumps([f"q{j}" for j in range(rng.randint(1, 4))]),
             json.dumps([f"d{j}" for j in range(rng.randint(1, 3))]), "[]", "owner", "interactive", last,
             None, None, None)
        )  # fmt: skip
        origins.append((key, agent, session, f"agent:{agent}:{session}", "owner", last))
    corpus.write_text("".join(lines))
    conn = connect(db)
    with conn:
        conn.executemany(
            "INSERT INTO memory_entry_origins(entry_key, agent_id, session_id, session_key, origin_class, "
            "observed_at) VALUES (?, ?, ?, ?, ?, ?)",
            origins,
        )
        conn.executemany(
            f"INSERT INTO short_term_entries({', '.join(COLUMNS)}) VALUES ({','.join('?' * len(COLUMNS))})",
            rows,
        )
    conn.close()


async def _open_store(settings: Any) -> tuple[Path, Path]:
    """Create the agent's store (migrated): its path and the agent's workspace."""
    async with entry(CONTEXT)(settings, AGENT, redis=False) as rt:
        return Path(rt.paths.db_path), Path(rt.paths.workspace)


async def _sweep(settings: Any, now_ms: int) -> tuple[float, float]:
    """One full sweep: (seconds, longest event-loop stall in seconds)."""
    stall = 0.0
    done = anyio.Event()

    async def ticker() -> None:
        nonlocal stall
        last = time.perf_counter()
        while not done.is_set():
            await anyio.sleep(0.01)
            now = time.perf_counter()
            stall = max(stall, now - last - 0.01)
            last = now

    async with entry(CONTEXT)(settings, AGENT) as rt, anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        t0 = time.perf_counter()
        await entry(SWEEP)(rt, now_ms=now_ms)
        elapsed = time.perf_counter() - t0
        done.set()
    return elapsed, stall


async def _read_back(settings: Any) -> float:
    async with entry(CONTEXT)(settings, AGENT, redis=False) as rt:
        t0 = time.perf_counter()
        await rt.require_store().read(entry(READ_STAGED), AGENT)
        return time.perf_counter() - t0


def run(ctx: Context) -> list[Row]:
    sizes = SIZES.get(ctx.scale, SIZES["small"])
    kinds = text_kinds()
    reason = missing()
    if reason:
        return [not_available(NAME, f"dream sweep over {n:,} staged entries", reason) for n in sizes]
    rows: list[Row] = []
    for text in kinds:
        for n in sizes:
            rows += _sweeps(ctx, n, text)
        rows += _quality(ctx, sizes[-1], text)
    return rows


def _sweeps(ctx: Context, n: int, text: str) -> list[Row]:
    now_ms = int(time.time() * 1000)
    times: list[float] = []
    stalls: list[float] = []
    reads: list[float] = []
    for rep in range(ctx.reps):
        # A fresh store each repetition: a sweep promotes and records phase signals.
        settings = ctx.settings(ctx.scratch(f"state-{text}-{n}-{rep}"))
        db, workspace = run_async(_open_store, settings)
        stage(db, workspace, n, now_ms, text=text)
        reads.append(run_async(_read_back, settings))
        elapsed, stall = run_async(_sweep, settings, now_ms)
        times.append(elapsed)
        stalls.append(stall)
    figure = f"dream sweep (light, REM, deep) over {n:,} staged entries, {text} text"
    note = "baseline: reading the same staged entries back from the store"
    rows = [info(NAME, figure, "s", times, reads, note=note)]
    if n in CEILING_S:
        rows.append(
            limit(NAME, f"  the same against the issue's ceiling ({n:,}, {text})", "s", times, CEILING_S[n])
        )
    rows.append(
        limit(NAME, f"  longest event-loop stall during it ({n:,}, {text})", "s", stalls, STALL_CEILING_S)
    )
    return rows


def _quality(ctx: Context, n: int, text: str) -> list[Row]:
    """The bounded grouping against the exact join on the same staged entries (module docstring)."""
    settings = ctx.settings(ctx.scratch(f"quality-{text}-{n}"))
    db, workspace = run_async(_open_store, settings)
    stage(db, workspace, n, int(time.time() * 1000), text=text)
    entries = run_async(_staged, settings)
    entries.sort(key=lambda e: (-e.last_recalled_at, -e.signal_count, e.entry_key))  # light's order
    group = entry(GROUPING)
    rows: list[Row] = []
    for phase, where, same_path in THRESHOLDS:
        threshold = settings.dreaming.dedupe_similarity if where.startswith("dreaming.") else entry(where)
        t0 = time.process_time()
        bounded = [g.keys for g in group(entries, threshold, same_path=same_path)]
        t1 = time.process_time()
        exact = [g.keys for g in group(entries, threshold, same_path=same_path, comparisons=None)]
        t2 = time.process_time()
        want, got = _pairs(exact), _pairs(bounded)
        same = len(set(exact) & set(bounded))
        rows.append(
            info(
                NAME,
                f"  {phase} grouping ({threshold:g}) vs the exact join, {n:,} {text}: CPU s",
                "s",
                [t1 - t0],
                [t2 - t1],
                note=(
                    f"pairs found {len(want & got):,} of {len(want):,} (missed {len(want - got):,}, "
                    f"other {len(got - want):,}); groups identical {100 * same / max(1, len(exact)):.2f}% "
                    f"of {len(exact):,}; baseline: the exact join's CPU time"
                ),
            )
        )
    return rows


def _pairs(groups: list[tuple[str, ...]]) -> set[tuple[str, str]]:
    """(member, head) of every grouped entry that is not its group's head."""
    return {(k, g[0]) for g in groups for k in g[1:]}


async def _staged(settings: Any) -> list[Any]:
    async with entry(CONTEXT)(settings, AGENT, redis=False) as rt:
        staged: list[Any] = await rt.require_store().read(entry(READ_STAGED), AGENT)
        return staged
