"""`memoryd sessions --explain <id-or-key>`: the admission decision with every rule it was
checked against, the checkpoint, and whether the session is forgotten."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memoryd.cli import main
from memoryd.sessions.admission import AdmissionPolicy, admission_reason, explain_admission
from memoryd.sessions.model import SessionInfo
from tests.builders import Msg, SessionStoreBuilder
from tests.conftest import REDIS_URL

RULES = [
    "forgotten",
    "incognito",
    "dreamingNarrative",
    "sessionKind",
    "cronSession",
    "checkpointTwin",
    "hookExternalContentSource",
    "channel",
    "chatType",
    "sessionKey",
]

_values = st.sampled_from([None, "gmail", "discord", "group", "direct"])
_keys = st.sampled_from(
    [None, "agent:main:main", "cron:nightly", "agent:main:dashboard:incognito-1", "agent:main:discord:x"]
)


@given(
    sid=st.sampled_from(["s1", "s2", "s.checkpoint.1"]),
    key=_keys,
    kind=st.sampled_from(["interactive", "cron", "heartbeat", "subagent", "unknown"]),
    hook=_values,
    channel=_values,
    chat=_values,
    narrative=st.booleans(),
    forgotten=st.sets(st.sampled_from(["s1", "s2"])),
    policy=st.sampled_from(
        [
            None,
            AdmissionPolicy(),
            AdmissionPolicy(
                frozenset({"gmail"}), frozenset({"discord"}), frozenset({"group"}), ("agent:*:discord:*",)
            ),
        ]
    ),
)
def test_the_explanation_decides_exactly_as_admission_does(
    sid, key, kind, hook, channel, chat, narrative, forgotten, policy
) -> None:
    s = SessionInfo(
        "main",
        sid,
        key,
        kind,
        chat_type=chat,
        channel=channel,
        hook_source=hook,
        generated_by_narrative=narrative,
    )
    checks = explain_admission(s, policy, forgotten)
    assert [c.rule for c in checks] == RULES
    assert next((c.reason for c in checks if c.reason), None) == admission_reason(s, policy, forgotten)


@pytest.fixture
def config(tmp_path: Path, sessions_root: Path, unique: str) -> Path:
    b = SessionStoreBuilder(sessions_root, "main")
    b.add(
        "agent:main:main",
        "s-main",
        [Msg("user", "Remember the ferry leaves at nine sharp.")],
        chatType="direct",
    )
    b.add(
        "hook:gmail:inv-1",
        "s-gmail",
        [Msg("user", "Remember the invoice is due Friday.")],
        hookExternalContentSource="gmail",
    )
    b.add("agent:main:dashboard:incognito-7c1d", "s-incognito", [Msg("user", "Remember nothing of this.")])
    b.add("agent:main:signal:dm:omar", "s-omar", [Msg("user", "Remember the orchard rota changes.")])
    b.archive("s-old", "reset", messages=[Msg("user", "Remember an older window.")])
    path = tmp_path / "memoryd.toml"
    path.write_text(
        f'state_dir = "{tmp_path / "state"}"\nsessions_root = "{sessions_root}"\nredis_url = "{REDIS_URL}"\n'
        f'[retention]\ntenant = "t{unique}"\n[memory_policy.exclude_sessions]\n'
        'hook_external_content_sources = ["gmail"]\n'
    )
    assert main(["--config", str(path), "ingest", "--agent", "main"]) == 0
    assert main(["--config", str(path), "forget", "--agent", "main", "--session", "s-omar"]) == 0
    return path


def _explain(capsys, config: Path, query: str, *extra: str) -> tuple[int, str, str]:
    code = main(["--config", str(config), "sessions", "--agent", "main", "--explain", query, *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _json(capsys, config: Path, query: str) -> dict:
    code, out, _ = _explain(capsys, config, query, "--json")
    assert code == 0
    return orjson.loads(out)


def test_an_admitted_session_is_explained_rule_by_rule_with_its_checkpoint(config, capsys) -> None:
    report = _json(capsys, config, "agent:main:main")
    (s,) = report["sessions"]
    assert (s["sessionId"], s["source"], s["decision"], s["forgotten"]) == (
        "s-main",
        "live",
        "admitted",
        False,
    )
    assert [r["rule"] for r in s["rules"]] == RULES
    assert {r["result"] for r in s["rules"]} == {"passes"}
    assert s["checkpoint"]["cursor"]["lineCount"] >= 2 and s["checkpoint"]["excludedReason"] is None


def test_an_excluded_session_names_the_rule_that_keeps_it_out(config, capsys) -> None:
    (s,) = _json(capsys, config, "s-gmail")["sessions"]
    assert s["decision"] == "hookExternalContentSource:gmail"
    hook = next(r for r in s["rules"] if r["rule"] == "hookExternalContentSource")
    assert hook == {
        "rule": "hookExternalContentSource",
        "value": "gmail",
        "result": "keeps out",
        "reason": "hookExternalContentSource:gmail",
    }
    assert s["checkpoint"]["excludedReason"] == "hookExternalContentSource:gmail"
    (s,) = _json(capsys, config, "s-incognito")["sessions"]
    assert s["decision"] == "incognito"


def test_a_forgotten_session_and_an_archive_are_explained(config, capsys) -> None:
    (s,) = _json(capsys, config, "s-omar")["sessions"]
    assert s["forgotten"] is True and s["decision"] == "forgotten"
    (a,) = _json(capsys, config, "s-old")["sessions"]
    assert (a["source"], a["decision"], a["checkpoint"]) == ("archived", "archive: never ingested", None)
    code, out, _ = _explain(capsys, config, "s-gmail")
    assert code == 0
    assert (
        "decision: hookExternalContentSource:gmail" in out and "keeps out" in out and "forgotten: no" in out
    )


def test_an_unknown_session_is_a_usage_error_naming_the_close_ones(config, capsys) -> None:
    code, out, err = _explain(capsys, config, "s-mian")
    assert code == 2 and out == ""
    assert "no session 's-mian' is known to agent main" in err and "Did you mean: 's-main'" in err
    assert len(err.strip().splitlines()) == 1
