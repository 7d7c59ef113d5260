"""Index runs on real SQLite and real Redis: rows per file, pre-publish checks, --force."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from redis.asyncio import Redis

from memoryd.agent_runtime import AgentRuntime, agent_runtime
from memoryd.index.purge import purge_chunks
from memoryd.index.sync import prepare_index, publish_index, run_index_sync
from memoryd.store.index_state import current_revision
from memoryd.store.tombstones import record_tombstones
from tests.builders import Msg, SessionStoreBuilder, conversation
from tests.conftest import index_settings

AGENT = "main"

MEMORY = """# Long-Term Memory

<!-- memoryd-promotion:memory:k1 -->
- The lighthouse rota changes every Tuesday. <!-- importance: 6 -->
- Nora prefers green tea in the morning.
"""


def _write(ws: Path, rel: str, text: str) -> Path:
    path = ws / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@asynccontextmanager
async def _runtime(settings, redis: Redis) -> AsyncIterator[AgentRuntime]:
    async with agent_runtime(settings, AGENT, redis=redis) as rt:
        yield rt


def _counts(conn, where: str = "1=1", args: tuple = ()) -> dict[str, int]:
    ids = f"SELECT id FROM memory_index_chunks WHERE {where}"
    rowids = f"SELECT rowid FROM memory_index_chunks WHERE {where}"
    return {
        "chunks": conn.execute(f"SELECT count(*) FROM memory_index_chunks WHERE {where}", args).fetchone()[0],
        "fts": conn.execute(
            f"SELECT count(*) FROM memory_index_chunks_fts_docsize WHERE id IN ({rowids})", args
        ).fetchone()[0],
        "vectors": conn.execute(
            f"SELECT count(*) FROM memory_index_vectors WHERE chunk_rowid IN ({rowids})", args
        ).fetchone()[0],
        "provenance": conn.execute(
            f"SELECT count(*) FROM memory_index_chunk_provenance WHERE chunk_id IN ({ids})", args
        ).fetchone()[0],
    }


def _fts_hits(conn, word: str) -> int:
    return conn.execute(
        "SELECT count(*) FROM memory_index_chunks_fts WHERE memory_index_chunks_fts MATCH ?", (f'"{word}"',)
    ).fetchone()[0]


def _session_text_rows(conn, sid: str) -> dict[str, int]:
    return {
        "chunks": conn.execute(
            "SELECT count(*) FROM memory_index_chunks WHERE session_id = ?", (sid,)
        ).fetchone()[0],
        "sources": conn.execute(
            "SELECT count(*) FROM memory_index_sources WHERE session_id = ?", (sid,)
        ).fetchone()[0],
        "fts": _fts_hits(conn, sid),
    }


async def test_memory_files_are_published_with_every_row_kind(redis, tmp_path, sessions_root, unique) -> None:
    settings = index_settings(tmp_path, sessions_root, unique, embedding={"provider": "hashing", "dims": 64})
    _write(tmp_path / "ws", "MEMORY.md", MEMORY)
    _write(tmp_path / "ws", "memory/2026-11-20.md", "Harbour crane inspection is due in March.\n")
    async with _runtime(settings, redis) as rt:
        report = await run_index_sync(rt)
        assert report.ok and report.files.indexed == 2 and report.chunks_written == 3
        assert report.embeddings_computed == 3
        store = rt.require_store()
        counts = await store.read(_counts)
        assert counts == {"chunks": 3, "fts": 3, "vectors": 3, "provenance": 3}
        assert (
            await store.read(lambda c: c.execute("SELECT count(*) FROM memory_embedding_cache").fetchone()[0])
            == 3
        )
        assert await store.read(
            lambda c: c.execute("SELECT importance FROM memory_index_chunk_recall_metadata").fetchall()
        ) == [(6,)]
        assert await store.read(
            lambda c: sorted(c.execute("SELECT path, source, model FROM memory_index_sources").fetchall())
        ) == [("MEMORY.md", "memory", "hashing-v1-d64"), ("memory/2026-11-20.md", "memory", "hashing-v1-d64")]
        assert report.revision_after > report.revision_before


async def test_a_chunks_text_is_stored_once_and_its_marker_lines_are_not_searched(
    redis, tmp_path, sessions_root, unique
) -> None:
    """The full-text table reads the searched text from the chunks (agent migration 8): the
    text's bytes are in the database file once, not once more in the index's own content."""
    settings = index_settings(tmp_path, sessions_root, unique)
    _write(tmp_path / "ws", "MEMORY.md", MEMORY + "- The quayside ledger is kept in blue ink.\n")
    async with _runtime(settings, redis) as rt:
        store = rt.require_store()
        assert (await run_index_sync(rt)).ok
        assert await store.read(_fts_hits, "lighthouse") == 1
        assert await store.read(_fts_hits, "promotion") == 0  # the marker line is not memory
        searched = await store.read(
            lambda c: c.execute(
                "SELECT search_text FROM memory_index_chunks WHERE text LIKE '%lighthouse%'"
            ).fetchone()
        )
        assert "lighthouse" in searched[0] and "memoryd-promotion" not in searched[0]
    db = settings.state_dir / "agents" / AGENT / "memory.sqlite"
    data = b"".join(p.read_bytes() for p in db.parent.glob("memory.sqlite*"))  # closed: checkpointed
    assert data.count(b"quayside ledger") == 1


async def test_unchanged_files_are_not_rewritten_and_changed_ones_replace_their_rows(
    redis, tmp_path, sessions_root, unique
) -> None:
    settings = index_settings(tmp_path, sessions_root, unique)
    path = _write(tmp_path / "ws", "MEMORY.md", MEMORY)
    async with _runtime(settings, redis) as rt:
        await run_index_sync(rt)
        again = await run_index_sync(rt)
        assert (again.files.indexed, again.files.unchanged, again.chunks_written) == (0, 1, 0)
        path.write_text(MEMORY.replace("green tea", "black coffee"))
        changed = await run_index_sync(rt)
        # The changed entry's chunk is replaced; the unchanged entry's chunk keeps its rows.
        assert changed.files.indexed == 1 and (changed.chunks_removed, changed.chunks_written) == (1, 1)
        store = rt.require_store()
        assert await store.read(_fts_hits, "green") == 0
        assert await store.read(_fts_hits, "coffee") == 1
        path.unlink()
        gone = await run_index_sync(rt)
        assert [n.path for n in gone.removed] == ["MEMORY.md"]
        assert await store.read(_counts) == {"chunks": 0, "fts": 0, "vectors": 0, "provenance": 0}


async def test_session_forgotten_after_preparation_publishes_nothing_and_says_why(
    redis, tmp_path, sessions_root, unique
) -> None:
    builder = SessionStoreBuilder(sessions_root, AGENT)
    builder.add("agent:main:one", "sess-keep", conversation("orchard", "sess-keep"))
    builder.add("agent:main:two", "sess-gone", conversation("lighthouse", "sess-gone"))
    settings = index_settings(
        tmp_path,
        sessions_root,
        unique,
        sources=["memory", "sessions"],
        embedding={"provider": "hashing", "dims": 64},
    )
    _write(tmp_path / "ws", "MEMORY.md", MEMORY)
    async with _runtime(settings, redis) as rt:
        store = rt.require_store()
        prepared = await prepare_index(rt)
        assert {f.session_id for f in prepared.files} == {None, "sess-keep", "sess-gone"}
        gone_hashes = [c.chunk.hash for f in prepared.files if f.session_id == "sess-gone" for c in f.chunks]
        assert gone_hashes

        # A forget runs between preparation (and embedding) and publication.
        async with rt.lock().hold() as lease:
            await store.write(
                record_tombstones, AGENT, ["sess-gone"], int(time.time() * 1000), fence=lease.fence
            )

        report = await publish_index(rt, prepared)
        assert not report.ok
        notes = {n.session_id: n for n in report.discarded}
        assert set(notes) == {"sess-gone", "sess-keep"} and notes["sess-gone"].source == "sessions"
        note = notes["sess-gone"]
        assert "forgotten while indexing" in note.reason and "nothing of it was published" in note.reason
        # Read under the exclusion set the purge changed: not published now, read again next run.
        assert "a purge committed while this transcript was indexed" in notes["sess-keep"].reason
        assert await store.read(_session_text_rows, "sess-gone") == {"chunks": 0, "sources": 0, "fts": 0}
        marks = ",".join("?" * len(gone_hashes))
        assert (
            await store.read(
                lambda c: c.execute(
                    f"SELECT count(*) FROM memory_embedding_cache WHERE hash IN ({marks})", gone_hashes
                ).fetchone()[0]
            )
            == 0
        )
        assert report.files.indexed == 1  # the memory file

        # a later run publishes the other transcript and does not bring the forgotten one back
        later = await run_index_sync(rt)
        assert (await store.read(_session_text_rows, "sess-keep"))["chunks"] > 0
        assert any(n.session_id == "sess-gone" and n.reason == "forgotten" for n in later.skipped)
        assert await store.read(_session_text_rows, "sess-gone") == {"chunks": 0, "sources": 0, "fts": 0}


async def test_memory_file_changed_while_indexing_is_not_published_and_is_retried(
    redis, tmp_path, sessions_root, unique
) -> None:
    settings = index_settings(tmp_path, sessions_root, unique)
    path = _write(tmp_path / "ws", "MEMORY.md", MEMORY)
    async with _runtime(settings, redis) as rt:
        prepared = await prepare_index(rt)
        path.write_text(MEMORY.replace("green tea", "black coffee"))  # e.g. a forget scrub
        report = await publish_index(rt, prepared)
        assert [n.reason for n in report.discarded] == [
            "memory source changed while indexing; retried on the next run"
        ]
        store = rt.require_store()
        assert await store.read(_fts_hits, "green") == 0
        retry = await run_index_sync(rt)
        assert retry.ok and retry.files.indexed == 1
        assert await store.read(_fts_hits, "coffee") == 1


async def test_rebuild_prepared_before_a_purge_is_discarded_by_the_revision_fence(
    redis, tmp_path, sessions_root, unique
) -> None:
    settings = index_settings(tmp_path, sessions_root, unique)
    _write(tmp_path / "ws", "MEMORY.md", MEMORY)
    async with _runtime(settings, redis) as rt:
        store = rt.require_store()
        await run_index_sync(rt)
        before = await store.read(
            lambda c: c.execute("SELECT id FROM memory_index_chunks ORDER BY id").fetchall()
        )
        prepared = await prepare_index(rt, force=True)
        async with rt.lock().hold() as lease:  # a purge of an unrelated session moves the fence
            await store.write(record_tombstones, AGENT, ["other"], 1, fence=lease.fence)
        report = await publish_index(rt, prepared)
        assert not report.ok and report.files.indexed == 0
        assert all("rebuild discarded" in n.reason for n in report.discarded)
        assert (
            await store.read(lambda c: c.execute("SELECT id FROM memory_index_chunks ORDER BY id").fetchall())
            == before
        )
        assert (
            await store.read(
                lambda c: c.execute("SELECT value FROM memory_index_meta WHERE key = 'dirty'").fetchone()
            )
            is not None
        )
        assert (await run_index_sync(rt, force=True)).ok


async def test_force_removes_rows_of_forgotten_and_internal_sessions_without_reindexing(
    redis, tmp_path, sessions_root, unique
) -> None:
    builder = SessionStoreBuilder(sessions_root, AGENT)
    builder.add("agent:main:a", "sess-live", conversation("orchard", "sess-live"))
    builder.add("agent:main:b", "sess-forgot", conversation("lighthouse", "sess-forgot"))
    builder.add("agent:main:c", "sess-cron", conversation("harbour", "sess-cron"))
    settings = index_settings(tmp_path, sessions_root, unique, sources=["memory", "sessions"])
    async with _runtime(settings, redis) as rt:
        store = rt.require_store()
        first = await run_index_sync(rt)
        assert first.files.indexed == 3
        # Stale rows: a forgotten record whose purge never ran, and a session now known to be cron.
        async with rt.lock().hold() as lease:
            await store.write(record_tombstones, AGENT, ["sess-forgot"], 1, fence=lease.fence)
        builder.entries["agent:main:c"]["sessionKind"] = "cron"
        builder.save()
        assert (await store.read(_session_text_rows, "sess-forgot"))["chunks"] > 0

        report = await run_index_sync(rt, force=True)
        removed = {n.session_id: n.reason for n in report.removed}
        assert removed == {"sess-forgot": "forgotten", "sess-cron": "cron"}
        assert report.files.indexed == 1  # only sess-live was reindexed
        for sid in ("sess-forgot", "sess-cron"):
            assert await store.read(_session_text_rows, sid) == {"chunks": 0, "sources": 0, "fts": 0}
        assert (await store.read(_session_text_rows, "sess-live"))["chunks"] > 0


async def test_internal_and_system_only_transcripts_are_never_indexed(
    redis, tmp_path, sessions_root, unique
) -> None:
    builder = SessionStoreBuilder(sessions_root, AGENT)
    builder.add("agent:main:heartbeat", "sess-hb", conversation("pulse", "sess-hb"), kind="heartbeat")
    builder.add("agent:main:dreaming-narrative-light", "sess-narr", conversation("dream", "sess-narr"))
    builder.add(
        "agent:main:sys",
        "sess-sys",
        [Msg("user", "scaffold prompt for checks", owner=False, extra={"provenance": "internal_system"})],
    )
    settings = index_settings(tmp_path, sessions_root, unique, sources=["memory", "sessions"])
    async with _runtime(settings, redis) as rt:
        report = await run_index_sync(rt)
        assert {n.session_id: n.reason for n in report.skipped} == {
            "sess-hb": "heartbeat",
            "sess-narr": "dreaming-narrative",
            "sess-sys": "system-only transcript",
        }
        assert await rt.require_store().read(_counts) == {
            "chunks": 0,
            "fts": 0,
            "vectors": 0,
            "provenance": 0,
        }


async def test_cached_embeddings_are_reused_on_a_rebuild(redis, tmp_path, sessions_root, unique) -> None:
    settings = index_settings(tmp_path, sessions_root, unique, embedding={"provider": "hashing", "dims": 64})
    _write(tmp_path / "ws", "MEMORY.md", MEMORY)
    async with _runtime(settings, redis) as rt:
        await run_index_sync(rt)
        rebuild = await run_index_sync(rt, force=True)
        assert (rebuild.embeddings_computed, rebuild.embeddings_cached) == (0, 2)
        assert await rt.require_store().read(_counts) == {
            "chunks": 2,
            "fts": 2,
            "vectors": 2,
            "provenance": 2,
        }


def _chunk_rows(conn) -> list[tuple]:
    return conn.execute(
        "SELECT c.rowid, c.id, p.origin_class, p.observed_at FROM memory_index_chunks c "
        "JOIN memory_index_chunk_provenance p ON p.chunk_id = c.id ORDER BY c.rowid"
    ).fetchall()


async def test_a_rebuild_keeps_the_rows_of_unchanged_chunks_and_refreshes_their_provenance(
    redis, tmp_path, sessions_root, unique
) -> None:
    """`--force` over unchanged files deletes and inserts no chunk (each FTS delete rewrites the
    pages of its terms), yet what it recomputes still lands: a wrong provenance row is fixed."""
    builder = SessionStoreBuilder(sessions_root, AGENT)
    builder.add("agent:main:a", "sess-a", conversation("orchard", "sess-a", n=8))
    settings = index_settings(
        tmp_path,
        sessions_root,
        unique,
        sources=["memory", "sessions"],
        embedding={"provider": "hashing", "dims": 64},
    )
    _write(tmp_path / "ws", "MEMORY.md", MEMORY)
    async with _runtime(settings, redis) as rt:
        store = rt.require_store()
        await run_index_sync(rt)
        before = await store.read(_chunk_rows)
        vectors = await store.read(
            lambda c: c.execute("SELECT * FROM memory_index_vectors ORDER BY 1").fetchall()
        )
        rowid, cid, origin, _ = before[0]
        async with rt.lock().hold() as lease:
            await store.write(
                lambda c: c.execute(
                    "UPDATE memory_index_chunk_provenance SET origin_class = 'system' WHERE chunk_id = ?",
                    (cid,),
                ),
                fence=lease.fence,
            )
            await store.write(
                lambda c: c.execute(
                    "UPDATE memory_index_vectors SET embedding = zeroblob(256) WHERE chunk_rowid = ?",
                    (rowid,),
                ),
                fence=lease.fence,
            )
        rebuild = await run_index_sync(rt, force=True)
        assert rebuild.ok and rebuild.files.indexed == 2
        assert (rebuild.chunks_written, rebuild.chunks_removed) == (0, 0)
        assert await store.read(_chunk_rows) == before  # same rowids, provenance restored
        assert (
            await store.read(lambda c: c.execute("SELECT * FROM memory_index_vectors ORDER BY 1").fetchall())
            == vectors
        )
        assert await store.read(_counts) == {
            "chunks": len(before),
            "fts": len(before),
            "vectors": len(before),
            "provenance": len(before),
        }


async def test_a_grown_transcript_rewrites_only_its_changed_chunks(
    redis, tmp_path, sessions_root, unique
) -> None:
    builder = SessionStoreBuilder(sessions_root, AGENT)
    messages = conversation("orchard", "sess-a", n=40)
    builder.add("agent:main:a", "sess-a", messages)
    settings = index_settings(
        tmp_path, sessions_root, unique, sources=["memory", "sessions"], chunk_tokens=64
    )
    async with _runtime(settings, redis) as rt:
        store = rt.require_store()
        await run_index_sync(rt)
        before = await store.read(_chunk_rows)
        assert len(before) > 4
        builder.add("agent:main:a", "sess-a", messages + conversation("lighthouse", "sess-a", n=2))
        grown = await run_index_sync(rt)
        assert grown.files.indexed == 1 and grown.chunks_removed <= 1
        after = await store.read(_chunk_rows)
        assert after[: len(before) - 1] == before[:-1]  # the earlier chunks kept their rows
        assert await store.read(_fts_hits, "lighthouse") >= 1


async def test_purge_chunks_removes_every_derived_row_in_one_call(
    redis, tmp_path, sessions_root, unique
) -> None:
    settings = index_settings(tmp_path, sessions_root, unique, embedding={"provider": "hashing", "dims": 64})
    _write(tmp_path / "ws", "MEMORY.md", MEMORY)
    async with _runtime(settings, redis) as rt:
        store = rt.require_store()
        await run_index_sync(rt)
        ids = await store.read(
            lambda c: [
                r[0] for r in c.execute("SELECT id FROM memory_index_chunks WHERE text LIKE '%lighthouse%'")
            ]
        )
        revision = await store.read(current_revision)
        async with rt.lock().hold() as lease:
            counts = await store.write(purge_chunks, ids + ["no-such-chunk"], fence=lease.fence)
        assert (
            counts.chunks,
            counts.fts_rows,
            counts.vector_rows,
            counts.provenance_rows,
            counts.recall_rows,
        ) == (1, 1, 1, 1, 1)
        assert await store.read(_fts_hits, "lighthouse") == 0
        assert await store.read(_counts) == {"chunks": 1, "fts": 1, "vectors": 1, "provenance": 1}
        assert await store.read(current_revision) > revision
