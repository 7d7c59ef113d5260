"""`memoryd reset`: the derived index and embedding cache go; lineage and forgotten records stay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.cli import main
from tests.builders import SessionStoreBuilder, conversation
from tests.conftest import REDIS_URL


def _json(capsys: pytest.CaptureFixture[str], config: Path, *args: str) -> dict:
    capsys.readouterr()
    assert main(["--config", str(config), *args, "--json"]) == 0, args
    return json.loads(capsys.readouterr().out)


def test_reset_clears_the_index_and_keeps_forgotten_records(
    tmp_path: Path,
    sessions_root: Path,
    store_builder: SessionStoreBuilder,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store_builder.add("agent:main:one", "direct-1", conversation("orchard", "direct-1"), chatType="direct")
    store_builder.add("agent:main:two", "direct-2", conversation("harbour", "direct-2"), chatType="direct")
    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "MEMORY.md").write_text("# Memory\n\n- The lighthouse keeper retires in spring.\n")
    config = tmp_path / "memoryd.toml"
    config.write_text(
        f'state_dir = "{tmp_path / "state"}"\nsessions_root = "{sessions_root}"\nredis_url = "{REDIS_URL}"\n'
        f'[agents.main]\nworkspace = "{workspace}"\n[index]\nsources = ["memory", "sessions"]\n'
    )
    _json(capsys, config, "ingest", "--agent", "main")
    _json(capsys, config, "forget", "--agent", "main", "--session", "direct-2")
    _json(capsys, config, "index", "--agent", "main")
    assert _json(capsys, config, "search", "--agent", "main", "lighthouse")["results"]
    report = _json(capsys, config, "reset", "--agent", "main")
    assert list(report) == [
        "agentId",
        "indexSources",
        "indexChunks",
        "ftsRows",
        "vectorRows",
        "embeddingCacheRows",
    ]
    assert report["indexChunks"] >= 1 and report["indexSources"] >= 1 and report["ftsRows"] >= 1
    after = _json(capsys, config, "search", "--agent", "main", "lighthouse")
    assert after["results"] == [] and after["stale"]
    sessions = {s["sessionId"]: s for s in _json(capsys, config, "sessions", "--agent", "main")["sessions"]}
    assert sessions["direct-2"]["excludedReason"] == "forgotten"  # the forgotten record survived
    assert _json(capsys, config, "index", "--agent", "main")["chunksWritten"] >= 1
    assert _json(capsys, config, "search", "--agent", "main", "lighthouse")["results"]
