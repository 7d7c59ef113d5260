"""The one pi v3 transcript writer (the demo store, the test builders, the benchmark corpus and the
OpenClaw fixture all write with it): what it writes, memoryd's reader reads back exactly."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from memoryd.sessions.transcript import Carry, ExportedLine, export_line
from memoryd.sessions.transcript_writer import Turn, encode_lines, message_line, session_header, transcript


def test_a_transcript_is_a_header_then_messages_chained_by_id() -> None:
    lines = transcript(
        "s1",
        [
            Turn("user", "remember the harbour rota", 1_000, meta={"senderIsOwner": True}),
            Turn("assistant", [{"type": "text", "text": "noted"}], 2_000),
        ],
    )
    assert lines[0] == {"type": "session", "version": 3, "id": "s1", "cwd": "/srv/agent"}
    assert [(x["id"], x["parentId"]) for x in lines[1:]] == [("s1-0", None), ("s1-1", "s1-0")]
    assert lines[1]["message"] == {
        "role": "user",
        "content": "remember the harbour rota",
        "timestamp": 1_000,
        "__openclaw": {"senderIsOwner": True},
    }
    assert "__openclaw" not in lines[2]["message"]  # no metadata, no key


def test_an_appended_turn_continues_the_chain_and_entry_fields_keep_their_place() -> None:
    line = message_line(
        "s1-4",
        "s1-3",
        Turn("toolResult", [{"type": "text", "text": "x"}], 5, fields={"toolCallId": "t3"}),
        timestamp="2026-01-01T00:00:00.005Z",
    )
    assert list(line) == ["type", "id", "parentId", "timestamp", "message"]
    assert list(line["message"]) == ["role", "content", "timestamp", "toolCallId"]
    assert session_header("s1", timestamp="2026-01-01T00:00:00.000Z", version=4, cwd="/tmp") == {
        "type": "session",
        "version": 4,
        "id": "s1",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/tmp",
    }


def test_lines_are_compact_utf8_json_and_a_lone_surrogate_is_escaped_as_json_stringify_does() -> None:
    data = encode_lines([{"a": "é"}, {"b": "cut \ud83d"}])
    assert data == b'{"a":"\xc3\xa9"}\n{"b":"cut \\ud83d"}\n'
    assert [json.loads(x) for x in data.splitlines()] == [{"a": "é"}, {"b": "cut \ud83d"}]


_text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=80).filter(
    lambda t: t.strip() and "\x00" not in t
)


@settings(max_examples=80, deadline=None)
@given(texts=st.lists(_text, min_size=1, max_size=6))
def test_what_it_writes_the_reader_exports_with_its_provenance(texts: list[str]) -> None:
    turns = [
        Turn(
            "user" if i % 2 == 0 else "assistant",
            t,
            1_000 + i,
            meta={"senderIsOwner": True} if i % 2 == 0 else {},
        )
        for i, t in enumerate(texts)
    ]
    raw = encode_lines(transcript("s1", turns)).splitlines()
    carry = Carry()
    out = [export_line(line, n, carry) for n, line in enumerate(raw, start=1)]
    assert out[0] is None  # the header is not a message
    exported = [x for x in out[1:] if isinstance(x, ExportedLine)]
    assert len(exported) == len(texts)
    assert [x.origin_class for x in exported] == [
        "owner" if i % 2 == 0 else "agent" for i in range(len(texts))
    ]
    assert [x.timestamp_ms for x in exported] == [t.timestamp_ms for t in turns]
