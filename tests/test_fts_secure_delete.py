"""A purged chunk's terms leave the FTS5 index segments (`*_fts_data`), not only its rows.

A contentless_delete table deletes by tombstone: the terms stay in the segments until an
`optimize`. Every FTS table of an agent store keeps its own content and has secure-delete on,
so a delete removes the entries from the segment pages in place."""

from __future__ import annotations

import random
import string
from pathlib import Path

from memoryd.agent_runtime import agent_runtime
from memoryd.index.purge import purge_chunks, rebuild_is_cheaper
from memoryd.index.sync import run_index_sync
from memoryd.store.engine import connect
from memoryd.store.index_chunks import FtsShape, fts_shape, rewrite_chunk_pages, rowids_of_chunks
from memoryd.store.migrate import AGENT as AGENT_SCHEMA
from memoryd.store.migrate import migrate_connection
from tests.conftest import index_settings

AGENT = "main"
RARE = ("quillowhisk", "brambleforth")


def _fts_tables(conn) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%fts5%'"
        )
    ]


def _segment_hits(conn) -> dict[str, list[str]]:
    """The rare terms found in any block of any FTS table's segment data."""
    out: dict[str, list[str]] = {}
    for table in _fts_tables(conn):
        blocks = [bytes(r[0] or b"") for r in conn.execute(f'SELECT block FROM "{table}_data"')]
        found = [t for t in RARE if any(t.encode() in b for b in blocks)]
        if found:
            out[table] = found
    return out


def _write(ws: Path, rel: str, text: str) -> None:
    path = ws / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


async def test_a_purged_chunks_rare_terms_leave_the_segment_blobs(redis, tmp_path, sessions_root, unique):
    settings = index_settings(tmp_path, sessions_root, unique)
    ws = tmp_path / "ws"
    for day in range(1, 25):
        _write(
            ws, f"memory/2026-10-{day:02d}.md", f"Harbour crane inspection number {day} is due in March.\n"
        )
    _write(ws, "memory/2026-11-01.md", f"The {RARE[0]} cabinet key sits under the {RARE[1]} mat.\n")
    async with agent_runtime(settings, AGENT, redis=redis) as rt:
        store = rt.require_store()
        await run_index_sync(rt)
        assert await store.read(_segment_hits) == {"memory_index_chunks_fts": list(RARE)}
        (ws / "memory/2026-11-01.md").unlink()
        removed = await run_index_sync(rt)
        assert removed.chunks_removed == 1
        assert await store.read(_segment_hits) == {}
        await run_index_sync(rt, force=True)
        assert await store.read(_segment_hits) == {}


async def test_every_fts_table_has_secure_delete_and_deletes_by_its_own_content(
    redis, tmp_path, sessions_root, unique
):
    settings = index_settings(tmp_path, sessions_root, unique)
    async with agent_runtime(settings, AGENT, redis=redis) as rt:
        await run_index_sync(rt)

        def options(conn) -> dict[str, tuple[object, str]]:
            return {
                t: (
                    conn.execute(f"SELECT v FROM \"{t}_config\" WHERE k = 'secure-delete'").fetchone(),
                    conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (t,)).fetchone()[0],
                )
                for t in _fts_tables(conn)
            }

        found = await rt.require_store().read(options)
    assert found and all(v == (1,) and "contentless_delete" not in sql for v, sql in found.values())


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(14))


def test_a_purge_that_rebuilds_the_segments_leaves_no_byte_of_the_purged_rows_terms(tmp_path: Path) -> None:
    """A large purge deletes its full-text rows without secure-delete and merges the index into
    one segment (cheaper than removing each term from every segment): the purged rows' terms
    are in no block, page or WAL frame after it, the others are all still found, and
    secure-delete is on again for every later delete."""
    rng = random.Random(3)
    path = tmp_path / "memory.sqlite"
    conn = connect(str(path), readonly=False)
    migrate_connection(conn, AGENT_SCHEMA)
    words: dict[int, str] = {}
    for batch in range(5):  # one segment per transaction
        conn.execute("BEGIN IMMEDIATE")
        for i in range(200):
            rowid = batch * 200 + i + 1
            words[rowid] = _word(rng)
            text = f"harbour crane {words[rowid]} inspection " + "word " * rng.randint(5, 60)
            conn.execute(
                "INSERT INTO memory_index_chunks(rowid, id, path, source, start_line, end_line, hash, "
                "model, text, updated_at) VALUES (?, ?, 'p', 'memory', 1, 1, 'h', 'fts-only', ?, 0)",
                (rowid, f"c{rowid}", text),
            )
            conn.execute("INSERT INTO memory_index_chunks_fts(rowid, text) VALUES (?, ?)", (rowid, text))
        conn.execute("COMMIT")
    assert fts_shape(conn).segments > 1
    doomed = rng.sample(sorted(words), 300)
    conn.execute("BEGIN IMMEDIATE")
    purged = rowids_of_chunks(conn, [f"c{r}" for r in doomed])
    purge_chunks(conn, [f"c{r}" for r in doomed], rebuild_segments=True)
    rewrite_chunk_pages(conn, purged)  # as forget's purge does: no copy left in a page's gap
    conn.execute("COMMIT")
    assert fts_shape(conn) == FtsShape(rows=len(words) - len(doomed), segments=1)
    options = conn.execute(
        "SELECT v FROM memory_index_chunks_fts_config WHERE k = 'secure-delete'"
    ).fetchall()
    assert options == [(1,)]
    conn.execute("INSERT INTO memory_index_chunks_fts(memory_index_chunks_fts) VALUES ('integrity-check')")
    survivors = [r for r in words if r not in set(doomed)]
    found = {
        r[0]
        for r in conn.execute(
            "SELECT rowid FROM memory_index_chunks_fts WHERE memory_index_chunks_fts MATCH 'inspection'"
        )
    }
    assert found == set(survivors)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # as forget does after its purge
    conn.close()
    # Terms are stored prefix-compressed: their last 8 letters are always written out.
    data = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert [r for r in doomed if words[r][-8:].encode() in data] == []
    assert all(words[r][-8:].encode() in data for r in survivors)


def test_the_segments_are_rebuilt_when_that_costs_less_than_removing_each_term() -> None:
    # Removing a row's terms rewrites a page per term and segment; a rebuild rewrites the index.
    assert rebuild_is_cheaper(FtsShape(rows=7_690, segments=7), purged=314)
    assert not rebuild_is_cheaper(FtsShape(rows=7_690, segments=7), purged=5)
    assert not rebuild_is_cheaper(FtsShape(rows=0, segments=0), purged=0)
    assert rebuild_is_cheaper(FtsShape(rows=100, segments=1), purged=100)
