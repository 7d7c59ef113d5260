"""Search p95 on an OpenClaw agent database of 300, 1,500 and 10,000 sessions (issue 19):
the search itself, in process, with the sessions source indexed. Search must do no work per
session at query time, so the p95 stays flat as the agent grows. Target: <= 20 ms at each size.
Reported beside it: the same queries as a bare unranked FTS5 match on the same store, and the
search once a transcript changed after the index run (stale: every fingerprint is compared)."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from bench.baselines import connect
from bench.corpus import _Text
from bench.runner import Context, Row, entry_point_missing, info, limit, not_available, run_async
from bench.scenarios._common import CONTEXT, INDEX, SEARCH, entry
from bench.scenarios.search import bare_match_p95_ms, p95

NAME = "search_sessions"
SIZES = {
    "tiny": (30, 120),
    "small": (300, 1_500, 10_000),
    "medium": (300, 1_500, 10_000),
    "large": (300, 1_500, 10_000),
}
AGENT = "main"
CEILING_MS = 20.0
MESSAGES_PER_SESSION = 12
ROUNDS = 3  # each query this many times per repetition: 30 searches to a p95
INDEXED = {"index": {"sources": ["memory", "sessions"], "embedding": {"provider": "none"}}}


def missing() -> str | None:
    return entry_point_missing(CONTEXT, INDEX, SEARCH)


def write_agent(sessions_root: Path, n: int, seed: int = 5) -> None:
    """An OpenClaw agent database of `n` sessions of MESSAGES_PER_SESSION Zipf-text messages,
    written the way OpenClaw's writers write it (the tests' builder), then closed: at rest."""
    from tests.builders import Msg
    from tests.openclaw_fixture import OpenClawDbBuilder

    text = _Text(random.Random(seed))
    builder = OpenClawDbBuilder(sessions_root, AGENT)
    for i in range(n):
        messages = [
            Msg(
                "user" if j % 2 == 0 else "assistant",
                text.sentence_block(random.Random(i * 31 + j).randint(60, 600)),
            )
            for j in range(MESSAGES_PER_SESSION)
        ]
        builder.session(
            builder.key(f"direct:u{i}"), f"s{i:06d}", messages, started=builder.base_ms + i * 1000
        )
    builder.close()


def append_turn(sessions_root: Path, session_id: str) -> None:
    from tests.builders import Msg
    from tests.openclaw_fixture import OpenClawDbBuilder

    builder = OpenClawDbBuilder(sessions_root, AGENT)
    builder.append(session_id, [Msg("user", "one more turn after the index run")])
    builder.close()


def queries() -> list[str]:
    w = _Text(random.Random(7)).words
    pairs = [
        (0, 1),
        (2, 3),
        (0, 16),
        (17, 18),
        (1, 400),
        (300, 700),
        (2_000, 5_000),
        (8_000, 12_000),
        (22, 29_000),
        (4, 5),
    ]
    return [f"{w[a]} {w[b]}" for a, b in pairs]


async def _index(settings: Any) -> None:
    from memoryd.agent_runtime import agent_runtime

    async with agent_runtime(settings, AGENT, redis=True) as rt:
        await entry(INDEX)(rt)


def _one_size(ctx: Context, n: int) -> tuple[list[float], list[float], list[float]]:
    root = ctx.scratch(f"sessions-{n}")
    write_agent(root, n)
    settings = ctx.settings(ctx.scratch(f"state-{n}"), sessions_root=root, **INDEXED)
    run_async(_index, settings)
    qs = queries()
    run_search = entry(SEARCH)
    conn = connect(settings.state_dir / "agents" / AGENT / "memory.sqlite")

    async def product_rep(stale: bool) -> float:
        from memoryd.agent_runtime import agent_runtime

        times = []
        async with agent_runtime(settings, AGENT, readonly=True, redis=False) as rt:
            for q in qs * ROUNDS:
                t0 = time.perf_counter()
                report = await run_search(rt, q, limit=10)
                times.append(time.perf_counter() - t0)
                assert report.stale is stale, report.warning
        return p95(times) * 1000

    def bare() -> float:
        return bare_match_p95_ms(conn, qs)

    prod, base = ctx.interleaved(lambda: run_async(product_rep, False), bare)
    append_turn(root, "s000000")
    (moved,) = ctx.interleaved(lambda: run_async(product_rep, True))
    conn.close()
    return prod, base, moved


def run(ctx: Context) -> list[Row]:
    sizes = SIZES[ctx.scale]
    reason = missing()
    if reason:
        return [not_available(NAME, f"search p95 at {n:,} sessions", reason) for n in sizes]
    rows: list[Row] = []
    for n in sizes:
        prod, base, moved = _one_size(ctx, n)
        figure = f"search p95 at {n:,} OpenClaw sessions, {MESSAGES_PER_SESSION} messages each"
        rows.append(limit(NAME, figure, "ms", prod, CEILING_MS, note="in process; the search alone"))
        rows.append(info(NAME, f"baseline: unranked FTS5 match p95 at {n:,} sessions", "ms", base))
        rows.append(
            info(NAME, f"search p95 at {n:,} sessions, a transcript changed since indexed", "ms", moved)
        )
    return rows
