"""One memory by the key a search hit gave (`memory_get`): its whole text and lineage.

    report = await get_entry(rt, "memory:claim:3f…", participant="ann")

A key is a promoted entry's key (its marker is looked for among MEMORY.md's chunks, where
promotion writes entries, by the path index) or `chunk:<id>` (the chunk id's unique index). The same rules as search
apply: nothing derived from a forgotten session, and with a participant only what that
participant may recall; otherwise the key reads as unknown, never as withheld.
"""

from __future__ import annotations

from memoryd.agent_runtime import AgentRuntime
from memoryd.constants import CHUNK_KEY_PREFIX, MEMORY_KEY_MAX_CHARS, PROMOTED_MEMORY_FILES
from memoryd.errors import UsageError
from memoryd.index.hit_lineage import entry_keys_of, read_page_lineage
from memoryd.index.provenance import least_trusted
from memoryd.index.recall_scope import visible_to
from memoryd.index.search_report import EntryReport, HitProvenance
from memoryd.index.snippet import flatten
from memoryd.store.db import Connection
from memoryd.store.index_chunks import HitRow, hit_rows, rowids_in_file_containing, rowids_of_chunk_ids


def check_key(key: str) -> str:
    if not key or not key.strip() or len(key) > MEMORY_KEY_MAX_CHARS or "\n" in key:
        raise UsageError(
            f"key: {key[:40]!r} is not a memory key; pass a hit's `key` as memory_search returned it"
        )
    return key.strip()


def _candidates(conn: Connection, key: str) -> list[int]:
    if key.startswith(CHUNK_KEY_PREFIX):
        return rowids_of_chunk_ids(conn, [key[len(CHUNK_KEY_PREFIX) :]])
    return [rowid for path in PROMOTED_MEMORY_FILES for rowid in rowids_in_file_containing(conn, path, key)]


def _get_txn(
    conn: Connection, agent_id: str, key: str, secret: bytes | None, participant: str | None
) -> EntryReport | None:
    rows = hit_rows(conn, _candidates(conn, key))
    if not key.startswith(CHUNK_KEY_PREFIX):
        rows = {r.rowid: r for r in rows.values() if key in entry_keys_of(r.text)}
    if not rows:
        return None
    page = read_page_lineage(conn, agent_id, rows.values(), secret, with_participants=participant is not None)
    for rowid in sorted(rows, reverse=True):  # the newest chunk quoting it
        row: HitRow = rows[rowid]
        if rowid in page.gone:
            continue
        if participant is not None and not visible_to(page.lineage[rowid], page.participants, participant):
            continue
        return EntryReport(
            agent_id=agent_id,
            key=key,
            path=row.path,
            source=row.source,
            start_line=row.start_line,
            end_line=row.end_line,
            text=flatten(row.text),
            untrusted=least_trusted([row.origin_class or "untrusted"]) == "untrusted",
            provenance=HitProvenance(
                origin_class=row.origin_class, session_kind=row.session_kind, observed_at=row.observed_at
            )
            if row.origin_class is not None and row.session_kind is not None and row.observed_at is not None
            else None,
            sessions=list(page.sessions[rowid]),
        )
    return None


async def get_entry(rt: AgentRuntime, key: str, *, participant: str | None = None) -> EntryReport:
    key = check_key(key)
    found = None
    if rt.store is not None:
        found = await rt.store.read(_get_txn, rt.agent_id, key, rt.secret(), participant)
    if found is None:
        raise UsageError(f"key: no memory {key!r} here; search again for a current key")
    return found
