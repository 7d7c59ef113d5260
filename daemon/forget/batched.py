"""`IN (...)` statements over any number of values: one statement per SQL_IN_BATCH values."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from daemon.constants import SQL_IN_BATCH
from daemon.store.db import Connection


def select_in(conn: Connection, sql: str, values: Sequence[Any], extra: tuple[Any, ...] = ()) -> list[tuple]:
    """Rows of `sql` (with `{marks}` where the placeholders go, `extra` bound after them)."""
    rows: list[tuple] = []
    values = list(values)
    for start in range(0, len(values), SQL_IN_BATCH):
        batch = values[start:start + SQL_IN_BATCH]
        rows += conn.execute(sql.format(marks=",".join("?" * len(batch))), [*batch, *extra]).fetchall()
    return rows


def execute_in(conn: Connection, sql: str, values: Sequence[Any]) -> int:
    """Run a write statement over `values` in batches; the number of rows it changed."""
    changed = 0
    values = list(values)
    for start in range(0, len(values), SQL_IN_BATCH):
        batch = values[start:start + SQL_IN_BATCH]
        changed += conn.execute(sql.format(marks=",".join("?" * len(batch))), batch).rowcount
    return changed
