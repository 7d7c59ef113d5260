"""The verifier's literal matcher finds what a regular expression of the alternation finds."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoryd.retention.literals import MIN_CHARS, literal_set, non_overlapping
from memoryd.retention.needles import ID_WORD_CHARS, VerifySubject, compile_needles

# A small alphabet, so literals share grams and heads and text repeats them.
ALPHABET = "ab cİK\u00e9"
literal_text = st.text(alphabet=ALPHABET, min_size=MIN_CHARS, max_size=30)


def regex_starts(literals: list[str], text: str, flags: int = 0) -> list[int]:
    ordered = sorted(set(literals), key=len, reverse=True)
    pattern = re.compile("|".join(re.escape(lit) for lit in ordered), flags)
    return [m.start() for m in pattern.finditer(text)]


@settings(max_examples=300, deadline=None)
@given(st.lists(literal_text, min_size=1, max_size=8), st.data())
def test_the_starts_are_those_of_the_alternation(literals: list[str], data: st.DataObject) -> None:
    pieces = data.draw(st.lists(st.one_of(st.sampled_from(literals), st.text(alphabet=ALPHABET, max_size=9))))
    text = "".join(pieces)
    assert literal_set(literals).starts(text) == regex_starts(literals, text)
    assert literal_set(literals).occurs_in(text) == bool(regex_starts(literals, text))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.text(alphabet="0123456789abcdef", min_size=12, max_size=12), min_size=1, max_size=6),
    st.data(),
)
def test_folded_literals_match_in_any_case(literals: list[str], data: st.DataObject) -> None:
    pieces = data.draw(
        st.lists(
            st.one_of(st.sampled_from(literals).map(str.upper), st.sampled_from(literals), st.text("xF0İ"))
        )
    )
    text = "".join(pieces)
    assert literal_set(literals, fold=True).starts(text) == regex_starts(literals, text, re.IGNORECASE)


@settings(max_examples=100, deadline=None)
@given(st.lists(literal_text, min_size=1, max_size=6), st.data())
def test_bytes_are_matched_as_text_is(literals: list[str], data: st.DataObject) -> None:
    encoded = [lit.encode() for lit in literals]
    pieces = data.draw(st.lists(st.one_of(st.sampled_from(encoded), st.binary(max_size=9))))
    data_bytes = b"".join(pieces)
    ordered = sorted(set(encoded), key=len, reverse=True)
    expected = [m.start() for m in re.finditer(b"|".join(re.escape(e) for e in ordered), data_bytes)]
    assert literal_set(encoded).starts(data_bytes) == expected


def test_a_literal_too_short_to_be_found_is_refused() -> None:
    with pytest.raises(ValueError, match="at least"):
        literal_set(["x" * (MIN_CHARS - 1)])


def test_overlapping_spans_keep_the_leftmost_then_the_longest() -> None:
    assert non_overlapping([(5, 3), (0, 4), (0, 6), (6, 2), (7, 2)]) == [(0, 6), (6, 2)]


def test_needles_count_snippets_hashes_ids_and_times_together() -> None:
    line = "the lighthouse rota changes on friday"
    subject = VerifySubject(ids=("sess-4242",), contents=(line,), times_ms=(1_795_996_830_123,))
    needles = compile_needles(subject)
    import hashlib

    digest = hashlib.sha256(line.encode()).hexdigest()[:12].upper()
    value = f"x {line} y sess-4242 z {digest} t=1795996830123 not sess-42421"
    assert needles.hits(value) == 4
    assert needles.may_hit(value)
    assert not needles.may_hit("nothing of it here at all, sess-42421")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="ab-:", min_size=MIN_CHARS, max_size=16), min_size=1, max_size=6), st.data())
def test_word_chars_keep_an_id_apart_as_lookarounds_do(ids: list[str], data: st.DataObject) -> None:
    pieces = data.draw(st.lists(st.one_of(st.sampled_from(ids), st.text(alphabet="ab :x", max_size=4))))
    text = "".join(pieces)
    ordered = sorted(set(ids), key=len, reverse=True)
    word = r"A-Za-z0-9_.\-"
    pattern = re.compile("|".join(f"(?<![{word}]){re.escape(i)}(?![{word}])" for i in ordered))
    expected = [m.start() for m in pattern.finditer(text)]
    assert literal_set(ids, word_chars=ID_WORD_CHARS).starts(text) == expected


def test_a_session_id_inside_a_longer_id_is_not_a_hit() -> None:
    sid = "0b5f3c1e-7d2a-4e7b-9c1d-2f6a8b3e4d5c"
    needles = compile_needles(VerifySubject(ids=(sid,)))
    assert needles.hits(f"sessions/main/{sid}#L3 and ({sid})") == 2
    assert needles.hits(f"x{sid} {sid}-2 {sid}_b") == 0
