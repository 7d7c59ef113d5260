"""Search (reference §6): BM25 over FTS5, plus vector similarity when an embedder is set.

    report = await run_search(rt, "lighthouse rota", limit=10)

* Words: every query word must match (AND; OR if AND finds nothing). The unranked MATCH is
  cheap at any size; ranking all matches of a very common pair is not (perf-limits §7), so
  bm25 ranks at most FTS_CANDIDATE_CAP of the newest matches, and only over the words that
  are not themselves that common (see fts_candidates).
* Meaning: the query's vector against the chunk vectors (exact cosine, index/vectors.py);
  hybrid score = 0.7 · cosine + 0.3 · text score.
* Nothing derived from a forgotten session is returned, even if its rows are still there (a
  purge between its first commit and the index purge): the live forgotten-session records are
  checked per query against each hit's whole lineage (daemon/index/hit_lineage.py).
* With a participant, a hit is shown only when its lineage allows it (index/recall_scope.py);
  the report counts the hits withheld, never which.
* The shown text is the part of the chunk that matched (index/snippet.py).
* Expired retention scopes hide what derives from their sessions: a session's chunk, and a
  memory chunk quoting a promoted entry all of whose origin sessions are hidden. Only the
  candidate page's sessions and entry keys are looked up, and only when a scope has expired.
* `stale: true` with a warning when the index lags the files, or the last run left work undone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memoryd.agent_runtime import AgentRuntime
from memoryd.constants import (
    CHUNK_KEY_PREFIX,
    FTS_CANDIDATE_CAP,
    HYBRID_TEXT_WEIGHT,
    HYBRID_VECTOR_WEIGHT,
    MIN_VECTOR_SIMILARITY,
    SEARCH_MAX_LIMIT,
)
from memoryd.errors import UsageError
from memoryd.index.embedder import make_embedder, model_name
from memoryd.index.freshness import Freshness, check_freshness, disk_state
from memoryd.index.hit_lineage import PageLineage, read_page_lineage
from memoryd.index.provenance import least_trusted
from memoryd.index.recall_scope import visible_to
from memoryd.index.search_report import HitProvenance, SearchHit, SearchReport
from memoryd.index.snippet import matched_snippet
from memoryd.index.vectors import VectorMatrices, nearest
from memoryd.markers import PROMOTION_ANYWHERE_RE
from memoryd.retention.gate import hidden_entries, load_visibility
from memoryd.store.db import Connection
from memoryd.store.index_chunks import HitRow, hit_rows
from memoryd.store.index_fts import count_matches, matches_from, ranked_newest, unranked_newest
from memoryd.store.origins import origins_for_entries

if TYPE_CHECKING:
    import numpy as np  # the query's vector; numpy is loaded by the embedder that makes it

_WORD_RE = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class Candidate:
    rowid: int
    text_score: float | None
    vector_score: float | None
    score: float


def fts_query(words: list[str], operator: str) -> str:
    # \w+ words hold no quote or operator characters; quoting keeps AND/OR/NEAR literal.
    return f" {operator} ".join(f'"{w}"' for w in words)


def text_scores(fts: list[tuple[int, float]]) -> dict[int, float]:
    """bm25() is negative, better when lower. Scale it by the best match so the best text
    match scores 1: bm25's IDF is near zero in small indexes, where an absolute mapping
    would make every word match look irrelevant next to the vector score."""
    best = min((b for _, b in fts), default=0.0)
    if best >= 0:
        return {rowid: 1.0 for rowid, _ in fts}
    return {rowid: max(0.0, b / best) for rowid, b in fts}


def merge(fts: list[tuple[int, float]], vec: list[tuple[int, float]], hybrid: bool) -> list[Candidate]:
    """Combine the two candidate lists into one ranking. Pure."""
    texts = text_scores(fts)
    sims = {rowid: max(0.0, s) for rowid, s in vec}
    out: list[Candidate] = []
    for rowid in texts.keys() | sims.keys():
        t, v = texts.get(rowid), sims.get(rowid)
        if not hybrid:
            out.append(Candidate(rowid, t, None, t or 0.0))
            continue
        if t is None and (v or 0.0) < MIN_VECTOR_SIMILARITY:
            continue
        out.append(
            Candidate(rowid, t, v, HYBRID_VECTOR_WEIGHT * (v or 0.0) + HYBRID_TEXT_WEIGHT * (t or 0.0))
        )
    out.sort(key=lambda c: (-c.score, -c.rowid))  # ties: the newer chunk first
    return out


def _bounded_df(conn: Connection, word: str) -> int:
    """Documents matching `word`, counted up to FTS_CANDIDATE_CAP + 1 (cheap at any size)."""
    return count_matches(conn, fts_query([word], "AND"), FTS_CANDIDATE_CAP + 1)


def _ranked(conn: Connection, words: list[str], operator: str) -> list[tuple[int, float]]:
    return ranked_newest(conn, fts_query(words, operator), FTS_CANDIDATE_CAP + 1)


def fts_candidates(conn: Connection, words: list[str]) -> tuple[list[tuple[int, float]], bool]:
    """(rowid, bm25) of at most FTS_CANDIDATE_CAP matches, and whether the cap was hit.

    bm25() first counts every document of every query word (its IDF), a scan of the word's
    whole posting list: ~0.3 s for a stop word at 1M chunks. So words matching more than the
    cap are left out of the ranking expression; they still filter (AND) through an unranked
    match over the candidates' rowid range. A query of only such words takes the newest
    matches unranked. All words must match; if no chunk has them all, any word will do.
    """
    words = list(dict.fromkeys(words))
    df = {w: _bounded_df(conn, w) for w in words}
    present = [w for w in words if df[w]]
    if not present:
        return [], False
    operator = "AND" if len(present) == len(words) else "OR"
    rare = [w for w in present if df[w] <= FTS_CANDIDATE_CAP]
    common = [w for w in present if df[w] > FTS_CANDIDATE_CAP]
    if not rare:
        rows = unranked_newest(conn, fts_query(common, operator), FTS_CANDIDATE_CAP + 1)
        if not rows and operator == "AND":
            rows = unranked_newest(conn, fts_query(common, "OR"), FTS_CANDIDATE_CAP + 1)
        return rows[:FTS_CANDIDATE_CAP], True
    rows = _ranked(conn, rare, operator)
    if operator == "AND" and common and rows:
        low = min(r[0] for r in rows)
        having_all = matches_from(conn, fts_query(present, "AND"), low)
        rows = [r for r in rows if r[0] in having_all] or rows
    if not rows and operator == "AND" and len(rare) > 1:
        rows = _ranked(conn, rare, "OR")
    return rows[:FTS_CANDIDATE_CAP], len(rows) > FTS_CANDIDATE_CAP


HiddenSessions = Callable[[Iterable[str]], frozenset[str]]


def _expired_rowids(
    conn: Connection, agent_id: str, rows: Iterable[HitRow], hide: HiddenSessions
) -> set[int]:
    """Rowids of candidate chunks that derive from sessions of expired scopes: the session's
    own chunk, or a memory chunk quoting an entry whose origin sessions are all hidden (the
    chunk goes whole: its snippet would show that entry)."""
    rows = list(rows)
    keys_of = {r.rowid: {m.group(1).strip() for m in PROMOTION_ANYWHERE_RE.finditer(r.text)} for r in rows}
    origins = origins_for_entries(conn, agent_id, sorted(set().union(*keys_of.values())))
    hidden = hide({r.session_id for r in rows if r.session_id} | {o.session_id for o in origins})
    if not hidden:
        return set()
    hidden_keys = hidden_entries(origins, hidden)
    return {
        r.rowid
        for r in rows
        if (r.session_id is not None and r.session_id in hidden) or keys_of[r.rowid] & hidden_keys
    }


def hit_key(row: HitRow, entry_keys: frozenset[str]) -> str:
    """A hit's stable key: the entry it quotes, else its chunk's id (memory_get takes either)."""
    if len(entry_keys) == 1:
        return next(iter(entry_keys))
    return CHUNK_KEY_PREFIX + row.chunk_id


def make_hit(row: HitRow, cand: Candidate, words: list[str], page: PageLineage) -> SearchHit:
    provenance = (  # the three are set together: a provenance row exists, or none does
        HitProvenance(
            origin_class=row.origin_class, session_kind=row.session_kind, observed_at=row.observed_at
        )
        if row.origin_class is not None and row.session_kind is not None and row.observed_at is not None
        else None
    )
    lineage = page.lineage[row.rowid]
    return SearchHit(
        path=row.path,
        source=row.source,
        start_line=row.start_line,
        end_line=row.end_line,
        score=round(cand.score, 6),
        text_score=None if cand.text_score is None else round(cand.text_score, 6),
        vector_score=None if cand.vector_score is None else round(cand.vector_score, 6),
        snippet=matched_snippet(row.text, words),
        session_id=row.session_id,
        provenance=provenance,
        key=hit_key(row, lineage.entry_keys),
        untrusted=least_trusted([row.origin_class or "untrusted"]) == "untrusted",
        sessions=list(page.sessions[row.rowid]),
    )


@dataclass(slots=True)
class _Found:
    hits: list[SearchHit]
    capped: bool
    withheld: int
    fresh: Freshness


def _search_txn(
    conn: Connection,
    words: list[str],
    query_vector: np.ndarray | None,
    model: str,
    limit: int,
    secret: bytes | None,
    disk: object,
    agent_id: str,
    hide: HiddenSessions | None,
    matrices: VectorMatrices,
    participant: str | None,
) -> _Found:
    fts, capped = fts_candidates(conn, words)
    vec = (
        nearest(conn, query_vector, model, max(limit * 5, 50), matrices=matrices)
        if query_vector is not None
        else []
    )
    ranked = merge(fts, vec, query_vector is not None)
    hits: list[SearchHit] = []
    withheld = 0
    page_size = max(limit * 3, 30)
    for start in range(0, len(ranked), page_size):
        batch = ranked[start : start + page_size]
        rows = hit_rows(conn, [c.rowid for c in batch])
        page = read_page_lineage(
            conn, agent_id, rows.values(), secret, with_participants=participant is not None
        )
        expired = _expired_rowids(conn, agent_id, rows.values(), hide) if hide is not None else set()
        for cand in batch:
            row = rows.get(cand.rowid)
            if row is None or cand.rowid in page.gone or cand.rowid in expired:
                continue  # gone since the candidates were read, derived from a forgotten session, or expired
            if participant is not None and not visible_to(
                page.lineage[row.rowid], page.participants, participant
            ):
                withheld += 1
                continue
            hits.append(make_hit(row, cand, words, page))
            if len(hits) >= limit:
                return _Found(hits, capped, withheld, check_freshness(conn, disk, model, secret))
    return _Found(hits, capped, withheld, check_freshness(conn, disk, model, secret))


async def run_search(
    rt: AgentRuntime, query: str, limit: int = 10, *, participant: str | None = None
) -> SearchReport:
    """Search the agent's index; with `participant`, only what that participant may recall
    (daemon/index/recall_scope.py), and how many hits were withheld."""
    if not query or not query.strip():
        raise UsageError("search: QUERY must not be empty")
    if not 1 <= limit <= SEARCH_MAX_LIMIT:
        raise UsageError(f"search: --limit must be between 1 and {SEARCH_MAX_LIMIT}, got {limit}")
    if participant is not None and not participant.strip():
        raise UsageError("search: participant must name an actor id, not be empty")
    embedder = make_embedder(rt.settings.index.embedding)
    model = model_name(embedder)
    report = SearchReport(
        agent_id=rt.agent_id,
        query=query,
        mode="hybrid" if embedder else "fts",
        scope="agent" if participant is None else "participant",
        participant=participant,
    )
    action = f"run `memoryd index --agent {rt.agent_id}`"
    if rt.store is None:
        report.stale, report.warning, report.action = True, "the agent has no index yet", action
        return report
    words = [w for w in _WORD_RE.findall(query.lower())]
    query_vector = (await embedder.embed([query]))[0] if embedder is not None else None
    disk = await disk_state(rt)
    visibility = await load_visibility(rt.settings, rt.sessions)
    hide = visibility.hidden_sessions if visibility is not None else None
    found = await rt.store.read(
        _search_txn,
        words,
        query_vector,
        model,
        limit,
        rt.secret(),
        disk,
        rt.agent_id,
        hide,
        rt.caches.part(VectorMatrices),
        participant,
    )
    report.results = found.hits
    report.candidates_capped = found.capped
    report.withheld = found.withheld
    if found.fresh.stale:
        report.stale, report.warning, report.action = True, found.fresh.reason, action
    return report
