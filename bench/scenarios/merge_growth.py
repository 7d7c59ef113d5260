"""Merge growth: the CPU time the parallel scan's merge (daemon/ingest/merge.py `write_parts`,
with its transaction's commit) spends per staged message, for each successive STEP messages
of one agent's first sweep into one store, against the first step's in the same run. Targets
(issue 35): <= 10 µs per message for the first 50,000, and no more than 1.5x that over the
store's growth (issue 35 states it at 300,000: the `medium` scale).

The rows are what the pool's workers write (store/scratch.py `CandRow`): sessions of 200-1,800
messages with uuid ids, chat text of the bench corpus cut as staged snippets, a few repeated
replies; cut into the serial sweep's batches (ingest/batch.py `batch_limit` rows, a session split
between two batches has its seen hashes written row by row), with each batch's checkpoints and
participants. Each repetition merges every step into a fresh store; the time is the merging
thread's CPU time (time.thread_time), from BEGIN to COMMIT, with the scratch files attached.
"""

from __future__ import annotations

import random
import statistics
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.corpus import _Text
from bench.runner import Context, Row, at_most, entry_point_missing, info, limit, not_available, run_async

NAME = "merge_growth"
AGENT = "main"
MERGE = "memoryd.ingest.merge:write_parts"
STEPS = {"tiny": (2, 5_000), "small": (4, 50_000), "medium": (6, 50_000), "large": (6, 50_000)}
FIRST_CEILING_US = 10.0
GROWTH_FACTOR = 1.5
SESSIONS_PER_TASK = 10
WORKERS = 2
DAY_MS = 86_400_000
START_MS = 1_767_225_600_000  # 2026-01-01: sessions spread over the following days
REPLIES = [f"ok, sounds good, talk {w} then" for w in ("soon", "later", "tomorrow", "tonight", "monday")]


def missing() -> str | None:
    return entry_point_missing(MERGE)


@dataclass
class Batch:
    parts: list[Any]  # store.scratch.Part
    rowwise: list[str]
    checkpoints: list[Any]
    participants: list[Any]


def run(ctx: Context) -> list[Row]:
    steps, size = STEPS.get(ctx.scale, STEPS["small"])
    reason = missing()
    if reason:
        return [not_available(NAME, "merge CPU per staged message", reason)]
    scratch = ctx.scratch("scratch")
    plan = [_write_step(scratch, k, size) for k in range(steps)]
    per_step: list[list[float]] = [[] for _ in range(steps)]
    for rep in range(ctx.warmup + ctx.reps):
        db = ctx.scratch(f"store-{rep}") / "memory.sqlite"
        seconds = run_async(_merge_all, db, plan)
        if rep >= ctx.warmup:
            for k, s in enumerate(seconds):
                per_step[k].append(s / size * 1e6)
    first = per_step[0]
    rows = [
        limit(
            NAME,
            f"merge CPU per staged message, messages 1-{size:,}",
            "µs",
            first,
            FIRST_CEILING_US,
            note=f"one agent, {WORKERS} scratch files, batches of the serial sweep; CPU of the merging thread",
        )
    ]
    for k in range(1, steps):
        figure = f"  messages {k * size + 1:,}-{(k + 1) * size:,} (store of {k * size:,} before)"
        rows.append(info(NAME, figure, "µs", per_step[k], first, note="baseline: the first step's"))
    if steps > 1:
        rows.append(
            at_most(
                NAME,
                f"  the last step against the first ({steps * size:,} messages)",
                "µs",
                per_step[-1],
                first,
                GROWTH_FACTOR,
            )
        )
        mean = [statistics.mean(per_step[k][r] for k in range(steps)) for r in range(len(first))]
        rows.append(info(NAME, f"  mean over all {steps * size:,} messages", "µs", mean, first))
    return rows


# --- the rows --------------------------------------------------------------------------------------


def _write_step(scratch: Path, step: int, size: int) -> list[Batch]:
    """Write one step's rows into the scratch files as the pool's workers would; its batches."""
    from memoryd.derivations import claim_hash, query_hash, seen_hash
    from memoryd.ingest.corpus import corpus_relative_path, render_line
    from memoryd.ingest.staging import session_query
    from memoryd.store.checkpoints import Checkpoint
    from memoryd.store.lines import CLAIM_KEY_PREFIX
    from memoryd.store.participants import ParticipantRow
    from memoryd.store.scratch import CandRow, Part, write_rows

    rng = random.Random(35_000 + step)
    text = _Text(rng)
    sessions: list[tuple[str, int]] = []
    left = size
    while left > 0:
        n = min(left, rng.randint(200, 1_800))
        sessions.append((str(uuid.UUID(int=rng.getrandbits(128))), n))
        left -= n
    ranges: list[tuple[Part, list[tuple[str, int]]]] = []  # (the task's rows, its sessions)
    for task_no, start in enumerate(range(0, len(sessions), SESSIONS_PER_TASK)):
        task = step * 10_000 + task_no
        group = sessions[start : start + SESSIONS_PER_TASK]
        rows: list[CandRow] = []
        day_counts: Counter[str] = Counter()
        for s_no, (sid, n) in enumerate(group):
            day = time.strftime(
                "%Y-%m-%d", time.gmtime((START_MS + (step * 40 + start + s_no) * DAY_MS // 8) / 1000)
            )
            path = f"{sid}.jsonl"
            for i in range(n):
                snippet = rng.choice(REPLIES) if rng.random() < 0.02 else text.message()[:800]
                claim = claim_hash(snippet)
                rows.append(
                    CandRow(
                        task, sid, f"agent:{AGENT}:direct:{sid[:8]}", i + 1, i, day, day_counts[day],
                        corpus_relative_path(day), CLAIM_KEY_PREFIX + claim, snippet,
                        "owner" if i % 2 == 0 else "agent", "interactive", START_MS + i * 60_000, claim,
                        query_hash(session_query(day)), seen_hash(f"{AGENT}:{sid}", f"line:{i + 1}", snippet),
                        render_line(AGENT, f"sessions/{path}", i + 1, snippet),
                    )
                )  # fmt: skip
                day_counts[day] += 1
        file = scratch / f"w{task_no % WORKERS}.sqlite"
        lo, hi = write_rows(file, rows)
        ranges.append((Part(str(file), task, lo, hi), group))
    # The serial sweep's batches: consecutive rows in reading order, as many as batch_limit allows
    # for the store at the batch's start (the earlier steps' rows and this step's before it).
    from memoryd.ingest.batch import batch_limit

    batches: list[Batch] = []
    current = Batch([], [], [], [])
    cut = step * size
    room = batch_limit(cut)
    for part, group in ranges:
        seq = part.lo
        for sid, n in group:
            taken = 0
            while taken < n:
                take = min(room, n - taken)
                _extend(current, part._replace(lo=seq, hi=seq + take - 1))
                if take < n:  # split between batches: its seen hashes are written row by row
                    current.rowwise.append(sid)
                seq += take
                taken += take
                room -= take
                cut += take
                if room == 0:
                    batches.append(current)
                    current, room = Batch([], [], [], []), batch_limit(cut)
            current.checkpoints.append(
                Checkpoint(
                    f"{AGENT}:sessions/{sid}.jsonl", AGENT, sid, None, f"sessions/{sid}.jsonl", START_MS, n * 300,
                    "0" * 64, n, n, True, "", None, START_MS,
                )
            )  # fmt: skip
            current.participants.append(ParticipantRow(sid, f"user-{sid[:6]}", "{}"))
    if current.parts:
        batches.append(current)
    return batches


def _extend(batch: Batch, part: Any) -> None:
    last = batch.parts[-1] if batch.parts else None
    if last is not None and last.path == part.path and last.task == part.task and last.hi + 1 == part.lo:
        batch.parts[-1] = last._replace(hi=part.hi)
    else:
        batch.parts.append(part)


# --- the merge -------------------------------------------------------------------------------------


async def _merge_all(db: Path, plan: list[list[Batch]]) -> list[float]:
    """Merge every step's batches into the store at `db`: each step's merging CPU seconds."""
    from memoryd.store.db import Store

    store = await Store.open(db)
    lines: Counter[str] = Counter()  # corpus lines per day file so far
    try:
        out = []
        for batches in plan:
            cpu = 0.0
            for batch in batches:
                cpu += await store.run(_merge_batch, batch, lines)
            out.append(cpu)
        return out
    finally:
        await store.close()


def _merge_batch(conn: Any, batch: Batch, lines: Counter[str]) -> float:
    """One batch as daemon/ingest/merge.py `_commit_merged` commits it, on the store's thread: its
    corpus line bases, then `write_parts` in one transaction (timed, with the commit)."""
    from memoryd.ingest.merge import write_parts
    from memoryd.store.scratch import attach, detach, part_days

    paths = sorted({p.path for p in batch.parts})
    names = attach(conn, paths)
    try:
        named = [(names[paths.index(p.path)], p) for p in batch.parts]
        days_of = [part_days(conn, name, part) for name, part in named]
        firsts = {day: lines[day] + 1 for per_part in days_of for day, *_ in per_part}
        before: Counter[str] = Counter()
        bases = []
        corpus_paths = set()
        for per_part in days_of:
            base = {}
            for day, path, count, first_idx in per_part:
                base[day] = firsts[day] + before[day] - first_idx
                before[day] += count
                corpus_paths.add(path)
            bases.append(base)
        lines.update(before)
        rowwise = sorted(set(batch.rowwise))
        t0 = time.thread_time()
        conn.execute("BEGIN IMMEDIATE")
        try:
            write_parts(
                conn, AGENT, named, bases, rowwise, batch.checkpoints, [], batch.participants,
                "2026-03-01", START_MS, sorted(corpus_paths),
            )  # fmt: skip
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return time.thread_time() - t0
    finally:
        detach(conn, names)
