"""Near-duplicate grouping (`group_similar`) gives exactly the groups of the greedy pairwise
scan it replaced, for every threshold, scope and limit, without comparing every pair; past a cap
on the heads one entry is compared with (text whose words every entry shares), it stays sound
(a member is always similar to its head) and still finds what its MinHash bands meet."""

from __future__ import annotations

import random
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from memoryd.constants import SKETCH_MISS_AT_THRESHOLD, SKETCH_PERMUTATIONS
from memoryd.dreaming.selection import group_similar
from memoryd.dreaming.sketch import band_keys, band_shape
from memoryd.dreaming.staged import StagedEntry
from memoryd.dreaming.text import claim_identity, claim_words, similarity, word_set, words

WORDS = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "Alpha", "BETA"]


def entry(i: int, snippet: str, path: str) -> StagedEntry:
    return StagedEntry(
        f"k{i}",
        path,
        1,
        1,
        snippet,
        1,
        0,
        0,
        0.5,
        0.5,
        0,
        0,
        (),
        (),
        (),
        "owner",
        "interactive",
        0,
        None,
        None,
        None,
    )


def pairwise(entries: Sequence[StagedEntry], threshold: float, same_path: bool) -> list[tuple[str, ...]]:
    """The reference: every entry compared with every group head, in order."""
    groups: list[list[StagedEntry]] = []
    for e in entries:
        for g in groups:
            if (not same_path or g[0].path == e.path) and similarity(g[0].snippet, e.snippet) >= threshold:
                g.append(e)
                break
        else:
            groups.append([e])
    return [tuple(m.entry_key for m in g) for g in groups]


snippets = st.lists(st.sampled_from([*WORDS, "!", "-", "user:"]), min_size=0, max_size=7).map(" ".join)


@settings(max_examples=400, deadline=None)
@given(
    texts=st.lists(st.tuples(snippets, st.sampled_from(["a.md", "b.md"])), max_size=40),
    threshold=st.sampled_from([0.0, 0.1, 1 / 3, 0.5, 0.7, 0.88, 0.9, 1.0]) | st.floats(0, 1),
    same_path=st.booleans(),
    limit=st.none() | st.integers(0, 5),
)
def test_groups_are_those_of_the_pairwise_scan(texts, threshold, same_path, limit):
    entries = [entry(i, text, path) for i, (text, path) in enumerate(texts)]
    want = pairwise(entries, threshold, same_path)
    got = [g.keys for g in group_similar(entries, threshold, same_path=same_path, limit=limit)]
    assert got == (want if limit is None else want[:limit])


def test_twenty_thousand_distinct_entries_group_without_a_pairwise_scan():
    entries = [entry(i, f"note {i} about topic{i % 97} and item{i}", "a.md") for i in range(20_000)]
    groups = group_similar(entries, 0.88, same_path=False)
    assert len(groups) == 20_000


PIECES = ["user", "assistant", "User", ":", " ", "\t", "\n", "\xa0", "-", "'", "_", "İ", "ß", "a", "Z", "1"]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=12).map("".join) | st.text(max_size=30))
def test_claim_words_are_the_words_of_the_claim_identity(text):
    assert claim_words(text) == words(claim_identity(text))


# --- bounded on any text (a cap on the heads an entry is compared with) ---------------------------

_CHAT = "i you the a to and it is that of we for in on this be have do not are with can what just so"
CHAT = _CHAT.split()


def chat_entries(n: int, seed: int) -> list[StagedEntry]:
    """Everyday chat from 28 words: every entry shares words with most others, so the prefix
    filter leaves nearly every head; every tenth restates an earlier one in another order and
    case (similarity 1.0)."""
    rng = random.Random(seed)
    texts: list[str] = []
    for i in range(n):
        if i % 10 == 9:
            words = texts[rng.randrange(len(texts))].split()
            rng.shuffle(words)
            texts.append(" ".join(w.upper() if rng.random() < 0.3 else w for w in words))
        else:
            texts.append(" ".join(rng.sample(CHAT, rng.randint(8, 14))))
    return [entry(i, text, "a.md") for i, text in enumerate(texts)]


def test_low_vocabulary_text_still_finds_every_restatement_under_a_small_cap():
    entries = chat_entries(3_000, 35)
    exact = [g.keys for g in group_similar(entries, 0.9, same_path=False, comparisons=None)]
    bounded = [g.keys for g in group_similar(entries, 0.9, same_path=False, comparisons=20)]
    restated = {e.entry_key for i, e in enumerate(entries) if i % 10 == 9}
    head_of = {k: g[0] for g in bounded for k in g}
    exact_head_of = {k: g[0] for g in exact for k in g}
    # A restatement's words are an earlier entry's: its sketch is that entry's, so it meets it.
    assert all(head_of[k] == exact_head_of[k] for k in restated)


@settings(max_examples=200, deadline=None)
@given(
    texts=st.lists(st.tuples(snippets, st.sampled_from(["a.md", "b.md"])), max_size=40),
    threshold=st.sampled_from([0.0, 0.5, 0.88, 0.9, 1.0]) | st.floats(0, 1),
    cap=st.integers(1, 4),
    same_path=st.booleans(),
)
def test_under_any_cap_every_member_is_similar_to_its_head_and_nothing_is_lost(
    texts, threshold, cap, same_path
):
    entries = [entry(i, text, path) for i, (text, path) in enumerate(texts)]
    groups = group_similar(entries, threshold, same_path=same_path, comparisons=cap)
    assert sorted(k for g in groups for k in g.keys) == sorted(e.entry_key for e in entries)
    for g in groups:
        for m in g.members[1:]:
            assert similarity(g.head.snippet, m.snippet) >= threshold
            assert not same_path or m.path == g.head.path


def test_band_shape_meets_a_pair_at_the_threshold_almost_surely():
    for t in (0.3, 0.5, 0.7, 0.88, 0.9, 0.95, 1.0):
        bands, rows = band_shape(t)
        assert bands * rows <= SKETCH_PERMUTATIONS
        assert (1 - t**rows) ** bands <= SKETCH_MISS_AT_THRESHOLD


def test_equal_word_sets_have_equal_band_keys_and_others_rarely_share_one():
    a, b = word_set("the cat sat on the mat"), word_set("Mat the on sat cat")
    far = word_set("quarterly budget review moved to friday")
    keys = band_keys([a, b, far, frozenset()], 0.9)
    assert keys[0] == keys[1]
    assert not set(keys[0]) & set(keys[2])
    assert keys == band_keys([a, b, far, frozenset()], 0.9)  # seeded: the same every run
