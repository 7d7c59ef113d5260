"""The parallel scan's merge (store/scratch.py `merge_new_claims`) writes exactly the rows the
statement it replaced wrote: every staged entry and staged line (origin and seen hash) of a realistic batch,
digested row by row (rowids included, since they order the staged entries)."""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from memoryd.constants import SESSION_INGESTION_SCORE
from memoryd.derivations import claim_hash, query_hash
from memoryd.ingest.corpus import render_line
from memoryd.ingest.staging import StagedMessage, session_query, stage_claims
from memoryd.store.db import Connection, Store
from memoryd.store.lines import CLAIM_KEY_PREFIX
from memoryd.store.scratch import (
    CandRow,
    Part,
    attach,
    detach,
    merge_lines,
    merge_new_claims,
    part_existing_keys,
    part_keys,
    write_rows,
)

AGENT = "main"
DAY_BUCKET = "2026-03-04"
NOW_MS = 1_772_600_000_000
WORDS = [f"word{i}" for i in range(400)]


def legacy_merge_new_claims(
    conn: Connection,
    name: str,
    part: Part,
    line_bases: dict[str, int],
    skip_keys: list[str],
    day_bucket: str,
    now_ms: int,
    score: float,
) -> None:
    """The statement before the keyed join, kept here as the reference the new one must match."""
    days = orjson.dumps([day_bucket]).decode().replace("'", "''")
    conn.execute(
        "INSERT INTO main.short_term_entries (entry_key, path, start_line, end_line, snippet, daily_count, "
        "total_score, max_score, first_recalled_at, last_recalled_at, query_hashes, recall_days, origin_class, "
        "session_kind, observed_at, claim_hash) "
        f"SELECT c.entry_key, c.path, c.day_idx + b.value, c.day_idx + b.value, c.snippet, 1, {float(score)!r}, "
        f"{float(score)!r}, {int(now_ms)}, {int(now_ms)}, json_array(c.query_hash), '{days}', c.origin_class, "
        f"c.session_kind, c.observed_at, c.claim_hash FROM {name}.cand c JOIN json_each(?) b ON b.key = c.day "
        f"WHERE c.task = ? AND c.seq BETWEEN ? AND ? AND c.entry_key NOT IN (SELECT value FROM json_each(?)) "
        "ORDER BY c.day, c.seq",
        (orjson.dumps(line_bases).decode(), *part[1:], orjson.dumps(list(skip_keys)).decode()),
    )


def generated_tasks(seed: int) -> list[list[CandRow]]:
    """Two workers' tasks of many sessions over three days, with snippets repeated within and
    across sessions and quotes in them, numbered as daemon/ingest/scan_task.py numbers them."""
    rng = random.Random(seed)
    days = ["2026-03-02", "2026-03-03", "2026-03-04"]
    said: list[str] = []
    tasks: list[list[CandRow]] = []
    for task in range(2):
        rows: list[CandRow] = []
        day_counts: Counter[str] = Counter()
        for s in range(60):
            session = f"sess-{task}-{s:03d}"
            for idx in range(rng.randint(1, 40)):
                if said and rng.random() < 0.1:
                    snippet = rng.choice(said)
                else:
                    snippet = " ".join(rng.choices(WORDS, k=rng.randint(4, 30)))
                    if rng.random() < 0.1:
                        snippet += ' it\'s "quoted"'
                    said.append(snippet)
                day = days[min(2, idx // 15)]
                claim = claim_hash(snippet)
                rows.append(
                    CandRow(
                        task,
                        session,
                        f"agent:{AGENT}:{session}" if s % 7 else None,
                        idx + 1,
                        idx,
                        day,
                        day_counts[day],
                        f"memory/.dreams/session-corpus/{day}.txt",
                        CLAIM_KEY_PREFIX + claim,
                        snippet,
                        rng.choice(["owner", "agent", "untrusted"]),
                        "interactive",
                        NOW_MS - rng.randrange(10**8),
                        claim,
                        query_hash(session_query(day)),
                        hashlib.sha256(f"{session}:{idx}".encode()).hexdigest()[:16],
                        render_line(AGENT, f"{session}.jsonl", idx + 1, snippet),
                    )
                )
                day_counts[day] += 1
        tasks.append(rows)
    return tasks


def stage(conn: Connection, named: list[tuple[str, Part]], claims: Any, rng_seed: int) -> None:
    """The merge's statements in daemon/ingest/merge.py `_write_parts` order, with `claims` as its
    staged-entry statement."""
    rng = random.Random(rng_seed)
    for name, part in named:
        merge_lines(conn, name, part, ["sess-0-003", "sess-1-010"])
    repeated = Counter(k for name, part in named for k in part_keys(conn, name, part))
    skip = {k for k, n in repeated.items() if n > 1}
    for name, part in named:
        skip |= part_existing_keys(conn, name, part)
    for name, part in named:
        bases = {day: rng.randint(1, 5000) for day in ("2026-03-02", "2026-03-03", "2026-03-04")}
        claims(conn, name, part, bases, sorted(skip), DAY_BUCKET, NOW_MS, SESSION_INGESTION_SCORE)


def digest(conn: Connection) -> tuple[int, str]:
    h = hashlib.sha256()
    n = 0
    for sql in (
        "SELECT rowid, * FROM short_term_entries ORDER BY rowid",
        "SELECT * FROM ingest_sessions ORDER BY session_no",
        "SELECT * FROM ingest_lines ORDER BY session_no, line_no",
    ):
        for row in conn.execute(sql):
            h.update(orjson.dumps(list(row)))
            n += 1
    return n, h.hexdigest()


async def merged_digest(tmp_path: Path, name: str, claims: Any, scratch: Path) -> tuple[int, str]:
    store = await Store.open(tmp_path / name / "memory.sqlite")
    try:
        # One staged entry before the batch: its claim is merged by the serial path, not here.
        await store.write(_stage_one, generated_tasks(35)[1][5], fence=None)
        names = await store.run(attach, [str(scratch)])
        try:
            parts = [Part(str(scratch), 0, 1, 0), Part(str(scratch), 1, 0, 0)]
            parts = await store.read(_task_ranges, names[0], parts)
            await store.write(stage, [(names[0], p) for p in parts], claims, 7, fence=None)
        finally:
            await store.run(detach, names)
        return await store.read(digest)
    finally:
        await store.close()


def _stage_one(conn: Connection, r: CandRow) -> None:
    staged = StagedMessage(
        r.claim_hash, r.snippet, r.path, 1, r.origin_class, r.session_kind, r.observed_at,
        r.session_id, r.session_key, r.query_hash,
    )  # fmt: skip
    stage_claims(conn, [staged], DAY_BUCKET, NOW_MS - 1)


def _task_ranges(conn: Connection, name: str, parts: list[Part]) -> list[Part]:
    out = []
    for p in parts:
        lo, hi = conn.execute(
            f"SELECT MIN(seq), MAX(seq) FROM {name}.cand WHERE task = ?", (p.task,)
        ).fetchone()
        out.append(p._replace(lo=lo, hi=hi))
    return out


async def test_keyed_merge_stages_the_same_rows_as_the_json_join(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch.sqlite"
    for rows in generated_tasks(35):
        write_rows(scratch, rows)
    old = await merged_digest(tmp_path, "old", legacy_merge_new_claims, scratch)
    new = await merged_digest(tmp_path, "new", merge_new_claims, scratch)
    assert old[0] > 1500  # staged entries, origins and seen hashes of about two thousand lines
    assert new == old
