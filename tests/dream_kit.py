"""Helpers for the dreaming tests: staged rows and corpus lines written the way ingestion
writes them (with SQL, under the lock), and a runtime to dream in."""

from __future__ import annotations

import json
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from memoryd.agent_runtime import agent_runtime
from memoryd.dreaming.rank import PromotionGates
from memoryd.dreaming.text import claim_hash
from memoryd.store.short_term import COLUMNS
from tests.lineage import ORIGINS

DAY_MS = 86_400_000
NOW_MS = int(time.time() * 1000)
OPEN_GATES = PromotionGates(min_score=0, min_recall_count=0, min_unique_queries=0)


@dataclass
class Stager:
    """Writes corpus lines and staged entries with their origin rows, like ingestion does."""

    workspace: Path
    agent: str = "main"
    rows: list[tuple] = field(default_factory=list)
    origins: list[tuple] = field(default_factory=list)

    def corpus_line(self, day: str, session: str, snippet: str, line_no: int = 1) -> tuple[str, int]:
        rel = f"memory/.dreams/session-corpus/{day}.txt"
        path = self.workspace / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        existing = path.read_text() if path.exists() else ""
        path.write_text(existing + f"[{self.agent}/sessions/{self.agent}/{session}#L{line_no}] {snippet}\n")
        return rel, existing.count("\n") + 1

    def add(
        self,
        snippet: str,
        sessions: list[str] | tuple[str, ...] = ("s1",),
        *,
        origin: str = "owner",
        key: str | None = None,
        day: str = "2026-11-20",
        signals: int = 3,
        queries: int = 3,
        days: int = 3,
        last_ms: int | None = None,
        path: str | None = None,
        line: int | None = None,
        session_classes: dict[str, str] | None = None,
    ) -> str:
        key = key or f"memory:claim:{claim_hash(snippet)}"
        if path is None:
            path, line = self.corpus_line(day, sessions[0] if sessions else "none", snippet)
        last = NOW_MS - 3_600_000 if last_ms is None else last_ms
        self.rows.append(
            (
                key,
                path,
                line or 1,
                line or 1,
                snippet,
                0,
                signals,
                0,
                0.58 * signals,
                0.58,
                last - DAY_MS,
                last,
                json.dumps([f"q{i}" for i in range(queries)]),
                json.dumps([f"2026-11-{10 + i:02d}" for i in range(days)]),
                "[]",
                origin,
                "interactive",
                last,
                claim_hash(snippet),
                None,
                None,
            )
        )
        for sid in sessions:
            cls = (session_classes or {}).get(sid, origin)
            self.origins.append((key, self.agent, sid, f"agent:{self.agent}:{sid}", cls, last))
        return key

    def flush(self, conn) -> None:
        conn.executemany(
            "INSERT INTO memory_entry_origins(entry_key, agent_id, session_id, session_key, origin_class, "
            "observed_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            self.origins,
        )
        conn.executemany(
            f"INSERT INTO short_term_entries({', '.join(COLUMNS)}) VALUES ({','.join('?' * 21)})", self.rows
        )
        self.rows, self.origins = [], []


@asynccontextmanager
async def runtime(settings, redis, agent="main"):
    async with agent_runtime(settings, agent, redis=redis) as rt:
        yield rt


async def stage(rt, stager: Stager) -> None:
    async with rt.lock().hold() as lease:
        await rt.store.write(stager.flush, fence=lease.fence)


def origin_sessions(conn, key: str) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            f"SELECT session_id FROM {ORIGINS} WHERE entry_key = ? ORDER BY session_id", (key,)
        )
    ]
