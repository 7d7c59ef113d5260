"""Index: chunks/s of a first index sync over the agents' transcripts (sources memory +
sessions), FTS only and with the built-in hashing embedder, each against a bare FTS5 insert of
the same chunk texts into the product's FTS layout, all three interleaved in one run.
Target (FTS only): >= 0.5x. The hashing figure is reported beside the same baseline."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from bench.baselines import fts5_insert, transcript_chunks
from bench.runner import Context, Row, at_least, entry_point_missing, info, not_available, run_async, timed
from bench.scenarios._common import CACHES, CONTEXT, INDEX, entry, process_caches

NAME = "index_fts"


def missing() -> str | None:
    return entry_point_missing(CONTEXT, INDEX, CACHES)


async def _index_all(settings: Any, agents: list[str], caches: Any) -> None:
    from memoryd.agent_runtime import agent_runtime

    run_index_sync = entry(INDEX)
    for agent in agents:
        async with agent_runtime(settings, agent, caches=caches) as rt:
            await run_index_sync(rt, force=False)


def _chunk_texts(state: Path, agents: list[str]) -> list[str]:
    from bench.baselines import connect

    texts: list[str] = []
    for agent in agents:
        db = state / "agents" / agent / "memory.sqlite"
        if db.exists():
            conn = connect(db)
            texts += [r[0] for r in conn.execute("SELECT text FROM memory_index_chunks ORDER BY rowid")]
            conn.close()
    return texts


def _count(state: Path, agents: list[str], sql: str) -> int:
    from bench.baselines import connect

    total = 0
    for agent in agents:
        conn = connect(state / "agents" / agent / "memory.sqlite")
        total += conn.execute(sql).fetchone()[0]
        conn.close()
    return total


def run(ctx: Context) -> list[Row]:
    # One agent (the largest) is enough for a ratio and keeps the small scale within its budget.
    agents = ["main"] if ctx.scale in ("tiny", "small") else list(ctx.corpus.manifest.agents)
    bare_db = ctx.workdir / "bare-fts.sqlite"
    figure = "index sync, FTS only: chunks/s"
    reason = missing()
    if reason:
        chunks = transcript_chunks([p for a in agents for p in ctx.corpus.transcripts(a)])
        (base,) = ctx.interleaved(lambda: len(chunks) / timed(lambda: fts5_insert(bare_db, chunks)))
        return [
            info(NAME, f"baseline: bare FTS5 insert of {len(chunks):,} transcript chunks", "chunk/s", base),
            not_available(NAME, figure, reason),
        ]

    overrides = {"index": {"sources": ["memory", "sessions"], "embedding": {"provider": "none"}}}
    hashing = {"index": {"sources": ["memory", "sessions"], "embedding": {"provider": "hashing"}}}
    # One unmeasured sync gives the chunk texts the baseline inserts.
    first = ctx.scratch("state")
    caches = process_caches()  # as the daemon's worker keeps them across its index jobs
    run_async(_index_all, ctx.settings(first, **overrides), agents, caches)
    chunks = _chunk_texts(first, agents)
    if not chunks:
        return [Row(NAME, figure, None, None, None, "", False, note="the index sync wrote no chunks")]

    def product(config: dict[str, Any]) -> float:
        # A fresh state dir each time: no chunk and no embedding-cache row survives a repetition.
        settings = ctx.settings(ctx.scratch("state"), **config)
        return len(chunks) / timed(lambda: run_async(_index_all, settings, agents, caches))

    def baseline() -> float:
        return len(chunks) / timed(lambda: fts5_insert(bare_db, chunks))

    fts, embedded, base = ctx.interleaved(lambda: product(overrides), lambda: product(hashing), baseline)
    dims = ctx.settings(ctx.workdir).index.embedding.dims
    # The last repetition's store is the hashing one: every chunk must have its vector, or the
    # figure measured an FTS-only sync under another name.
    vectors = _count(ctx.workdir / "state", agents, "SELECT count(*) FROM memory_index_vectors")
    if vectors != len(chunks):
        return [
            Row(
                NAME,
                "index sync, hashing embedder",
                None,
                None,
                None,
                "",
                False,
                note=f"the hashing sync stored {vectors} vectors for {len(chunks)} chunks",
            )
        ]
    where = f"agent {', '.join(agents)}; baseline: executemany into a fresh FTS5 table (its own content, the product's tokenizer), one txn"
    return [
        at_least(
            NAME,
            f"index sync of {len(chunks):,} chunks, FTS only: chunks/s",
            "chunk/s",
            fts,
            base,
            0.5,
            note=where,
        ),
        info(
            NAME,
            f"index sync of {len(chunks):,} chunks, hashing embedder ({dims} dims): chunks/s",
            "chunk/s",
            embedded,
            base,
            note=f"hashing: same chunks, vectors and embedding-cache rows written too; "
            f"{statistics.median(embedded) / statistics.median(fts):.2f}x the FTS-only rate",
        ),
    ]
