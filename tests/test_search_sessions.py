"""Search over an OpenClaw agent database with the sessions source indexed: a changed
transcript still makes the index stale, and a search opens as many snapshots of OpenClaw's
database at 80 sessions as at 8 (counted by SQLite's own statement trace)."""

from __future__ import annotations

from pathlib import Path

from memoryd.agent_runtime import AgentRuntime, agent_runtime
from memoryd.index.search import run_search
from memoryd.index.sync import run_index_sync
from memoryd.sessions.openclaw_store import OpenClawSessionSource
from tests.builders import Msg
from tests.conftest import index_settings
from tests.openclaw_fixture import OpenClawDbBuilder

AGENT = "main"
SOURCES = ["memory", "sessions"]


def _agent(sessions_root: Path, n: int) -> OpenClawDbBuilder:
    b = OpenClawDbBuilder(sessions_root, AGENT)
    for i in range(n):
        b.session(
            b.key(f"direct:u{i}"), f"s{i:03d}", [Msg("user", f"lighthouse rota {i}"), Msg("assistant", "ok")]
        )
    return b


def _traced(rt: AgentRuntime, statements: list[str]) -> None:
    source = rt.sessions
    assert isinstance(source, OpenClawSessionSource)
    rt.sessions = OpenClawSessionSource(AGENT, source.db_path, trace=statements.append)


async def test_a_search_notices_a_transcript_that_changed_after_the_index_run(
    redis, tmp_path, sessions_root, unique
) -> None:
    b = _agent(sessions_root, 5)
    settings = index_settings(tmp_path, sessions_root, unique, sources=SOURCES)
    async with agent_runtime(settings, AGENT, redis=redis) as rt:
        await run_index_sync(rt)
        assert not (await run_search(rt, "lighthouse")).stale
        b.append("s003", [Msg("user", "the boiler is serviced in May")])
        report = await run_search(rt, "lighthouse")
        assert report.stale and "sessions/main/s003" in (report.warning or "")
        await run_index_sync(rt)
        assert not (await run_search(rt, "boiler")).stale
        b.close()  # at rest now (checkpointed, no -wal): the same answers
        assert not (await run_search(rt, "boiler")).stale
        b.open().append("s001", [Msg("user", "one more turn")])
        b.close()
        report = await run_search(rt, "lighthouse")
        assert report.stale and "sessions/main/s001" in (report.warning or "")


async def test_the_snapshots_a_search_opens_do_not_grow_with_the_sessions(
    redis, tmp_path, sessions_root, unique
) -> None:
    """None while the database is as the index run read it; a fixed few once it moved on."""
    opened: dict[tuple[int, str], int] = {}
    for n in (8, 80):
        root = sessions_root / str(n)
        b = _agent(root, n)
        b.close()
        settings = index_settings(tmp_path / str(n), root, unique, sources=SOURCES)
        async with agent_runtime(settings, AGENT, redis=redis) as rt:
            await run_index_sync(rt)
            statements: list[str] = []
            _traced(rt, statements)
            for state in ("as indexed", "changed"):
                if state == "changed":
                    b.open().append("s002", [Msg("user", "a later turn")])
                statements.clear()
                report = await run_search(rt, "lighthouse rota")
                assert report.results and report.stale is (state == "changed")
                opened[n, state] = statements.count("BEGIN")
            b.close()
    assert opened[8, "as indexed"] == opened[80, "as indexed"] == 0
    assert opened[8, "changed"] == opened[80, "changed"] <= 4  # the tables, then list, fingerprint, archives


async def test_openclaw_writing_its_own_tables_costs_a_search_one_read_and_no_stale_warning(
    redis, tmp_path, sessions_root, unique
) -> None:
    b = _agent(sessions_root, 20)
    b.close()
    settings = index_settings(tmp_path, sessions_root, unique, sources=SOURCES)
    async with agent_runtime(settings, AGENT, redis=redis) as rt:
        await run_index_sync(rt)
        statements: list[str] = []
        _traced(rt, statements)
        b.open()
        # OpenClaw keeps its own memory index in the agent database: the file moves, no session does.
        b.conn.execute("CREATE TABLE openclaw_memory_chunks (id INTEGER PRIMARY KEY, text TEXT)")
        b.conn.execute("INSERT INTO openclaw_memory_chunks(text) VALUES ('lighthouse rota')")
        report = await run_search(rt, "lighthouse rota")
        assert report.results and not report.stale
        assert statements.count("BEGIN") == 1
        b.append("s007", [Msg("user", "a later turn")])
        report = await run_search(rt, "lighthouse rota")
        assert report.stale and "sessions/main/s007" in (report.warning or "")
        b.close()


async def test_an_index_run_reads_every_transcript_from_one_snapshot(
    redis, tmp_path, sessions_root, unique
) -> None:
    """A connection per transcript was most of a large index run's reading; the run's
    snapshots now do not grow with the sessions, and every transcript is still indexed."""
    opened: dict[int, int] = {}
    for n in (8, 80):
        root = sessions_root / str(n)
        b = _agent(root, n)
        b.close()
        settings = index_settings(tmp_path / str(n), root, unique, sources=SOURCES)
        async with agent_runtime(settings, AGENT, redis=redis) as rt:
            statements: list[str] = []
            _traced(rt, statements)
            report = await run_index_sync(rt)
            assert report.ok and report.files.indexed >= n
            opened[n] = statements.count("BEGIN")
            hits = await run_search(rt, f"lighthouse rota {n - 1}")
            assert any(f"sessions/{AGENT}/s{n - 1:03d}" in r.path for r in hits.results)
    assert opened[8] == opened[80]


def test_transcripts_read_in_one_snapshot_see_a_consistent_state_while_openclaw_appends(
    sessions_root,
) -> None:
    b = _agent(sessions_root, 3)  # open: OpenClaw holds the database (WAL)
    source = OpenClawSessionSource(AGENT, b.path)
    listing = source.list_sessions()
    by_id = {s.session_id: s for s in listing.sessions}
    with source.reading():
        with source.open_transcript(by_id["s000"]) as lines:
            first = list(lines)
        b.append("s001", [Msg("user", "written after the snapshot began")])
        with source.open_transcript(by_id["s001"]) as lines:
            second = list(lines)
    assert first and second
    assert not any(b"after the snapshot began" in line for line in second)  # the snapshot's state
    with source.open_transcript(by_id["s001"]) as lines:  # outside the block: the current state
        assert any(b"after the snapshot began" in line for line in lines)
    b.close()


async def test_a_backfill_preview_reads_every_transcript_from_one_snapshot(
    redis, tmp_path, sessions_root, unique
) -> None:
    """Backfill scans every admitted session's transcript: one snapshot of OpenClaw's database
    for all of them, not a connection each, and the same messages found."""
    from memoryd.dreaming.backfill import run_backfill
    from memoryd.dreaming.backfill_request import BackfillRequest

    opened: dict[int, int] = {}
    for n in (8, 80):
        root = sessions_root / str(n)
        b = _agent(root, n)
        b.close()
        settings = index_settings(tmp_path / str(n), root, unique, sources=SOURCES)
        async with agent_runtime(settings, AGENT, redis=redis) as rt:
            statements: list[str] = []
            _traced(rt, statements)
            report = await run_backfill(rt, BackfillRequest(agent=AGENT))
            assert report.sessions_scanned == n
            opened[n] = statements.count("BEGIN")
    assert opened[8] == opened[80]
