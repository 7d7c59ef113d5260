"""A session the session store no longer describes is still found by what memoryd recorded when
it ingested it (reference F-03, and sessions whose history a reset deleted): its key resolves
to its id, by key or by id, and a forget removes everything derived from it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memoryd.dreaming.sweep import run_dreaming
from memoryd.forget.request import ForgetRequest
from memoryd.forget.run import run_forget
from memoryd.forget.select import Selectors, select_sessions
from memoryd.ingest.sweep import run_ingest_sweep
from memoryd.sessions.model import SessionInfo
from memoryd.store.tombstones import list_tombstones
from tests.builders import Msg, SessionStoreBuilder
from tests.conftest import make_settings
from tests.dream_kit import runtime


def _settings(tmp_path, sessions_root, unique):
    return make_settings(
        tmp_path,
        sessions_root,
        daemon={"host_id": f"test-{unique}"},
        agents={"main": {"workspace": str(tmp_path / "ws")}},
        dreaming={"min_score": 0, "min_recall_count": 0, "min_unique_queries": 0},
    )


def _drop_from_store(b: SessionStoreBuilder, key: str, sid: str, archive_as: str | None) -> None:
    """The session store forgets the session: its entry goes, its transcript is archived or deleted."""
    del b.entries[key]
    b.save()
    live = b.dir / f"{sid}.jsonl"
    if archive_as is None:
        live.unlink()
    else:
        live.rename(b.dir / f"{sid}.jsonl.{archive_as}.2026-11-30T10-00-00.000Z")


async def _world(rt, b: SessionStoreBuilder) -> None:
    b.add(
        "agent:main:archived",
        "archived",
        [Msg("user", "Remember the archived secret is a copper kettle.")],
        chatType="direct",
    )
    b.add(
        "agent:main:reset-me",
        "vanished",
        [Msg("user", "Remember the vanished detail is a tin whistle.")],
        chatType="direct",
    )
    b.add(
        "agent:main:main",
        "keep",
        [Msg("user", "Remember the ferry leaves at nine sharp.")],
        chatType="direct",
    )
    await run_ingest_sweep(rt)
    await run_dreaming(rt)
    memory = (rt.paths.workspace / "MEMORY.md").read_text()
    assert "copper kettle" in memory and "tin whistle" in memory
    _drop_from_store(b, "agent:main:archived", "archived", "deleted")
    _drop_from_store(b, "agent:main:reset-me", "vanished", None)
    await run_ingest_sweep(rt)  # prunes the checkpoints of sessions that are gone


async def _forget(rt, selector: str, dry_run: bool):
    return await run_forget(rt, ForgetRequest(agent="main", sessions=[selector], dry_run=dry_run))


async def test_an_archived_only_session_resolves_by_key_and_by_id_from_ingestion_records(
    tmp_path, sessions_root, unique, redis
):
    b = SessionStoreBuilder(sessions_root, "main")
    async with runtime(_settings(tmp_path, sessions_root, unique), redis) as rt:
        await _world(rt, b)
        for selector in ("agent:main:archived", "archived"):
            preview = await _forget(rt, selector, True)
            assert preview.session_ids == ["archived"], selector
            assert [r.to_json() for r in preview.session_resolutions] == [
                {"sessionId": "archived", "sessionKey": "agent:main:archived", "source": "archived"}
            ], selector
            # The promoted claim, and the light and REM diary entries that quote it.
            assert [k.split(":")[1] for k in preview.entry_keys] == ["claim", "dream-light", "dream-rem"]
            assert preview.artifacts.memory_entries == 3 and preview.artifacts.session_corpus_lines == 1
            assert preview.artifacts.origin_rows == 3
        assert await rt.store.read(list_tombstones) == []  # a dry run writes nothing
        applied = await _forget(rt, "agent:main:archived", False)
        expected = preview.to_json()
        expected["counts"] = {**expected["counts"], "sessionsRecordedForgotten": 1}  # only a purge records
        assert applied.to_json() == {**expected, "dryRun": False}
        memory = (rt.paths.workspace / "MEMORY.md").read_text()
        assert "copper kettle" not in memory and "ferry leaves" in memory
        assert "copper kettle" not in (rt.paths.workspace / "DREAMS.md").read_text()
        assert [(t.session_id, t.reason) for t in await rt.store.read(list_tombstones)] == [
            ("archived", "forgotten")
        ]


async def test_a_session_whose_history_a_reset_deleted_still_resolves_by_key(
    tmp_path, sessions_root, unique, redis
):
    b = SessionStoreBuilder(sessions_root, "main")
    async with runtime(_settings(tmp_path, sessions_root, unique), redis) as rt:
        await _world(rt, b)
        preview = await _forget(rt, "agent:main:reset-me", True)
        assert preview.session_ids == ["vanished"]
        assert [r.to_json() for r in preview.session_resolutions] == [
            {"sessionId": "vanished", "sessionKey": "agent:main:reset-me", "source": "recorded"}
        ]
        assert preview.artifacts.memory_entries == 3 and preview.artifacts.session_corpus_lines == 1
        applied = await _forget(rt, "agent:main:reset-me", False)
        expected = preview.to_json()
        expected["counts"] = {**expected["counts"], "sessionsRecordedForgotten": 1}  # only a purge records
        assert applied.to_json() == {**expected, "dryRun": False}
        assert "tin whistle" not in (rt.paths.workspace / "MEMORY.md").read_text()
        assert [t.session_id for t in await rt.store.read(list_tombstones)] == ["vanished"]
        # The forget removed memoryd's records of it too (the forgotten record keeps its id,
        # never its key): by key, a rerun finds nothing left and says so.
        again = await _forget(rt, "agent:main:reset-me", True)
        assert [u.value for u in again.unmatched_selectors] == ["agent:main:reset-me"]
        assert again.session_ids == ["agent:main:reset-me"] and again.artifacts.origin_rows == 0


_IDS = st.sampled_from(["a", "A", "a.jsonl", "ab", "b", "c"])
_KEYS = st.sampled_from([None, "agent:main:a", "agent:main:A", "agent:main:a:x", "agent:main:b"])


@given(
    recorded=st.lists(st.tuples(_IDS, _KEYS), max_size=6),
    live=st.lists(st.tuples(_IDS, _KEYS), max_size=3, unique_by=lambda t: t[0]),
    wanted=st.lists(st.one_of(_IDS, _KEYS.filter(lambda k: k is not None)), min_size=1, max_size=3),
)
def test_recorded_sessions_resolve_by_exact_id_or_key_and_never_override_the_source(recorded, live, wanted):
    sessions = [SessionInfo("main", sid, key, "interactive") for sid, key in live]
    selection = select_sessions(sessions, [], Selectors(tuple(wanted), (), ()), recorded)
    by_id = {t.session_id: t for t in selection.targets}
    for sid, key in recorded:
        named = sid in wanted or (key is not None and key in wanted)
        if sid in {s for s, _ in live}:
            assert sid not in by_id or by_id[sid].resolution == "live"
        elif named:
            assert by_id[sid].resolution == "recorded"
    for t in selection.targets:
        if t.resolution == "recorded":
            keys = {k for s, k in recorded if s == t.session_id and k is not None}
            assert t.session_id in wanted or keys & set(wanted)
