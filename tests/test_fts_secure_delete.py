"""A purged chunk's terms leave the FTS5 index segments (`*_fts_data`), not only its rows.

A contentless_delete table deletes by tombstone: the terms stay in the segments until an
`optimize`. Every FTS table of an agent store keeps its own content and has secure-delete on,
so a delete removes the entries from the segment pages in place."""

from __future__ import annotations

from pathlib import Path

from daemon.agent_runtime import agent_runtime
from daemon.index.sync import run_index_sync
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
