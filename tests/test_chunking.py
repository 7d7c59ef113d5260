"""Chunking and transcript rendering: pure functions, no disk."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from memoryd.index.chunking import (
    CHARS_PER_TOKEN,
    Annotations,
    chunk_memory_file,
    chunk_session,
    strip_annotations,
    window_lines,
)
from memoryd.index.transcript import render_transcript

MEMORY = """# Long-Term Memory

## Promoted From Short-Term Memory (2026-11-20)

<!-- memoryd-lineage:memory:old -->
<!-- memoryd-promotion:memory:abc -->
- The lighthouse rota changes every Tuesday. <!-- trigger: rota, lighthouse --> <!-- importance: 7 -->
  It was agreed with the harbour office.
- Nora prefers tea. <!-- project: kitchen -->

A plain paragraph about the orchard
that spans two lines.
"""


def test_memory_md_is_chunked_per_entry_with_markers_kept_in_text_only() -> None:
    chunks = chunk_memory_file("MEMORY.md", MEMORY, 400, 80)
    assert [(c.start_line, c.end_line) for c in chunks] == [(5, 8), (9, 9), (11, 12)]
    first = chunks[0]
    assert "<!-- memoryd-promotion:memory:abc -->" in first.text
    assert "memoryd" not in first.search_text
    assert first.search_text.startswith("- The lighthouse rota changes every Tuesday.")
    assert "harbour office" in first.search_text
    assert first.entry_keys == ("memory:abc",)
    assert all("Long-Term Memory" not in c.text for c in chunks)


def test_annotation_comments_are_stripped_and_parsed_into_recall_metadata() -> None:
    chunks = chunk_memory_file("MEMORY.md", MEMORY, 400, 80)
    assert chunks[0].annotations == Annotations(importance=7, triggers=("rota", "lighthouse"))
    assert chunks[1].annotations == Annotations(project_key="kitchen")
    assert all("<!-- trigger" not in c.text and "importance" not in c.text for c in chunks)


def test_importance_outside_one_to_ten_is_ignored() -> None:
    line, notes = strip_annotations("- fact <!-- importance: 11 --> <!-- IMPORTANCE: 3 -->")
    assert line == "- fact"
    assert notes.importance == 3


def test_other_memory_files_are_windowed_with_overlap() -> None:
    text = "\n".join(f"line {i:03d} " + "word " * 8 for i in range(60))
    chunks = chunk_memory_file("memory/2026-11-20.md", text, 32, 8)
    assert len(chunks) > 3
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert b.start_line <= a.end_line  # consecutive windows share their edge lines
        assert len(a.text) <= 32 * CHARS_PER_TOKEN
    covered = {n for c in chunks for n in range(c.start_line, c.end_line + 1)}
    assert covered == set(range(1, 61))


def test_a_line_longer_than_a_chunk_is_split_not_dropped() -> None:
    text = "x" * 1000
    chunks = chunk_memory_file("memory/notes.md", text, 50, 0)
    assert "".join(c.text for c in chunks) == text
    assert {(c.start_line, c.end_line) for c in chunks} == {(1, 1)}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.text(alphabet="ab \n", max_size=300), max_size=40), st.integers(16, 64), st.integers(0, 30)
)
def test_windows_cover_every_line_and_respect_the_size(texts: list[str], tokens: int, overlap: int) -> None:
    lines = [(i + 1, t.replace("\n", " ")) for i, t in enumerate(texts)]
    windows = window_lines(lines, tokens, overlap)
    max_chars = max(32, tokens * CHARS_PER_TOKEN)
    covered = {n for w in windows for n, _ in w}
    assert covered >= {n for n, t in lines if t.strip()}
    for w in windows:
        assert sum(len(t) + 1 for _, t in w) <= max_chars + 1


def _line(role: str, content, **meta) -> bytes:
    msg = {"role": role, "content": content, "timestamp": 1_700_000_000_000}
    if meta:
        msg["__openclaw"] = meta
    return json.dumps({"type": "message", "message": msg}).encode()


def test_transcript_lines_carry_origin_classes() -> None:
    rendered = render_transcript(
        [
            json.dumps({"type": "session", "version": 3, "id": "s"}).encode(),
            _line("user", "owner says hello there", senderIsOwner=True),
            _line("assistant", [{"type": "text", "text": "agent replies"}]),
            _line("toolResult", [{"type": "text", "text": "fetched page"}], resultContentSource="network"),
            _line("assistant", "tainted summary of a web page"),
            _line("user", "someone else in the group"),
            _line("assistant", "a reply to a stranger"),
            _line("user", "scaffolding prompt", provenance="internal_system"),
            b"{not json",
        ],
        fallback_ms=1,
    )
    assert [(line.line_number, line.origin_class) for line in rendered.lines] == [
        (2, "owner"),
        (3, "agent"),
        (5, "untrusted"),
        (6, "untrusted"),
        (7, "untrusted"),
        (8, "system"),
    ]
    assert rendered.lines[0].text == "User: owner says hello there"
    assert rendered.malformed == 1
    assert not rendered.system_only


def test_a_transcript_of_scaffolding_only_is_system_only() -> None:
    rendered = render_transcript([_line("user", "heartbeat check", provenance="internal_system")], 1)
    assert rendered.system_only


def test_session_chunk_provenance_is_the_least_trusted_line_and_newest_time() -> None:
    rendered = render_transcript(
        [
            _line("user", "owner line", senderIsOwner=True),
            _line("assistant", "agent line"),
            _line("user", "stranger line"),
        ],
        1,
    )
    [(chunk, prov)] = chunk_session(rendered.lines, "interactive", 400, 80)
    assert (chunk.start_line, chunk.end_line) == (1, 3)
    assert prov.origin_class == "untrusted"
    assert prov.session_kind == "interactive"
    assert prov.observed_at == 1_700_000_000_000
