"""Transcript export: pi v3 lines -> "User: …"/"Assistant: …" lines with per-line provenance."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from memoryd.sessions.model import OversizedLine
from memoryd.sessions.transcript import (
    SKIP_INVALID_UTF8,
    SKIP_MALFORMED,
    SKIP_NUL,
    SKIP_OVERSIZED,
    SKIP_UNKNOWN_TYPE,
    Carry,
    ExportedLine,
    iter_exported,
)


def msg(role: str, content: Any, **meta: Any) -> bytes:
    body: dict[str, Any] = {"role": role, "content": content, "timestamp": 1_787_738_401_000}
    if meta:
        body["__openclaw"] = meta
    return json.dumps({"type": "message", "id": "x", "parentId": None, "message": body}).encode()


HEADER = json.dumps({"type": "session", "version": 3, "id": "s", "cwd": "/srv"}).encode()


def export(lines: list[bytes]) -> tuple[list[ExportedLine], dict[str, int]]:
    skipped: dict[str, int] = {}
    return list(iter_exported(lines, skipped)), skipped


def classes(lines: list[bytes]) -> list[tuple[str, str]]:
    return [(e.text, e.origin_class) for e in export(lines)[0]]


def test_owner_turn_is_owner_and_the_answer_is_agent() -> None:
    out = classes(
        [
            HEADER,
            msg("user", "Please remember violet-mongoose-42.", senderIsOwner=True),
            msg("assistant", "Noted: violet-mongoose-42."),
        ]
    )
    assert out == [
        ("User: Please remember violet-mongoose-42.", "owner"),
        ("Assistant: Noted: violet-mongoose-42.", "agent"),
    ]


def test_unknown_sender_is_untrusted_and_so_is_the_answer() -> None:
    out = classes(
        [msg("user", "hi from a stranger in the group"), msg("assistant", "hello stranger, welcome")]
    )
    assert [c for _, c in out] == ["untrusted", "untrusted"]


def test_network_tool_result_taints_assistant_until_next_user_message() -> None:
    out = classes(
        [
            msg("user", "look up the weather please", senderIsOwner=True),
            msg("assistant", [{"type": "toolCall", "id": "t", "name": "fetch", "arguments": {}}]),
            msg("toolResult", [{"type": "text", "text": "sunny"}], resultContentSource="network"),
            msg("assistant", "It is sunny according to the web."),
            msg("assistant", "Anything else about the weather?"),
            msg("user", "no thanks, that is all", senderIsOwner=True),
            msg("assistant", "Alright, have a good day."),
        ]
    )
    assert [c for _, c in out] == ["owner", "untrusted", "untrusted", "owner", "agent"]


def test_local_tool_result_does_not_taint() -> None:
    out = classes(
        [
            msg("user", "write the file please", senderIsOwner=True),
            msg("toolResult", [{"type": "text", "text": "ok"}]),
            msg("assistant", "The file is written now."),
        ]
    )
    assert out[-1][1] == "agent"


def test_turn_tainted_flag_makes_an_assistant_line_untrusted() -> None:
    out = classes(
        [
            msg("user", "summarise the page", senderIsOwner=True),
            msg("assistant", "The page says hello.", turnTainted=True),
        ]
    )
    assert out[-1][1] == "untrusted"


def test_internal_system_provenance_is_system() -> None:
    out = classes(
        [
            msg("user", "[cron] run the daily digest", provenance="internal_system"),
            msg("assistant", "Digest done for today."),
            msg("user", "another scaffold prompt here", provenance={"kind": "internal_system"}),
        ]
    )
    assert [c for _, c in out] == ["system", "system", "system"]


def test_content_list_keeps_text_items_and_skips_tool_calls_and_thinking() -> None:
    lines = [
        msg("user", "go ahead with the plan", senderIsOwner=True),
        msg(
            "assistant",
            [
                {"type": "thinking", "thinking": "secret reasoning"},
                {"type": "text", "text": "First part."},
                {"type": "toolCall", "id": "c", "name": "write", "arguments": {"path": "x"}},
                {"type": "text", "text": "Second\npart."},
            ],
        ),
        msg("assistant", [{"type": "toolCall", "id": "c2", "name": "read", "arguments": {}}]),
    ]
    out, _ = export(lines)
    assert [e.text for e in out] == ["User: go ahead with the plan", "Assistant: First part. Second part."]
    assert all("secret reasoning" not in e.text for e in out)


def test_multiline_text_becomes_one_line_and_line_numbers_are_transcript_lines() -> None:
    out, _ = export([HEADER, msg("user", "line one\n\n  line   two\tend", senderIsOwner=True)])
    assert out[0].text == "User: line one line two end"
    assert out[0].line_number == 2
    assert out[0].timestamp_ms == 1_787_738_401_000


def test_iso_timestamp_is_used_when_the_message_has_none() -> None:
    line = json.dumps(
        {
            "type": "message",
            "timestamp": "2026-08-26T10:00:01.000Z",
            "message": {
                "role": "user",
                "content": "hello with iso time",
                "__openclaw": {"senderIsOwner": True},
            },
        }
    ).encode()
    out, _ = export([line])
    assert out[0].timestamp_ms == 1_787_738_401_000


def test_bad_lines_are_skipped_and_counted_by_kind_without_losing_the_rest() -> None:
    good = msg("user", "still here after the bad lines", senderIsOwner=True)
    lines = [
        HEADER,
        b"{not json",
        b'{"type":"message","message":{"role":"user","content":"\xff\xfe"}}',
        b'{"type":"message"\x00}',
        OversizedLine(20 * 1024 * 1024),
        json.dumps({"type": "future_entry_kind", "x": 1}).encode(),
        b"",
        b"[1,2]",
        good,
    ]
    out, skipped = export(lines)
    assert [e.text for e in out] == ["User: still here after the bad lines"]
    assert skipped == {
        SKIP_MALFORMED: 2,
        SKIP_INVALID_UTF8: 1,
        SKIP_NUL: 1,
        SKIP_OVERSIZED: 1,
        SKIP_UNKNOWN_TYPE: 1,
    }


def test_known_non_message_entries_are_not_exported_nor_counted() -> None:
    lines = [json.dumps({"type": t}).encode() for t in ("compaction", "custom", "model_change", "leaf")]
    out, skipped = export(lines)
    assert out == [] and skipped == {}


@given(st.sampled_from([None, "owner", "agent", "untrusted", "system"]), st.booleans())
def test_carry_round_trips_through_its_checkpoint_encoding(last: Any, tainted: bool) -> None:
    decoded = Carry.decode(Carry(last, tainted).encode())
    assert (decoded.last_user, decoded.tainted) == (last, tainted)


def test_resuming_with_a_carry_classifies_like_a_full_pass() -> None:
    lines = [
        msg("user", "check the news for me", senderIsOwner=True),
        msg("toolResult", "headline", resultContentSource="network"),
        msg("assistant", "Here is the news summary."),
    ]
    full, _ = export(lines)
    carry = Carry()
    head = list(iter_exported(lines[:2], {}, carry))
    tail = list(iter_exported(lines[2:], {}, Carry.decode(carry.encode()), first_line_number=3))
    assert [(e.text, e.origin_class, e.line_number) for e in head + tail] == [
        (e.text, e.origin_class, e.line_number) for e in full
    ]


def test_an_erased_senders_turns_and_the_replies_to_them_are_not_exported_even_across_a_resume() -> None:
    import orjson

    from memoryd.sessions.transcript import Carry, export_line

    def line(role: str, text: str, sender: str | None = None) -> bytes:
        meta = {"senderId": sender} if sender else {}
        return orjson.dumps(
            {"type": "message", "message": {"role": role, "content": text, "__openclaw": meta}}
        )

    erased = {"nadia"}.__contains__
    lines = [
        line("user", "olga asks about the ferry timetable", "olga"),
        line("assistant", "the ferry leaves at nine"),
        line("user", "nadia shares her locker code", "nadia"),
        line("assistant", "noted your locker code"),
    ]
    carry = Carry()
    kept = [r for i, raw in enumerate(lines[:3], 1) if (r := export_line(raw, i, carry, erased=erased))]
    resumed = Carry.decode(carry.encode())  # a checkpoint between her turn and its reply
    assert resumed.skipping
    kept += [r for r in [export_line(lines[3], 4, resumed, erased=erased)] if r]
    assert [k.text for k in kept] == [
        "User: olga asks about the ferry timetable",
        "Assistant: the ferry leaves at nine",
    ]
    plain = Carry()
    assert len([r for i, raw in enumerate(lines, 1) if export_line(raw, i, plain)]) == 4  # no filter: all
