"""Schema migrations by PRAGMA user_version. Numbered steps; each runs in one transaction."""

from __future__ import annotations

from daemon.store.engine import Connection
from daemon.store.schema import core, dreaming, index, ingest, retention

# Version 1 is the union of every domain's tables. Later versions append steps here; a step
# never edits an earlier one once released.
MIGRATIONS: list[tuple[int, str]] = [
    (1, core.DDL + ingest.DDL + dreaming.DDL + index.DDL + retention.DDL),
    (2, ingest.CHECKPOINT_TOKEN_DDL),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]


def migrate_connection(conn: Connection) -> int:
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    for version, ddl in MIGRATIONS:
        if version <= current:
            continue
        # The step, its version and the transaction around them as one script: SQLite runs it
        # without a round trip to Python per statement (a fresh store creates ~50 objects).
        try:
            conn.executescript(f"BEGIN IMMEDIATE;\n{ddl}\n;\nPRAGMA user_version = {version};\nCOMMIT;")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        current = version
    return current
