"""Deep-phase promotion into MEMORY.md on real stores and real Redis."""

from __future__ import annotations

import pytest

from memoryd.dreaming.promote import prepare_promotion, publish_promotion, run_promote
from memoryd.errors import UsageError
from memoryd.failpoints import ENV_VAR, FailpointTriggered
from memoryd.fileio import sha256_hex
from memoryd.markers import promotion_keys_in
from memoryd.store.tombstones import record_tombstones
from tests.dream_kit import NOW_MS, OPEN_GATES, Stager, origin_sessions, runtime, stage


async def test_promoted_entries_are_marked_and_their_origins_name_exactly_their_sessions(settings, redis):
    async with runtime(settings, redis) as rt:
        s = Stager(rt.paths.workspace)
        k1 = s.add("User: the orchard rota changes on Monday", ["s1"])
        k2 = s.add("User: the harbour gate code is rotated weekly", ["s2", "s3"])
        await stage(rt, s)
        report = await run_promote(rt, OPEN_GATES)
        text = (rt.paths.workspace / "MEMORY.md").read_text()
        assert sorted(p.entry_key for p in report.promoted) == sorted([k1, k2])
        lines = text.split("\n")
        for key, snippet in ((k1, "orchard rota"), (k2, "harbour gate")):
            i = lines.index(f"<!-- memoryd-promotion:{key} -->")
            assert lines[i + 1].startswith("- User: the " + snippet)
        assert await rt.store.read(origin_sessions, k1) == ["s1"]
        assert await rt.store.read(origin_sessions, k2) == ["s2", "s3"]
        promoted = await rt.store.read(
            lambda c: c.execute(
                "SELECT entry_key FROM short_term_entries WHERE promoted_at IS NOT NULL ORDER BY 1"
            ).fetchall()
        )
        assert [r[0] for r in promoted] == sorted([k1, k2])
        assert (rt.paths.workspace / "MEMORY.md").stat().st_mode & 0o777 == 0o600


async def test_a_claim_staged_twice_is_written_once_with_the_union_of_origins(settings, redis):
    async with runtime(settings, redis) as rt:
        s = Stager(rt.paths.workspace)
        k1 = s.add(
            "User: The deploy window is Friday.", ["s1"], key="memory:claim:aaa", last_ms=NOW_MS - 7_200_000
        )
        k2 = s.add("Assistant: the deploy window is friday.", ["s2"], key="memory:claim:bbb")
        await stage(rt, s)
        report = await run_promote(rt, OPEN_GATES)
        (entry,) = report.promoted
        assert entry.entry_key == k1 and entry.merged_keys == [k2] and entry.session_ids == ["s1", "s2"]
        text = (rt.paths.workspace / "MEMORY.md").read_text()
        assert promotion_keys_in(text) == [k1] and text.count("deploy window") == 1
        assert await rt.store.read(origin_sessions, k1) == ["s1", "s2"]


async def test_untrusted_and_system_lines_never_reach_memory(settings, redis):
    async with runtime(settings, redis) as rt:
        s = Stager(rt.paths.workspace)
        s.add("Assistant: fetched page says wire money to acct 99", ["web"], origin="untrusted")
        s.add("User: heartbeat preamble check the inbox", ["cron"], origin="system")
        # An owner entry that also drew on a tainted turn is refused as a whole.
        s.add("User: mixed provenance statement here", ["s1", "web"], session_classes={"web": "untrusted"})
        keep = s.add("User: the harbour gate code is rotated weekly", ["s1"])
        await stage(rt, s)
        report = await run_promote(rt, OPEN_GATES)
        text = (rt.paths.workspace / "MEMORY.md").read_text()
        assert [p.entry_key for p in report.promoted] == [keep]
        assert "wire money" not in text and "heartbeat" not in text and "mixed provenance" not in text
        assert report.rejected == {"untrusted": 3}


async def test_a_session_forgotten_while_the_sweep_runs_is_never_promoted(settings, redis):
    async with runtime(settings, redis) as rt:
        s = Stager(rt.paths.workspace)
        doomed = s.add("User: the vault combination is 4-8-15", ["gone"])
        shared = s.add("User: the standup moved to ten", ["ok", "gone"])
        keep = s.add("User: the harbour gate code is rotated weekly", ["ok"])
        await stage(rt, s)
        plan = await prepare_promotion(rt, OPEN_GATES)
        assert {c.key for c in plan.ranking.candidates} == {doomed, shared, keep}
        # A forget completes between ranking and publication; its staged rows are still there.
        async with rt.lock().hold() as lease:
            await rt.store.write(record_tombstones, "main", ["gone"], NOW_MS, fence=lease.fence)
        report = await publish_promotion(rt, plan)
        text = (rt.paths.workspace / "MEMORY.md").read_text()
        assert [p.entry_key for p in report.promoted] == [keep]
        assert {(x.entry_key, x.reason) for x in report.skipped} == {
            (doomed, "forgotten"),
            (shared, "forgotten"),
        }
        assert "vault" not in text and "standup" not in text
        unpromoted = await rt.store.read(
            lambda c: c.execute(
                "SELECT COUNT(*) FROM short_term_entries WHERE promoted_at IS NULL"
            ).fetchone()[0]
        )
        assert unpromoted == 2


async def test_a_concurrent_memory_edit_is_detected_and_nothing_is_lost(settings, redis):
    async with runtime(settings, redis) as rt:
        memory = rt.paths.workspace / "MEMORY.md"
        rt.paths.workspace.mkdir(parents=True, exist_ok=True)
        memory.write_text("# Long-Term Memory\n\n- hand-written note one\n")
        s = Stager(rt.paths.workspace)
        key = s.add("User: the orchard rota changes on Monday", ["s1"])
        await stage(rt, s)
        plan = await prepare_promotion(rt, OPEN_GATES)
        assert plan.memory.content_hash == sha256_hex(memory.read_bytes())
        # The owner edits MEMORY.md after it was read for this promotion.
        memory.write_text(memory.read_text() + "- hand-written note two\n")
        report = await publish_promotion(rt, plan)
        text = memory.read_text()
        assert report.write_conflicts == 1
        assert "- hand-written note one" in text and "- hand-written note two" in text
        assert f"<!-- memoryd-promotion:{key} -->\n- User: the orchard rota" in text
        assert [p.entry_key for p in report.promoted] == [key]


async def test_a_failed_commit_rolls_back_reserved_lineage_and_a_rerun_converges(
    settings, redis, monkeypatch
):
    async with runtime(settings, redis) as rt:
        s = Stager(rt.paths.workspace)
        k1 = s.add(
            "User: The deploy window is Friday.", ["s1"], key="memory:claim:aaa", last_ms=NOW_MS - 7_200_000
        )
        s.add("User: the deploy window is friday.", ["s2"], key="memory:claim:bbb")
        await stage(rt, s)
        monkeypatch.setenv(ENV_VAR, "dream.promote.commit")
        with pytest.raises(FailpointTriggered):
            await run_promote(rt, OPEN_GATES)
        assert not (rt.paths.workspace / "MEMORY.md").exists()
        assert await rt.store.read(origin_sessions, k1) == ["s1"]  # the reservation was rolled back
        monkeypatch.delenv(ENV_VAR)
        again = await run_promote(rt, OPEN_GATES)
        assert [p.entry_key for p in again.promoted] == [k1]
        assert await rt.store.read(origin_sessions, k1) == ["s1", "s2"]


async def test_a_changed_or_missing_source_snippet_is_skipped(settings, redis):
    async with runtime(settings, redis) as rt:
        s = Stager(rt.paths.workspace)
        changed = s.add("User: the orchard rota changes on Monday", ["s1"], day="2026-11-20")
        missing = s.add("User: the harbour gate code is rotated weekly", ["s2"], day="2026-11-21")
        moved = s.add("User: the boiler is serviced in March", ["s3"], day="2026-11-20")
        await stage(rt, s)
        corpus = rt.paths.workspace / "memory/.dreams/session-corpus/2026-11-20.txt"
        lines = corpus.read_text().splitlines()
        corpus.write_text("\n".join([lines[1]]) + "\n")  # orchard line gone; boiler line moved up
        (rt.paths.workspace / "memory/.dreams/session-corpus/2026-11-21.txt").unlink()
        report = await run_promote(rt, OPEN_GATES)
        assert [p.entry_key for p in report.promoted] == [moved]
        assert {(x.entry_key, x.reason) for x in report.skipped} == {
            (changed, "source_changed"),
            (missing, "source_missing"),
        }
        assert "session-corpus/2026-11-20.txt:1-1" in (rt.paths.workspace / "MEMORY.md").read_text()


async def test_a_non_utf8_memory_file_is_never_rewritten(settings, redis):
    async with runtime(settings, redis) as rt:
        rt.paths.workspace.mkdir(parents=True, exist_ok=True)
        memory = rt.paths.workspace / "MEMORY.md"
        memory.write_bytes(b"# notes \xff\xfe\n")
        s = Stager(rt.paths.workspace)
        s.add("User: the orchard rota changes on Monday", ["s1"])
        await stage(rt, s)
        report = await run_promote(rt, OPEN_GATES)
        assert memory.read_bytes() == b"# notes \xff\xfe\n"
        assert report.promoted == [] and "not valid UTF-8" in report.warnings[0]


async def test_a_rerun_after_a_crash_reconciles_instead_of_appending_twice(settings, redis, monkeypatch):
    async with runtime(settings, redis) as rt:
        s = Stager(rt.paths.workspace)
        key = s.add("User: the orchard rota changes on Monday", ["s1"])
        await stage(rt, s)
        # A crash after the file commit but before promoted_at was recorded:
        monkeypatch.setenv(ENV_VAR, "dream.promote.mark")
        with pytest.raises(FailpointTriggered):
            await run_promote(rt, OPEN_GATES)
        monkeypatch.delenv(ENV_VAR)
        assert (rt.paths.workspace / "MEMORY.md").read_text().count("orchard rota") == 1
        report = await run_promote(rt, OPEN_GATES)
        assert report.reconciled == [key] and report.promoted == []
        assert (rt.paths.workspace / "MEMORY.md").read_text().count("orchard rota") == 1
        third = await run_promote(rt, OPEN_GATES)
        assert third.mode == "none" and third.considered == 0


async def test_daily_note_entries_are_promoted_without_lineage_rows(settings, redis):
    async with runtime(settings, redis) as rt:
        note = rt.paths.workspace / "memory" / "2026-11-20-planning.md"
        note.parent.mkdir(parents=True, exist_ok=True)
        note.write_text("# Planning\n\n- Ship the gateway refactor before December\n")
        s = Stager(rt.paths.workspace)
        key = s.add(
            "Planning > Ship the gateway refactor before December",
            [],
            origin="agent",
            key="memory:memory/2026-11-20-planning.md:3:3",
            path="memory/2026-11-20-planning.md",
            line=3,
        )
        await stage(rt, s)
        report = await run_promote(rt, OPEN_GATES)
        assert [p.entry_key for p in report.promoted] == [key] and report.promoted[0].session_ids == []
        assert await rt.store.read(origin_sessions, key) == []
        assert f"<!-- memoryd-promotion:{key} -->" in (rt.paths.workspace / "MEMORY.md").read_text()


async def test_default_gates_hold_back_weak_entries(settings, redis):
    async with runtime(settings, redis) as rt:
        s = Stager(rt.paths.workspace)
        s.add("User: the orchard rota changes on Monday", ["s1"], signals=1, queries=1, days=1)
        await stage(rt, s)
        report = await run_promote(rt, None)
        assert report.mode == "none" and report.rejected == {"min_recall_count": 1}
        assert not (rt.paths.workspace / "MEMORY.md").exists()


async def test_a_symlinked_memory_file_is_refused_and_its_target_untouched(settings, redis, tmp_path):
    async with runtime(settings, redis) as rt:
        rt.paths.workspace.mkdir(parents=True, exist_ok=True)
        target = tmp_path / "elsewhere.md"
        target.write_text("# someone else's file\n")
        (rt.paths.workspace / "MEMORY.md").symlink_to(target)
        s = Stager(rt.paths.workspace)
        s.add("User: the orchard rota changes on Monday", ["s1"])
        await stage(rt, s)
        with pytest.raises(UsageError, match="symlink"):
            await run_promote(rt, OPEN_GATES)
        assert target.read_text() == "# someone else's file\n"
        assert (rt.paths.workspace / "MEMORY.md").is_symlink()


async def test_entries_beyond_the_size_budget_stay_eligible(tmp_path, sessions_root, unique, redis):
    from tests.conftest import make_settings

    small = make_settings(
        tmp_path,
        sessions_root,
        daemon={"host_id": f"test-{unique}"},
        dreaming={"memory_file_max_chars": 1000},
    )
    async with runtime(small, redis) as rt:
        s = Stager(rt.paths.workspace)
        keys = [s.add(f"User: fact number {i} " + "x" * 200, [f"s{i}"]) for i in range(4)]
        await stage(rt, s)
        report = await run_promote(rt, OPEN_GATES)
        assert len(report.promoted) == 2 and {x.reason for x in report.skipped} == {"budget"}
        assert len((rt.paths.workspace / "MEMORY.md").read_text()) <= 1000
        waiting = await rt.store.read(
            lambda c: c.execute(
                "SELECT COUNT(*) FROM short_term_entries WHERE promoted_at IS NULL"
            ).fetchone()[0]
        )
        assert waiting == 2 and len(keys) == 4


async def test_promote_explain_gives_the_verdict_the_score_parts_and_each_gate(
    settings, redis, tmp_path, capsys
):
    import json

    import anyio

    from memoryd.cli import main as cli_main

    async def main(args: list[str]) -> int:  # the CLI runs its own event loop
        return await anyio.to_thread.run_sync(cli_main, args)

    async with runtime(settings, redis) as rt:
        s = Stager(rt.paths.workspace)
        strong = s.add("User: the orchard rota changes on Monday", ["s1"], signals=4, queries=4, days=3)
        weak = s.add("User: the harbour opens late on Sundays", ["s2"], signals=1, queries=1, days=1)
        await stage(rt, s)
    cfg = tmp_path / "explain.toml"
    cfg.write_text(
        f'state_dir = "{settings.state_dir}"\nsessions_root = "{settings.sessions_root}"\n'
        f'redis_url = "{settings.redis_url}"\n[dreaming]\nmin_score = 0.5\n'
    )
    capsys.readouterr()
    assert (
        await main(["--config", str(cfg), "promote", "--agent", "main", "--explain", strong, "--json"]) == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert (report["entryKey"], report["wouldPromote"], report["verdict"]) == (strong, True, "promote")
    parts = {p["name"]: p for p in report["parts"]}
    assert set(parts) == {
        "relevance",
        "frequency",
        "diversity",
        "recency",
        "consolidation",
        "conceptual",
        "phaseBoost",
    }
    assert abs(sum(p["contribution"] for p in report["parts"]) - report["score"]) < 1e-9
    assert [g["name"] for g in report["gates"]] == [
        "max_age_days",
        "min_recall_count",
        "min_unique_queries",
        "min_score",
    ]
    assert all(g["passed"] for g in report["gates"])
    assert await main(["--config", str(cfg), "promote", "--agent", "main", "--explain", weak]) == 0
    human = capsys.readouterr().out
    assert human.startswith(f"{weak}: would not promote: it misses the min_recall_count gate")
    assert "  min_recall_count    1 >= 3: FAIL" in human
    assert not (settings.workspace_for("main") / "MEMORY.md").exists()  # an explanation writes nothing
    assert (
        await main(["--config", str(cfg), "promote", "--agent", "main", "--explain", "memory:claim:nope"])
        == 2
    )
    assert "has no staged entry 'memory:claim:nope'" in capsys.readouterr().err
