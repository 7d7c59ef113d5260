"""A session that arrives after its day was backfilled is still read (reference B-19): its
claim, already in the diary, keeps both origins (the line is not written twice), so forgetting
the later session reports the shared line as mixed lineage and removes it."""

from __future__ import annotations

from daemon.dreaming.backfill import BackfillRequest, run_backfill
from daemon.forget.request import ForgetRequest
from daemon.forget.run import run_forget
from tests.builders import Msg, SessionStoreBuilder
from tests.conftest import make_settings
from tests.dream_kit import runtime

CLAIM = "The preferred editor for release notes is Nova."


async def test_a_later_session_on_an_applied_day_adds_its_origin_to_the_shared_diary_line(
    tmp_path, sessions_root, unique, redis
):
    b = SessionStoreBuilder(sessions_root, "main")
    b.add("agent:main:main", "first", [Msg("user", CLAIM)], chatType="direct")
    settings = make_settings(
        tmp_path,
        sessions_root,
        daemon={"host_id": f"test-{unique}"},
        agents={"main": {"workspace": str(tmp_path / "ws")}},
    )
    diary = tmp_path / "ws" / "DREAMS.md"
    async with runtime(settings, redis) as rt:
        first = await run_backfill(rt, BackfillRequest(agent="main", mode="apply"))
        assert first.diary_lines == 1 and first.staged_entries == 1
        b.add("agent:main:signal:dm:omar", "second", [Msg("user", CLAIM)], chatType="direct")  # same day
        second = await run_backfill(rt, BackfillRequest(agent="main", mode="apply"))
        assert second.sessions_scanned == 2 and second.candidates == 1
        assert second.diary_lines == 0  # the line is there already: not written twice
        assert diary.read_text().count(CLAIM) == 1
        again = await run_backfill(rt, BackfillRequest(agent="main", mode="apply"))
        assert again.candidates == 0  # both sessions' day is done now
        report = await run_forget(rt, ForgetRequest(agent="main", sessions=["second"]))
        assert report.mixedLineageEntryKeys != []
        assert CLAIM not in diary.read_text()
        # The cursor's rows name the session: the forget takes them with its origins.
        left = await rt.store.read(
            lambda c: c.execute("SELECT kind, key FROM backfill_journal WHERE payload = 'second'").fetchall()
        )
        assert left == []
        kept = await rt.store.read(
            lambda c: c.execute(
                "SELECT count(*) FROM backfill_journal WHERE kind = 'day' AND payload = 'first'"
            ).fetchone()[0]
        )
        assert kept == 1
