"""The rows that shared a purged row's page, for purges that must leave no copy in the file.

A b-tree balance rebuilds a page without clearing its free gap, so an older copy of a row that
stayed on the page (at a new offset) can sit there; deleting the row zeroes only its live cell
(secure_delete). Deleting and reinserting the rows that shared the page frees it (zeroed) and
rebuilds them elsewhere. The rows are taken in rowid (page) order, a page's worth of bytes on
either side of each purged row, counted from a lower bound of each row's cell size: they always
cover the purged row's page. The cost follows the purged rows (a lookup per run of consecutive
rowids), not the table.
"""

from __future__ import annotations

from collections.abc import Sequence

from memoryd.store.engine import Connection

MAX_PAGE_NEIGHBOURS = 64  # rows looked at on either side (a page holds fewer rows of any table here)


def rows_sharing_pages(conn: Connection, table: str, row_bytes: str, purged: Sequence[int]) -> list[int]:
    """Rowids of `table` within a page's worth of bytes of each purged rowid (`row_bytes`: an
    SQL expression of a row's stored bytes, a lower bound of its cell)."""
    page = int(conn.execute("PRAGMA page_size").fetchone()[0])
    before = f"SELECT rowid, {row_bytes} FROM {table} WHERE rowid < ? ORDER BY rowid DESC LIMIT ?"
    after = f"SELECT rowid, {row_bytes} FROM {table} WHERE rowid > ? ORDER BY rowid LIMIT ?"
    around: set[int] = set()
    # The rows between a run's first and last are purged: each member has the same live rows on
    # either side, so a run is looked around once (a session's chunks are one run).
    for first, last in _runs(purged):
        for sql, rowid in ((before, first), (after, last)):
            around.update(_a_page_of(conn.execute(sql, (rowid, MAX_PAGE_NEIGHBOURS)).fetchall(), page))
    return sorted(around)


def _runs(rowids: Sequence[int]) -> list[tuple[int, int]]:
    """(first, last) of each run of consecutive rowids."""
    runs: list[tuple[int, int]] = []
    for rowid in sorted(set(rowids)):
        if runs and rowid == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], rowid)
        else:
            runs.append((rowid, rowid))
    return runs


def _a_page_of(rows: Sequence[tuple[int, int]], page: int) -> list[int]:
    """The rowids of `rows` (nearest first) until their bytes reach a page. A row too large for
    one cell keeps at least SQLite's minimum local payload in the page (the rest overflows)."""
    min_local = (page - 12) * 32 // 255 - 23
    taken: list[int] = []
    size = 0
    for rowid, row_bytes in rows:
        if size >= page:
            break
        taken.append(rowid)
        size += min(int(row_bytes or 0), min_local)
    return taken
