"""`memoryd status` and the daemon's gauges report what is true: lag is what the next sweep
would read, "last sweep" is the last sweep."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pytest

from memoryd.cli import main
from tests.builders import SessionStoreBuilder, conversation
from tests.conftest import REDIS_URL


@pytest.fixture
def config(tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder) -> Path:
    store_builder.add("agent:main:main", "direct-1", conversation("orchard", "direct-1"), chatType="direct")
    store_builder.add("agent:main:two", "direct-2", conversation("harbour", "direct-2"), chatType="direct")
    store_builder.add(
        "hook:gmail:1", "hook-1", conversation("invoice", "hook-1"), hookExternalContentSource="gmail"
    )
    store_builder.add("agent:main:cron:x:run:1", "cron-1", conversation("digest", "cron-1"), kind="cron")
    path = tmp_path / "memoryd.toml"
    path.write_text(
        f'state_dir = "{tmp_path / "state"}"\nsessions_root = "{sessions_root}"\n'
        f'redis_url = "{REDIS_URL}"\n\n[memory_policy.exclude_sessions]\n'
        'hook_external_content_sources = ["gmail"]\n'
    )
    return path


def _status(capsys: pytest.CaptureFixture[str], config: Path) -> dict:
    capsys.readouterr()
    assert main(["--config", str(config), "status", "--agent", "main", "--json"]) == 0
    return json.loads(capsys.readouterr().out)["agents"][0]


def _ingest(config: Path) -> None:
    assert main(["--config", str(config), "ingest", "--agent", "main", "--json"]) == 0


def test_lag_is_zero_after_a_complete_sweep_with_excluded_and_forgotten_sessions(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _status(capsys, config)["lag"] == 2  # two admitted sessions to read; the excluded two are not lag
    _ingest(config)
    assert _status(capsys, config)["lag"] == 0
    assert main(["--config", str(config), "forget", "--agent", "main", "--session", "direct-2"]) == 0
    assert _status(capsys, config)["lag"] == 0
    _ingest(config)
    assert _status(capsys, config)["lag"] == 0


def test_last_sweep_is_the_last_sweep_even_when_it_changed_nothing(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _ingest(config)
    first = datetime.fromisoformat(_status(capsys, config)["lastSweepAt"]).timestamp()
    time.sleep(0.05)
    before_quiet_sweep = time.time()
    _ingest(config)  # nothing changed: it writes no checkpoint
    last = datetime.fromisoformat(_status(capsys, config)["lastSweepAt"]).timestamp()
    assert last >= before_quiet_sweep > first


def test_two_sweeps_of_one_agent_ending_at_once_both_record_their_time(tmp_path: Path) -> None:
    """Two sweeps of one agent (a live one and a requested one) end in the same daemon process,
    each writing the last-sweep file from a worker thread: neither write may fail."""
    from concurrent.futures import ThreadPoolExecutor

    from memoryd.ingest.last_sweep import last_sweep_ms, record_sweep

    def writes(start: int) -> None:
        for at_ms in range(start, start + 300):
            record_sweep(tmp_path, at_ms)

    with ThreadPoolExecutor(2) as pool:
        for done in [pool.submit(writes, 0), pool.submit(writes, 1000)]:
            done.result()
    assert last_sweep_ms(tmp_path) in (299, 1299)
    assert [p.name for p in tmp_path.iterdir()] == ["last-sweep"]  # no temporary file left


def test_admitted_and_excluded_add_up_to_sessions_after_a_forget_and_an_erasure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, unique: str
) -> None:
    assert main(["demo", "init", str(tmp_path / "demo"), "--redis-url", REDIS_URL]) == 0
    config = tmp_path / "demo" / "memoryd.toml"
    monkeypatch.setenv("MEMORYD_DAEMON__HOST_ID", f"test-{unique}")

    def sums() -> list[tuple[int, int]]:
        capsys.readouterr()
        assert main(["--config", str(config), "status", "--json"]) == 0
        agents = json.loads(capsys.readouterr().out)["agents"]
        return [(a["sessions"], a["sessionsAdmitted"] + sum(a["sessionsExcluded"].values())) for a in agents]

    def run(*args: str) -> None:
        assert main(["--config", str(config), *args]) == 0, args

    steps = [
        ("ingest", "--agent", "main"),
        ("forget", "--agent", "main", "--participant", "omar"),
        ("ingest", "--agent", "main"),
        ("erase", "--scope", "tenant:default:user:nora", "--request-id", f"r-{unique}"),
        ("ingest", "--agent", "main"),
    ]
    for step in [(), *steps]:
        if step:
            run(*step)
        for live, counted in sums():
            assert counted == live, step
