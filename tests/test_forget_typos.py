"""A typo is not silent: a forget selector that matches nothing is still applied as the
reference applies it (an unknown session id is recorded as forgotten, literally), and the report
says plainly that nothing was found, with the known values closest to it."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from memoryd.cli import main
from memoryd.forget.select import Selectors, UnmatchedSelector, select_sessions, suggest_close
from memoryd.sessions.model import Participant, SessionInfo
from tests.builders import SessionStoreBuilder, conversation
from tests.conftest import REDIS_URL


def _info(sid: str, key: str, *, hook: str | None = None, actors: tuple[str, ...] = ()) -> SessionInfo:
    return SessionInfo(
        "main", sid, key, "interactive", hook_source=hook, participants=tuple(Participant(a) for a in actors)
    )


SESSIONS = [
    _info("tg-nora", "agent:main:telegram:direct:nora", actors=("nora",)),
    _info("gmail-inv", "hook:gmail:inv-1", hook="gmail"),
]


def test_each_selector_that_matches_nothing_is_listed_with_its_closest_known_values() -> None:
    selectors = Selectors(("tg-nroa", "tg-nora", "zzz"), ("nroa", "nora"), ("gmial", "gmail"))
    selection = suggest_close(select_sessions(SESSIONS, [], selectors), SESSIONS, [])
    assert selection.unmatched == (
        UnmatchedSelector("session", "tg-nroa", ("tg-nora",)),
        UnmatchedSelector("session", "zzz", ()),
        UnmatchedSelector("participant", "nroa", ("nora",)),
        UnmatchedSelector("hookSource", "gmial", ("gmail",)),
    )
    # The unknown id is still selected, literally, as the reference selects it.
    assert [(t.session_id, t.resolution) for t in selection.targets if t.resolution == "unresolved"] == [
        ("tg-nroa", "unresolved"),
        ("zzz", "unresolved"),
    ]


def test_a_selector_that_matches_is_never_listed() -> None:
    selectors = Selectors(("tg-nora", "hook:gmail:inv-1"), ("nora",), ("gmail",))
    assert select_sessions(SESSIONS, [], selectors).unmatched == ()


@pytest.fixture
def config(tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, unique: str) -> Path:
    store_builder.add("agent:main:telegram:direct:nora", "tg-nora", conversation("orchard", "tg-nora"))
    store_builder.add(
        "agent:main:slack:group:launch",
        "slack-launch",
        conversation("lighthouse", "slack-launch"),
        participants=[{"actorId": "nora"}, {"actorId": "omar"}],
    )
    store_builder.add(
        "hook:gmail:inv-1",
        "gmail-inv",
        conversation("invoice", "gmail-inv"),
        hookExternalContentSource="gmail",
    )
    path = tmp_path / "memoryd.toml"
    path.write_text(
        f'state_dir = "{tmp_path / "state"}"\nsessions_root = "{sessions_root}"\n'
        f'redis_url = "{REDIS_URL}"\n[retention]\ntenant = "t{unique}"\n'
    )
    assert main(["--config", str(path), "ingest", "--agent", "main"]) == 0
    return path


def _run(capsys: pytest.CaptureFixture[str], config: Path, *args: str) -> tuple[int, str]:
    code = main(["--config", str(config), "forget", "--agent", "main", *args])
    return code, capsys.readouterr().out


def test_the_cli_says_an_unknown_session_is_unknown_and_names_the_close_ones(
    config: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = _run(capsys, config, "--session", "tg-nroa", "--dry-run")
    assert code == 0
    assert (
        "No session 'tg-nroa' is known to agent main (no live session, archive or record of it); "
        "it would be recorded as forgotten as written. Did you mean: 'tg-nora'?" in out
    )
    code, out = _run(capsys, config, "--participant", "nroa", "--hook-source", "gmial", "--dry-run")
    assert code == 0
    assert (
        "No session of agent main has the participant 'nroa'; it selects nothing. Did you mean: 'nora'?"
        in out
    )
    assert (
        "No session of agent main has the hook source 'gmial'; it selects nothing. Did you mean: 'gmail'?"
        in out
    )
    code, out = _run(capsys, config, "--session", "tg-nroa", "--json")
    report = orjson.loads(out)
    assert report["sessionIds"] == ["tg-nroa"]  # recorded as forgotten, literally
    assert report["unmatchedSelectors"] == [
        {"selector": "session", "value": "tg-nroa", "closeMatches": ["tg-nora"]}
    ]
    code, out = _run(capsys, config, "--session", "tg-nora", "--json")
    assert code == 0 and "unmatchedSelectors" not in orjson.loads(out)
