"""A session that arrives after its day was backfilled is still read (reference B-19): its
claim, already in the diary, keeps both origins (the line is not written twice), so forgetting
the later session reports the shared line as mixed lineage and removes it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memoryd.dreaming.backfill import BackfillRequest, Scan, plan_claims, read_cursor, run_backfill
from memoryd.dreaming.backfill_plan import Message
from memoryd.forget.request import ForgetRequest
from memoryd.forget.run import run_forget
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
        b.append("first", [Msg("user", "The release train leaves every second Tuesday.")], start_index=1)
        appended = await run_backfill(rt, BackfillRequest(agent="main", mode="apply"))
        assert appended.candidates == 1 and appended.diary_lines == 1  # a later message of a done day
        report = await run_forget(rt, ForgetRequest(agent="main", sessions=["second"]))
        assert report.mixed_lineage_entry_keys != []
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
        assert kept == 2  # one per run that read it


_DAYS = st.sampled_from(["2026-01-01", "2026-01-02", "2026-01-03"])
_SESSIONS = st.sampled_from(["a", "b", "c"])


@given(
    waves=st.lists(st.lists(st.tuples(_DAYS, _SESSIONS), min_size=1, max_size=6), min_size=1, max_size=4),
    limit=st.integers(1, 3),
    legacy=st.sets(_DAYS, max_size=1),
)
def test_the_cursor_reads_every_message_once_whenever_it_arrives(waves, limit, legacy):
    # Messages (new sessions, or appends to old ones on a done day) arrive in waves; after each
    # wave, runs go on until nothing is left to do.
    rows: list[tuple[str, str]] = [(d, "") for d in legacy]  # days an older run marked whole
    seen: list[tuple[str, str]] = []
    messages: list[Message] = []
    for wave in waves:
        for day, sid in wave:
            n = len(messages)
            messages.append(Message("main", sid, None, n + 1, f"Fact number {n} of {sid}.", "owner", 1, day))
        for _ in range(10):
            scan = Scan(tuple(messages), 3, {})
            request = BackfillRequest(agent="main", limit_days=limit)
            days, claims, done = plan_claims(scan, read_cursor(rows), request, set())
            if not days:
                break
            seen += [(m.day, m.session_id) for c in claims for m in c.messages]
            rows += done
    expected = [(m.day, m.session_id) for m in messages if m.day not in legacy]
    assert sorted(seen) == sorted(expected)  # every message once, late ones too; legacy days never
