"""The scrub (reference §7.4 step 1, §7.5): examples for each rule, properties for all text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memoryd.forget.refs import references_session
from memoryd.forget.scrub import Selection, has_history_highlights, scrub_corpus, scrub_memory
from memoryd.markers import promotion_key

SEL = Selection(
    "main", frozenset({"target"}), frozenset({"k1"}), ("User: Please remember violet-mongoose-42.",)
)


def test_entry_with_lineage_marker_and_indented_continuation_is_removed():
    text = "a\n<!-- memoryd-lineage:old -->\n<!-- memoryd-promotion:k1 -->\n- entry\n  more\n\tand more\nb"
    out = scrub_memory(text, SEL)
    assert out.content == "a\nb" and out.removed_entries == 1


def test_reference_system_markers_are_recognised_too():
    text = "<!-- openclaw-memory-lineage:x -->\n<!--openclaw-memory-promotion: k1 -->\n- entry\nkeep"
    assert scrub_memory(text, SEL).content == "keep"


def test_a_consecutive_marker_stops_the_entry_removal():
    text = "<!-- memoryd-promotion:k1 -->\n<!-- memoryd-promotion:k2 -->\n- merged entry\nkeep"
    assert scrub_memory(text, SEL).content == "<!-- memoryd-promotion:k2 -->\n- merged entry\nkeep"


def test_crlf_line_endings_survive_on_kept_lines():
    text = "keep one\r\n<!-- memoryd-promotion:k1 -->\r\n- entry\r\nkeep two\r\n"
    assert scrub_memory(text, SEL).content == "keep one\r\nkeep two\r\n"


def test_a_line_quoting_a_snippet_is_removed_whole():
    text = "x\n- diary: User: Please remember violet-mongoose-42. (said twice)\ny"
    out = scrub_memory(text, SEL)
    assert out.content == "x\ny" and out.removed_lines == 1


def test_a_heading_section_with_a_session_reference_is_removed_to_the_next_peer_heading():
    text = "## Session main:target\n### sub\nbody\n## Next\nkept"
    assert scrub_memory(text, SEL).content == "## Next\nkept"


def test_a_passing_mention_of_the_session_is_kept():
    text = "- see sessions/main/target for details\nkept"
    assert scrub_memory(text, SEL).content == text


def test_a_labelled_list_row_goes_with_its_children_and_stops_at_a_blank_line():
    text = "- Session ID: target\n  - child\n\n  - after blank\n- next"
    assert scrub_memory(text, SEL).content == "\n  - after blank\n- next"


def test_history_highlights_are_detected_for_a_refusal():
    assert has_history_highlights("## Memory Consolidation History\n\n### 2026\n  - `+ added` x\n")
    assert not has_history_highlights("## Memory Consolidation History\n- nothing quoted\n")


def test_a_six_character_corpus_snippet_is_never_collected():
    out = scrub_corpus(
        "[main/sessions/main/target#L4] shorty\n[main/sessions/main/target#L5]  exactly-12ch \n",
        "main",
        {"target"},
    )
    assert out.removed_lines == 2
    assert out.snippets == ("exactly-12ch",)
    line = "a memory line that says shorty"
    assert (
        scrub_memory(line, Selection("main", frozenset({"target"}), frozenset(), out.snippets)).content
        == line
    )


def test_the_snippet_limit_counts_utf16_units():
    # 6 astral characters are 12 UTF-16 units: long enough, as in the reference.
    out = scrub_corpus("[main/sessions/main/target#L1] " + "\U0001f600" * 6, "main", {"target"})
    assert out.snippets == ("\U0001f600" * 6,)


def test_a_corpus_file_left_blank_is_removed():
    out = scrub_corpus("[main/sessions/main/target#L1] User: something long enough\n\n", "main", {"target"})
    assert out.remove_file


# --- properties --------------------------------------------------------------------------------

MARKERS = [
    "<!-- memoryd-promotion:k1 -->",
    "<!-- memoryd-promotion:k2 -->",
    "<!-- memoryd-lineage:k0 -->",
    "<!-- openclaw-memory-promotion:k1 -->",
]
REFS = ["Session ID: target", "Session ID: other", "## main:target", "sessions/main/target", "- main:prefix"]
line_st = st.one_of(
    st.sampled_from(
        MARKERS
        + REFS
        + ["", "  indented", "- row", "# H", "## H2", "User: Please remember violet-mongoose-42.", "shorty"]
    ),
    st.text(alphabet=st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)), max_size=30),
)
doc_st = st.lists(line_st, max_size=25).map("\n".join)


def _is_subsequence(small: list[str], big: list[str]) -> bool:
    it = iter(big)
    return all(any(x == y for y in it) for x in small)


@settings(max_examples=300, deadline=None)
@given(doc_st)
def test_scrub_only_ever_deletes_whole_lines(text):
    out = scrub_memory(text, SEL).content
    kept = out.split("\n") if out else []  # "" is what remains when every line went
    assert _is_subsequence(kept, text.split("\n"))


@settings(max_examples=300, deadline=None)
@given(doc_st)
def test_no_selected_marker_and_no_quoting_line_survives(text):
    out = scrub_memory(text, SEL).content
    for line in out.split("\n"):
        assert promotion_key(line) != "k1"
        assert SEL.corpus_snippets[0] not in line


@settings(max_examples=300, deadline=None)
@given(doc_st)
def test_an_empty_selection_changes_nothing(text):
    assert scrub_memory(text, Selection("main", frozenset(), frozenset(), ())).content == text


@settings(max_examples=300, deadline=None)
@given(doc_st)
def test_text_without_markers_references_or_quotes_is_kept_verbatim(text):
    lines = [ln for ln in text.split("\n") if "<!--" not in ln and "target" not in ln and "violet" not in ln]
    clean = "\n".join(lines)
    assert scrub_memory(clean, SEL).content == clean


corpus_line_st = st.builds(
    lambda sid, body: f"[main/sessions/main/{sid}#L1] {body}",
    st.sampled_from(["target", "other", "prefix-survivor", "target.jsonl", "TARGET"]),
    st.text(alphabet=st.characters(blacklist_characters="\n\r", blacklist_categories=("Cs",)), max_size=40),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(corpus_line_st, max_size=15))
def test_corpus_scrub_removes_exactly_the_lines_that_reference_the_session(lines):
    text = "\n".join(lines)
    out = scrub_corpus(text, "main", {"target"})
    expected = [ln for ln in text.split("\n") if not references_session(ln, "main", {"target"})]
    assert out.content == "\n".join(expected)
    assert out.removed_lines == len(text.split("\n")) - len(expected)
    for snippet in out.snippets:
        assert len(snippet.encode("utf-16-le")) // 2 >= 12
