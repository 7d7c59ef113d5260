"""The retention tables of `state_dir/retention.sqlite` (seed 001): scopes, memory-tool objects
with their provenance edges, legal holds and erasure receipts. Plain parameterised SQL, one
function per query.

Every function takes a DB-API connection and runs inside the caller's transaction
(`Store.read` / `Store.write`), so one logical step is one transaction and one thread hop.
Lists of keys go through `IN (...)` in batches (store/batched.py), never one statement per row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memoryd.constants import DAY_MS, TOMBSTONE_REF_PREFIX, TOMBSTONE_REF_RANDOM_BYTES
from memoryd.store.batched import execute_in, select_in
from memoryd.store.engine import Connection


def subtree_bounds(root: str) -> tuple[str, str]:
    """Key range (exclusive) holding every scope strictly under `root`: ';' sorts right after ':'
    (the retention schema's key order; cascades and hold checks are range scans)."""
    return root + ":", root + ";"


@dataclass(frozen=True, slots=True)
class ScopeRow:
    scope: str
    parent: str | None
    created_at: int
    retention_days: int | None
    expires_at: int | None
    expired_at: int | None


@dataclass(frozen=True, slots=True)
class ObjectRow:
    object_id: str
    scope: str
    content: str
    content_hash: str
    created_at: int
    provenance_parent: str | None
    provenance_hash: str | None
    provenance_at: int | None


@dataclass(frozen=True, slots=True)
class HoldRow:
    hold_id: str
    scope: str
    reason: str
    created_at: int


@dataclass(frozen=True, slots=True)
class CitingEdge:
    """An object whose provenance cites a scope (a provenance child of that scope)."""

    object_id: str
    scope: str
    provenance_parent: str


_SCOPE_COLS = "scope, parent, created_at, retention_days, expires_at, expired_at"
_OBJECT_COLS = (
    "object_id, scope, content, content_hash, created_at, provenance_parent, provenance_hash, provenance_at"
)


# --- scopes -----------------------------------------------------------------------------------


def scopes_by_key(conn: Connection, keys: Iterable[str]) -> dict[str, ScopeRow]:
    wanted = list(dict.fromkeys(keys))
    rows = select_in(conn, f"SELECT {_SCOPE_COLS} FROM retention_scopes WHERE scope IN ({{marks}})", wanted)
    return {row[0]: ScopeRow(*row) for row in rows}


def subtree_scopes(conn: Connection, root: str) -> list[ScopeRow]:
    """`root` (if stored) and every scope under it, by key range on the primary key."""
    low, high = subtree_bounds(root)
    rows = conn.execute(
        f"SELECT {_SCOPE_COLS} FROM retention_scopes WHERE scope = ? OR (scope > ? AND scope < ?) "
        "ORDER BY scope",
        (root, low, high),
    ).fetchall()
    return [ScopeRow(*r) for r in rows]


def insert_scopes(conn: Connection, rows: Sequence[ScopeRow]) -> None:
    conn.executemany(
        f"INSERT INTO retention_scopes({_SCOPE_COLS}) VALUES (?, ?, ?, ?, ?, ?)",
        [(r.scope, r.parent, r.created_at, r.retention_days, r.expires_at, r.expired_at) for r in rows],
    )


def set_scope_retention(
    conn: Connection, scope: str, retention_days: int | None, expires_at: int | None
) -> int:
    """Set a scope's TTL and pull every descendant's expiry down to it (child TTL <= parent TTL)."""
    conn.execute(
        "UPDATE retention_scopes SET retention_days = ?, expires_at = ? WHERE scope = ?",
        (retention_days, expires_at, scope),
    )
    if expires_at is None:
        return 0
    low, high = subtree_bounds(scope)
    return int(
        conn.execute(
            "UPDATE retention_scopes SET expires_at = ? WHERE scope > ? AND scope < ? "
            "AND (expires_at IS NULL OR expires_at > ?)",
            (expires_at, low, high, expires_at),
        ).rowcount
    )


def expired_scope_keys(conn: Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT scope FROM retention_scopes WHERE expired_at IS NOT NULL")}


def due_for_expiry(conn: Connection, now_ms: int) -> list[ScopeRow]:
    rows = conn.execute(
        f"SELECT {_SCOPE_COLS} FROM retention_scopes WHERE expires_at IS NOT NULL "
        "AND expires_at <= ? AND expired_at IS NULL ORDER BY scope",
        (now_ms,),
    ).fetchall()
    return [ScopeRow(*r) for r in rows]


def mark_expired(conn: Connection, scopes: Sequence[str], now_ms: int) -> int:
    return execute_in(
        conn,
        "UPDATE retention_scopes SET expired_at = ? WHERE scope IN ({marks}) AND expired_at IS NULL",
        scopes,
        (now_ms,),
    )


def expired_before(conn: Connection, cutoff_ms: int) -> list[ScopeRow]:
    rows = conn.execute(
        f"SELECT {_SCOPE_COLS} FROM retention_scopes WHERE expired_at IS NOT NULL "
        "AND expired_at <= ? ORDER BY scope",
        (cutoff_ms,),
    ).fetchall()
    return [ScopeRow(*r) for r in rows]


def children_exist_outside(conn: Connection, scope: str, allowed: set[str]) -> bool:
    low, high = subtree_bounds(scope)
    for (key,) in conn.execute(
        "SELECT scope FROM retention_scopes WHERE scope > ? AND scope < ?", (low, high)
    ):
        if key not in allowed:
            return True
    return False


def delete_scopes(conn: Connection, scopes: Sequence[str]) -> int:
    return execute_in(conn, "DELETE FROM retention_scopes WHERE scope IN ({marks})", scopes)


# --- objects ----------------------------------------------------------------------------------


def insert_objects(conn: Connection, rows: Sequence[ObjectRow]) -> None:
    conn.executemany(
        f"INSERT INTO retention_objects({_OBJECT_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                r.object_id,
                r.scope,
                r.content,
                r.content_hash,
                r.created_at,
                r.provenance_parent,
                r.provenance_hash,
                r.provenance_at,
            )
            for r in rows
        ],
    )


def objects_in_scopes(conn: Connection, scopes: Sequence[str]) -> list[ObjectRow]:
    rows = select_in(
        conn,
        f"SELECT {_OBJECT_COLS} FROM retention_objects WHERE scope IN ({{marks}}) ORDER BY scope, created_at, object_id",
        scopes,
    )
    return [ObjectRow(*r) for r in rows]


def latest_objects(conn: Connection, scopes: Sequence[str]) -> dict[str, ObjectRow]:
    """The newest object of each scope: what a provenance edge citing the scope hashes."""
    latest: dict[str, ObjectRow] = {}
    for obj in objects_in_scopes(conn, scopes):
        cur = latest.get(obj.scope)
        if cur is None or (obj.created_at, obj.object_id) >= (cur.created_at, cur.object_id):
            latest[obj.scope] = obj
    return latest


def objects_by_id(conn: Connection, object_ids: Sequence[str]) -> dict[str, ObjectRow]:
    rows = select_in(
        conn, f"SELECT {_OBJECT_COLS} FROM retention_objects WHERE object_id IN ({{marks}})", object_ids
    )
    return {r[0]: ObjectRow(*r) for r in rows}


def citing_edges(conn: Connection, parents: Sequence[str]) -> list[CitingEdge]:
    """Provenance children of `parents`, by the provenance index (never a table scan)."""
    rows = select_in(
        conn,
        "SELECT object_id, scope, provenance_parent FROM retention_objects "
        "WHERE provenance_parent IN ({marks}) ORDER BY object_id",
        parents,
    )
    return [CitingEdge(*r) for r in rows]


def citing_subtree(conn: Connection, root: str) -> list[CitingEdge]:
    """Provenance children of `root` and of every scope under it (stored or not): one range scan
    of the provenance index, so an edge citing a scope row that is already gone is found too."""
    low, high = subtree_bounds(root)
    return [
        CitingEdge(*r)
        for r in conn.execute(
            "SELECT object_id, scope, provenance_parent FROM retention_objects WHERE provenance_parent = ? "
            "OR (provenance_parent > ? AND provenance_parent < ?) ORDER BY object_id",
            (root, low, high),
        )
    ]


def rewrite_provenance(conn: Connection, object_ids: Sequence[str]) -> int:
    """Neutralise the edges of these objects: an opaque random parent per edge, no hash, day time.

    randomblob() is evaluated per row, so no two rewritten edges share a token (a shared token
    would link the children of one erased subject to each other).
    """
    return execute_in(
        conn,
        "UPDATE retention_objects SET provenance_parent = ? || lower(hex(randomblob(?))), "
        f"provenance_hash = NULL, provenance_at = (provenance_at / {DAY_MS}) * {DAY_MS} "
        "WHERE object_id IN ({marks}) AND provenance_parent IS NOT NULL",
        object_ids,
        (TOMBSTONE_REF_PREFIX, TOMBSTONE_REF_RANDOM_BYTES),
    )


def coarsen_times(conn: Connection, times: Sequence[int]) -> int:
    """Cut to the day every surviving time equal to one of `times` (an erased object's exact
    millisecond: the scope its write created, a sibling written in the same batch)."""
    changed = 0
    for table, column in (
        ("retention_scopes", "created_at"),
        ("retention_objects", "created_at"),
        ("retention_objects", "provenance_at"),
    ):
        changed += execute_in(
            conn,
            f"UPDATE {table} SET {column} = ({column} / {DAY_MS}) * {DAY_MS} WHERE {column} IN ({{marks}})",
            [t for t in times if t % DAY_MS],
        )
    return changed


def delete_objects(conn: Connection, object_ids: Sequence[str]) -> int:
    return execute_in(conn, "DELETE FROM retention_objects WHERE object_id IN ({marks})", object_ids)


def derivable_edges(conn: Connection) -> list[tuple[str, str]]:
    """Edges that break the erasure invariant whatever the subject: a tombstoned or dangling
    parent that still carries a hash or a sub-day time. Returns (object_id, what)."""
    rows = conn.execute(
        f"SELECT o.object_id, o.provenance_parent, o.provenance_hash, o.provenance_at, s.scope "
        f"FROM retention_objects o LEFT JOIN retention_scopes s ON s.scope = o.provenance_parent "
        f"WHERE o.provenance_parent IS NOT NULL AND s.scope IS NULL "
        f"AND (o.provenance_hash IS NOT NULL OR (o.provenance_at IS NOT NULL AND o.provenance_at % {DAY_MS} != 0) "
        f"OR o.provenance_parent NOT LIKE '{TOMBSTONE_REF_PREFIX}%')"
    ).fetchall()
    out: list[tuple[str, str]] = []
    for object_id, parent, phash, pat, _ in rows:
        if not parent.startswith(TOMBSTONE_REF_PREFIX):
            out.append((object_id, "provenance cites a scope that no longer exists"))
        elif phash is not None:
            out.append((object_id, "tombstoned provenance keeps a parent hash"))
        elif pat is not None and pat % DAY_MS:
            out.append((object_id, "tombstoned provenance keeps a sub-day time"))
    return out


def tombstone_parents(conn: Connection) -> list[str]:
    """Every tombstoned provenance parent (the verifier checks each is opaque and unshared)."""
    return [
        r[0]
        for r in conn.execute(
            "SELECT provenance_parent FROM retention_objects WHERE provenance_parent >= ? AND provenance_parent < ?",
            (TOMBSTONE_REF_PREFIX, TOMBSTONE_REF_PREFIX[:-1] + ";"),
        )
    ]


# --- holds ------------------------------------------------------------------------------------


def all_holds(conn: Connection) -> list[HoldRow]:
    return [
        HoldRow(*r)
        for r in conn.execute("SELECT hold_id, scope, reason, created_at FROM retention_holds ORDER BY scope")
    ]


def hold_for_scope(conn: Connection, scope: str) -> HoldRow | None:
    row = conn.execute(
        "SELECT hold_id, scope, reason, created_at FROM retention_holds WHERE scope = ?", (scope,)
    ).fetchone()
    return HoldRow(*row) if row else None


def upsert_hold(conn: Connection, hold: HoldRow) -> HoldRow:
    """One hold per scope; adding again keeps its id and time and replaces the reason."""
    conn.execute(
        "INSERT INTO retention_holds(hold_id, scope, reason, created_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT(scope) DO UPDATE SET reason = excluded.reason",
        (hold.hold_id, hold.scope, hold.reason, hold.created_at),
    )
    row = hold_for_scope(conn, hold.scope)
    assert row is not None
    return row


def delete_hold(conn: Connection, scope: str) -> HoldRow | None:
    row = hold_for_scope(conn, scope)
    if row is not None:
        conn.execute("DELETE FROM retention_holds WHERE scope = ?", (scope,))
    return row


# --- receipts ---------------------------------------------------------------------------------


def insert_receipt(conn: Connection, receipt_id: str, day: str, state: str, body: str) -> None:
    conn.execute(
        "INSERT INTO erasure_receipts(receipt_id, day, state, body) VALUES (?, ?, ?, ?)",
        (receipt_id, day, state, body),
    )


def update_receipt_body(conn: Connection, receipt_id: str, body: str) -> int:
    return int(
        conn.execute("UPDATE erasure_receipts SET body = ? WHERE receipt_id = ?", (body, receipt_id)).rowcount
    )


def waiting_receipt_bodies(conn: Connection) -> list[str]:
    """Receipts whose verification waits for queued purge jobs (daemon/retention/settle.py)."""
    return [
        r[0]
        for r in conn.execute(
            'SELECT body FROM erasure_receipts WHERE instr(body, \'"waitingFor":["\') > 0 ORDER BY seq'
        )
    ]


def receipt_bodies(conn: Connection, receipt_id: str | None = None) -> list[str]:
    if receipt_id is None:
        return [r[0] for r in conn.execute("SELECT body FROM erasure_receipts ORDER BY seq")]
    return [
        r[0] for r in conn.execute("SELECT body FROM erasure_receipts WHERE receipt_id = ?", (receipt_id,))
    ]


# --- the pending-erasure journal ----------------------------------------------------------------


def journal_entry(conn: Connection, target_ref: str) -> tuple[str, bytes] | None:
    """(journal id, sealed needles) of the pending erasure of a target, if one is pending."""
    row = conn.execute(
        "SELECT journal_id, sealed FROM erasure_journal WHERE target_ref = ?", (target_ref,)
    ).fetchone()
    return (row[0], bytes(row[1])) if row else None


def journal_ids(conn: Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT journal_id FROM erasure_journal")}


def put_journal(conn: Connection, journal_id: str, target_ref: str, sealed: bytes) -> None:
    conn.execute(
        "INSERT INTO erasure_journal(journal_id, target_ref, sealed) VALUES (?, ?, ?) "
        "ON CONFLICT(journal_id) DO UPDATE SET sealed = excluded.sealed",
        (journal_id, target_ref, sealed),
    )


def delete_journal(conn: Connection, journal_id: str) -> int:
    return int(conn.execute("DELETE FROM erasure_journal WHERE journal_id = ?", (journal_id,)).rowcount)
