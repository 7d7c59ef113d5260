"""Staging corpus messages as short-term entries with lineage (reference §5.4).

Each staged message is a daily signal on the entry `memory:claim:<sha1(normalized snippet)[:12]>`.
Entry-origin rows (which session the claim came from) are written before the staged entries
in the same transaction: staged content never exists without its source-session facts.

`merge_signals` is the pure part (existing entry + new signals -> entry); `write_staging` is the
SQL, run inside the caller's write transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import NamedTuple

from memoryd.constants import (
    MAX_QUERY_HASHES,
    MAX_RECALL_DAYS,
    SESSION_CORPUS_QUERY_PREFIX,
    SESSION_INGESTION_SCORE,
    STAGED_SNIPPET_MAX_CHARS,
)

# Declared once with every other derivation (daemon/derivations.py); re-exported for the sweep.
from memoryd.derivations import claim_hash as claim_hash
from memoryd.derivations import normalize_snippet as normalize_snippet
from memoryd.derivations import query_hash as query_hash
from memoryd.store.engine import Connection  # not store.db: scan workers load no event loop
from memoryd.store.lines import CLAIM_KEY_PREFIX, Line
from memoryd.store.origins import stage_lines
from memoryd.store.short_term import NewClaim, ShortTermEntry, insert_new_claims, load_entries, upsert_signals

# Least trusted wins when one entry has several sources (the reference's findLast over this order).
ORIGIN_TRUST_ORDER = {"owner": 0, "agent": 1, "system": 2, "untrusted": 3}


def session_query(day: str) -> str:
    return SESSION_CORPUS_QUERY_PREFIX + day


class StagedMessage(NamedTuple):
    """A message appended to the corpus, ready to stage. (NamedTuple: one per message, built fast.)"""

    claim_hash: str
    snippet: str
    path: str  # corpus file, workspace-relative
    line: int  # line in that corpus file
    origin_class: str
    session_kind: str
    observed_at: int
    session_id: str
    session_key: str | None
    query_hash: str  # of `__dreaming_sessions__:<message day>`

    @property
    def entry_key(self) -> str:
        return CLAIM_KEY_PREFIX + self.claim_hash


def least_trusted(a: str, b: str) -> str:
    """The less trusted of two origin classes (the first on a tie; unknown ranks as untrusted)."""
    return a if ORIGIN_TRUST_ORDER.get(a, 3) >= ORIGIN_TRUST_ORDER.get(b, 3) else b


def _append_capped(items: tuple[str, ...], value: str, cap: int) -> tuple[str, ...]:
    if value in items:
        return items
    return (*items, value)[-cap:]


def merge_signals(
    existing: ShortTermEntry | None, messages: Sequence[StagedMessage], day_bucket: str, now_ms: int
) -> ShortTermEntry:
    """Apply daily signals (all of one entry key, in order) to an entry. Pure.

    A daily claim keeps its first source citation forever; a signal whose (query, day bucket)
    the entry already has is deduped (counts unchanged); provenance is the least trusted seen.
    """
    first = messages[0]
    if existing is None and len(messages) == 1:
        # The common case of a first sweep: one new claim, one signal. Same result, built directly.
        return ShortTermEntry(
            first.entry_key,
            first.path,
            first.line,
            first.line,
            first.snippet[:STAGED_SNIPPET_MAX_CHARS],
            0,
            1,
            0,
            SESSION_INGESTION_SCORE,
            SESSION_INGESTION_SCORE,
            now_ms,
            now_ms,
            (first.query_hash,),
            (day_bucket,),
            (),
            first.origin_class,
            first.session_kind,
            first.observed_at,
            first.claim_hash,
            None,
            None,
        )
    if existing is None:
        existing = ShortTermEntry(
            first.entry_key,
            first.path,
            first.line,
            first.line,
            first.snippet[:STAGED_SNIPPET_MAX_CHARS],
            0,
            0,
            0,
            0.0,
            0.0,
            now_ms,
            now_ms,
            (),
            (),
            (),
            first.origin_class,
            first.session_kind,
            first.observed_at,
            first.claim_hash,
            None,
            None,
        )
    daily, total, best = existing.daily_count, existing.total_score, existing.max_score
    queries, days = existing.query_hashes, existing.recall_days
    origin, kind, observed = existing.origin_class, existing.session_kind, existing.observed_at
    for msg in messages:
        origin = least_trusted(origin, msg.origin_class)
        if kind != msg.session_kind:
            kind = "unknown"
        if msg.observed_at > observed:
            observed = msg.observed_at
        if msg.query_hash in queries and day_bucket in days:
            continue
        daily += 1
        total += SESSION_INGESTION_SCORE
        best = max(best, SESSION_INGESTION_SCORE)
        queries = _append_capped(queries, msg.query_hash, MAX_QUERY_HASHES)
        days = _append_capped(days, day_bucket, MAX_RECALL_DAYS)
    return replace(
        existing,
        daily_count=daily,
        total_score=total,
        max_score=best,
        last_recalled_at=now_ms,
        query_hashes=queries,
        recall_days=days,
        origin_class=origin,
        session_kind=kind,
        observed_at=observed,
        claim_hash=existing.claim_hash or first.claim_hash,
    )


def write_staging(
    conn: Connection,
    agent_id: str,
    messages: Sequence[StagedMessage],
    day_bucket: str,
    now_ms: int,
    seen_hashes: Sequence[str | None] | None = None,
) -> int:
    """The staged lines (each message's origin and its seen hash, `seen_hashes` in the same
    order, store/lines.py) first, then the staged entries; inside the caller's write transaction
    (the store is `agent_id`'s). Returns the number of entries written."""
    if not messages:
        return 0
    # Lineage is reserved before the candidates are published (reference §5.4 step 7).
    stage_lines(
        conn,
        [
            Line(m.session_id, m.session_key, int(m.claim_hash, 16), m.origin_class, m.observed_at, digest)
            for m, digest in zip(messages, seen_hashes or [None] * len(messages), strict=True)
        ],
    )
    return stage_claims(conn, messages, day_bucket, now_ms)


def stage_claims(
    conn: Connection,
    messages: Sequence[StagedMessage],
    day_bucket: str,
    now_ms: int,
    keys: Sequence[str] | None = None,
) -> int:
    """The staged entries of `messages` (in staging order), their origins already written; inside
    the caller's write transaction. Returns the number of entries written."""
    if keys is None:
        keys = [CLAIM_KEY_PREFIX + m.claim_hash for m in messages]
    by_key: dict[str, list[StagedMessage]] = {}
    for key, m in zip(keys, messages, strict=True):
        by_key.setdefault(key, []).append(m)
    existing = load_entries(conn, list(by_key))
    fresh: list[NewClaim] = []
    merged: list[ShortTermEntry] = []
    for key, group in by_key.items():
        prior = existing.get(key)
        if prior is None and len(group) == 1:
            # The common case; the row is the one merge_signals builds for one new signal.
            m = group[0]
            fresh.append(
                NewClaim(
                    key,
                    m.path,
                    m.line,
                    m.snippet[:STAGED_SNIPPET_MAX_CHARS],
                    m.query_hash,
                    m.origin_class,
                    m.session_kind,
                    m.observed_at,
                    m.claim_hash,
                )
            )
        else:
            merged.append(merge_signals(prior, group, day_bucket, now_ms))
    if fresh:
        insert_new_claims(conn, fresh, day_bucket, now_ms, SESSION_INGESTION_SCORE)
    if merged:
        upsert_signals(conn, merged)
    return len(fresh) + len(merged)
