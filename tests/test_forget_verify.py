"""`memoryd forget --verify`: after a real purge the retention verifier runs over the forgotten
sessions' content and its result follows `refusals` in the report; it can fail, and a dry run
with --verify is a usage error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.cli import main
from memoryd.settings import load_settings
from tests.builders import Msg, SessionStoreBuilder
from tests.conftest import REDIS_URL

NORA_TEXT = "Remember that the violet mongoose launch is on Friday at noon."
OMAR_TEXT = "Remember that the orchard rota changes every Monday morning."


@pytest.fixture
def config(tmp_path: Path, sessions_root: Path, unique: str) -> Path:
    b = SessionStoreBuilder(sessions_root, "main")
    b.add(
        "agent:main:dm:nora",
        "sess-nora-1",
        [Msg("user", NORA_TEXT)],
        participants=[{"actorId": "nora"}],
        chatType="direct",
    )
    b.add(
        "agent:main:dm:omar",
        "sess-omar-1",
        [Msg("user", OMAR_TEXT)],
        participants=[{"actorId": "omar"}],
        chatType="direct",
    )
    path = tmp_path / "memoryd.toml"
    path.write_text(
        f'state_dir = "{tmp_path / "state"}"\nsessions_root = "{sessions_root}"\n'
        f'redis_url = "{REDIS_URL}"\n\n[daemon]\nhost_id = "test-{unique}"\n\n'
        '[index]\nsources = ["memory", "sessions"]\n\n'
        "[dreaming]\nmin_score = 0\nmin_recall_count = 0\nmin_unique_queries = 0\n"
    )
    return path


def run(capsys: pytest.CaptureFixture[str], config: Path, *args: str, code: int = 0) -> dict:
    assert main(["--config", str(config), *args, "--json"]) == code
    return json.loads(capsys.readouterr().out)


def derive_everything(capsys: pytest.CaptureFixture[str], config: Path) -> Path:
    run(capsys, config, "ingest", "--agent", "main")
    promoted = run(capsys, config, "dream", "--agent", "main")["deep"]["promoted"]
    assert any("violet mongoose" in p["text"] for p in promoted)
    run(capsys, config, "index", "--agent", "main")
    memory = load_settings(config).workspace_for("main") / "MEMORY.md"
    assert "violet mongoose" in memory.read_text()
    return memory


def test_forget_verify_reports_verified_after_purging_an_ingested_promoted_indexed_session(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    memory = derive_everything(capsys, config)

    out = run(capsys, config, "forget", "--agent", "main", "--session", "sess-nora-1", "--verify")

    assert list(out)[-3:] == ["refusals", "counts", "verification"]
    a = out["artifacts"]
    assert a["memoryEntries"] >= 1 and a["indexChunks"] >= 1 and a["shortTermEntries"] >= 1
    assert a["sessionCorpusLines"] >= 1
    v = out["verification"]
    assert v["verified"] is True, v
    assert {c["name"] for c in v["checks"]} >= {"derivability", "physical"}
    assert all(c["status"] == "passed" for c in v["checks"])
    assert "violet mongoose" not in memory.read_text() and "orchard rota" in memory.read_text()


def test_a_fresh_verify_fails_when_the_forgotten_text_is_planted_back_into_memory(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    memory = derive_everything(capsys, config)
    first = run(capsys, config, "forget", "--agent", "main", "--session", "sess-nora-1", "--verify")
    assert first["verification"]["verified"] is True

    memory.write_text(memory.read_text() + f"\n- {NORA_TEXT}\n")
    again = run(capsys, config, "forget", "--agent", "main", "--session", "sess-nora-1", "--verify", code=1)

    v = again["verification"]
    assert v["verified"] is False
    derivability = next(c for c in v["checks"] if c["name"] == "derivability")
    assert derivability["status"] == "failed" and derivability["count"] >= 1
    assert any("MEMORY.md" in loc for loc in derivability["locations"])


def test_forget_without_verify_keeps_the_reference_fields_only(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, config, "ingest", "--agent", "main")
    out = run(capsys, config, "forget", "--agent", "main", "--session", "sess-nora-1")
    assert list(out)[-2:] == ["refusals", "counts"] and "verification" not in out


def test_verify_with_dry_run_is_a_usage_error_and_changes_nothing(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, config, "ingest", "--agent", "main")
    code = main(
        [
            "--config",
            str(config),
            "forget",
            "--agent",
            "main",
            "--session",
            "sess-nora-1",
            "--dry-run",
            "--verify",
            "--json",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "--verify" in err and "--dry-run" in err
    preview = run(capsys, config, "forget", "--agent", "main", "--session", "sess-nora-1", "--dry-run")
    assert preview["artifacts"]["shortTermEntries"] == 1  # still there: nothing was purged


SHARED = "Remember that the standup moves to ten on Mondays from now on."


def test_forget_verify_passes_a_clean_purge_whose_text_other_sessions_and_agents_still_hold(
    config: Path, sessions_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b = SessionStoreBuilder(sessions_root, "main")
    b.entries = json.loads((b.dir / "sessions.json").read_text())
    b.add(
        "agent:main:dm:nora",
        "sess-nora-1",
        [Msg("user", NORA_TEXT), Msg("user", SHARED)],
        participants=[{"actorId": "nora"}],
    )
    b.add(
        "agent:main:dm:omar",
        "sess-omar-1",
        [Msg("user", OMAR_TEXT), Msg("user", SHARED)],
        participants=[{"actorId": "omar"}],
    )
    # Another agent that heard nora say the same: its memory is not this forget's business.
    SessionStoreBuilder(sessions_root, "peer").add(
        "agent:peer:dm:nora", "sess-peer-1", [Msg("user", NORA_TEXT)], participants=[{"actorId": "nora"}]
    )
    for agent in ("main", "peer"):
        run(capsys, config, "ingest", "--agent", agent)

    out = run(capsys, config, "forget", "--agent", "main", "--session", "sess-nora-1", "--verify")

    assert out["verification"]["verified"] is True, out["verification"]
    corpus = load_settings(config).workspace_for("main") / "memory" / ".dreams" / "session-corpus"
    text = "".join(p.read_text() for p in corpus.glob("*.txt"))
    assert SHARED in text and NORA_TEXT not in text  # omar's line stays; nora's is gone
