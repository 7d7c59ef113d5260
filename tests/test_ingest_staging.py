"""Staging: claim keys, signal merging, and origins before entries (reference §5.4)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memoryd.constants import MAX_QUERY_HASHES
from memoryd.ingest.staging import (
    StagedMessage,
    claim_hash,
    merge_signals,
    query_hash,
    session_query,
    write_staging,
)
from memoryd.store.db import IntegrityError, Store
from memoryd.store.short_term import encode_row, load_entries
from tests.lineage import ORIGINS


def message(
    snippet: str = "User: the boiler code is 4411",
    origin: str = "owner",
    line: int = 1,
    day: str = "2026-08-26",
    session: str = "s1",
    observed: int = 1000,
) -> StagedMessage:
    return StagedMessage(
        claim_hash(snippet),
        snippet,
        f"memory/.dreams/session-corpus/{day}.txt",
        line,
        origin,
        "interactive",
        observed,
        session,
        f"agent:main:{session}",
        query_hash(session_query(day)),
    )


def test_claim_key_is_sha1_of_the_whitespace_normalized_snippet() -> None:
    m = message("User:  the boiler\tcode is 4411 ")
    digest = hashlib.sha1(b"User: the boiler code is 4411").hexdigest()[:12]
    assert m.entry_key == f"memory:claim:{digest}"
    assert claim_hash("User: the boiler code is 4411") == digest


def test_least_trusted_origin_wins_and_the_first_citation_stays() -> None:
    first = merge_signals(None, [message(origin="owner", line=3)], "2026-08-27", 5)
    later = merge_signals(
        first, [message(origin="untrusted", line=9, day="2026-08-28", observed=2000)], "2026-08-29", 6
    )
    assert (later.origin_class, later.start_line, later.daily_count, later.observed_at) == (
        "untrusted",
        3,
        2,
        2000,
    )
    back = merge_signals(later, [message(origin="agent", day="2026-08-30")], "2026-08-30", 7)
    assert back.origin_class == "untrusted"


def test_a_repeated_signal_for_the_same_query_and_day_bucket_is_deduped() -> None:
    once = merge_signals(None, [message(), message(line=2)], "2026-08-27", 5)
    assert once.daily_count == 1
    again = merge_signals(once, [message(line=3)], "2026-08-27", 6)
    assert again.daily_count == 1 and again.last_recalled_at == 6
    next_day = merge_signals(again, [message(line=4)], "2026-08-28", 7)
    assert next_day.daily_count == 2 and next_day.recall_days == ("2026-08-27", "2026-08-28")


@given(st.lists(st.dates().map(lambda d: d.isoformat()), min_size=1, max_size=80))
def test_query_hashes_and_recall_days_stay_capped(days: list[str]) -> None:
    entry = None
    for i, day in enumerate(days):
        entry = merge_signals(entry, [message(day=day)], day, i)
    assert entry is not None
    assert len(entry.query_hashes) <= MAX_QUERY_HASHES and len(entry.recall_days) <= 16
    assert len(set(entry.query_hashes)) == len(entry.query_hashes)


async def test_the_fast_insert_of_a_new_claim_writes_the_same_row_as_the_general_merge(
    tmp_path: Path,
) -> None:
    async with await Store.open(tmp_path / "m.sqlite") as store:
        fast, general = message("User: fast path row here"), message("User: general path row here")
        await store.write(write_staging, "main", [fast], "2026-08-27", 5, fence=None)
        await store.write(
            write_staging, "main", [general, general._replace(line=2)], "2026-08-27", 5, fence=None
        )
        rows = await store.read(load_entries, [fast.entry_key, general.entry_key])
    assert encode_row(rows[fast.entry_key]) == encode_row(merge_signals(None, [fast], "2026-08-27", 5))
    assert encode_row(rows[general.entry_key]) == encode_row(
        merge_signals(None, [general, general._replace(line=2)], "2026-08-27", 5)
    )


async def test_every_staged_entry_has_its_origin_rows(tmp_path: Path) -> None:
    async with await Store.open(tmp_path / "m.sqlite") as store:
        msgs = [
            message("User: shared claim text", session="a"),
            message("User: shared claim text", session="b"),
            message("Assistant: another claim text", origin="agent", session="a"),
        ]
        await store.write(write_staging, "main", msgs, "2026-08-27", 5, fence=None)
        origins = await store.read(
            lambda c: c.execute(
                f"SELECT entry_key, session_id, session_key, origin_class FROM {ORIGINS} ORDER BY 1, 2"
            ).fetchall()
        )
    shared, other = msgs[0].entry_key, msgs[2].entry_key
    assert sorted(origins) == sorted(
        [
            (shared, "a", "agent:main:a", "owner"),
            (shared, "b", "agent:main:b", "owner"),
            (other, "a", "agent:main:a", "agent"),
        ]
    )


async def test_a_failed_origin_write_leaves_no_staged_entry(tmp_path: Path) -> None:
    async with await Store.open(tmp_path / "m.sqlite") as store:
        bad = message(origin="nobody-knows")  # violates the origin_class CHECK
        with pytest.raises(IntegrityError):
            await store.write(
                write_staging, "main", [message("User: a good claim here"), bad], "2026-08-27", 5, fence=None
            )
        count = await store.read(lambda c: c.execute("SELECT COUNT(*) FROM short_term_entries").fetchone()[0])
    assert count == 0


@given(st.text())
def test_normalize_snippet_is_the_references_trim_and_collapse(text: str) -> None:
    from memoryd.ingest.staging import normalize_snippet

    assert normalize_snippet(text) == " ".join(text.split())
