"""Admission is one rule for every path that reads a transcript into memory: raw transcript
indexing (`index.sources` with "sessions") leaves out what the admission policy excludes, and
says why in `memoryd index`. A deliberate difference from the reference, whose transcript
indexing ignores the policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.cli import main
from tests.conftest import REDIS_URL

GMAIL = "gmail-inv-2291"


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_demos_excluded_gmail_session_is_neither_indexed_nor_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "demo", "init", str(tmp_path / "demo"), "--redis-url", REDIS_URL, "--json")
    assert code == 0
    config = json.loads(out)["config"]
    code, out, err = _run(capsys, "--config", config, "index", "--agent", "main")
    assert code == 0, err
    assert "hookExternalContentSource:gmail" in out and "excluded" in out  # the reason, visible
    code, out, err = _run(capsys, "--config", config, "index", "--agent", "main", "--json")
    assert code == 0, err
    skipped = {n["sessionId"]: n["reason"] for n in json.loads(out)["skipped"]}
    assert skipped[GMAIL] == "hookExternalContentSource:gmail"
    code, out, err = _run(capsys, "--config", config, "search", "--agent", "main", "invoice 2291", "--json")
    assert code == 0, err
    hits = json.loads(out)["results"]
    assert [h for h in hits if h.get("sessionId") == GMAIL or "Harbour Supplies" in h["snippet"]] == []
    # An admitted session is still found: the transcripts are indexed.
    code, out, err = _run(
        capsys, "--config", config, "search", "--agent", "main", "release checklist", "--json"
    )
    assert code == 0, err
    assert json.loads(out)["results"]
