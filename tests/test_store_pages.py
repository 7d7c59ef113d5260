"""rows_sharing_pages: the rows within a page's worth of bytes of each purged row, looked up
once per run of consecutive purged rowids (the rows between them are gone, so each member of a
run has the same live rows on either side) — the same rows as looking around each one."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from memoryd.store.engine import Connection, connect
from memoryd.store.pages import MAX_PAGE_NEIGHBOURS, _a_page_of, rows_sharing_pages

ROWS = 300


def _around_each(conn: Connection, purged: list[int]) -> list[int]:
    """The rule row by row: a page's worth of live rows before and after every purged rowid."""
    page = int(conn.execute("PRAGMA page_size").fetchone()[0])
    around: set[int] = set()
    for rowid in purged:
        for sql in (
            "SELECT rowid, length(v) FROM t WHERE rowid < ? ORDER BY rowid DESC LIMIT ?",
            "SELECT rowid, length(v) FROM t WHERE rowid > ? ORDER BY rowid LIMIT ?",
        ):
            around.update(_a_page_of(conn.execute(sql, (rowid, MAX_PAGE_NEIGHBOURS)).fetchall(), page))
    return sorted(around)


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 3000), min_size=ROWS, max_size=ROWS),
    purged=st.lists(st.integers(1, ROWS + 5), max_size=80),
    runs=st.lists(st.tuples(st.integers(1, ROWS), st.integers(1, 40)), max_size=4),
)
def test_a_run_of_purged_rows_shares_the_rows_each_of_them_would(
    tmp_path_factory, sizes: list[int], purged: list[int], runs: list[tuple[int, int]]
) -> None:
    path: Path = tmp_path_factory.mktemp("pages") / "t.sqlite"
    conn = connect(str(path), readonly=False)
    conn.execute("CREATE TABLE t (v TEXT)")
    conn.executemany("INSERT INTO t(rowid, v) VALUES (?, ?)", [(i + 1, "x" * n) for i, n in enumerate(sizes)])
    doomed = sorted(set(purged) | {r for start, n in runs for r in range(start, start + n)})
    conn.executemany("DELETE FROM t WHERE rowid = ?", [(r,) for r in doomed])
    assert rows_sharing_pages(conn, "t", "length(v)", doomed) == _around_each(conn, doomed)
    conn.close()
