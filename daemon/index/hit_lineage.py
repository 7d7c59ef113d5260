"""The lineage of a page of search candidates, read inside the search's read transaction.

For each chunk: the sessions it derives from (a transcript chunk's own session; for a memory
chunk, the origin sessions of every entry its promotion markers quote), with their keys, origin
classes and dates. A chunk with any forgotten session in that lineage is `gone`: its session's
forgotten record is committed first by every purge (plain id or keyed hash), so between that
commit and the index purge a read already returns nothing of it.

Every lookup is by index over the page's own rows (entry keys, session ids), never a scan.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from memoryd.index.recall_scope import HitLineage
from memoryd.index.search_report import HitSession
from memoryd.markers import PROMOTION_ANYWHERE_RE
from memoryd.store.checkpoints import recorded_session_keys
from memoryd.store.engine import Connection
from memoryd.store.index_chunks import HitRow
from memoryd.store.origins import origins_for_entries
from memoryd.store.participants import participants_of_sessions
from memoryd.store.tombstones import forgotten_ids


@dataclass(frozen=True, slots=True)
class PageLineage:
    lineage: dict[int, HitLineage]  # by chunk rowid
    sessions: dict[int, list[HitSession]]  # by chunk rowid, ordered by session id: the hits' own
    gone: frozenset[int]  # rowids with a forgotten session in their lineage
    participants: dict[str, frozenset[str]]  # session id -> recorded actors (only when asked)


def entry_keys_of(text: str) -> frozenset[str]:
    return frozenset(m.group(1).strip() for m in PROMOTION_ANYWHERE_RE.finditer(text))


def read_page_lineage(
    conn: Connection,
    agent_id: str,
    rows: Iterable[HitRow],
    secret: bytes | None,
    *,
    with_participants: bool,
) -> PageLineage:
    rows = list(rows)
    keys_of = {r.rowid: entry_keys_of(r.text) for r in rows}
    origins = origins_for_entries(conn, agent_id, sorted(frozenset().union(*keys_of.values())))
    by_key: dict[str, list[HitSession]] = {}
    for o in origins:
        by_key.setdefault(o.entry_key, []).append(
            HitSession(
                session_id=o.session_id,
                session_key=o.session_key,
                origin_class=o.origin_class,
                observed_at=o.observed_at,
            )
        )
    own = {r.rowid: r.session_id for r in rows if r.session_id is not None}
    every = sorted(set(own.values()) | {o.session_id for o in origins})
    known_keys = dict(recorded_session_keys(conn, every, [])) if every else {}
    forgotten = forgotten_ids(conn, every, secret)

    lineage: dict[int, HitLineage] = {}
    sessions: dict[int, list[HitSession]] = {}
    gone: set[int] = set()
    for r in rows:
        found: dict[str, HitSession] = {}
        if r.session_id is not None:
            found[r.session_id] = HitSession(
                session_id=r.session_id,
                session_key=known_keys.get(r.session_id),
                origin_class=r.origin_class or "untrusted",
                observed_at=r.observed_at or 0,
            )
        for key in keys_of[r.rowid]:
            for s in by_key.get(key, []):
                found.setdefault(s.session_id, s if s.session_key else _with_key(s, known_keys))
        ids = frozenset(found)
        if ids & forgotten:
            gone.add(r.rowid)
        lineage[r.rowid] = HitLineage(
            sessions=ids,
            entry_keys=keys_of[r.rowid],
            unresolved=any(k not in by_key for k in keys_of[r.rowid]),
            origin_class=r.origin_class,
        )
        sessions[r.rowid] = [found[s] for s in sorted(found)]
    participants: dict[str, frozenset[str]] = {}
    if with_participants and every:
        grouped: dict[str, set[str]] = {}
        for p in participants_of_sessions(conn, every):
            grouped.setdefault(p.session_id, set()).add(p.actor_id)
        participants = {sid: frozenset(actors) for sid, actors in grouped.items()}
    return PageLineage(lineage, sessions, frozenset(gone), participants)


def _with_key(s: HitSession, known: dict[str, str | None]) -> HitSession:
    return replace(s, session_key=known.get(s.session_id))
