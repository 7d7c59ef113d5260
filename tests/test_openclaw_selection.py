"""Forget selection and ingestion admission on an OpenClaw agent database, case by case as the
reference page's "Selection semantics" section describes them."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import pytest

from memoryd.agent_runtime import agent_runtime
from memoryd.agents import agent_paths, list_agents
from memoryd.forget.report import ForgetReport
from memoryd.forget.request import ForgetRequest
from memoryd.forget.run import forget
from memoryd.sessions.admission import AdmissionPolicy, admission_reason
from memoryd.sessions.json_store import JsonSessionSource
from memoryd.sessions.openclaw_store import OpenClawSessionSource
from memoryd.sessions.source import session_source_for
from memoryd.settings import ExcludeSessions
from tests.conftest import make_settings
from tests.openclaw_fixture import (
    HOUR_MS,
    OBSERVATION_DISCORD,
    OBSERVATION_TELEGRAM,
    OpenClawDbBuilder,
    populate,
    sid,
)


@pytest.fixture
def agent(tmp_path: Path) -> tuple[Any, OpenClawDbBuilder]:
    root = tmp_path / "openclaw"  # an OpenClaw state directory
    builder = OpenClawDbBuilder(root)
    populate(builder)
    builder.close()
    return make_settings(tmp_path, root), builder


def tree_state(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(root.rglob("*"))
    }


def preview(settings: Any, **selectors: Any) -> ForgetReport:
    return asyncio.run(forget(settings, ForgetRequest(agent="main", dry_run=True, **selectors)))


def resolved(report: ForgetReport) -> set[tuple[str, str]]:
    return {(r.session_id, r.source) for r in report.session_resolutions}


GMAIL_RESET = "agent:main:hook:gmail:msg-20b1"
DELETED = "agent:main:discord:channel:c0proj"


@pytest.mark.parametrize(
    ("selectors", "expected", "why"),
    [
        ({"sessions": [sid(5)]}, {(sid(5), "live")}, "a session id selects its window"),
        ({"sessions": [sid(5).upper()]}, {(sid(5).upper(), "unresolved")}, "ids are case-sensitive"),
        ({"sessions": [sid(5)[:-1]]}, {(sid(5)[:-1], "unresolved")}, "a prefix never selects a longer id"),
        (
            {"sessions": [GMAIL_RESET]},
            {(sid(8), "live"), (sid(9), "live")},
            "a key selects every live window under it; its archive of a live window adds nothing",
        ),
        ({"sessions": [DELETED]}, {(sid(0x16), "archived")}, "a deleted session's key selects its archive"),
        ({"sessions": [sid(0x16)]}, {(sid(0x16), "archived")}, "and so does its id"),
        (
            {"sessions": [DELETED.replace("c0proj", "C0PROJ")]},
            {(DELETED.replace("c0proj", "C0PROJ"), "unresolved")},
            "stored keys are canonical lower case; selection is exact",
        ),
        (
            {"hook_sources": ["gmail"]},
            {(sid(n), "live") for n in (5, 8, 9, 0x10)},
            "gmail: current entries' gmail plus gmail columns written by the entry writer (provenance 1)",
        ),
        (
            {"hook_sources": ["email"]},
            {(sid(6), "live"), (sid(0xB), "live")},
            "email: only current entries; an older window's coarse webhook column never matches email",
        ),
        (
            {"hook_sources": ["webhook"]},
            {(sid(7), "live")},
            "webhook: only the current entry that says webhook; webhook columns are never used to match",
        ),
        ({"participants": ["tg:2002"]}, {(sid(0xD), "live")}, "a participant id matches in any namespace"),
        ({"participants": ["dc:77"]}, set(), "participants match live metadata only, not archives"),
        (
            {"sessions": [sid(1)], "hook_sources": ["webhook"], "participants": ["alice"]},
            {(sid(1), "live"), (sid(7), "live"), (sid(0xD), "live")},
            "selectors combine with OR",
        ),
    ],
)
def test_forget_selection_on_an_openclaw_database(agent, selectors, expected, why):
    settings, _ = agent
    report = preview(settings, **selectors)
    assert resolved(report) == expected, why
    assert report.session_ids == sorted(r[0] for r in expected)


def test_since_filters_on_window_created_at_without_making_known_selectors_unresolved(agent):
    settings, builder = agent
    since = str(builder.base_ms + 5 * HOUR_MS)
    report = preview(settings, hook_sources=["gmail"], sessions=[sid(5), DELETED], since=since)
    # sid 5 (created base+2h) is known, so it is filtered out rather than reported unresolved;
    # the deleted session's archive (created base+16h) passes.
    assert resolved(report) == {
        (sid(8), "live"),
        (sid(9), "live"),
        (sid(0x10), "live"),
        (sid(0x16), "archived"),
    }


def test_participant_matches_list_every_identity_namespace_of_the_actor(agent):
    settings, _ = agent
    report = preview(settings, participants=["tg:2002", "nobody", "alice"])
    matches = {m.actor_id: m.identities for m in report.participant_matches}
    assert [m.actor_id for m in report.participant_matches] == [
        "alice",
        "nobody",
        "tg:2002",
    ]  # code-unit order
    assert sorted(matches["tg:2002"], key=lambda i: i["pluginId"]) == [
        {**OBSERVATION_DISCORD, "id": "tg:2002"},
        {**OBSERVATION_TELEGRAM, "id": "tg:2002"},
    ]
    assert matches["nobody"] == []


def test_a_forget_preview_writes_nothing_anywhere(agent, tmp_path):
    settings, _ = agent
    before = tree_state(settings.sessions_root)
    preview(settings, hook_sources=["gmail"], participants=["tg:1001"], sessions=[DELETED])
    assert tree_state(settings.sessions_root) == before
    assert not settings.state_dir.exists()


# -- admission -----------------------------------------------------------------------------------


def test_admission_is_decided_from_session_rows_without_reading_any_transcript_event(agent):
    settings, builder = agent
    statements: list[str] = []
    src = OpenClawSessionSource("main", builder.path, trace=statements.append)
    policy = AdmissionPolicy.from_settings(
        ExcludeSessions(hook_external_content_sources=["gmail", "email"], channels=["telegram"])
    )
    decisions = {
        s.session_id: admission_reason(s, policy, forgotten={sid(7)}) for s in src.list_sessions().sessions
    }
    assert not any("transcript_events" in s for s in statements)
    assert decisions[sid(5)] == decisions[sid(8)] == decisions[sid(0x10)] == "hookExternalContentSource:gmail"
    assert decisions[sid(6)] == decisions[sid(0xB)] == "hookExternalContentSource:email"
    assert decisions[sid(0xA)] is None  # only the coarse webhook column: never matches email
    assert decisions[sid(0xE)] is None  # an untrusted gmail column
    assert decisions[sid(1)] == decisions[sid(0xD)] == "channel:telegram"
    assert decisions[sid(7)] == "forgotten"
    assert decisions[sid(0x11)] == "sessionKind:cron"
    assert decisions[sid(0x15)] == "dreamingNarrative"


# -- wiring --------------------------------------------------------------------------------------


def test_the_database_source_is_chosen_when_present_else_sessions_json(tmp_path):
    root = tmp_path / "state"
    builder = OpenClawDbBuilder(root, "peer")
    builder.close()
    (root / "agents" / "legacy" / "sessions").mkdir(parents=True)
    settings = make_settings(tmp_path, root)
    assert list_agents(settings) == ["legacy", "peer"]
    assert isinstance(session_source_for(settings, "peer"), OpenClawSessionSource)
    assert isinstance(session_source_for(settings, "legacy"), JsonSessionSource)
    forced = make_settings(tmp_path, root, agents={"peer": {"session_source": "json"}})
    assert isinstance(session_source_for(forced, "peer"), JsonSessionSource)


def test_a_forced_database_source_without_a_database_reads_empty_and_creates_nothing(tmp_path):
    root = tmp_path / "state"
    root.mkdir()
    settings = make_settings(tmp_path, root, agents={"main": {"session_source": "openclaw"}})
    src = session_source_for(settings, "main")
    assert isinstance(src, OpenClawSessionSource)
    assert src.list_sessions().sessions == () and src.list_archives() == []
    assert list(root.iterdir()) == []


def test_memoryd_state_stays_under_state_dir_and_the_openclaw_directory_is_untouched(agent):
    settings, _ = agent
    before = tree_state(settings.sessions_root)

    async def run() -> None:
        async with agent_runtime(settings, "main", redis=False) as rt:
            assert rt.sessions.kind == "openclaw"
            listing = rt.sessions.list_sessions()
            with rt.sessions.open_transcript(listing.sessions[0]) as lines:
                assert list(lines)

    asyncio.run(run())
    paths = agent_paths(settings, "main")
    for path in (paths.db_path, paths.secret_path, paths.workspace):
        assert path.is_relative_to(settings.state_dir), path
    assert paths.db_path.exists()
    assert tree_state(settings.sessions_root) == before


async def test_a_preview_reads_the_selected_transcripts_with_one_snapshot_each_and_a_fixed_few_more(tmp_path):
    from memoryd.forget.run import run_forget
    from tests.builders import Msg

    root = tmp_path / "openclaw"
    b = OpenClawDbBuilder(root)
    for i in range(30):
        key = b.key(f"telegram:group:g{i}")
        b.session(
            key, f"g{i:02d}", [Msg("user", f"turn {i}")], participants=((OBSERVATION_TELEGRAM, "tg:7"),)
        )
    b.close()
    settings = make_settings(tmp_path, root)
    statements: list[str] = []
    async with agent_runtime(settings, "main", readonly=True, redis=False) as rt:
        rt.sessions = OpenClawSessionSource("main", b.path, trace=statements.append)
        report = await run_forget(rt, ForgetRequest(agent="main", participants=["tg:7"], dry_run=True))
    assert len(report.session_ids) == 30
    assert statements.count("BEGIN") <= 30 + 3  # a transcript each; sessions, archives, fingerprints


# -- the listing a selection reads ---------------------------------------------------------------


def _write_raw_entry(b: OpenClawDbBuilder, key: str, session_id: str, entry_json: str, **window: Any) -> None:
    """A session row whose entry JSON is given byte for byte (escapes, damage)."""
    b.conn.execute(
        "INSERT INTO session_nodes(session_key, current_session_id, entry_json, entry_valid, updated_at, "
        "created_via) VALUES (?, ?, ?, 1, ?, ?)",
        (key, session_id, entry_json, b.base_ms, window.pop("created_via", None)),
    )
    b.add_window(key, session_id, created_at=b.base_ms + 20 * HOUR_MS, **window)


@pytest.fixture
def odd_agent(tmp_path: Path) -> OpenClawDbBuilder:
    """populate()'s agent plus entries only a JSON parser reads right: keys written with escapes,
    a damaged entry whose created_via column says cron, a sessionKind on a plain key."""
    b = OpenClawDbBuilder(tmp_path / "openclaw")
    populate(b)
    _write_raw_entry(b, b.key("esc-kind"), "esc-kind", '{"sessionId":"esc-kind","\\u0073essionKind":"cron"}')
    _write_raw_entry(
        b, b.key("esc-hook"), "esc-hook", '{"sessionId":"esc-hook","\\u0068ookExternalContentSource":"gmail"}'
    )
    _write_raw_entry(
        b, b.key("esc-value"), "esc-value", '{"sessionId":"esc-value","sessionKind":"h\\u0065artbeat"}'
    )
    _write_raw_entry(b, b.key("damaged"), "damaged", "{not json", created_via="cron")
    _write_raw_entry(b, b.key("plain"), "plain-kind", '{"sessionId":"plain-kind","sessionKind":"heartbeat"}')
    b.add_participant(b.key("plain"), OBSERVATION_TELEGRAM, "tg:2002")
    b.close()
    return b


SELECTABLE_CASES = [
    ((), ("tg:2002",), ()),
    ((), ("alice", "nobody"), ()),
    ((), ("dc:77",), ()),
    ((sid(5), GMAIL_RESET, DELETED, "nothing-here"), (), ()),
    ((), (), ("gmail",)),
    ((), (), ("email", "webhook")),
    ((sid(1),), ("tg:1001",), ("gmail",)),
    (("plain-kind",), (), ()),
]


@pytest.mark.parametrize(("refs", "actors", "hooks"), SELECTABLE_CASES)
def test_the_selectable_windows_select_what_the_whole_listing_selects(odd_agent, refs, actors, hooks):
    from memoryd.forget.select import Selectors, select_sessions
    from memoryd.forget.snapshot import SessionCatalog

    src = OpenClawSessionSource("main", odd_agent.path)
    archives = tuple(src.list_archives())
    whole = SessionCatalog(src.list_sessions().sessions, archives)
    narrow = SessionCatalog(src.list_selectable(refs, actors, hooks).sessions, archives)
    selectors = Selectors(refs, actors, hooks)
    assert select_sessions(narrow.sessions, archives, selectors) == select_sessions(
        whole.sessions, archives, selectors
    )
    # internal windows are always listed: a forget purges their stale chunks
    assert narrow.excluded_session_ids == whole.excluded_session_ids
    assert {"esc-kind", "esc-value", "damaged", "plain-kind"} <= whole.excluded_session_ids


def test_a_participant_selection_lists_only_its_windows_and_the_internal_ones(tmp_path):
    from tests.builders import Msg

    b = OpenClawDbBuilder(tmp_path / "openclaw")
    for i in range(40):
        b.session(
            b.key(f"telegram:group:g{i}"),
            f"g{i:02d}",
            [Msg("user", f"turn {i}")],
            participants=((OBSERVATION_TELEGRAM, "tg:7" if i % 10 == 0 else f"tg:{100 + i}"),),
        )
    b.session(b.key("cron:nightly"), "cron-1", [Msg("user", "digest")], createdVia="cron")
    b.close()
    listing = OpenClawSessionSource("main", b.path).list_selectable((), ("tg:7",), ())
    assert sorted(s.session_id for s in listing.sessions) == ["cron-1", "g00", "g10", "g20", "g30"]
    assert all(
        p.actor_id == "tg:7" for s in listing.sessions if s.session_id != "cron-1" for p in s.participants
    )


async def test_a_participant_preview_never_lists_every_window(tmp_path):
    from memoryd.forget.run import run_forget
    from tests.builders import Msg

    root = tmp_path / "openclaw"
    b = OpenClawDbBuilder(root)
    for i in range(12):
        b.session(
            b.key(f"telegram:group:g{i}"),
            f"g{i:02d}",
            [Msg("user", f"turn {i}")],
            participants=((OBSERVATION_TELEGRAM, "tg:7" if i < 3 else "tg:8"),),
        )
    b.close()
    settings = make_settings(tmp_path, root)
    statements: list[str] = []
    async with agent_runtime(settings, "main", readonly=True, redis=False) as rt:
        rt.sessions = OpenClawSessionSource("main", b.path, trace=statements.append)
        report = await run_forget(rt, ForgetRequest(agent="main", participants=["tg:7"], dry_run=True))
    assert report.session_ids == ["g00", "g01", "g02"]
    listings = [s for s in statements if "FROM session_windows AS w" in s]
    assert listings and all("WHERE" in s for s in listings)
