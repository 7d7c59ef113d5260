"""A store transaction that fails says why: when SQLite has already ended the transaction (a
full disk or an I/O error rolls it back by itself), the error that ended it reaches the caller,
not "cannot rollback - no transaction is active". Real SQLite files."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.store.db import Store
from memoryd.store.engine import Connection


class Ended(Exception):
    """The error that ended the transaction."""


def _ended_by_sqlite(conn: Connection) -> None:
    conn.execute("ROLLBACK")  # as SQLite does itself on SQLITE_FULL or SQLITE_IOERR
    raise Ended


@pytest.mark.parametrize("kind", ["read", "write"])
async def test_the_error_that_ended_a_transaction_reaches_the_caller(tmp_path: Path, kind: str) -> None:
    store = await Store.open(tmp_path / "memory.sqlite")
    try:
        with pytest.raises(Ended):
            if kind == "read":
                await store.read(_ended_by_sqlite)
            else:
                await store.write(_ended_by_sqlite, fence=None)
        assert await store.read(lambda conn: conn.execute("SELECT 1").fetchone()[0]) == 1  # still usable
    finally:
        await store.close()
