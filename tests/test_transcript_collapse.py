"""Whitespace collapsing of exported lines: the already-collapsed shortcut returns exactly what
splitting and joining returns, for every kind of whitespace str.split() knows."""

from __future__ import annotations

import json
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from memoryd.sessions.transcript import Carry, collapse_ws, export_line

# Every code point str.split() splits on, plus look-alikes it does not (zero-width space, BOM).
WHITESPACE = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
PIECES = st.sampled_from(WHITESPACE + [" ", "  ", "\u200b", "\ufeff", "\x00"]) | st.text(max_size=6)


def slow(text: str) -> str:
    return " ".join(text.split())


def test_space_is_the_only_whitespace_that_counts_as_printable() -> None:
    assert [c for c in WHITESPACE if c.isprintable()] == [" "]


@settings(max_examples=400, deadline=None)
@given(st.lists(PIECES, max_size=30).map("".join))
def test_collapsing_equals_split_and_join(text: str) -> None:
    assert collapse_ws(text) == slow(text)


@settings(max_examples=200, deadline=None)
@given(st.lists(PIECES, max_size=60).map("".join), st.integers(min_value=0, max_value=40))
def test_a_cut_result_is_a_long_enough_prefix_of_the_full_one(text: str, at_least: int) -> None:
    cut = collapse_ws(text, at_least)
    assert slow(text).startswith(cut)
    assert len(cut) > at_least or cut == slow(text)


def test_an_exported_line_keeps_its_text_when_already_collapsed_and_collapses_it_otherwise() -> None:
    def text_of(content: str) -> str:
        line = json.dumps({"type": "message", "message": {"role": "user", "content": content}}).encode()
        out = export_line(line, 1, Carry())
        assert not isinstance(out, str) and out is not None
        return out.text

    assert text_of("plain words, one space each") == "User: plain words, one space each"
    assert text_of(" edges and  doubles\tand\u00a0nbsp\u2028 ") == "User: edges and doubles and nbsp"
