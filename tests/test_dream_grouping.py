"""Near-duplicate grouping (`group_similar`) gives exactly the groups of the greedy pairwise
scan it replaced, for every threshold, scope and limit, without comparing every pair."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.dreaming.selection import group_similar
from daemon.dreaming.staged import StagedEntry
from daemon.dreaming.text import similarity

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
