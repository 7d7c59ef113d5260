"""Schema migrations applied as one script in one transaction, on real SQLite files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from daemon.store import migrations
from daemon.store.db import OperationalError, sqlite3
from daemon.store.migrations import MIGRATIONS, SCHEMA_VERSION, migrate_connection

CREATED = re.compile(
    r"CREATE\s+(?:VIRTUAL\s+)?(?:TABLE|INDEX|TRIGGER|VIEW)\s+IF\s+NOT\s+EXISTS\s+(\w+)", re.I
)


def _connect(path: Path):
    return sqlite3.connect(str(path), isolation_level=None)


def _names(conn) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}


def test_a_fresh_store_gets_every_object_of_the_schema_and_its_version(tmp_path: Path) -> None:
    conn = _connect(tmp_path / "fresh.sqlite")
    assert migrate_connection(conn) == SCHEMA_VERSION
    assert not conn.in_transaction
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    expected = {name for _, ddl in MIGRATIONS for name in CREATED.findall(ddl)}
    assert expected and expected <= _names(conn)
    # the FTS table's secure-delete option, set by an INSERT in the script, was applied
    assert conn.execute(
        "SELECT v FROM memory_index_chunks_fts_config WHERE k = 'secure-delete'"
    ).fetchone() == (1,)
    assert migrate_connection(conn) == SCHEMA_VERSION  # an up-to-date store: nothing to do


def test_a_failing_step_leaves_neither_its_objects_nor_its_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = _connect(tmp_path / "store.sqlite")
    migrate_connection(conn)
    broken = SCHEMA_VERSION + 1
    monkeypatch.setattr(
        migrations,
        "MIGRATIONS",
        [*MIGRATIONS, (broken, "CREATE TABLE IF NOT EXISTS step_two (x);\nCREATE TABLE broken (;\n")],
    )
    with pytest.raises(OperationalError):
        migrate_connection(conn)
    assert not conn.in_transaction
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert "step_two" not in _names(conn)
