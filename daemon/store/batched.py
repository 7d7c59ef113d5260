"""`IN (...)` statements over any number of values: one statement per SQL_IN_BATCH values.

The SQL carries `{marks}` where the placeholders go; any other parameters are bound before them
(`before`) or after them (`select_in`'s `extra`), as they stand in the statement.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from memoryd.constants import SQL_IN_BATCH
from memoryd.store.engine import Connection


def select_in(
    conn: Connection,
    sql: str,
    values: Iterable[Any],
    extra: tuple[Any, ...] = (),
    *,
    before: tuple[Any, ...] = (),
) -> list[tuple[Any, ...]]:
    """Rows of `sql` over all `values` (`before` bound ahead of the placeholders, `extra` after)."""
    rows: list[tuple[Any, ...]] = []
    values = list(values)
    for start in range(0, len(values), SQL_IN_BATCH):
        batch = values[start : start + SQL_IN_BATCH]
        rows += conn.execute(
            sql.format(marks=",".join("?" * len(batch))), [*before, *batch, *extra]
        ).fetchall()
    return rows


def execute_in(conn: Connection, sql: str, values: Iterable[Any], before: tuple[Any, ...] = ()) -> int:
    """Run a write statement over `values` in batches (`before` bound ahead of the placeholders);
    the number of rows it changed."""
    changed = 0
    values = list(values)
    for start in range(0, len(values), SQL_IN_BATCH):
        batch = values[start : start + SQL_IN_BATCH]
        changed += conn.execute(sql.format(marks=",".join("?" * len(batch))), [*before, *batch]).rowcount
    return changed
