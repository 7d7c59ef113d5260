"""The exclusion set's generation (`store_meta` key `exclusion_generation`).

Forgotten-session records and erased senders are one exclusion set (DESIGN §5). Every write
that changes it bumps this counter in the same transaction; a producer (a sweep, the index, backfill,
dreaming) reads the counter together with the set it works from, and re-reads it under the
workspace lock before it publishes: a changed counter means a purge committed meanwhile, so
what it prepared is dropped and read again under the new set, never published.

Each function runs inside the caller's transaction.
"""

from __future__ import annotations

from memoryd.store.engine import Connection

_KEY = "exclusion_generation"


def exclusion_generation(conn: Connection) -> int:
    row = conn.execute("SELECT value FROM store_meta WHERE key = ?", (_KEY,)).fetchone()
    return int(row[0]) if row else 0


def bump_exclusions(conn: Connection) -> None:
    conn.execute(
        "INSERT INTO store_meta(key, value) VALUES (?, '1') "
        "ON CONFLICT(key) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)",
        (_KEY,),
    )


class ExclusionsChanged(Exception):
    """A purge changed the exclusion set after a producer read it: what it prepared is stale."""


def check_exclusions(conn: Connection, generation: int) -> None:
    """Raise ExclusionsChanged (rolling the caller's transaction back) if the set moved on."""
    if exclusion_generation(conn) != generation:
        raise ExclusionsChanged
