"""Choosing entries by key or by text (daemon/forget/entries.py): pure, no store, no files."""

from __future__ import annotations

import pytest

from memoryd.derivations import claim_hash
from memoryd.errors import UsageError
from memoryd.forget.entries import (
    EntryFacts,
    EntryOriginRef,
    derived_keys,
    marked_entries,
    match_claim_keys,
    select_entries,
)

TEXT = "User: Remember the deploy window is Friday afternoon."
KEY = "memory:claim:" + claim_hash(TEXT)
NORA = EntryOriginRef("s-nora", "agent:main:dm:nora")


def facts(**kw) -> EntryFacts:
    base = dict(staged={KEY: TEXT}, promoted={}, marked=frozenset(), origins={KEY: (NORA,)}, suppressed={})
    return EntryFacts(**{**base, **kw})


def test_match_names_the_staged_claim_with_or_without_its_role_prefix_whitespace_collapsed() -> None:
    assert KEY in match_claim_keys("Remember the deploy window is Friday afternoon.")
    assert KEY in match_claim_keys("  User:  Remember the deploy   window is Friday afternoon. ")
    chosen = select_entries("main", [], "Remember the deploy window is Friday afternoon.", facts())
    assert [e.entry_key for e in chosen.entries] == [KEY]
    assert chosen.suppressions == ((claim_hash(TEXT), "s-nora"),)


def test_match_is_exact_not_a_substring_and_says_when_nothing_has_the_text() -> None:
    chosen = select_entries("main", [], "deploy window", facts())
    assert chosen.entries == () and chosen.unmatched_match == "deploy window"


def test_an_unknown_key_is_refused_naming_it_and_a_suppressed_claim_is_known_on_a_rerun() -> None:
    with pytest.raises(UsageError, match="entries: no entry 'memory:claim:nope'"):
        select_entries("main", ["memory:claim:nope"], None, facts())
    gone = facts(staged={}, origins={}, suppressed={claim_hash(TEXT): ("s-nora", "s-omar")})
    rerun = select_entries("main", [KEY], None, gone)
    assert [o.session_id for o in rerun.entries[0].origins] == ["s-nora", "s-omar"]


def test_diary_lines_quoting_the_fact_are_derived_and_a_longer_promoted_fact_is_not() -> None:
    longer = "memory:claim:" + claim_hash(TEXT + " Bring snacks.")
    diary = (
        "<!-- memoryd-promotion:memory:dream-light:abc -->\n"
        f"- Candidate: {TEXT}\n"
        "  - confidence: 0.58\n"
        f"<!-- memoryd-promotion:{longer} -->\n"
        f"- {TEXT} Bring snacks. [score=0.5]\n"
    )
    assert [k for k, _ in marked_entries(diary)] == ["memory:dream-light:abc", longer]
    chosen = select_entries("main", [KEY], None, facts())
    assert derived_keys([diary], chosen) == frozenset({"memory:dream-light:abc"})
