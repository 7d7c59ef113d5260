"""Forget apply on a real store, real files and real Redis: every artifact kind of reference
§7.10 is removed, and what must stay stays."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from redis.asyncio import Redis

from memoryd.agent_runtime import agent_runtime
from memoryd.forget.report import ForgetReport
from memoryd.forget.request import ForgetRequest
from memoryd.forget.run import forget, run_forget
from memoryd.settings import Settings
from memoryd.store.index_state import current_revision
from memoryd.store.tombstones import list_tombstones
from tests.conftest import make_settings
from tests.forget_world import (
    BACKUP_UNRELATED,
    BACKUP_WITH_TARGET,
    CORPUS_MIXED,
    CORPUS_MIXED_TEXT,
    CORPUS_TARGET_ONLY,
    DAILY_MD_AFTER,
    DREAMS_MD_AFTER,
    MEMORY_MD,
    MEMORY_MD_AFTER,
    OTHER_SNIPPET,
    SHORT_SNIPPET,
    TARGET_SNIPPET,
    ForgetWorld,
)
from tests.lineage import SEEN


@pytest.fixture
async def world(settings: Settings, sessions_root) -> ForgetWorld:
    return await ForgetWorld(settings, sessions_root).build()


async def purge(world: ForgetWorld, redis: Redis, **selectors) -> ForgetReport:
    request = ForgetRequest(agent=world.agent, **selectors)
    return await forget(world.settings, request, redis=redis)


async def preview(world: ForgetWorld, **selectors) -> ForgetReport:
    return await forget(world.settings, ForgetRequest(agent=world.agent, dry_run=True, **selectors))


EXPECTED_ARTIFACTS = {
    "memoryFiles": 3,
    "memoryEntries": 4,
    "memoryLines": 1,
    "sessionCorpusFiles": 2,
    "sessionCorpusLines": 3,
    "indexChunks": 7,
    "indexSources": 3,
    "ftsRows": 7,
    "vectorRows": 6,
    "embeddingCacheRows": 3,
    "shortTermEntries": 3,
    "seenHashScopes": 1,
    "backups": 1,
    "originRows": 3,
}


async def test_preview_reports_every_artifact_kind_in_reference_order(world: ForgetWorld):
    report = await preview(world, sessions=["target"])
    data = report.to_json()
    assert list(data) == [
        "agentId",
        "dryRun",
        "sessionIds",
        "participantMatches",
        "sessionResolutions",
        "entryKeys",
        "mixedLineageEntryKeys",
        "untargetableEntryKeys",
        "curatedWrites",
        "artifacts",
        "refusals",
        "counts",
    ]
    assert data["artifacts"] == EXPECTED_ARTIFACTS
    assert list(data["artifacts"]) == list(EXPECTED_ARTIFACTS)
    assert data["sessionIds"] == ["target"]
    assert data["sessionResolutions"] == [
        {"sessionId": "target", "sessionKey": "agent:main:main", "source": "live"}
    ]
    assert data["entryKeys"] == ["k-mixed", "k-target"]
    assert data["mixedLineageEntryKeys"] == ["k-mixed"]
    assert data["untargetableEntryKeys"] == ["k-untracked"]
    # Sorted as the reference sorts them (localeCompare): case aside, memory/ before USER.md.
    assert [w["relativePath"] for w in data["curatedWrites"]] == ["MEMORY.md", "memory/notes.md", "USER.md"]
    assert data["curatedWrites"][0]["observedAt"] == 1787738401000
    assert data["refusals"] == []


async def test_dry_run_takes_no_lock_and_writes_nothing_not_even_a_schema(settings: Settings, sessions_root):
    world = ForgetWorld(settings, sessions_root)
    world.build_sessions()
    world.build_files()
    before = {p: p.read_bytes() for p in world.workspace.rglob("*") if p.is_file()}
    report = await preview(world, sessions=["target"])  # no Redis given: a lock would fail
    assert report.dry_run is True
    assert report.artifacts.session_corpus_lines == 3  # files are still scanned
    assert not world.paths.db_path.exists()
    assert not world.paths.state_dir.joinpath("forgotten.key").exists()
    assert {p: p.read_bytes() for p in world.workspace.rglob("*") if p.is_file()} == before


async def test_dry_run_on_an_existing_store_changes_no_row_and_no_revision(world: ForgetWorld):
    before_rev = await world.query("SELECT revision FROM memory_index_state")
    counts_sql = (
        "SELECT (SELECT count(*) FROM memory_entry_origins), (SELECT count(*) FROM memory_index_chunks), "
        "(SELECT count(*) FROM short_term_entries), (SELECT count(*) FROM memory_session_tombstones)"
    )
    before = await world.query(counts_sql)
    await preview(world, sessions=["target"])
    assert await world.query(counts_sql) == before
    assert await world.query("SELECT revision FROM memory_index_state") == before_rev
    assert world.read("MEMORY.md") == MEMORY_MD


async def test_preview_then_apply_on_unchanged_state_gives_the_same_report_but_dry_run(world, redis):
    previewed = await preview(world, sessions=["target"])
    applied = await purge(world, redis, sessions=["target"])
    expected = previewed.to_json()
    expected["counts"] = {**expected["counts"], "sessionsRecordedForgotten": 1}  # only a purge records
    assert applied.to_json() == {**expected, "dryRun": False}


async def test_promoted_entries_and_session_sections_are_removed_from_memory_files(world, redis):
    await purge(world, redis, sessions=["target"])
    assert world.read("MEMORY.md") == MEMORY_MD_AFTER
    assert world.read("memory/2026-08-25.md") == DAILY_MD_AFTER
    assert world.read("DREAMS.md") == DREAMS_MD_AFTER


async def test_diary_lines_quoting_a_removed_corpus_snippet_are_removed(world, redis):
    await purge(world, redis, sessions=["target"])
    dreams = world.read("DREAMS.md")
    assert TARGET_SNIPPET not in dreams
    assert OTHER_SNIPPET in dreams


async def test_corpus_lines_are_removed_and_an_emptied_corpus_file_is_deleted(world, redis):
    await purge(world, redis, sessions=["target"])
    corpus = world.read(CORPUS_MIXED)
    assert "sessions/main/target#" not in corpus
    assert corpus.splitlines() == [line for line in CORPUS_MIXED_TEXT.splitlines() if "/target#" not in line]
    assert world.read(CORPUS_TARGET_ONLY) is None


async def test_index_chunks_fts_vectors_sources_and_embedding_cache_are_purged(world, redis):
    await purge(world, redis, sessions=["target"])
    paths = {p for (p,) in await world.query("SELECT path FROM memory_index_chunks")}
    assert paths == {"USER.md", "sessions/main/other", "sessions/main/prefix-survivor"}
    fts = await world.query("SELECT count(*) FROM memory_index_chunks_fts_docsize")
    assert fts == [(3,)]
    # no FTS row survives for a purged chunk: full-text search cannot find the forgotten words
    assert (
        await world.query(
            "SELECT rowid FROM memory_index_chunks_fts WHERE memory_index_chunks_fts MATCH 'mongoose'"
        )
        == []
    )
    vec_owners = await world.query(
        "SELECT c.path FROM memory_index_vectors v JOIN memory_index_chunks c "
        "ON c.rowid = v.chunk_rowid ORDER BY c.path"
    )
    assert [p for (p,) in vec_owners] == ["USER.md", "sessions/main/other", "sessions/main/prefix-survivor"]
    assert await world.query("SELECT count(*) FROM memory_index_vectors") == [(3,)]
    assert await world.query("SELECT count(*) FROM memory_index_chunk_provenance") == [(3,)]
    sources = {p for (p,) in await world.query("SELECT path FROM memory_index_sources")}
    assert CORPUS_TARGET_ONLY not in sources and "sessions/main/target" not in sources
    assert "sessions/main/cronjob" not in sources  # stale internal transcript
    assert "MEMORY.md" in sources  # memory-file sources stay: the changed hash re-indexes them
    assert await world.query("SELECT count(*) FROM memory_embedding_cache") == [(0,)]


async def test_staged_entries_and_their_phase_signals_are_removed(world, redis):
    await purge(world, redis, sessions=["target"])
    staged = {k for (k,) in await world.query("SELECT entry_key FROM short_term_entries")}
    assert staged == {"k-other", "k-daily"}
    signals = {k for (k,) in await world.query("SELECT entry_key FROM phase_signals")}
    assert signals == {"k-other", "k-daily"}


async def test_checkpoints_and_seen_hash_scopes_of_the_session_are_removed(world, redis):
    await purge(world, redis, sessions=["target"])
    checkpoints = {k for (k,) in await world.query("SELECT state_key FROM ingest_checkpoints")}
    assert checkpoints == {"main:sessions/main/other", "main:sessions/main/prefix-survivor"}
    scopes = {s for (s,) in await world.query(f"SELECT DISTINCT scope FROM {SEEN}")}
    assert scopes == {"main:other", "main:prefix-survivor"}


async def test_rewrite_preimages_are_scrubbed_in_place_not_deleted(world, redis):
    await purge(world, redis, sessions=["target"])
    rows = await world.query("SELECT content, content_hash FROM memory_backups ORDER BY id")
    assert len(rows) == 2
    assert rows[0][0] == MEMORY_MD_AFTER and rows[0][0] != BACKUP_WITH_TARGET
    from memoryd.fileio import sha256_hex

    assert rows[0][1] == sha256_hex(MEMORY_MD_AFTER)
    assert rows[1][0] == BACKUP_UNRELATED


async def test_origin_rows_of_selected_entries_go_for_every_session(world, redis):
    await purge(world, redis, sessions=["target"])
    rows = await world.query("SELECT entry_key, session_id FROM memory_entry_origins ORDER BY 1, 2")
    assert ("k-mixed", "other") not in rows  # mixed lineage: the whole entry went
    assert {k for k, _ in rows} == {"k-other", "k-survivor"}


async def test_forgotten_records_are_added_and_the_index_revision_moves(world, redis):
    before = await world.query("SELECT revision FROM memory_index_state")
    await purge(world, redis, sessions=["target"])
    store = await world.open_store()
    try:
        tombstones = await store.read(list_tombstones)
        revision = await store.read(current_revision)
    finally:
        await store.close()
    assert [(t.session_id, t.reason) for t in tombstones] == [("target", "forgotten")]
    assert revision > before[0][0]


async def test_mixed_lineage_entry_is_removed_whole_and_listed(world, redis):
    report = await purge(world, redis, sessions=["target"])
    assert report.mixed_lineage_entry_keys == ["k-mixed"]
    assert "orchard rota and the violet plan" not in world.read("MEMORY.md")


async def test_marker_without_origins_is_listed_untargetable_and_kept(world, redis):
    report = await purge(world, redis, sessions=["target"])
    assert report.untargetable_entry_keys == ["k-untracked"]
    assert "openclaw-memory-promotion:k-untracked" in world.read("MEMORY.md")


async def test_a_six_character_corpus_snippet_never_removes_a_line(world, redis):
    report = await purge(world, redis, sessions=["target"])
    assert f"says {SHORT_SNIPPET} more than once" in world.read("MEMORY.md")
    assert report.artifacts.memory_lines == 1  # only the long quotation


async def test_what_must_stay_stays(world, redis, sessions_root):
    ops = ForgetWorld(world.settings, sessions_root, agent="ops")
    ops.sessions.add("agent:ops:main", "target", [])  # the same session id, another agent
    ops.write("MEMORY.md", MEMORY_MD)
    await ops.build_rows()
    transcripts = world.transcript_bytes()
    await purge(world, redis, sessions=["target"])
    # source transcripts and archives, byte for byte
    assert world.transcript_bytes() == transcripts
    # unrelated entries and files
    memory = world.read("MEMORY.md")
    assert "The orchard rota changes on Monday." in memory
    assert "Survivor sessions keep their own memory." in memory
    assert world.read("USER.md") == "# User\n- likes tea\n"  # a curated write is reported, never edited
    # another agent's store and workspace are untouched
    assert ops.read("MEMORY.md") == MEMORY_MD
    assert await ops.query("SELECT count(*) FROM memory_entry_origins") == [(7,)]
    assert await ops.query("SELECT count(*) FROM memory_session_tombstones") == [(0,)]
    assert await ops.query("SELECT count(*) FROM memory_index_chunks") == [(10,)]


async def test_a_rerun_after_success_finds_nothing_and_keeps_the_exclusion(world, redis):
    await purge(world, redis, sessions=["target"])
    rev = await world.query("SELECT revision FROM memory_index_state")
    again = await purge(world, redis, sessions=["target"])
    assert again.artifacts.to_json() == dict.fromkeys(EXPECTED_ARTIFACTS, 0)
    assert again.session_ids == ["target"]
    assert await world.query("SELECT count(*) FROM memory_session_tombstones") == [(1,)]
    assert (await world.query("SELECT revision FROM memory_index_state"))[0][0] > rev[0][0]


async def test_a_selector_matching_nothing_writes_nothing(world, redis):
    report = await purge(world, redis, participants=["nobody"])
    assert report.session_ids == []
    assert report.participant_matches[0].identities == []
    assert await world.query("SELECT count(*) FROM memory_session_tombstones") == [(0,)]
    assert world.read("MEMORY.md") == MEMORY_MD


async def test_an_unresolved_explicit_id_is_still_recorded_as_forgotten(world, redis):
    report = await purge(world, redis, sessions=["never-seen"])
    assert [r.to_json() for r in report.session_resolutions] == [
        {"sessionId": "never-seen", "source": "unresolved"}
    ]
    assert await world.query("SELECT session_id FROM memory_session_tombstones") == [("never-seen",)]


async def test_run_forget_refuses_a_runtime_of_another_agent(world):
    async with agent_runtime(world.settings, "ops", readonly=True, redis=False) as rt:
        from memoryd.errors import UsageError

        with pytest.raises(UsageError, match="agent"):
            await run_forget(rt, ForgetRequest(agent="main", sessions=["target"], dry_run=True))


async def test_settings_of_a_second_host_see_the_same_forgotten_records(
    world, redis, tmp_path, sessions_root
):
    await purge(world, redis, sessions=["target"])
    twin = make_settings(tmp_path, sessions_root)  # same state dir, fresh settings object
    report = await forget(twin, ForgetRequest(agent="main", sessions=["target"], dry_run=True))
    assert report.artifacts.to_json() == dict.fromkeys(EXPECTED_ARTIFACTS, 0)


async def test_invalid_utf8_and_symlinked_files_are_never_rewritten(world, redis, tmp_path):
    bad = world.workspace / "memory" / "2026-08-24.md"
    raw = b"- Session ID: target \xff\xfe broken bytes\n"
    bad.write_bytes(raw)
    outside = tmp_path / "outside.md"
    outside.write_text("<!-- memoryd-promotion:k-target -->\n- outside the workspace\n")
    (world.workspace / "memory" / "linked.md").symlink_to(outside)
    report = await purge(world, redis, sessions=["target"])
    assert bad.read_bytes() == raw
    assert report.refusals == ["Cannot scan memory/2026-08-24.md: not valid UTF-8; review it manually."]
    assert outside.read_text().startswith("<!-- memoryd-promotion:k-target -->")
    assert (world.workspace / "memory" / "linked.md").is_symlink()


async def test_human_summary_names_sessions_counts_and_retained_items(world):
    from memoryd.forget.summary import render_human

    text = render_human(await preview(world, sessions=["target"], participants=["omar"]))
    assert text.splitlines()[0] == "Memory Deletion Preview"
    assert "Source sessions: 2" in text
    assert "Session corpus: 2 files, 4 lines" in text
    assert "Session resolution: other (live)" in text
    assert (
        'Raw participant selector: omar: [{"domain":"signal","type":"remote","id":"omar"}]. '
        "Matches select whole sessions across identity namespaces."
    ) in text
    assert "Mixed-lineage entry deleted whole" not in text  # both sessions of k-mixed are selected
    assert "Entry without targetable provenance: k-untracked" in text
    assert "Curated write retained: MEMORY.md (2026-08-26T10:00:01Z)" in text
    assert text.splitlines()[-1] == "Dry run: no memory files, index rows, or plugin state were changed."


async def test_no_frame_of_the_forgotten_text_outlives_the_purge_in_the_wal(settings, sessions_root, redis):
    # Another connection stays open throughout (as the worker's pooled stores do), so closing
    # the purge's own connection does not remove the WAL.
    world = ForgetWorld(settings, sessions_root)
    world.build_sessions()
    world.build_files()
    held = await world.open_store()
    try:
        await world.build_rows()
        wal = Path(f"{held.path}-wal")
        assert b"violet-mongoose-42" in wal.read_bytes()  # the rows' frames are in the WAL
        await purge(world, redis, sessions=["target"])
        assert b"violet-mongoose-42" not in wal.read_bytes()
    finally:
        await held.close()


async def test_the_report_reads_back_from_its_json_as_the_same_report(world):
    # Plain data (a dry run loads no pydantic), and the one declaration of its schema: what
    # pydantic reads from the dataclasses takes the JSON the report gives as the same report,
    # a verification (a model) and the stored form (Redis) included.
    from memoryd.ops.result import read_result
    from memoryd.retention.receipts import Verification, VerificationCheck
    from memoryd.stored_form import stored_form

    check = VerificationCheck(name="physical", status="passed", count=0, note="searched")
    reports = [
        await preview(world, sessions=["target", "targte"], participants=["omar"]),
        await preview(world, entries=["k-target", "k-mixed"]),
        dataclasses.replace(
            await preview(world, match="nothing has this text"),
            verification=Verification(verified=True, checks=[check]),
        ),
    ]
    for report in reports:
        for each in (report, stored_form(report)):
            assert read_result(ForgetReport, each.to_json()) == each
        assert read_result(ForgetReport, {**report.to_json(), "sessionIdz": []}) is None  # another report
    sessions, entries, verified = (r.to_json() for r in reports)
    assert {"sessionId": "targte", "source": "unresolved"} in sessions["sessionResolutions"]
    assert "forgottenEntries" not in sessions and "suppressedClaims" not in sessions["counts"]
    assert len(entries["forgottenEntries"]) == 2 and "unmatchedSelectors" not in entries
    assert verified["unmatchedSelectors"][0]["selector"] == "match" and verified["forgottenEntries"] == []
    assert verified["verification"]["verified"] is True and "verification" not in entries
