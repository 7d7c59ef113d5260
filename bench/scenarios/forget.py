"""Forget preview and apply of one session (~100 affected rows) in stores of growing size.

The store is built for real: a first ingest sweep of the target agent. It is then padded to
the wanted number of origin rows with copies of the other sessions' lineage — origin rows,
staged entries and the corpus lines they cite, under new session ids — so every size has the
same shape. Target: the figure at the largest size <= 1.2x the figure at 10k origin rows
(forget must cost what it removes, not what the store holds).
"""

from __future__ import annotations

import os
import re
import shutil
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from bench.baselines import connect
from bench.runner import Context, Row, at_most, entry_point_missing, info, not_available, run_async, timed
from bench.scenarios._common import (
    CACHES,
    CONTEXT,
    FORGET_REQUEST,
    INGEST,
    RUN_FORGET,
    entry,
    process_caches,
    sweep_agents,
)

NAME = "forget"
AGENT = "main"
SIZES = {
    "tiny": (2_000, 8_000),
    "small": (10_000, 100_000),
    "medium": (10_000, 100_000, 1_000_000),
    "large": (10_000, 100_000, 1_000_000),
}
OTHER_SESSIONS = 300  # sessions besides the target in the store the first sweep builds
DATE_RE = re.compile(r"(\d{4}-\d{2}-\d{2})(?=[^/]*$)")


def missing() -> str | None:
    return entry_point_missing(CONTEXT, INGEST, RUN_FORGET, FORGET_REQUEST, CACHES)


def subset_sessions(ctx: Context, target: str, others: int = OTHER_SESSIONS) -> Path:
    """A sessions root holding the target session and `others` more sessions of the agent, so the
    store the first sweep builds is the same modest size at every scale (padding does the rest)."""
    import orjson

    src = ctx.corpus.sessions_dir(AGENT)
    root = ctx.scratch("sessions")
    dst = root / "agents" / AGENT / "sessions"
    dst.mkdir(parents=True)
    entries = orjson.loads((src / "sessions.json").read_bytes())
    keep = {k: e for k, e in entries.items() if e["sessionId"] == target}
    for key, meta in entries.items():
        if len(keep) > others:
            break
        if meta.get("sessionKind") == "interactive" and not meta.get("hookExternalContentSource"):
            keep.setdefault(key, meta)
    for meta in keep.values():
        shutil.copy2(src / f"{meta['sessionId']}.jsonl", dst / f"{meta['sessionId']}.jsonl")
    (dst / "sessions.json").write_bytes(orjson.dumps(keep))
    return root


def pad_store(state: Path, target: str, total: int, copy: int = 0) -> tuple[int, int]:
    """Add copies of the non-target lineage until the store holds `total` origin rows (staged
    lines that are a claim's origin: daemon/store/lines.py), each copy under other session ids and
    other claims.

    `copy` is the number of copies made by earlier calls. Returns (copies made so far, origin rows).
    Raw SQL on a copy of the tables: the product has no bulk-copy path, and the store is built
    before anything is measured."""
    db = state / "agents" / AGENT / "memory.sqlite"
    workspace = state / "agents" / AGENT / "workspace"
    conn = connect(db)
    # The staged lines of the other sessions (origins of their claims), as ingestion keys them.
    have = conn.execute("SELECT count(*) FROM ingest_lines WHERE claim IS NOT NULL").fetchone()[0]
    origins = conn.execute(
        "SELECT s.session_id, s.session_key, l.line_no, l.claim, l.origin_class, l.observed_at, l.seen "
        "FROM ingest_lines l JOIN ingest_sessions s ON s.session_no = l.session_no "
        "WHERE s.session_id != ? AND l.claim IS NOT NULL",
        (target,),
    ).fetchall()
    cols = [r[1] for r in conn.execute("PRAGMA table_info(short_term_entries)")]
    keys_of = sorted({f"memory:claim:{r[3]:012x}" for r in origins})
    staged = [
        row
        for i in range(0, len(keys_of), 500)
        for row in conn.execute(
            f"SELECT {', '.join(cols)} FROM short_term_entries WHERE entry_key IN "
            f"({','.join('?' * len(keys_of[i : i + 500]))})",
            keys_of[i : i + 500],
        )
    ]
    corpus_files = {
        p: (workspace / p).read_bytes()
        for p in {r[cols.index("path")] for r in staged}
        if (workspace / p).is_file()
    }
    if not origins:
        raise RuntimeError("the first sweep staged nothing outside the target session")
    # Which corpus files each copied session's lines are in, as ingestion records them.
    tracked = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'corpus_session_files'").fetchone()
    records = (
        conn.execute(
            "SELECT session_id, relative_path FROM corpus_session_files WHERE session_id != ?", (target,)
        ).fetchall()
        if tracked
        else []
    )
    conn.execute("BEGIN")
    while have < total:
        copy += 1
        rename = {
            p: DATE_RE.sub(lambda m, c=copy: str(date.fromisoformat(m[1]) - timedelta(days=31 * c)), p)
            for p in corpus_files
        }
        suffix = f"-pad{copy}"
        rows = origins[: total - have]
        mask = (copy * 0x9E3779B97F4A) & 0xFFFFFFFFFFFF  # each copy's claims are other claims
        numbers: dict[tuple[str, str | None], int] = {}
        for sid, key, *_ in rows:
            if (sid, key) not in numbers:
                cur = conn.execute(
                    "INSERT INTO ingest_sessions (session_id, session_key) VALUES (?, ?)",
                    (f"{sid}{suffix}", key),
                )
                numbers[(sid, key)] = cur.lastrowid
        conn.executemany(
            "INSERT INTO ingest_lines (session_no, line_no, claim, origin_class, observed_at, seen) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [(numbers[(r[0], r[1])], r[2], r[3] ^ mask, r[4], r[5], r[6]) for r in rows],
        )
        conn.executemany(
            "INSERT OR IGNORE INTO corpus_session_files VALUES (?, ?)",
            [(f"{sid}{suffix}", rename.get(p, p)) for sid, p in records],
        )
        keys = {f"memory:claim:{r[3]:012x}" for r in rows}
        ki, pi = cols.index("entry_key"), cols.index("path")
        clones = []
        for r in staged:
            if r[ki] in keys:
                c = list(r)
                c[ki] = f"memory:claim:{int(c[ki][13:], 16) ^ mask:012x}"
                c[pi] = rename.get(c[pi], c[pi])
                clones.append(c)
        conn.executemany(
            f"INSERT INTO short_term_entries({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", clones
        )
        sub = re.compile(rb"(\[" + AGENT.encode() + rb"/sessions/" + AGENT.encode() + rb"/)([^#\]]+)(#L)")
        for p, data in corpus_files.items():
            (workspace / rename[p]).write_bytes(sub.sub(rb"\1\2" + suffix.encode() + rb"\3", data))
        have += len(rows)
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return copy, have


def flush_tree(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


async def _forget(settings: Any, target: str, dry_run: bool, caches: Any) -> None:
    from memoryd.agent_runtime import agent_runtime

    request = entry(FORGET_REQUEST).model_validate({"agent": AGENT, "sessions": [target], "dry_run": dry_run})
    async with agent_runtime(settings, AGENT, readonly=dry_run, redis=not dry_run, caches=caches) as rt:
        if dry_run:
            await entry(RUN_FORGET)(rt, request)
        else:
            async with rt.lock().hold():
                await entry(RUN_FORGET)(rt, request)


def run(ctx: Context) -> list[Row]:
    sizes = SIZES[ctx.scale]
    reason = missing()
    if reason:
        return [
            not_available(
                NAME, f"forget {kind} of one session, {sizes[-1]:,} vs {sizes[0]:,} origin rows", reason
            )
            for kind in ("preview", "apply")
        ]
    target = ctx.corpus.manifest.targets[AGENT]
    sessions_root = subset_sessions(ctx, target)
    base = ctx.scratch("base")
    run_async(sweep_agents, ctx.settings(base, sessions_root=sessions_root), [AGENT])
    rows: list[Row] = []
    first: dict[str, list[float]] = {}
    copies = 0
    caches = process_caches()  # as the daemon's worker keeps them across its forget jobs
    smallest = 0
    for size in sizes:
        copies, have = pad_store(base, target, size, copies)
        smallest = smallest or have
        preview_settings = ctx.settings(base, sessions_root=sessions_root)
        apply_dir = ctx.workdir / "apply"

        def preview(s: Any = preview_settings) -> float:
            return timed(lambda: run_async(_forget, s, target, True, caches))

        def apply(apply_dir: Path = apply_dir) -> float:
            shutil.rmtree(apply_dir, ignore_errors=True)
            shutil.copytree(base, apply_dir)
            flush_tree(apply_dir)  # else the store's first fsync writes the whole fresh copy, timed
            s = ctx.settings(apply_dir, sessions_root=sessions_root)
            return timed(lambda: run_async(_forget, s, target, False, caches))

        prev, appl = ctx.interleaved(preview, apply)
        for kind, samples in (("preview", prev), ("apply", appl)):
            if size == sizes[0]:
                first[kind] = samples
                rows.append(info(NAME, f"forget {kind}, {have:,} origin rows", "s", samples))
            elif size == sizes[-1]:
                rows.append(
                    at_most(
                        NAME,
                        f"forget {kind}, {have:,} origin rows (vs {smallest:,})",
                        "s",
                        samples,
                        first[kind],
                        1.2,
                        note="baseline: the same forget at the smallest store",
                    )
                )
            else:
                rows.append(info(NAME, f"forget {kind}, {have:,} origin rows", "s", samples, first[kind]))
    return rows
