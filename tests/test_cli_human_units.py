"""What a person reads in tables: times as "12 s ago", lag and sizes with their units, a line
saying a table is empty; `--json` keeps the exact values."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from memoryd.cli import main
from memoryd.commands import ago, human_size
from tests.builders import SessionStoreBuilder, conversation
from tests.conftest import REDIS_URL

AGO = re.compile(r"\b\d+ (s|min|h|d) ago\b|\bjust now\b")


@pytest.fixture
def config(tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, unique: str) -> Path:
    store_builder.add("agent:main:main", "direct-1", conversation("orchard", "direct-1"), chatType="direct")
    path = tmp_path / "memoryd.toml"
    path.write_text(
        f'state_dir = "{tmp_path / "state"}"\nsessions_root = "{sessions_root}"\n'
        f'redis_url = "{REDIS_URL}"\n[retention]\ntenant = "t{unique}"\n'
    )
    return path


def _out(capsys: pytest.CaptureFixture[str], config: Path, *args: str) -> str:
    capsys.readouterr()
    assert main(["--config", str(config), *args]) == 0, args
    return capsys.readouterr().out


def test_relative_times_and_sizes_read_as_a_person_says_them() -> None:
    now = 1_700_000_000_000
    assert ago(now - 12_000, now) == "12 s ago"
    assert ago(now - 5 * 60_000, now) == "5 min ago"
    assert ago(now - 3 * 3_600_000, now) == "3 h ago"
    assert ago(now - 2 * 86_400_000, now) == "2 d ago"
    assert ago(now + 3 * 86_400_000, now) == "in 3 d"
    assert ago(now, now) == "just now"
    assert ago(None, now) == "never"
    assert [human_size(n) for n in (0, 512, 2048, 5 * 1024**2)] == ["0 B", "512 B", "2.0 KiB", "5.0 MiB"]


def test_status_shows_last_sweep_ago_and_lag_in_sessions_json_exact(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _out(capsys, config, "status")
    assert "1 session" in before  # the lag, with its unit
    _out(capsys, config, "ingest", "--agent", "main")
    human = _out(capsys, config, "status")
    assert AGO.search(human), human
    assert "0 sessions" in human
    agent = json.loads(_out(capsys, config, "status", "--json"))["agents"][0]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+Z", agent["lastSweepAt"])
    assert agent["lag"] == 0


def test_checkpoints_show_modified_ago_and_size_with_unit_json_exact(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _out(capsys, config, "ingest", "--agent", "main")
    human = _out(capsys, config, "checkpoints", "--agent", "main")
    assert AGO.search(human), human
    assert re.search(r"\b\d+ B\b|\bKiB\b", human), human
    row = json.loads(_out(capsys, config, "checkpoints", "--agent", "main", "--json"))["checkpoints"][0]
    assert isinstance(row["fingerprint"]["size"], int) and isinstance(row["fingerprint"]["mtimeMs"], int)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["checkpoints", "--agent", "main"], "no checkpoints"),
        (["hold", "list"], "no holds"),
        (["receipts"], "no receipts"),
    ],
)
def test_an_empty_table_says_it_is_empty(
    config: Path, capsys: pytest.CaptureFixture[str], args: list[str], line: str
) -> None:
    out = _out(capsys, config, *args).strip()
    assert line in out, out
    assert "---" not in out, out  # no bare headers
