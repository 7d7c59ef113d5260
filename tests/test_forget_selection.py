"""Selection and resolution (reference §7.2), the request model and the CLI surface."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from memoryd.commands import CliState
from memoryd.commands.forget import register
from memoryd.errors import UsageError
from memoryd.forget.refs import references_session, session_id_from_file_name
from memoryd.forget.request import ForgetRequest
from memoryd.forget.select import Selectors, select_sessions
from memoryd.sessions.model import ArchiveInfo, Participant, SessionInfo

PROFILE = (("type", "profile"),)


def live(
    sid: str, key: str | None, *, created: int = 1000, hook: str | None = None, actors: tuple[str, ...] = ()
) -> SessionInfo:
    return SessionInfo(
        "main",
        sid,
        key,
        "interactive",
        hook_source=hook,
        created_at=created,
        participants=tuple(Participant(a, PROFILE) for a in actors),
    )


def arc(sid: str, key: str | None, created: int | None = 500) -> ArchiveInfo:
    return ArchiveInfo("main", sid, key, "reset", created, name=f"{sid}.jsonl.reset.2026-08-25T10-00-00.000Z")


def sel(sessions=(), participants=(), hooks=(), since=None) -> Selectors:
    return Selectors(tuple(sessions), tuple(participants), tuple(hooks), since)


SESSIONS = [
    live("w1", "agent:main:main", created=1000, actors=("nora",)),
    live("w2", "agent:main:main", created=2000),
    live("g1", "hook:gmail:1", hook="gmail", actors=("omar",)),
    live("prefix-survivor", "agent:main:survivor"),
    live("PREFIX", "agent:main:upper"),
]
ARCHIVES = [arc("w0", "agent:main:main"), arc("old", None, created=100), arc("g0", "hook:gmail:0")]


def resolved(selection):
    return sorted((t.session_id, t.resolution) for t in selection.targets)


def test_a_session_key_selects_every_window_and_its_archives():
    selection = select_sessions(SESSIONS, ARCHIVES, sel(["agent:main:main"]))
    assert resolved(selection) == [("w0", "archived"), ("w1", "live"), ("w2", "live")]


def test_an_id_selects_only_that_window():
    assert resolved(select_sessions(SESSIONS, ARCHIVES, sel(["w2"]))) == [("w2", "live")]


def test_prefix_never_selects_prefix_survivor_or_upper_case_or_file_names():
    selection = select_sessions(SESSIONS, ARCHIVES, sel(["prefix"]))
    assert resolved(selection) == [("prefix", "unresolved")]
    for other in ("prefix-survivor", "PREFIX", "prefix.jsonl.other"):
        assert not references_session(f"[main/sessions/main/{other}#L1] text", "main", {"prefix"})
        assert not references_session(f"main:{other}", "main", {"prefix"})
        assert not references_session(f"Session ID: {other}", "main", {"prefix"})


def test_hook_source_and_participant_match_live_metadata_only():
    assert resolved(select_sessions(SESSIONS, ARCHIVES, sel(hooks=["gmail"]))) == [("g1", "live")]
    assert resolved(select_sessions(SESSIONS, ARCHIVES, sel(participants=["omar"]))) == [("g1", "live")]
    assert resolved(select_sessions(SESSIONS, ARCHIVES, sel(hooks=["Gmail"]))) == []


def test_archives_resolve_by_full_id():
    assert resolved(select_sessions(SESSIONS, ARCHIVES, sel(["old"]))) == [("old", "archived")]


def test_an_unresolved_explicit_id_is_still_selected_literally():
    selection = select_sessions(SESSIONS, ARCHIVES, sel(["ghost", "w1"]))
    assert resolved(selection) == [("ghost", "unresolved"), ("w1", "live")]
    ghost = next(t for t in selection.targets if t.session_id == "ghost")
    assert ghost.session_key is None


def test_since_filters_after_resolution_so_known_selectors_do_not_become_unresolved():
    selection = select_sessions(SESSIONS, ARCHIVES, sel(["agent:main:main", "w1"], since=1500))
    assert resolved(selection) == [("w2", "live")]


def test_participant_matches_list_distinct_identities_per_actor():
    sessions = [live("a", "k1", actors=("nora",)), live("b", "k2", actors=("nora", "omar"))]
    selection = select_sessions(sessions, [], sel(participants=["omar", "nora", "zed"]))
    assert [(m.actor_id, m.identities) for m in selection.participant_matches] == [
        ("nora", ({"type": "profile", "id": "nora"},)),
        ("omar", ({"type": "profile", "id": "omar"},)),
        ("zed", ()),
    ]


@given(
    st.lists(
        st.sampled_from(["w1", "w2", "g1", "W1", "w", "w1 ", "agent:main", "prefix", "PREFIX"]),
        min_size=1,
        max_size=4,
    )
)
def test_selection_is_exact_equality_on_ids_and_keys(values):
    selection = select_sessions(SESSIONS, ARCHIVES, sel(values))
    for t in selection.targets:
        if t.resolution != "unresolved":
            assert t.session_id in values or t.session_key in values
        else:
            assert t.session_id in values


def test_transcript_file_names_reduce_to_their_session_id():
    assert session_id_from_file_name("target.jsonl") == "target"
    assert session_id_from_file_name("target.jsonl.reset.2026-08-25T10-00-00.000Z.zst") == "target"
    assert session_id_from_file_name("target.jsonl.deleted.2026-08-25T10-00-00Z") == "target"
    assert session_id_from_file_name("prefix.jsonl.other") is None
    assert session_id_from_file_name("target.jsonl.reset.yesterday") is None
    assert session_id_from_file_name("p.checkpoint.abc.jsonl") is None
    assert references_session(
        "sessions/main/target.jsonl.reset.2026-08-25T10-00-00.000Z.zst", "main", {"target"}
    )
    assert references_session("main:sessions/main/target", "main", {"target"})
    assert references_session("main:target", "main", {"target"})
    assert not references_session("ops:target", "main", {"target"})
    assert not references_session("xsessions/main/target", "main", {"target"})


# --- the request -------------------------------------------------------------------------------


def test_a_request_without_a_selector_is_a_usage_error():
    with pytest.raises(UsageError, match="requires a session, hook source, or participant"):
        ForgetRequest(agent="main")


def test_request_rejects_unknown_fields_and_names_them():
    from memoryd.ops import forget

    with pytest.raises(UsageError, match="^forget: bogus: unknown field$"):
        forget.OP.contract.parse({"agent": "main", "sessions": ["a"], "bogus": 1})


@pytest.mark.parametrize("bad", ["../etc", "a/b", "", "x\n"])
def test_request_rejects_unsafe_session_selectors(bad):
    with pytest.raises(UsageError, match="sessions"):
        ForgetRequest(agent="main", sessions=[bad])


def test_request_rejects_an_invalid_since_date():
    with pytest.raises(UsageError, match="Invalid memory session date: yesterday-ish"):
        ForgetRequest(agent="main", sessions=["a"], since="yesterday-ish")


def test_since_accepts_dates_datetimes_and_milliseconds():
    assert ForgetRequest(agent="m", sessions=["a"], since="2026-08-25").since_ms == 1787616000000
    assert ForgetRequest(agent="m", sessions=["a"], since="2026-08-25T00:00:01Z").since_ms == 1787616001000
    assert ForgetRequest(agent="m", sessions=["a"], since="1787616000000").since_ms == 1787616000000


def test_request_rejects_a_bad_agent_id():
    with pytest.raises(UsageError, match="agent"):
        ForgetRequest(agent="../x", sessions=["a"])


# --- the command --------------------------------------------------------------------------------


def _cli() -> click.Group:
    @click.group()
    def root() -> None:
        pass

    register(root)
    return root


def _write_config(tmp_path: Path, sessions_root: Path) -> CliState:
    cfg = tmp_path / "memoryd.toml"
    cfg.write_text(f'state_dir = "{tmp_path / "state"}"\nsessions_root = "{sessions_root}"\n')
    return CliState(str(cfg))


def test_cli_without_a_selector_exits_2_with_one_line(tmp_path, sessions_root):
    runner = CliRunner()
    result = runner.invoke(
        _cli(), ["forget", "--agent", "main", "--dry-run"], obj=_write_config(tmp_path, sessions_root)
    )
    assert isinstance(result.exception, UsageError)
    assert result.exception.exit_code == 2
    assert "\n" not in str(result.exception)


def test_cli_dry_run_prints_json_report_and_a_human_summary(tmp_path, sessions_root, store_builder):
    store_builder.add("agent:main:main", "s1", [], participants=[{"actorId": "omar"}])
    state = _write_config(tmp_path, sessions_root)
    runner = CliRunner()
    result = runner.invoke(
        _cli(), ["forget", "--agent", "main", "--participant", "omar", "--dry-run", "--json"], obj=state
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["sessionIds"] == ["s1"] and data["dryRun"] is True
    human = runner.invoke(_cli(), ["forget", "--agent", "main", "--session", "s1", "--dry-run"], obj=state)
    assert "Memory Deletion Preview" in human.output
    assert "Session resolution: s1 (live)" in human.output
    assert "Dry run: no memory files, index rows, or plugin state were changed." in human.output
