"""`memoryd sessions`, `ingest` and `checkpoints`: flags, JSON shapes, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.cli import main
from tests.builders import SessionStoreBuilder, conversation
from tests.conftest import REDIS_URL


@pytest.fixture
def config(tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder) -> Path:
    store_builder.add(
        "agent:main:main",
        "direct-1",
        conversation("orchard", "direct-1"),
        chatType="direct",
        participants=[{"actorId": "nora"}],
    )
    store_builder.add(
        "hook:webhook:b1", "hook-1", conversation("pipeline", "hook-1"), hookExternalContentSource="webhook"
    )
    store_builder.add("agent:main:evil", "../../etc/passwd", write_transcript=False)
    path = tmp_path / "memoryd.toml"
    path.write_text(
        f'state_dir = "{tmp_path / "state"}"\nsessions_root = "{sessions_root}"\n'
        f'redis_url = "{REDIS_URL}"\n\n[memory_policy.exclude_sessions]\n'
        'hook_external_content_sources = ["webhook"]\n'
    )
    return path


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


def test_sessions_lists_metadata_with_admission_and_names_refused_ids(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run_json(capsys, "--config", str(config), "sessions", "--agent", "main", "--limit", "all", "--json")
    assert list(out) == ["agentId", "total", "shown", "sessions", "archives", "errors"]
    rows = {s["sessionId"]: s for s in out["sessions"]}
    assert rows["hook-1"]["excludedReason"] == "hookExternalContentSource:webhook"
    assert rows["direct-1"]["excludedReason"] is None and rows["direct-1"]["participants"] == ["nora"]
    assert any("../../etc/passwd" in e for e in out["errors"])
    limited = run_json(
        capsys, "--config", str(config), "sessions", "--agent", "main", "--limit", "1", "--json"
    )
    assert (limited["total"], limited["shown"]) == (2, 1)


def test_ingest_then_checkpoints_show_what_was_read_and_what_was_kept_out(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = run_json(capsys, "--config", str(config), "ingest", "--agent", "main", "--json")
    assert list(report)[:6] == [
        "agentId",
        "sessionsSeen",
        "sessionsScanned",
        "sessionsUnchanged",
        "sessionsExcluded",
        "sessionsMissing",
    ]
    assert report["sessionsExcluded"] == {"hookExternalContentSource:webhook": 1}
    assert report["messagesStaged"] == 4
    cps = run_json(capsys, "--config", str(config), "checkpoints", "--agent", "main", "--json")
    rows = {c["sessionId"]: c for c in cps["checkpoints"]}
    assert rows["hook-1"]["excludedReason"] == "hookExternalContentSource:webhook"
    assert rows["hook-1"]["fingerprint"]["contentHash"] == ""
    assert rows["direct-1"]["cursor"] == {"lineCount": 5, "lastContentLine": 4, "atEnd": True}
    assert rows["direct-1"]["stateKey"] == "main:sessions/main/direct-1"


def test_bad_agent_id_and_bad_limit_exit_2_naming_the_input(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--config", str(config), "checkpoints", "--agent", "../etc"]) == 2
    assert "'../etc'" in capsys.readouterr().err
    assert main(["--config", str(config), "sessions", "--agent", "main", "--limit", "zero"]) == 2
    assert "--limit" in capsys.readouterr().err


def test_checkpoints_of_an_agent_never_swept_is_empty_and_creates_nothing(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run_json(capsys, "--config", str(config), "checkpoints", "--agent", "main", "--json")
    assert out == {"agentId": "main", "checkpoints": []}
    assert not (tmp_path / "state" / "agents" / "main" / "memory.sqlite").exists()


def test_a_bounded_sweep_says_what_deferred_means_and_what_happens_next(
    tmp_path: Path,
    sessions_root: Path,
    store_builder: SessionStoreBuilder,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for i in range(3):
        store_builder.add(f"agent:main:s{i}", f"s-{i}", conversation("orchard", f"s-{i}"), chatType="direct")
    path = tmp_path / "memoryd.toml"
    path.write_text(
        f'state_dir = "{tmp_path / "state"}"\nsessions_root = "{sessions_root}"\n'
        f'redis_url = "{REDIS_URL}"\n\n[ingest]\nmax_messages_per_sweep = 4\ninterval_s = 60\n'
    )
    assert main(["--config", str(path), "ingest", "--agent", "main"]) == 0
    out = capsys.readouterr().out
    assert "2 deferred" in out
    assert (
        "deferred: 2 admitted sessions wait for the next sweep (one sweep stages at most "
        "4 messages, ingest.max_messages_per_sweep); the daemon sweeps every 60 s, or run "
        "`memoryd ingest --agent main` again" in out
    )


def test_a_sweep_reports_its_progress_session_by_session(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder
) -> None:
    import anyio

    from memoryd.ops import ingest_sweep
    from memoryd.ops.execute import run_locally
    from tests.conftest import make_settings

    for i in range(3):
        store_builder.add(f"agent:main:s{i}", f"s-{i}", conversation("orchard", f"s-{i}"), chatType="direct")
    settings = make_settings(tmp_path, sessions_root)
    seen: list[tuple[str, int, int]] = []

    async def go() -> None:
        request = ingest_sweep.OP.contract.parse({"agent": "main"})
        await run_locally(ingest_sweep.OP, settings, request, progress=lambda *p: seen.append(p))

    anyio.run(go)
    assert [p for p in seen if p[0] == "sessions"][-1] == ("sessions", 3, 3)
    sessions = [done for phase, done, _ in seen if phase == "sessions"]
    assert sessions == sorted(sessions)
