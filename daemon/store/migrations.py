"""Schema migrations by PRAGMA user_version. Numbered steps; each runs in one transaction."""

from __future__ import annotations

from daemon.store.db import Connection
from daemon.store.schema import core, dreaming, index, ingest, retention

# Version 1 is the union of every domain's tables. Later versions append steps here; a step
# never edits an earlier one once released.
MIGRATIONS: list[tuple[int, str]] = [
    (1, core.DDL + ingest.DDL + dreaming.DDL + index.DDL + retention.DDL),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]


def migrate_connection(conn: Connection) -> int:
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    for version, ddl in MIGRATIONS:
        if version <= current:
            continue
        conn.execute("BEGIN IMMEDIATE")
        try:
            # executescript would commit our transaction; run the statements one by one instead.
            for statement in _split_sql(ddl):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        current = version
    return current


def _split_sql(script: str) -> list[str]:
    """Split a script into complete statements (sqlite3.complete_statement handles triggers)."""
    from daemon.store.db import sqlite3

    statements: list[str] = []
    buf = ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            stmt = buf.strip()
            if stmt and stmt != ";":
                statements.append(stmt)
            buf = ""
    if buf.strip():
        statements.append(buf.strip())
    return statements
