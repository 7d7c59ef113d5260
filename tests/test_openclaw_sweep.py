"""An ingest sweep over an OpenClaw agent database: admission is decided from the session rows,
so no transcript event of an excluded session is ever read; admitted ones are staged, resumed
and left alone when unchanged; the database is never written."""

from __future__ import annotations

import hashlib
from pathlib import Path

from memoryd.agent_runtime import agent_runtime
from memoryd.forget.request import ForgetRequest
from memoryd.forget.run import forget
from memoryd.index.search import run_search
from memoryd.index.sync import run_index_sync
from memoryd.ingest.sweep import run_ingest_sweep
from memoryd.sessions.openclaw_store import OpenClawSessionSource
from tests.builders import Msg
from tests.conftest import make_settings
from tests.openclaw_fixture import OpenClawDbBuilder, populate, sid

EXCLUDED_BY_POLICY = [sid(n) for n in (5, 6, 8, 9, 0xB, 0x10)]  # gmail / email hook sessions
NEVER_INGESTED = [sid(n) for n in (0x11, 0x12, 0x13, 0x14, 0x15)]  # cron, heartbeat, subagents, narrative


def tree_state(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


async def test_a_sweep_reads_no_event_of_an_excluded_session_and_stages_the_admitted(
    tmp_path, sessions_root, redis, unique
):
    builder = OpenClawDbBuilder(sessions_root)
    populate(builder)
    builder.close()
    settings = make_settings(
        tmp_path,
        sessions_root,
        daemon={"host_id": f"test-{unique}"},
        memory_policy={"exclude_sessions": {"hook_external_content_sources": ["gmail", "email"]}},
    )
    before = tree_state(sessions_root)
    statements: list[str] = []
    async with agent_runtime(settings, "main", redis=redis) as rt:
        assert rt.sessions.kind == "openclaw"
        rt.sessions = OpenClawSessionSource("main", builder.path, trace=statements.append)
        report = await run_ingest_sweep(rt)

    event_reads = [s for s in statements if "transcript_events" in s]
    for excluded in EXCLUDED_BY_POLICY + NEVER_INGESTED:
        assert not any(excluded in s for s in event_reads), excluded
    assert any(sid(1) in s for s in event_reads)  # the trace does see admitted sessions' reads
    assert report.sessions_excluded["hookExternalContentSource:gmail"] == 4
    assert report.sessions_excluded["hookExternalContentSource:email"] == 2
    assert report.messages_staged > 0 and report.errors == []

    corpus = "".join(p.read_text() for p in (rt.paths.corpus_dir).glob("*.txt"))
    assert f"[main/sessions/main/{sid(1)}#L2] User: Please remember that the boiler service" in corpus
    assert "Trattoria Roma" in corpus
    assert "landlord" not in corpus and "dentist" not in corpus  # gmail / email hook content
    assert rt.paths.corpus_dir.is_relative_to(settings.state_dir)
    assert tree_state(sessions_root) == before  # OpenClaw's files, byte for byte


async def test_an_unchanged_database_is_not_reread_and_an_append_is_resumed(
    tmp_path, sessions_root, redis, unique
):
    builder = OpenClawDbBuilder(sessions_root)
    builder.session(
        builder.key("main"),
        "chat",
        [
            Msg("user", "The spare key is under the blue flowerpot."),
            Msg("assistant", "Noted: the spare key is under the blue flowerpot."),
        ],
    )
    settings = make_settings(tmp_path, sessions_root, daemon={"host_id": f"test-{unique}"})
    async with agent_runtime(settings, "main", redis=redis) as rt:
        first = await run_ingest_sweep(rt)
        second = await run_ingest_sweep(rt)  # OpenClaw still running, nothing appended
        builder.append("chat", [Msg("user", "The alarm code changed to the new one on Monday.")])
        third = await run_ingest_sweep(rt)
    builder.close()
    assert first.messages_staged == 2
    assert (second.sessions_unchanged, second.sessions_scanned, second.messages_staged) == (1, 0, 0)
    assert third.messages_staged == 1
    corpus = "".join(p.read_text() for p in rt.paths.corpus_dir.glob("*.txt"))
    assert corpus.count("alarm code") == 1 and corpus.count("spare key") == 2


async def test_a_forgotten_openclaw_session_is_neither_reread_nor_restaged(
    tmp_path, sessions_root, redis, unique
):
    builder = OpenClawDbBuilder(sessions_root)
    populate(builder)
    settings = make_settings(tmp_path, sessions_root, daemon={"host_id": f"test-{unique}"})
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_ingest_sweep(rt)
        assert "Trattoria Roma" in "".join(p.read_text() for p in rt.paths.corpus_dir.glob("*.txt"))
    report = await forget(settings, ForgetRequest(agent="main", participants=["tg:2002"]), redis=redis)
    assert report.session_ids == [sid(0xD)]
    builder.append(
        sid(0xD), [Msg("user", "Trattoria Roma also wants a deposit by Thursday.")]
    )  # OpenClaw goes on
    statements: list[str] = []
    async with agent_runtime(settings, "main", redis=redis) as rt:
        rt.sessions = OpenClawSessionSource("main", builder.path, trace=statements.append)
        again = await run_ingest_sweep(rt)
        corpus = "".join(p.read_text() for p in rt.paths.corpus_dir.glob("*.txt"))
    builder.close()
    assert again.sessions_excluded.get("forgotten") == 1
    assert not any(sid(0xD) in s for s in statements if "transcript_events" in s)
    assert "Trattoria" not in corpus and "deposit" not in corpus


async def test_index_force_reads_live_and_archived_transcripts_without_writing_them(
    tmp_path, sessions_root, redis, unique
):
    builder = OpenClawDbBuilder(sessions_root)
    populate(builder)
    builder.close()
    settings = make_settings(
        tmp_path,
        sessions_root,
        daemon={"host_id": f"test-{unique}"},
        index={"sources": ["memory", "sessions"]},
    )
    before = tree_state(sessions_root)
    async with agent_runtime(settings, "main", redis=redis) as rt:
        await run_index_sync(rt, force=True)
        live = await run_search(rt, "Trattoria Roma")
        archived = await run_search(rt, "launch moved to May")
    assert [r.session_id for r in live.results] == [sid(0xD)]
    assert [r.session_id for r in archived.results] == [sid(0x16)]  # the deleted session's zstd archive
    assert tree_state(sessions_root) == before
