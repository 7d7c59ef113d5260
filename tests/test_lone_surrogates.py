"""A lone surrogate, as Node's JSON.stringify writes a string cut mid-pair, in sessions.json
and in transcript lines (issue 18, finding 7): the agent is ingested (the surrogate read as
U+FFFD, as the reference's UTF-8 writes store it), an entry that cannot be used is skipped
and counted, and forget and erase still work for that agent, through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoryd.sessions.json_text import loads
from tests.builders import Msg, SessionStoreBuilder, exchange
from tests.daemon_harness import run_cli, write_config

CUT = "\ud83d"  # the high half of an emoji, alone


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF)))
def test_a_string_reads_as_python_json_reads_it_with_lone_surrogates_as_fffd(text):
    raw = json.dumps({"t": text, text: [text]}).encode()
    want = json.loads(raw)
    assert loads(raw) == {
        _fffd(k): [_fffd(x) for x in v] if isinstance(v, list) else _fffd(v) for k, v in want.items()
    }


def _fffd(s: str) -> str:
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in s)


@pytest.mark.slow  # three CLI processes
def test_an_agent_with_lone_surrogates_is_ingested_forgotten_and_erased(
    tmp_path: Path, redis_url: str, unique: str
):
    root = tmp_path / "sessions"
    builder = SessionStoreBuilder(root, "main")
    builder.add(
        f"agent:main:direct:nora{CUT}",
        "s-cut",
        [
            Msg("user", f"Remember that the orchard rota changes every Tuesday {CUT} for the ops team."),
            Msg("assistant", "Understood: the orchard rota changes every Tuesday for the ops team."),
        ],
        chatType="direct",
        participants=[{"actorId": "nora"}, {"actorId": f"guest{CUT}"}],
    )
    builder.add(
        "agent:main:other",
        "s-plain",
        exchange("lighthouse"),
        chatType="direct",
        participants=[{"actorId": "omar"}],
    )
    builder.entries[f"agent:main:broken{CUT}"] = [f"not an entry {CUT}"]
    builder.save()
    raw = (builder.dir / "sessions.json").read_bytes()
    assert b"\\ud83d" in raw  # written as Node writes it: an escape no low surrogate follows

    config = write_config(
        tmp_path / "memoryd.toml",
        state_dir=tmp_path / "state",
        sessions_root=root,
        redis_url=redis_url,
        host_id=f"h{unique}",
    )
    ingest = run_cli(config, "ingest", "--agent", "main", "--json")
    assert ingest.returncode == 0, ingest.stderr
    report = json.loads(ingest.stdout)
    assert report["messagesStaged"] == 4, report
    assert report.get("linesSkipped", {}) == {}, report
    (bad,) = report["errors"]  # the one entry that cannot be used, and only it
    assert "agent:main:broken" in bad and "not an object" in bad
    corpus = b"".join(p.read_bytes() for p in (tmp_path / "state").rglob("session-corpus/*.txt"))
    assert "Tuesday \ufffd for".encode() in corpus

    forget = run_cli(config, "forget", "--agent", "main", "--session", "s-cut", "--json")
    assert forget.returncode == 0, forget.stderr
    assert json.loads(forget.stdout)["sessionIds"] == ["s-cut"]
    corpus = b"".join(p.read_bytes() for p in (tmp_path / "state").rglob("session-corpus/*.txt"))
    assert b"orchard" not in corpus and b"lighthouse" in corpus

    erase = run_cli(config, "erase", "--scope", "tenant:default:user:omar", "--json")
    assert erase.returncode == 0, erase.stderr
    receipt = json.loads(erase.stdout)
    assert receipt["state"] == "complete" and receipt["verified"] is True, receipt
    corpus = b"".join(p.read_bytes() for p in (tmp_path / "state").rglob("session-corpus/*.txt"))
    assert b"lighthouse" not in corpus
