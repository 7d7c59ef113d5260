"""Corpus files per session: ingestion and backfill record which corpus files a session's lines
went to (before appending them), forget reads only those files, falls back to every corpus
file for a session with no record, and removes the records with the origin rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.agent_runtime import agent_runtime
from memoryd.dreaming.backfill import BackfillRequest, run_backfill
from memoryd.errors import OperationFailed
from memoryd.forget.request import ForgetRequest
from memoryd.forget.run import forget
from memoryd.forget.snapshot import corpus_files_to_scan
from memoryd.ingest.sweep import run_ingest_sweep
from memoryd.ops import erasure
from memoryd.retention.api import EraseRequest
from tests.builders import Msg, SessionStoreBuilder
from tests.conftest import make_settings

DAY1_MS = 1_787_400_000_000  # 2026-08-22 (UTC)
DAY2_MS = DAY1_MS + 2 * 86_400_000
CORPUS = "memory/.dreams/session-corpus"
TARGET_TEXT = "Remember that the violet mongoose launch is on Friday at noon."
OTHER_TEXT = "Remember that the orchard rota changes every Monday morning."
LATER_TEXT = "Remember that the violet mongoose needs a new launch window."


def corpus_path(ms: int) -> str:
    from datetime import UTC, datetime

    return f"{CORPUS}/{datetime.fromtimestamp(ms / 1000, UTC).date().isoformat()}.txt"


def build(tmp_path: Path, sessions_root: Path, unique: str) -> tuple:
    settings = make_settings(tmp_path, sessions_root, daemon={"host_id": f"test-{unique}"})
    b = SessionStoreBuilder(sessions_root, "main")
    b.add(
        "agent:main:dm:nora",
        "s-target",
        [Msg("user", TARGET_TEXT, ts=DAY1_MS), Msg("assistant", "Noted: " + TARGET_TEXT, ts=DAY2_MS)],
        participants=[{"actorId": "nora"}],
        chatType="direct",
    )
    b.add(
        "agent:main:dm:omar",
        "s-other",
        [Msg("user", OTHER_TEXT, ts=DAY1_MS)],
        participants=[{"actorId": "omar"}],
        chatType="direct",
    )
    return settings, b


async def records(settings, redis) -> list[tuple[str, str]]:
    async with agent_runtime(settings, "main", redis=redis) as rt:
        return await rt.require_store().read(
            lambda conn: conn.execute(
                "SELECT session_id, relative_path FROM corpus_session_files ORDER BY 1, 2"
            ).fetchall()
        )


async def sweep(settings, redis):
    async with agent_runtime(settings, "main", redis=redis) as rt:
        return await run_ingest_sweep(rt)


def corpus_text(settings) -> str:
    root = settings.workspace_for("main") / CORPUS
    return "".join(p.read_text() for p in sorted(root.glob("*.txt"))) if root.exists() else ""


async def test_ingest_records_every_corpus_file_a_session_was_appended_to(
    tmp_path, sessions_root, unique, redis
):
    settings, _ = build(tmp_path, sessions_root, unique)
    await sweep(settings, redis)
    assert await records(settings, redis) == sorted(
        [
            ("s-other", corpus_path(DAY1_MS)),
            ("s-target", corpus_path(DAY1_MS)),
            ("s-target", corpus_path(DAY2_MS)),
        ]
    )


async def test_forget_removes_the_sessions_lines_and_its_corpus_file_rows_only(
    tmp_path, sessions_root, unique, redis
):
    settings, _ = build(tmp_path, sessions_root, unique)
    await sweep(settings, redis)
    report = await forget(settings, ForgetRequest(agent="main", sessions=["s-target"]), redis=redis)
    assert report.artifacts.session_corpus_lines == 2 and report.artifacts.session_corpus_files == 2
    assert await records(settings, redis) == [("s-other", corpus_path(DAY1_MS))]
    text = corpus_text(settings)
    assert "violet mongoose" not in text and "s-target" not in text and OTHER_TEXT[:30] in text
    preview = await forget(settings, ForgetRequest(agent="main", sessions=["s-target"], dry_run=True))
    assert preview.artifacts.session_corpus_lines == 0


async def test_erasure_leaves_no_corpus_file_row_naming_the_session(tmp_path, sessions_root, unique, redis):
    settings, _ = build(tmp_path, sessions_root, unique)
    await sweep(settings, redis)
    receipt = await erasure.run_erase(settings, redis, EraseRequest(scope="tenant:default:user:nora"))
    assert receipt.state == "complete", receipt
    assert receipt.artifacts.forget["sessionCorpusLines"] == 2
    rows = await records(settings, redis)
    assert rows == [("s-other", corpus_path(DAY1_MS))]
    assert not any("s-target" in value for row in rows for value in row)


async def test_a_failed_ingest_commit_takes_its_corpus_lines_back_and_the_retry_stages_them_once(
    tmp_path, sessions_root, unique, redis
):
    """A staging transaction that fails after the append (disk full, a trigger here) undoes the
    append: no unstaged line is left for the retry to append again (issue 18, item 11), and
    the record reserved first still leads forget to the file."""
    settings = make_settings(tmp_path, sessions_root, daemon={"host_id": f"test-{unique}"})
    b = SessionStoreBuilder(sessions_root, "main")
    b.add("agent:main:dm:nora", "s-target", [Msg("user", TARGET_TEXT, ts=DAY1_MS)], chatType="direct")
    b.add("agent:main:dm:omar", "s-other", [Msg("user", OTHER_TEXT, ts=DAY1_MS)], chatType="direct")
    await sweep(settings, redis)
    b.append("s-target", [Msg("user", LATER_TEXT, ts=DAY2_MS)], start_index=1)

    async with agent_runtime(settings, "main", redis=redis) as rt:
        store = rt.require_store()
        await store.write(
            lambda conn: conn.execute(
                "CREATE TRIGGER fail_staging BEFORE INSERT ON ingest_lines "
                "BEGIN SELECT RAISE(ABORT, 'injected staging failure'); END"
            ),
            fence=None,
        )
        with pytest.raises(OperationFailed, match="ingest commit failed"):
            await run_ingest_sweep(rt)
        await store.write(lambda conn: conn.execute("DROP TRIGGER fail_staging"), fence=None)
    assert "new launch window" not in corpus_text(settings)  # the append was undone
    assert ("s-target", corpus_path(DAY2_MS)) in await records(settings, redis)  # reserved first

    await sweep(settings, redis)  # the retry appends and stages the line once
    assert corpus_text(settings).count("new launch window") == 1
    await forget(settings, ForgetRequest(agent="main", sessions=["s-target"]), redis=redis)
    text = corpus_text(settings)
    assert "violet mongoose" not in text and "s-target" not in text and OTHER_TEXT[:30] in text


async def test_a_session_without_records_has_every_corpus_file_scanned(
    tmp_path, sessions_root, unique, redis
):
    """Lines the store never recorded (written before it tracked them) are found by the full scan."""
    settings, _ = build(tmp_path, sessions_root, unique)
    await sweep(settings, redis)
    legacy = settings.workspace_for("main") / CORPUS / "2026-01-05.txt"
    legacy.write_text(
        "[main/sessions/main/s-legacy#L3] the heron code word is lantern\n"
        "[main/sessions/main/s-other#L9] an unrelated kept line of text\n"
    )
    report = await forget(settings, ForgetRequest(agent="main", sessions=["s-legacy"]), redis=redis)
    assert report.session_resolutions[0].source == "unresolved"
    assert report.artifacts.session_corpus_lines == 1
    assert legacy.read_text() == "[main/sessions/main/s-other#L9] an unrelated kept line of text\n"


def test_only_recorded_files_are_scanned_when_every_selected_session_has_records(tmp_path):
    workspace = tmp_path / "ws"
    corpus_dir = workspace / CORPUS
    corpus_dir.mkdir(parents=True)
    for name in ("2026-08-22.txt", "2026-08-23.txt", "2026-08-24.md", "notes.json"):
        (corpus_dir / name).write_text("x\n")
    (workspace / "memory" / "2026-08-22.txt").write_text("outside the corpus directory\n")
    recorded = {
        "a": {
            f"{CORPUS}/2026-08-22.txt",
            f"{CORPUS}/gone.txt",
            "memory/2026-08-22.txt",
            f"{CORPUS}/../2026-08-22.txt",
        },
        "b": {f"{CORPUS}/2026-08-24.md"},
    }
    names = [p.name for p in corpus_files_to_scan(workspace, corpus_dir, {"a", "b"}, recorded)]
    assert names == ["2026-08-22.txt", "2026-08-24.md"]  # absent and out-of-directory paths are skipped
    every = ["2026-08-22.txt", "2026-08-23.txt", "2026-08-24.md"]
    assert [p.name for p in corpus_files_to_scan(workspace, corpus_dir, {"a", "c"}, recorded)] == every
    assert [p.name for p in corpus_files_to_scan(workspace, corpus_dir, {"a"}, None)] == every
    assert corpus_files_to_scan(workspace, corpus_dir, set(), recorded) == []


async def test_backfill_apply_records_its_corpus_files_and_forget_removes_them(
    tmp_path, sessions_root, unique, redis
):
    settings, _ = build(tmp_path, sessions_root, unique)
    async with agent_runtime(settings, "main", redis=redis) as rt:
        report = await run_backfill(rt, BackfillRequest(agent="main", mode="apply"))
        assert report.corpus_lines >= 1
    rows = await records(settings, redis)
    assert ("s-target", corpus_path(DAY1_MS)) in rows and ("s-other", corpus_path(DAY1_MS)) in rows
    await forget(settings, ForgetRequest(agent="main", sessions=["s-target"]), redis=redis)
    assert all(sid != "s-target" for sid, _ in await records(settings, redis))
    assert "s-target" not in corpus_text(settings)


def test_stale_internal_session_chunks_are_read_through_the_partial_index_not_a_scan():
    """The query's WHERE must stay the partial index's WHERE, or every session chunk is scanned."""
    from memoryd.index.provenance import INTERNAL_SESSION_KINDS
    from memoryd.store.db import sqlite3
    from memoryd.store.index_chunks import INTERNAL_KINDS, STALE_CHUNKS_SQL
    from memoryd.store.migrate import migrate_connection

    conn = sqlite3.connect(":memory:", isolation_level=None)
    migrate_connection(conn)
    plan = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + STALE_CHUNKS_SQL)]
    assert plan[0] == "SCAN p USING INDEX idx_memory_index_chunk_provenance_internal", plan
    assert not any(step.startswith("SCAN c") for step in plan)
    assert set(INTERNAL_KINDS) == INTERNAL_SESSION_KINDS  # the index's kinds are the domain's


def test_memory_files_under_a_corpus_subdirectory_are_still_listed(tmp_path):
    """The corpus directory is skipped unlisted only when it has no subdirectory."""
    from memoryd.forget.snapshot import list_memory_files

    workspace = tmp_path / "ws"
    corpus_dir = workspace / CORPUS
    corpus_dir.mkdir(parents=True)
    (corpus_dir / "2026-08-22.md").write_text("a corpus day file, left to the corpus scan\n")
    (workspace / "memory" / "2026-08-22.md").write_text("a daily note\n")
    assert [p.relative_to(workspace).as_posix() for p in list_memory_files(workspace, corpus_dir)] == [
        "memory/2026-08-22.md"
    ]
    (corpus_dir / "notes").mkdir()
    (corpus_dir / "notes" / "kept.md").write_text("a memory file in an odd place\n")
    assert [p.relative_to(workspace).as_posix() for p in list_memory_files(workspace, corpus_dir)] == [
        "memory/2026-08-22.md",
        f"{CORPUS}/notes/kept.md",
    ]


async def test_forget_removes_the_backfill_journal_rows_of_the_session_and_keeps_the_others(
    tmp_path, sessions_root, unique, redis
):
    from memoryd.agents import agent_paths
    from memoryd.store.db import Store

    settings, _ = build(tmp_path, sessions_root, unique)
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_backfill(rt, BackfillRequest(agent="main", mode="apply"))

    async def journal() -> list[tuple[str, str, str]]:
        store = await Store.open(agent_paths(settings, "main").db_path)
        try:
            return await store.read(
                lambda c: c.execute("SELECT kind, key, payload FROM backfill_journal").fetchall()
            )
        finally:
            await store.close()

    def naming(rows, sid: str, text: str) -> list:
        return [r for r in rows if sid in r[1] or sid in r[2] or text[:40] in r[2]]

    before = await journal()
    assert naming(before, "s-target", TARGET_TEXT) and naming(before, "s-other", OTHER_TEXT)
    await forget(settings, ForgetRequest(agent="main", sessions=["s-target"]), redis=redis)
    after = await journal()
    assert naming(after, "s-target", TARGET_TEXT) == []
    assert naming(after, "s-other", OTHER_TEXT) == naming(before, "s-other", OTHER_TEXT)
