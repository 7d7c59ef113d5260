"""An agent's `memory_search` over MCP (issue 34): the tool call's round trip through the SDK's own
client and `memoryd mcp` over stdio, recall scoped to a participant, on a store of many chunks
(100,000 at small scale), half of them transcript chunks of recorded sessions with participants.
Target: p95 <= 20 ms, and flat in the number of sessions (the same chunks spread over 100 and
over 10,000 sessions). Reported beside it, as where the time goes: the same searches in process
(the domain's share), and a tool call refused at argument validation (the protocol's share)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from bench.corpus import _Text
from bench.runner import Context, Row, entry_point_missing, info, limit, not_available, run_async
from bench.scenarios._common import CONTEXT, SEARCH, entry
from bench.scenarios.search import CHUNKS, build_store, p95, queries

NAME = "mcp_search"
AGENT = "main"
ASKER = "alice"
CEILING_MS = 20.0
SESSION_COUNTS = (100, 10_000)
ROUNDS = 3  # each query this many times per repetition
SERVER = "memoryd.agents_api.server:McpServer"


def missing() -> str | None:
    reason = entry_point_missing(CONTEXT, SEARCH, SERVER)
    if reason:
        return reason
    return entry_point_missing("mcp.client.client:Client")


def spread_over_sessions(db_path: Path, sessions: int) -> None:
    """Every other chunk becomes a transcript chunk of one of `sessions` sessions; each session
    records its user, and the asker takes part in every other one (so half is withheld)."""
    conn = sqlite3.connect(db_path)
    conn.execute("BEGIN")
    conn.execute(
        "UPDATE memory_index_chunks SET source = 'sessions', path = 'sessions/' || (rowid % ?), "
        "session_id = 's' || (rowid % ?) WHERE rowid % 2 = 0",
        (sessions, sessions),
    )
    rows = [(f"s{i}", f"u{i}", "{}") for i in range(sessions)]
    rows += [(f"s{i}", ASKER, "{}") for i in range(0, sessions, 2)]
    conn.executemany(
        "INSERT INTO session_participants(session_id, actor_id, namespace) VALUES (?, ?, ?)", rows
    )
    conn.execute("COMMIT")
    conn.close()


def _config(ctx: Context, state: Path) -> Path:
    path = state.parent / f"{state.name}.toml"
    path.write_text(
        f'state_dir = "{state}"\nsessions_root = "{ctx.corpus.root}"\nredis_url = "{ctx.redis_url}"\n'
        f'[daemon]\nhost_id = "bench-{ctx.unique}"\n[recall]\nscope = "participant"\n'
    )
    return path


async def _tool_p95(config: Path, calls: list[tuple[str, dict[str, Any]]]) -> float:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memoryd.cli", "--config", str(config), "mcp", "--agent", AGENT],
        env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
    )
    times = []
    async with Client(server) as client:
        await client.list_tools()
        for name, args in calls[:3]:  # the first calls open the store and warm its pages
            await client.call_tool(name, args)
        for name, args in calls:
            t0 = time.perf_counter()
            await client.call_tool(name, args)
            times.append(time.perf_counter() - t0)
    return p95(times) * 1000


async def _in_process_p95(settings: Any, qs: list[str]) -> float:
    from memoryd.agent_runtime import agent_runtime

    run_search = entry(SEARCH)
    times = []
    async with agent_runtime(settings, AGENT, readonly=True, redis=False) as rt:
        for q in qs[:3]:
            await run_search(rt, q, limit=10, participant=ASKER)
        for q in qs:
            t0 = time.perf_counter()
            await run_search(rt, q, limit=10, participant=ASKER)
            times.append(time.perf_counter() - t0)
    return p95(times) * 1000


def run(ctx: Context) -> list[Row]:
    import random

    n = CHUNKS[ctx.scale]
    qs = queries(_Text(random.Random(7))) * ROUNDS
    searches = [("memory_search", {"query": q, "limit": 10, "participant": ASKER}) for q in qs]
    refused = [("memory_search", {"query": q, "limit": 0, "participant": ASKER}) for q in qs]
    figure = f"memory_search round trip p95 over stdio at {n:,} chunks"
    reason = missing()
    if reason:
        return [not_available(NAME, figure, reason)]
    conn, db_path = build_store(ctx, n)
    conn.close()
    stores: dict[int, tuple[Path, Any]] = {}
    for count in SESSION_COUNTS:
        state = ctx.scratch(f"state-{count}")
        target = state / "agents" / AGENT / "memory.sqlite"
        target.parent.mkdir(parents=True)
        shutil.copyfile(db_path, target)
        spread_over_sessions(target, count)
        stores[count] = (_config(ctx, state), ctx.settings(state, recall={"scope": "participant"}))

    few, many = SESSION_COUNTS
    samples = ctx.interleaved(
        lambda: run_async(_tool_p95, stores[few][0], searches),
        lambda: run_async(_tool_p95, stores[many][0], searches),
        lambda: run_async(_in_process_p95, stores[many][1], qs),
        lambda: run_async(_tool_p95, stores[many][0], refused),
    )
    tool_few, tool_many, in_process, protocol = samples
    note = (
        f"{n:,} chunks (half transcript chunks), {len(qs)} calls per rep, two-term queries from stop "
        f"words to rare pairs, scoped to a participant of every other session; FTS only"
    )
    return [
        limit(NAME, f"{figure}, {many:,} sessions", "ms", tool_many, CEILING_MS, note=note),
        limit(NAME, f"{figure}, {few:,} sessions", "ms", tool_few, CEILING_MS),
        info(
            NAME,
            f"{many:,} against {few:,} sessions (flat: about 1x)",
            "ms",
            tool_many,
            tool_few,
        ),
        info(NAME, "where the time goes: the same searches in process", "ms", in_process),
        info(NAME, "where the time goes: a call refused at validation (protocol round trip)", "ms", protocol),
    ]
