"""Entry origins (reference §5.4, §5.7): which sessions each tracked entry key came from — the
lineage that forget and erasure follow.

An origin of a claim key (`memory:claim:<hash>`) is written as the first line of its session
with that claim in the keyed lineage (store/lines.py: `ingest_lines`, `ingest_sessions`); an
origin of any other key (a dream diary's) as a row of `memory_entry_origins`. Reads and deletes
go to both (a store written before version 12 may hold claim keys there too, and a row there
is an origin whatever its key). Each function runs inside the caller's transaction; lookups go
by the claim index, the session index or the primary key, never a scan of every origin.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from memoryd.store.batched import execute_in, select_in
from memoryd.store.engine import Connection
from memoryd.store.lines import (
    Line,
    LineRow,
    add_lines,
    claim_of_key,
    claims_of_sessions,
    forget_claims,
    key_of_claim,
    lines_of_claims,
    lines_of_sessions,
    record_origin_lines,
    sessions_of_claims,
    split_keys,
)

ORIGIN_CLASSES = ("owner", "agent", "untrusted", "system")


@dataclass(frozen=True, slots=True)
class EntryOrigin:
    entry_key: str
    agent_id: str
    session_id: str
    session_key: str | None
    origin_class: str
    observed_at: int


_COLUMNS = "entry_key, agent_id, session_id, session_key, origin_class, observed_at"


def _first_lines(rows: Iterable[LineRow], agent_id: str) -> list[EntryOrigin]:
    """The origin of each (claim, session id): its first line's."""
    first: dict[tuple[int, str], LineRow] = {}
    for row in rows:
        key = (row[3], row[1])
        have = first.get(key)
        if have is None or row[0] < have[0]:
            first[key] = row
    return [
        EntryOrigin(key_of_claim(claim), agent_id, sid, key, origin_class, observed_at)
        for _line, sid, key, claim, origin_class, observed_at, _seen in first.values()
    ]


def _sorted(origins: list[EntryOrigin]) -> list[EntryOrigin]:
    return sorted(origins, key=lambda o: (o.entry_key, o.session_id))


def record_origins(conn: Connection, agent_id: str, origins: Iterable[EntryOrigin]) -> list[EntryOrigin]:
    """Insert-or-ignore origin rows; return the rows actually added.

    Rejects rows of another agent: selection and forgotten records are per agent.
    """
    added: list[EntryOrigin] = []
    wanted = list(origins)
    for origin in wanted:
        if origin.agent_id != agent_id:
            raise ValueError(f"memory entry origin belongs to another agent: {origin.agent_id!r}")
    claims, _ = split_keys(o.entry_key for o in wanted)
    have = {(o.entry_key, o.session_id) for o in origins_for_entries(conn, agent_id, list(claims.values()))}
    lines: list[tuple[str, str | None, int, str, int]] = []
    for origin in wanted:
        claim = claim_of_key(origin.entry_key)
        if claim is not None:
            if (origin.entry_key, origin.session_id) in have:
                continue
            have.add((origin.entry_key, origin.session_id))
            lines.append(
                (origin.session_id, origin.session_key, claim, origin.origin_class, origin.observed_at)
            )
            added.append(origin)
            continue
        cur = conn.execute(
            f"INSERT INTO memory_entry_origins({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(entry_key, agent_id, session_id) DO NOTHING",
            (
                origin.entry_key,
                origin.agent_id,
                origin.session_id,
                origin.session_key,
                origin.origin_class,
                origin.observed_at,
            ),
        )
        if cur.rowcount:
            added.append(origin)
    record_origin_lines(conn, lines)
    return added


def _other_rows(conn: Connection, agent_id: str, where: str, values: Sequence[str]) -> list[EntryOrigin]:
    rows = select_in(
        conn,
        f"SELECT {_COLUMNS} FROM memory_entry_origins WHERE {where} IN ({{marks}}) AND agent_id = ?",
        values,
        (agent_id,),
    )
    return [EntryOrigin(*r) for r in rows]


def origins_for_sessions(conn: Connection, agent_id: str, session_ids: Sequence[str]) -> list[EntryOrigin]:
    """Origins of the given sessions, by index (never a scan of all origins)."""
    if not session_ids:
        return []
    found = _first_lines(lines_of_sessions(conn, session_ids), agent_id)
    return _sorted(found + _other_rows(conn, agent_id, "session_id", session_ids))


def origins_for_entries(conn: Connection, agent_id: str, entry_keys: Sequence[str]) -> list[EntryOrigin]:
    if not entry_keys:
        return []
    claims, _ = split_keys(entry_keys)
    found = _first_lines(lines_of_claims(conn, sorted(claims)), agent_id) if claims else []
    return _sorted(found + _other_rows(conn, agent_id, "entry_key", entry_keys))


def existing_entry_keys(conn: Connection, agent_id: str, entry_keys: Sequence[str]) -> set[str]:
    return {o.entry_key for o in origins_for_entries(conn, agent_id, entry_keys)}


def delete_origins_for_entries(conn: Connection, agent_id: str, entry_keys: Sequence[str]) -> int:
    """Every origin of these entry keys; how many there were."""
    claims, _ = split_keys(entry_keys)
    removed = len(forget_claims(conn, sorted(claims))) if claims else 0
    return removed + execute_in(
        conn,
        "DELETE FROM memory_entry_origins WHERE agent_id = ? AND entry_key IN ({marks})",
        entry_keys,
        (agent_id,),
    )


def stage_lines(conn: Connection, lines: Sequence[Line]) -> None:
    """A sweep's staged lines: the origins of their claims and the sessions' seen hashes
    (store/lines.py add_lines), in staging order."""
    add_lines(conn, lines)


def entry_keys_of_sessions(conn: Connection, agent_id: str, session_ids: Sequence[str]) -> set[str]:
    """Entry keys any of these sessions contributed to (session indexes)."""
    keys = {key_of_claim(c) for c in claims_of_sessions(conn, session_ids)}
    rows = select_in(
        conn,
        "SELECT DISTINCT entry_key FROM memory_entry_origins WHERE session_id IN ({marks}) AND agent_id = ?",
        session_ids,
        (agent_id,),
    )
    return keys | {k for (k,) in rows}


def origin_pairs(conn: Connection, agent_id: str, entry_keys: Sequence[str]) -> list[tuple[str, str]]:
    """(entry_key, session_id) of every origin of these entry keys (claim index, primary key)."""
    claims, _ = split_keys(entry_keys)
    pairs = {(key_of_claim(c), sid) for c, sid in sessions_of_claims(conn, sorted(claims))}
    rows = select_in(
        conn,
        "SELECT entry_key, session_id FROM memory_entry_origins WHERE entry_key IN ({marks}) AND agent_id = ?",
        entry_keys,
        (agent_id,),
    )
    return sorted(pairs | {(k, sid) for k, sid in rows})


def keys_with_origins(conn: Connection, agent_id: str, entry_keys: Collection[str]) -> frozenset[str]:
    """Which of `entry_keys` have at least one origin for this agent (index lookups)."""
    if not entry_keys:
        return frozenset()
    return frozenset(existing_entry_keys(conn, agent_id, sorted(set(entry_keys))))


def delete_origin_rows(conn: Connection, agent_id: str, pairs: Iterable[tuple[str, str]]) -> int:
    """Delete exactly these (entry_key, session_id) origins; how many there were."""
    by_claim: dict[int, list[str]] = {}
    others = list(pairs)
    for key, sid in others:
        claim = claim_of_key(key)
        if claim is not None:
            by_claim.setdefault(claim, []).append(sid)
    removed = 0
    for claim, sids in by_claim.items():
        removed += len(forget_claims(conn, [claim], sids))
    before = conn.total_changes
    conn.executemany(
        "DELETE FROM memory_entry_origins WHERE entry_key = ? AND agent_id = ? AND session_id = ?",
        [(key, agent_id, sid) for key, sid in others],
    )
    return removed + conn.total_changes - before


def recorded_session_keys(
    conn: Connection, agent_id: str, session_ids: Sequence[str], session_keys: Sequence[str]
) -> list[tuple[str, str | None]]:
    """Distinct (session id, session key) of the origins of these ids or keys (each by its
    index): the sessions entries were derived from, also once the session store has lost them."""
    rows = select_in(
        conn,
        "SELECT DISTINCT s.session_id, s.session_key FROM ingest_sessions s WHERE s.session_id IN ({marks}) "
        "AND EXISTS (SELECT 1 FROM ingest_lines l WHERE l.session_no = s.session_no AND l.claim IS NOT NULL)",
        session_ids,
    )
    rows += select_in(
        conn,
        "SELECT DISTINCT s.session_id, s.session_key FROM ingest_sessions s WHERE s.session_key IN ({marks}) "
        "AND EXISTS (SELECT 1 FROM ingest_lines l WHERE l.session_no = s.session_no AND l.claim IS NOT NULL)",
        session_keys,
    )
    rows += select_in(
        conn,
        "SELECT DISTINCT session_id, session_key FROM memory_entry_origins"
        " WHERE session_id IN ({marks}) AND agent_id = ?",
        session_ids,
        (agent_id,),
    )
    rows += select_in(
        conn,
        "SELECT DISTINCT session_id, session_key FROM memory_entry_origins"
        " WHERE session_key IN ({marks}) AND agent_id = ?",
        session_keys,
        (agent_id,),
    )
    return list(dict.fromkeys((r[0], r[1]) for r in rows))
