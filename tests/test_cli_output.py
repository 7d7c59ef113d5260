"""Human output conventions: times in tables as "12 s ago", in sentences as ISO 8601 (never
epoch milliseconds), yes/no for booleans."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memoryd.cli import main
from tests.builders import SessionStoreBuilder, conversation
from tests.conftest import REDIS_URL

EPOCH_MS = re.compile(r"(?<![\d.])1\d{12}(?![\d.])")
ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z")
AGO = re.compile(r"\b\d+ (s|min|h|d) ago\b|\bjust now\b|\bin \d+ (s|min|h|d)\b")


@pytest.fixture
def config(tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, unique: str) -> Path:
    store_builder.add("agent:main:main", "direct-1", conversation("orchard", "direct-1"), chatType="direct")
    path = tmp_path / "memoryd.toml"
    path.write_text(
        f'state_dir = "{tmp_path / "state"}"\nsessions_root = "{sessions_root}"\n'
        f'redis_url = "{REDIS_URL}"\n[retention]\ntenant = "t{unique}"\n'
    )
    return path


def _human(capsys: pytest.CaptureFixture[str], config: Path, *args: str) -> str:
    capsys.readouterr()
    assert main(["--config", str(config), *args]) in (0, 3), args
    return capsys.readouterr().out


def test_times_are_relative_in_tables_iso_in_sentences_and_booleans_yes_or_no(
    config: Path, capsys: pytest.CaptureFixture[str], unique: str
) -> None:
    scope = f"tenant:t{unique}:user:nora"
    outputs = {
        "ingest": _human(capsys, config, "ingest", "--agent", "main"),
        "checkpoints": _human(capsys, config, "checkpoints", "--agent", "main"),
        "mem write": _human(
            capsys,
            config,
            "mem",
            "write",
            "--scope",
            scope,
            "--content",
            "likes tea",
            "--retention-days",
            "3",
        ),
        "hold add": _human(capsys, config, "hold", "add", "--scope", scope, "--reason", "case 7"),
        "hold list": _human(capsys, config, "hold", "list"),
    }
    _human(capsys, config, "hold", "release", "--scope", scope)
    _human(capsys, config, "erase", "--scope", scope)
    outputs["receipts"] = _human(capsys, config, "receipts")
    for name, out in outputs.items():
        assert not EPOCH_MS.search(out), f"{name} prints epoch ms:\n{out}"
        assert not re.search(r"\b(True|False)\b", out), f"{name} prints a Python boolean:\n{out}"
    for name in ("checkpoints", "hold list"):
        assert AGO.search(outputs[name]), f"{name} shows no relative time:\n{outputs[name]}"
        assert not ISO.search(outputs[name]), f"{name} shows an ISO time in a table:\n{outputs[name]}"
    assert ISO.search(outputs["mem write"]) and AGO.search(outputs["mem write"]), outputs["mem write"]
    assert re.search(r"\b(yes|no)\b", outputs["receipts"].splitlines()[-1]), outputs["receipts"]


def test_a_forget_says_what_it_did(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _human(capsys, config, "ingest", "--agent", "main")
    preview = _human(capsys, config, "forget", "--agent", "main", "--session", "direct-1", "--dry-run")
    assert "recorded" not in preview
    out = _human(capsys, config, "forget", "--agent", "main", "--session", "direct-1")
    last = out.strip().splitlines()[-1]
    assert last.startswith("Done: recorded 1 session as forgotten; removed "), last
    assert "4 session-corpus lines" in last and "transcripts and archives untouched" in last, last


def test_a_dry_run_erase_shows_no_receipt_id_and_does_not_say_complete(
    config: Path, capsys: pytest.CaptureFixture[str], unique: str
) -> None:
    scope = f"tenant:t{unique}:user:nora"
    _human(capsys, config, "mem", "write", "--scope", scope, "--content", "likes tea")
    preview = _human(capsys, config, "erase", "--scope", scope, "--dry-run")
    assert "rcpt-" not in preview and "complete" not in preview, preview
    assert "dry run" in preview and "nothing changed" in preview, preview
    assert "no receipts" in _human(capsys, config, "receipts")
    done = _human(capsys, config, "erase", "--scope", scope)
    assert "rcpt-" in done and "complete" in done, done


def test_a_bad_since_lists_the_accepted_forms(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    args = ["forget", "--agent", "main", "--participant", "nora", "--since", "last week", "--dry-run"]
    assert main(["--config", str(config), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "Invalid memory session date: last week" in err
    assert "2024-05-01" in err and "2024-05-01T09:30:00Z" in err and "Unix milliseconds" in err
