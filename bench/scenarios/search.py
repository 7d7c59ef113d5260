"""Search p95 over two-term queries of every term-frequency class, very common terms included,
on a store of many chunks (1M at medium and large scale). Target: p95 <= 50 ms. Reported beside
it: the same queries as a bare unranked FTS5 match (the floor) on the same store."""

from __future__ import annotations

import hashlib
import random
import statistics
import time
from pathlib import Path
from typing import Any

from bench.baselines import connect
from bench.corpus import _Text
from bench.runner import Context, Row, entry_point_missing, info, limit, not_available, run_async
from bench.scenarios._common import SEARCH, entry

NAME = "search"
CHUNKS = {"tiny": 5_000, "small": 100_000, "medium": 1_000_000, "large": 1_000_000}
AGENT = "main"


def missing() -> str | None:
    return entry_point_missing("memoryd.agent_runtime:agent_runtime", SEARCH)


def queries(text: _Text) -> list[str]:
    w = text.words
    pairs = [
        (0, 1),
        (2, 3),
        (0, 16),
        (17, 18),
        (19, 21),
        (0, 20_000),
        (1, 400),
        (300, 700),
        (500, 900),
        (2_000, 5_000),
        (8_000, 12_000),
        (20_000, 25_000),
        (22, 29_000),
        (4, 5),
        (6, 7),
        (15, 23),
    ]
    return [f"{w[a]} {w[b]}" for a, b in pairs]


def build_store(ctx: Context, n: int) -> tuple[Any, Path]:
    """A store with `n` indexed memory chunks in the product's schema (created by Store.open)."""
    from memoryd.store.db import Store

    settings = ctx.settings(ctx.scratch("state"))
    db_path = settings.state_dir / "agents" / AGENT / "memory.sqlite"

    async def create() -> None:
        store = await Store.open(db_path)
        await store.close()

    run_async(create)
    # Chunks are drawn from a pool of Zipf-distributed passages, three at a time: the term
    # statistics stay Zipf while a million chunks take seconds, not minutes, to make.
    text = _Text(random.Random(7))
    pool = [text.sentence_block(random.Random(i).randint(100, 400)) for i in range(4_000)]
    rng = random.Random(11)
    now = int(time.time() * 1000)
    conn = connect(db_path)
    conn.execute("BEGIN")
    batch: list[tuple[Any, ...]] = []
    for i in range(n):
        body = " ".join(rng.choices(pool, k=3))
        path = f"memory/2026-{1 + (i // 5000) % 12:02d}-{1 + (i // 200) % 28:02d}.md"
        digest = hashlib.sha256(body.encode()).hexdigest()
        batch.append((i + 1, f"bench-{i}", path, (i % 200) * 5 + 1, (i % 200) * 5 + 5, digest, body, now))
        if len(batch) == 10_000:
            _insert(conn, batch)
            batch = []
    _insert(conn, batch)
    conn.execute(
        "INSERT INTO memory_index_chunks_fts(rowid, text) SELECT chunk_rowid, text FROM memory_index_chunks_search"
    )
    conn.execute("COMMIT")
    return conn, db_path


def _insert(conn: Any, rows: list[tuple[Any, ...]]) -> None:
    conn.executemany(
        "INSERT INTO memory_index_chunks(rowid, id, path, source, start_line, end_line, hash, "
        "model, text, updated_at) VALUES (?, ?, ?, 'memory', ?, ?, ?, 'fts-only', ?, ?)",
        rows,
    )
    conn.executemany(
        "INSERT INTO memory_index_chunk_provenance(chunk_id, origin_class, session_kind, "
        "observed_at) VALUES (?, 'owner', 'interactive', ?)",
        [(r[1], r[7]) for r in rows],
    )


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


def bare_match_p95_ms(conn: Any, qs: list[str]) -> float:
    """The baseline: p95 of an unranked FTS5 MATCH … LIMIT 10 of each query, in milliseconds."""
    times = []
    for q in qs:
        t0 = time.perf_counter()
        conn.execute(
            "SELECT rowid FROM memory_index_chunks_fts WHERE memory_index_chunks_fts MATCH ? LIMIT 10",
            (q,),
        ).fetchall()
        times.append(time.perf_counter() - t0)
    return p95(times) * 1000


def run(ctx: Context) -> list[Row]:
    n = CHUNKS[ctx.scale]
    qs = queries(_Text(random.Random(7)))
    conn, _ = build_store(ctx, n)
    figure = f"search p95 at {n:,} chunks, two-term queries"

    def bare() -> float:
        return bare_match_p95_ms(conn, qs)

    reason = missing()
    if reason:
        (base,) = ctx.interleaved(bare)
        return [
            info(NAME, f"baseline: unranked FTS5 match p95 at {n:,} chunks", "ms", base),
            not_available(NAME, figure, reason),
        ]

    settings = ctx.settings(ctx.workdir / "state")
    run_search = entry(SEARCH)

    async def product_rep() -> float:
        from memoryd.agent_runtime import agent_runtime

        times = []
        async with agent_runtime(settings, AGENT, readonly=True, redis=False) as rt:
            for q in qs:
                t0 = time.perf_counter()
                await run_search(rt, q, limit=10)
                times.append(time.perf_counter() - t0)
        return p95(times) * 1000

    prod, base = ctx.interleaved(lambda: run_async(product_rep), bare)
    per_scale = ", ".join(f"{scale} {count:,}" for scale, count in CHUNKS.items())
    return [
        limit(
            NAME,
            figure,
            "ms",
            prod,
            50.0,
            note=f"{n:,} chunks at --scale {ctx.scale} (chunks per scale: {per_scale}; 1M is the issue's "
            f"target, run --scale medium --only search); {len(qs)} queries per rep, stop-word to rare "
            "pairs; FTS only",
        ),
        info(NAME, "baseline: unranked FTS5 match p95, same queries", "ms", base),
    ]
