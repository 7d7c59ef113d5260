"""A dreaming sweep: light and REM diary blocks with tracked lines, deep promotion, one timestamp."""

from __future__ import annotations

import json

import pytest

from memoryd.dreaming.diary import block_text
from memoryd.dreaming.sweep import run_dreaming
from memoryd.errors import UsageError
from memoryd.markers import promotion_key, promotion_keys_in
from memoryd.store.tombstones import record_tombstones
from tests.dream_kit import NOW_MS, Stager, origin_sessions, runtime, stage


def _diary(rt) -> str:
    return (rt.paths.workspace / "DREAMS.md").read_text()


def _tracked_lines(block: str) -> dict[str, str]:
    """diary key -> the line under its marker."""
    lines = block.split("\n")
    return {k: lines[i + 1] for i, ln in enumerate(lines) if (k := promotion_key(ln)) is not None}


async def test_light_and_rem_blocks_track_every_quoted_session(settings, redis):
    async with runtime(settings, redis) as rt:
        s = Stager(rt.paths.workspace)
        s.add("User: the orchard rota changes on Monday for the orchard crew", ["s1"], signals=4, days=3)
        s.add("User: the orchard rota is posted on the orchard board", ["s2", "s3"], signals=3, days=3)
        s.add("Assistant: fetched page says the orchard is closed", ["web"], origin="untrusted")
        await stage(rt, s)
        report = await run_dreaming(rt, ("light", "rem"), now_ms=NOW_MS)
        diary = _diary(rt)
        assert report.light.candidates == 2 and report.light.diary_lines == 2
        assert "orchard" in report.rem.themes and report.rem.truths >= 1
        assert "fetched page" not in diary
        light = _tracked_lines(block_text(diary, "light"))
        rem = _tracked_lines(block_text(diary, "rem"))
        assert all(line.startswith("- Candidate: ") for line in light.values())
        by_text = {line: await rt.store.read(origin_sessions, key) for key, line in {**light, **rem}.items()}
        assert by_text["- Candidate: User: the orchard rota changes on Monday for the orchard crew"] == ["s1"]
        assert by_text["- Candidate: User: the orchard rota is posted on the orchard board"] == ["s2", "s3"]
        theme = next(v for k, v in by_text.items() if "Theme: `orchard`" in k)
        assert theme == ["s1", "s2", "s3"]
        assert not (rt.paths.workspace / "MEMORY.md").exists()  # light and REM never write MEMORY.md
        signals = await rt.store.read(
            lambda c: c.execute("SELECT SUM(light_hits), MAX(last_light_at) FROM phase_signals").fetchone()
        )
        assert signals == (2, NOW_MS)


async def test_rerunning_a_phase_replaces_its_block_and_prunes_dropped_lines_lineage(settings, redis):
    async with runtime(settings, redis) as rt:
        s = Stager(rt.paths.workspace)
        s.add("User: the orchard rota changes on Monday", ["s1"])
        s.add("User: the harbour gate code is rotated weekly", ["s2"])
        await stage(rt, s)
        await run_dreaming(rt, ("light",), now_ms=NOW_MS)
        first = _tracked_lines(block_text(_diary(rt), "light"))
        assert len(first) == 2
        async with rt.lock().hold() as lease:
            await rt.store.write(record_tombstones, "main", ["s2"], NOW_MS, fence=lease.fence)
        again = await run_dreaming(rt, ("light",), now_ms=NOW_MS + 1000)
        diary = _diary(rt)
        assert again.light.candidates == 1 and "harbour" not in diary
        assert diary.count("## Light Sleep") == 1
        dropped = [k for k, v in first.items() if "harbour" in v][0]
        assert await rt.store.read(origin_sessions, dropped) == []
        hits = await rt.store.read(
            lambda c: c.execute("SELECT light_hits FROM phase_signals ORDER BY 1").fetchall()
        )
        assert hits == [(1,), (1,)]  # a rerun on the same dreaming day adds no light hit


async def test_a_full_sweep_uses_one_timestamp_and_only_deep_writes_memory(
    tmp_path, sessions_root, unique, redis
):
    from tests.conftest import make_settings

    settings = make_settings(
        tmp_path,
        sessions_root,
        daemon={"host_id": f"test-{unique}"},
        dreaming={"min_score": 0.5, "min_recall_count": 2, "min_unique_queries": 2},
    )
    async with runtime(settings, redis) as rt:
        s = Stager(rt.paths.workspace)
        key = s.add("User: the orchard rota changes on Monday", ["s1"], signals=6, queries=4, days=3)
        await stage(rt, s)
        report = await run_dreaming(rt, now_ms=NOW_MS)
        data = report.model_dump(mode="json", by_alias=True)
        assert list(data) == ["agentId", "sweepAt", "phases", "light", "rem", "deep", "warnings"]
        assert data["phases"] == ["light", "rem", "deep"]
        assert [p.entry_key for p in report.deep.promoted] == [key]
        promoted_at, light_at = await rt.store.read(
            lambda c: c.execute(
                "SELECT e.promoted_at, s.last_light_at FROM short_term_entries e JOIN phase_signals s "
                "USING (entry_key)"
            ).fetchone()
        )
        assert promoted_at == light_at == NOW_MS
        memory = (rt.paths.workspace / "MEMORY.md").read_text()
        assert promotion_keys_in(memory) == [key]
        json.dumps(data)


async def test_an_unknown_phase_is_a_usage_error(settings, redis):
    async with runtime(settings, redis) as rt:
        with pytest.raises(UsageError, match="phase"):
            await run_dreaming(rt, ("nap",))
