"""A whole verification (daemon/retention/verify.py run_verify) of an erased subject of 500
messages over a store of other people's text: the retention database (pages and WAL), an
agent's workspace (memory files, a corpus day file) and Redis, against `grep -F -c -f
needles` over the same files in the same run (the subject's pieces and hash prefixes, one a
line). Target: at most 3x grep. The verification does more than grep: it reads every row as
well as the raw bytes, compacts the database (VACUUM) and reads its raw bytes again, and reads
every Redis key; grep reads each file once."""

from __future__ import annotations

import os
import random
import shutil
import string
import subprocess
from pathlib import Path
from typing import Any

from bench.runner import Context, Row, at_most, entry_point_missing, info, not_available, run_async, timed

NAME = "verify"
OBJECTS = {"tiny": 2_000, "small": 10_000, "medium": 40_000, "large": 100_000}
FILES = {"tiny": 5, "small": 20, "medium": 60, "large": 150}
LINES_PER_FILE = 800
SUBJECT_MESSAGES = 500
CEILING = 3.0
TENANT = "tenant:bench"
SUBJECT = f"{TENANT}:user:u-erased"


def missing() -> str | None:
    if shutil.which("grep") is None:
        return "no grep on PATH for the baseline"
    return entry_point_missing(
        "memoryd.retention.verify:run_verify",
        "memoryd.retention.api:write_objects",
        "memoryd.retention.pieces:pieces",
    )


def _sentence(rng: random.Random, n: int) -> str:
    # Random words: the subject shares no 16-character window with the others by chance (a clean
    # store). With a small vocabulary (5,000 words) a few windows recur by chance, as common
    # phrases do in chat: those would be findings, which is not what this measures.
    words = ("".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(10 + n % 15))
    return " ".join(words) + f" m{n}."


async def _populate(settings: Any, objects: int) -> None:
    from memoryd.redis_conn import connect_redis
    from memoryd.retention.api import ObjectWrite, write_objects

    rng = random.Random(7)
    redis = await connect_redis(settings)
    try:
        items = [
            ObjectWrite(f"{TENANT}:user:u-{i % 50}:session:o-{i}", _sentence(rng, i)) for i in range(objects)
        ]
        for start in range(0, len(items), 5_000):
            await write_objects(settings, redis, items[start : start + 5_000])
    finally:
        await redis.aclose()


def _workspace(workspace: Path, files: int) -> None:
    rng = random.Random(11)
    memory = workspace / "memory"
    (memory / ".dreams" / "session-corpus").mkdir(parents=True, exist_ok=True)
    for f in range(files):
        lines = [f"- {_sentence(rng, f * LINES_PER_FILE + i)}" for i in range(LINES_PER_FILE)]
        (memory / f"2026-08-{f % 28 + 1:02d}-{f}.md").write_text("\n".join(lines) + "\n")
    corpus = [
        f"[main/sessions/main/s-{i}.jsonl#L{i}] User: {_sentence(rng, 10**7 + i)}"
        for i in range(LINES_PER_FILE)
    ]
    (memory / ".dreams" / "session-corpus" / "2026-08-30.txt").write_text("\n".join(corpus) + "\n")


def _subject() -> Any:
    from memoryd.retention.needles import VerifySubject

    rng = random.Random(13)
    contents = tuple(_sentence(rng, 10**8 + i) for i in range(SUBJECT_MESSAGES))
    return VerifySubject(ids=(SUBJECT, "u-erased"), contents=contents)


def _needles_file(subject: Any, path: Path) -> int:
    """The subject's pieces and hash prefixes, one a line, as grep -f reads them."""
    from memoryd.retention.needles import derived_values, subject_pieces

    lines = {p for p in subject_pieces(subject) if b"\n" not in p}
    lines |= {v[:12].encode() for c in subject.contents for v in derived_values(c)}
    lines |= {i.encode() for i in subject.ids}
    path.write_bytes(b"\n".join(sorted(lines)) + b"\n")
    return len(lines)


def _files(settings: Any) -> list[str]:
    state = Path(settings.state_dir)
    return sorted(str(p) for p in state.rglob("*") if p.is_file() and not p.is_symlink())


async def _verify(settings: Any, subject: Any) -> Any:
    from memoryd.redis_conn import connect_redis
    from memoryd.retention.verify import run_verify

    redis = await connect_redis(settings)
    try:
        return await run_verify(settings, redis, subject, embedder=None)
    finally:
        await redis.aclose()


def run(ctx: Context) -> list[Row]:
    objects, files = OBJECTS[ctx.scale], FILES[ctx.scale]
    figure = (
        f"verification of a {SUBJECT_MESSAGES}-message subject over {objects:,} objects and {files} files"
    )
    reason = missing()
    if reason:
        return [not_available(NAME, figure, reason)]
    settings = ctx.settings(ctx.scratch("state"), sessions_root=ctx.scratch("no-sessions"))
    run_async(_populate, settings, objects)
    _workspace(Path(settings.workspace_for("main")), files)
    subject = _subject()
    patterns = ctx.workdir / "needles.txt"
    count = _needles_file(subject, patterns)
    results: list[Any] = []

    def product() -> float:
        return timed(lambda: results.append(run_async(_verify, settings, subject)))

    def grep() -> float:
        paths = _files(settings)  # the files as they are now (VACUUM may have rewritten them)
        cmd = ["grep", "-a", "-F", "-c", "-f", str(patterns), *paths]
        # Bytes, as the verifier matches them: the C locale (a UTF-8 locale makes grep -F with
        # many patterns several times slower).
        env = {**os.environ, "LC_ALL": "C"}
        return timed(lambda: subprocess.run(cmd, capture_output=True, check=False, env=env))

    verified, base = ctx.interleaved(product, grep)
    size = sum(Path(p).stat().st_size for p in _files(settings))
    verdict = results[-1]
    note = (
        f"{count:,} needles, {size / 1e6:.1f} MB of files; verified={verdict.verified}; "
        "baseline: LC_ALL=C grep -F -c -f needles over the same files"
    )
    return [
        at_most(NAME, figure + ": time", "s", verified, base, CEILING, note=note),
        info(NAME, "baseline: LC_ALL=C grep -F -c -f needles over the same files", "s", base),
    ]
