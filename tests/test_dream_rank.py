"""The pure pieces of dreaming: ranking gates, claim grouping, MEMORY.md parsing and appends."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memoryd.dreaming.memory_file import AppendItem, build_append, parse_entries
from memoryd.dreaming.rank import PromotionGates, Thresholds, rank_candidates
from memoryd.dreaming.staged import StagedEntry
from memoryd.settings import DreamingSettings
from memoryd.store.origins import EntryOrigin
from tests.dream_kit import DAY_MS, NOW_MS, OPEN_GATES


def entry(
    key: str,
    snippet: str,
    *,
    origin: str = "owner",
    signals: int = 3,
    queries: int = 3,
    days: int = 3,
    age_days: float = 0.1,
    sessions: tuple[str, ...] = ("s1",),
) -> StagedEntry:
    last = NOW_MS - int(age_days * DAY_MS)
    return StagedEntry(
        entry_key=key,
        path="memory/.dreams/session-corpus/2026-11-20.txt",
        start_line=1,
        end_line=1,
        snippet=snippet,
        recall_count=0,
        daily_count=signals,
        grounded_count=0,
        total_score=0.58 * signals,
        max_score=0.58,
        first_recalled_at=last,
        last_recalled_at=last,
        query_hashes=tuple(f"q{i}" for i in range(queries)),
        recall_days=tuple(f"d{i}" for i in range(days)),
        concept_tags=(),
        origin_class=origin,
        session_kind="interactive",
        observed_at=last,
        claim_hash=None,
        project_key=None,
        promoted_at=None,
        origins=tuple(EntryOrigin(key, "main", s, None, origin, last) for s in sessions),
    )


THRESHOLDS = Thresholds.resolve(DreamingSettings(), None)


def test_untrusted_and_system_entries_are_refused_before_any_gate():
    ranking = rank_candidates(
        [
            entry("a", "User: the deploy window is Friday", origin="untrusted", signals=20),
            entry("b", "User: the heartbeat prompt says hello", origin="system", signals=20),
        ],
        Thresholds.resolve(DreamingSettings(), OPEN_GATES),
        NOW_MS,
    )
    assert ranking.candidates == ()
    assert {(r.entry_key, r.reason) for r in ranking.rejections} == {("a", "untrusted"), ("b", "untrusted")}


def test_each_gate_holds_back_what_fails_it():
    entries = [
        entry("few", "User: few signals here today", signals=2),
        entry("narrow", "User: one query only for this", queries=1),
        entry("old", "User: stale fact from last quarter", age_days=45),
        entry("ok", "User: the orchard rota changes on Monday", signals=12, queries=6, days=4),
    ]
    ranking = rank_candidates(entries, THRESHOLDS, NOW_MS)
    reasons = {r.entry_key: r.reason for r in ranking.rejections}
    assert reasons == {"few": "min_recall_count", "narrow": "min_unique_queries", "old": "too_old"}
    assert [c.key for c in ranking.candidates] == ["ok"]
    assert ranking.candidates[0].score >= THRESHOLDS.min_score


def test_score_gate_uses_the_reference_weights():
    ranking = rank_candidates(
        [entry("weak", "User: weak evidence claim text", signals=3, queries=3, days=1)], THRESHOLDS, NOW_MS
    )
    assert [r.reason for r in ranking.rejections] == ["min_score"]
    relaxed = rank_candidates(
        [entry("weak", "User: weak evidence claim text", signals=3, queries=3, days=1)],
        Thresholds.resolve(DreamingSettings(), PromotionGates(min_score=0.4)),
        NOW_MS,
    )
    c = relaxed.candidates[0]
    s = c.signals
    assert (
        abs(
            c.score
            - (
                0.30 * s.relevance
                + 0.24 * s.frequency
                + 0.15 * s.diversity
                + 0.15 * s.recency
                + 0.10 * s.consolidation
                + 0.06 * s.conceptual
                + s.phase_boost
            )
        )
        < 1e-9
    )


def test_same_claim_from_two_entries_coalesces_and_keeps_every_origin():
    ranking = rank_candidates(
        [
            entry("k1", "User: The deploy window is Friday.", sessions=("s1",)),
            entry("k2", "Assistant: the deploy   window is friday.", sessions=("s2",)),
        ],
        Thresholds.resolve(DreamingSettings(), OPEN_GATES),
        NOW_MS,
    )
    (c,) = ranking.candidates
    assert c.member_keys == ("k1", "k2") and c.session_ids == ("s1", "s2")


def test_parse_entries_reads_markers_and_lineage_above_each_entry():
    text = (
        "# Long-Term Memory\n\n<!-- memoryd-lineage:L1 -->\n<!-- memoryd-promotion:k1 -->\n- first\n"
        "  - detail\n\n<!-- openclaw-memory-promotion:k2 -->\n- second\n- untracked\n"
    )
    entries = parse_entries(text)
    assert [(e.keys, e.lineage_key, e.text, e.has_continuation) for e in entries] == [
        (("k1",), "L1", "- first", True),
        (("k2",), None, "- second", False),
        ((), None, "- untracked", False),
    ]


def test_append_stays_within_budget_and_leaves_the_rest_eligible():
    items = [AppendItem("k1", "- " + "a" * 40), AppendItem("k2", "- " + "b" * 400), AppendItem("k3", "- c")]
    text, appended = build_append("", "Promoted", items, max_chars=200)
    assert appended == ["k1", "k3"]
    assert "<!-- memoryd-promotion:k1 -->\n- " + "a" * 40 in text and "b" * 400 not in text
    assert len(text) <= 200
    unchanged, none = build_append("# x\n", "Promoted", [AppendItem("k", "- " + "z" * 500)], max_chars=100)
    assert unchanged == "# x\n" and none == []


_line_text = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(existing=st.lists(_line_text, max_size=5), snippets=st.lists(_line_text, min_size=1, max_size=5))
def test_appended_entries_parse_back_with_their_markers_and_keep_existing_text(existing, snippets):
    from memoryd.dreaming.promote import entry_text

    original = "".join(f"- {t}\n" for t in existing)
    items = [
        AppendItem(f"memory:claim:{i:012x}", f"- {text}")
        for i, s in enumerate(snippets)
        if (text := entry_text(s, 640)) is not None
    ]
    new, appended = build_append(original, "Promoted", items, max_chars=100_000)
    assert new.startswith(original)
    parsed = {e.keys[0]: e.text for e in parse_entries(new) if e.keys}
    assert parsed == {i.entry_key: i.entry_line for i in items}
    assert appended == [i.entry_key for i in items]


@given(st.text(max_size=200))
def test_entry_text_never_carries_a_marker_or_a_line_break(snippet):
    from memoryd.dreaming.promote import entry_text

    text = entry_text(snippet, 640)
    if text is not None:
        assert "\n" not in text and "<!--" not in text and "-->" not in text and len(text) <= 640
