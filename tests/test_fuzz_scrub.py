"""Hostile text through the forget scrubber: CRLF mixes, NUL, lone surrogates, Unicode line
separators, marker look-alikes, ids that are prefixes of others. The scrubber only deletes whole
lines, keeps every line that does not reference a selected session, and never raises.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryd.forget.refs import references_session
from memoryd.forget.scrub import Selection, promotion_keys_on_lines, scrub_corpus, scrub_memory

EXAMPLES = 300
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

IDS = ["target", "target-2", "TARGET", "tar", "target.jsonl.reset.2026-08-25T10-00-00.000Z", "other", "x:y"]
FRAGMENTS = [
    "[main/sessions/main/target#L2] User: Please remember violet-mongoose-42.",
    "[main/sessions/main/other#L3] User: The orchard rota changes on Monday.",
    "[main/sessions/main/target-2#L1] User: A session whose id extends the target's.",
    "[main/sessions/main/target.jsonl.reset.2026-08-25T10-00-00.000Z#L3] User: Archived words here.",
    "<!-- memoryd-promotion:k1 -->",
    "<!-- memoryd-lineage:k0 -->",
    "<!-- openclaw-memory-promotion:k2 -->",
    "<!-- memoryd-promotion: -->",
    "- an entry line",
    "  continued",
    "## Session ID: target",
    "# Heading",
    "- Session ID: other; notes",
    "main:target",
    "sessions/main/target",
    "Session ID:target;x",
    "\r",
    "\x00",
    "\ud800",
    "\u2028",
    "\u2029",
    "\x85",
    "\t",
    " ",
    "[",
    "]",
    "#L",
    "sessions/main/",
]
texts = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=20)), max_size=30).flatmap(
    lambda parts: st.lists(
        st.sampled_from(["\n", "\r\n", "", " "]), min_size=len(parts), max_size=len(parts)
    ).map(lambda seps: "".join(p + s for p, s in zip(parts, seps, strict=True)))
)
id_sets = st.frozensets(st.one_of(st.sampled_from(IDS), st.text(min_size=1, max_size=8)), max_size=3)


def _is_subsequence(small: list[str], big: list[str]) -> bool:
    it = iter(big)
    return all(line in it for line in small)


@FUZZ
@given(content=texts, ids=id_sets, agent=st.sampled_from(["main", "m.a-in", "x"]))
def test_corpus_scrub_removes_exactly_the_referencing_lines(content, ids, agent):
    result = scrub_corpus(content, agent, ids)
    lines = content.split("\n")
    expected = [line for line in lines if not references_session(line, agent, ids)]
    assert result.content == "\n".join(expected)  # no collateral loss, order and CR kept
    assert result.removed_lines == len(lines) - len(expected)
    assert all(len(s.encode("utf-16-le", "surrogatepass")) // 2 >= 12 for s in result.snippets)
    again = scrub_corpus(result.content, agent, ids)
    assert again.content == result.content and again.removed_lines == 0  # converges


@FUZZ
@given(content=texts)
def test_a_memory_scrub_with_nothing_selected_changes_nothing(content):
    result = scrub_memory(content, Selection("main", frozenset(), frozenset(), ()))
    assert (result.content, result.removed_entries, result.removed_lines) == (content, 0, 0)


@FUZZ
@given(
    content=texts,
    ids=id_sets,
    keys=st.frozensets(st.sampled_from(["k0", "k1", "k2", "", " "]), max_size=3),
    snippets=st.lists(
        st.sampled_from(["violet-mongoose-42", "orchard rota changes", "\ud800 lone"]), max_size=2
    ),
)
def test_a_memory_scrub_only_deletes_whole_lines_and_leaves_no_selected_marker(content, ids, keys, snippets):
    sel = Selection("main", ids, keys, tuple(snippets))
    result = scrub_memory(content, sel)
    before = content.split("\n")
    after = result.content.split("\n") if result.content else []  # every line removed
    assert _is_subsequence(after, before)
    assert not set(promotion_keys_on_lines(result.content.replace("\r\n", "\n"))) & {
        k.strip() for k in keys if k.strip()
    }
    assert not any(s in line for s in snippets for line in after)
    assert len(before) - len(after) >= result.removed_lines
