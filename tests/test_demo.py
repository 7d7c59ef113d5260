"""`memoryd demo init`: an example store memoryd reads as is, with a config pointing into it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.cli import main
from memoryd.sessions.admission import AdmissionPolicy, exclusion_reason
from memoryd.sessions.json_store import JsonSessionSource
from memoryd.settings import load_settings


def _init(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["demo", "init", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_demo_init_writes_a_store_with_every_session_kind_and_a_config_pointing_into_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _init(capsys, str(tmp_path / "demo"), "--redis-url", "redis://127.0.0.1:6379/15", "--json")
    assert code == 0
    report = json.loads(out)
    settings = load_settings(report["config"])
    assert settings.state_dir == tmp_path / "demo" / "state"
    assert settings.sessions_root == tmp_path / "demo" / "sessions"
    assert settings.redis_url == "redis://127.0.0.1:6379/15"
    sessions, archives = [], []
    for agent in report["agents"]:
        source = JsonSessionSource(
            agent["agent"], settings.sessions_root / "agents" / agent["agent"] / "sessions"
        )
        listing = source.list_sessions()
        assert listing.errors == () and len(listing.sessions) == agent["sessions"]
        sessions += listing.sessions
        archives += source.list_archives()
    assert len({s.agent_id for s in sessions}) >= 2
    assert {s.hook_source for s in sessions} >= {"gmail", "email", "webhook"}
    assert {s.chat_type for s in sessions} >= {"direct", "group"}
    assert {s.session_kind for s in sessions} >= {"interactive", "cron"}
    assert any(len(s.participants) >= 3 for s in sessions)
    assert len(archives) == sum(a["archives"] for a in report["agents"]) >= 1
    # The config's admission policy keeps exactly the gmail hook session out.
    policy = AdmissionPolicy.from_settings(settings.memory_policy.exclude_sessions)
    reasons = {s.session_id: exclusion_reason(s, policy, ()) for s in sessions}
    assert [r for r in reasons.values() if r] == ["hookExternalContentSource:gmail"]


def test_demo_init_refuses_a_directory_that_holds_one_and_leaves_it_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "demo"
    assert _init(capsys, str(target))[0] == 0
    config = target / "memoryd.toml"
    config.write_text(config.read_text() + "# operator edit\n")
    code, _, err = _init(capsys, str(target))
    assert code == 2
    assert str(target) in err and "--force" in err
    assert config.read_text().endswith("# operator edit\n")
    assert _init(capsys, str(target), "--force")[0] == 0
    assert "# operator edit" not in config.read_text()


def test_demo_init_prints_what_it_wrote_and_how_to_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _init(capsys, str(tmp_path / "d"))
    assert code == 0
    assert "main" in out and "ops" in out and str(tmp_path / "d" / "memoryd.toml") in out
    assert "run" in out


def test_demo_init_force_resets_the_examples_state_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "demo"
    assert _init(capsys, str(target))[0] == 0
    stale = target / "state" / "agents" / "main" / "memory.sqlite"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"what an earlier tour ingested")
    extra = target / "sessions" / "agents" / "main" / "sessions" / "left-over.jsonl"
    extra.write_text("{}\n")
    code, out, _ = _init(capsys, str(target), "--force")
    assert code == 0
    assert not (target / "state").exists() and not extra.exists()
    assert "earlier state removed" in out
