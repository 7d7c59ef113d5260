"""`memoryd status` without a usable Redis: it says which Redis and why, exits non-zero, and
does not claim the daemon is down (without Redis it cannot know)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.cli import main
from tests.builders import SessionStoreBuilder, conversation


def _config(tmp_path: Path, sessions_root: Path, redis_url: str) -> Path:
    path = tmp_path / "memoryd.toml"
    path.write_text(
        f'state_dir = "{tmp_path / "state"}"\nsessions_root = "{sessions_root}"\nredis_url = "{redis_url}"\n'
    )
    return path


@pytest.fixture(autouse=True)
def _one_session(store_builder: SessionStoreBuilder) -> None:
    store_builder.add("agent:main:main", "direct-1", conversation("orchard", "direct-1"), chatType="direct")


def test_status_exits_non_zero_when_redis_is_unreachable(
    tmp_path: Path, sessions_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, sessions_root, "redis://127.0.0.1:1/0")
    assert main(["--config", str(config), "status"]) == 1
    out, err = capsys.readouterr()
    assert "Redis unreachable at 127.0.0.1:1" in err
    assert "not running" not in out + err
    assert "main" in out  # the stores are still read and shown


def test_status_exits_non_zero_when_redis_refuses_the_password(
    tmp_path: Path, sessions_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, sessions_root, "redis://nobody:wrong@127.0.0.1:6379/0")
    assert main(["--config", str(config), "status", "--json"]) == 1
    out, err = capsys.readouterr()
    assert "Redis refused the password at 127.0.0.1:6379" in err
    assert "wrong" not in out + err
    daemon = json.loads(out)["daemon"]
    assert daemon["running"] is None  # unknown without Redis, not "not running"
    assert daemon["redis"].startswith("refused the password")
