"""Hostile transcripts: random bytes, deep JSON, huge numbers, lone surrogates, CRLF mixes and NUL
bytes through the streaming line reader and the pi v3 exporter. Every line ends as an exported
message, a counted skip or a non-message entry; nothing raises, nothing is lost in splitting.
"""

from __future__ import annotations

import io
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryd.sessions.lines import iter_lines
from memoryd.sessions.model import OversizedLine
from memoryd.sessions.transcript import (
    MAX_TIMESTAMP_MS,
    SKIP_KINDS,
    Carry,
    ExportedLine,
    export_line,
    iter_exported,
)

EXAMPLES = 300
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Pieces that hurt parsers: separators, NUL, surrogate escapes, deep nesting, huge numbers.
HOSTILE_PIECES = [
    b"\n",
    b"\r\n",
    b"\r",
    b"\x00",
    b"\\u0000",
    b'"\\ud800"',
    b'"\\udfff\\ud800"',
    b"\xed\xa0\x80",
    b"\xff\xfe",
    b"[" * 1100,
    b"{" * 600,
    b"1e999999",
    b"-1e400",
    b"123456789012345678901234567890123",
    b'{"type":"message","message":{"role":"user","content":"hi there friend","timestamp":1e308}}',
    b'{"type":"message","message":{"role":"assistant","content":[{"type":"text","text":"a\\u2028b"}]}}',
    b'{"type":"message","message":{"role":"user","content":"x\\u0000y","timestamp":"nan"}}',
    b'{"type":"message","timestamp":"0001-01-01T00:00:00+23:59","message":{"role":"user","content":"t"}}',
    b'{"type":"message","message":{"role":"user","content":"z","timestamp":99999999999999999999999}}',
    b'{"type":"unknown-future"}',
    b'{"type":"message","message":[]}',
    b"[]",
    b"null",
    b'"str"',
]

hostile_bytes = st.lists(st.one_of(st.binary(max_size=64), st.sampled_from(HOSTILE_PIECES)), max_size=24).map(
    b"".join
)


def _lines(data: bytes, max_line_bytes: int) -> list[bytes]:
    return list(iter_lines(io.BytesIO(data), max_line_bytes=max_line_bytes))


@FUZZ
@given(data=hostile_bytes)
def test_line_reader_splits_random_bytes_without_losing_or_inventing_any(data):
    lines = _lines(data, max_line_bytes=1 << 20)
    assert not any(isinstance(line, OversizedLine) for line in lines)
    rebuilt = b"\n".join(lines)
    # Only the final newline (if any) is not represented by a line.
    assert rebuilt == (data[:-1] if data.endswith(b"\n") else data)


@FUZZ
@given(data=hostile_bytes, cap=st.integers(min_value=1, max_value=200))
def test_line_reader_replaces_every_oversized_line_by_a_marker_of_its_size(data, cap):
    raw_lines = (data[:-1] if data.endswith(b"\n") else data).split(b"\n") if data else []
    got = _lines(data, max_line_bytes=cap)
    assert len(got) == len(raw_lines)
    for raw, line in zip(raw_lines, got, strict=True):
        if len(raw) > cap:
            assert isinstance(line, OversizedLine) and line.size == len(raw) and line == b""
        else:
            assert line == raw


@FUZZ
@given(data=hostile_bytes, cap=st.integers(min_value=8, max_value=4096))
def test_every_hostile_line_is_exported_counted_or_ignored_and_never_raises(data, cap):
    lines = _lines(data, max_line_bytes=cap)
    skipped: dict[str, int] = {}
    exported = list(iter_exported(lines, skipped))
    assert set(skipped) <= set(SKIP_KINDS)
    assert len(exported) + sum(skipped.values()) <= len(lines)
    for out in exported:
        assert isinstance(out, ExportedLine)
        # One corpus line each: no line breaks, and writable as strict UTF-8 (no lone surrogates).
        assert "\n" not in out.text and "\r" not in out.text and "\x00" not in out.text
        out.text.encode("utf-8")
        assert out.text.startswith(("User: ", "Assistant: "))
        assert 0 <= out.timestamp_ms <= MAX_TIMESTAMP_MS
    # Lines with a NUL byte or oversized are always counted, never exported.
    nul_lines = sum(1 for line in lines if not isinstance(line, OversizedLine) and b"\x00" in line)
    assert skipped.get("nulByte", 0) == nul_lines
    assert skipped.get("oversizedLine", 0) == sum(isinstance(line, OversizedLine) for line in lines)


# Flat junk of every JSON type: deep structures are covered by the byte-level test above.
json_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False),
    st.text(max_size=12),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["kind", "type", "text"]), st.text(max_size=4), max_size=2),
)


@st.composite
def message_entries(draw):
    message = {
        "role": draw(st.sampled_from(["user", "assistant", "toolResult", "system", 7, None])),
        "content": draw(
            st.one_of(
                json_values,
                st.text(max_size=40),
                st.lists(
                    st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=30)}), max_size=3
                ),
            )
        ),
        "timestamp": draw(json_values),
        "__openclaw": draw(
            st.one_of(
                json_values,
                st.fixed_dictionaries(
                    {
                        "senderIsOwner": json_values,
                        "turnTainted": json_values,
                        "resultContentSource": json_values,
                    }
                ),
            )
        ),
    }
    entry = {
        "type": draw(st.sampled_from(["message", "session", "custom", "x"])),
        "message": message,
        "timestamp": draw(st.one_of(json_values, st.text(max_size=30))),
    }
    return json.dumps(entry).encode()


@FUZZ
@given(entries=st.lists(message_entries(), max_size=6), crlf=st.lists(st.booleans(), max_size=6))
def test_structured_hostile_messages_classify_without_raising_and_keep_provenance_valid(entries, crlf):
    raw = [e + b"\r" if i < len(crlf) and crlf[i] else e for i, e in enumerate(entries)]
    carry = Carry()
    for n, line in enumerate(raw, start=1):
        out = export_line(line, n, carry)
        assert out is None or out in SKIP_KINDS or isinstance(out, ExportedLine)
        if isinstance(out, ExportedLine):
            assert out.origin_class in ("owner", "agent", "untrusted", "system")
            assert out.line_number == n
            out.text.encode("utf-8")
    # The carry survives an encode/decode round trip (it is stored in the checkpoint).
    again = Carry.decode(carry.encode())
    assert (again.last_user, again.tainted) == (carry.last_user, carry.tainted)


@FUZZ
@given(text=st.text(max_size=200))
def test_carry_decode_of_any_stored_text_never_raises(text):
    carry = Carry.decode(text)
    assert carry.last_user in (None, "owner", "agent", "untrusted", "system")


# --- the whole sweep over a hostile transcript (real store, real Redis lock) -----------------------


async def test_a_sweep_over_a_hostile_transcript_stages_the_good_lines_and_counts_the_rest(
    settings, store_builder, redis
):
    """Regression: a message timestamp beyond year 9999 (9e15 ms, or an ISO date with an offset)
    made day bucketing raise, failing every sweep of the agent."""
    from memoryd.agent_runtime import agent_runtime
    from memoryd.ingest.sweep import run_ingest_sweep
    from tests.builders import Msg, conversation

    store_builder.add("agent:main:main", "hostile", conversation("orchard", "hostile", 4))
    path = store_builder.dir / "hostile.jsonl"
    good_tail = [Msg("user", "The far future timestamp message stays readable.", ts=9_000_000_000_000_000)]
    store_builder.append("hostile", good_tail, start_index=4)
    with path.open("ab") as fh:
        fh.write(b"\n".join(HOSTILE_PIECES) + b"\n")
        fh.write(
            b'{"type":"message","timestamp":"9999-12-31T23:59:59-23:59","message":'
            b'{"role":"user","content":"An offset past year 9999 is no timestamp at all."}}\n'
        )
    before = path.read_bytes()
    async with agent_runtime(settings, "main", redis=redis) as rt:
        report = await run_ingest_sweep(rt)
    assert report.errors == []
    assert report.messages_staged >= 5
    assert report.lines_skipped.get("nulByte", 0) >= 1 and report.lines_skipped.get("malformedJson", 0) >= 1
    corpus = "".join(p.read_text() for p in settings.workspace_for("main").rglob("session-corpus/*.txt"))
    assert "far future timestamp" in corpus and "past year 9999" in corpus
    assert path.read_bytes() == before  # the transcript is never rewritten
