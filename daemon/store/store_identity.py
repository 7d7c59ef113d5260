"""The store's own id (`store_meta` key `store_id`): 32 random hex digits made once, by the
migration that brought it in, and kept for the store's life. An agent's route names it
(memoryd.runtime.hosts.Route): hosts tell the same store from another one by it.

Runs inside the caller's transaction."""

from __future__ import annotations

from memoryd.store.engine import Connection

_KEY = "store_id"


def store_id(conn: Connection) -> str:
    row = conn.execute("SELECT value FROM store_meta WHERE key = ?", (_KEY,)).fetchone()
    if row is None:  # only a store its migrations have not reached yet
        raise LookupError("store has no store_id; open it for writing to migrate it")
    return str(row[0])
