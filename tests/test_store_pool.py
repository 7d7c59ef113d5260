"""The worker's pool of open stores, on real SQLite files: a store handed back is the next
job's, never outlives its file, never blocks compaction elsewhere, and is closed when it
idles too long, when its block fails and when the pool closes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memoryd.runtime.store_pool import StorePool
from memoryd.store.db import Connection, Store


def _note(conn: Connection, text: str) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS pool_probe (text TEXT NOT NULL)")
    conn.execute("INSERT INTO pool_probe (text) VALUES (?)", (text,))


def _notes(conn: Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT text FROM pool_probe ORDER BY rowid")]


async def _write(path: Path, text: str) -> None:
    """A write by a connection of its own (another job, the CLI, an erasure)."""
    async with await Store.open(path) as store:
        await store.write(_note, text, fence=None)


async def _is_closed(store: Store) -> bool:
    try:
        await store.read(lambda conn: conn.execute("SELECT 1").fetchone())
    except ValueError:  # aiosqlite: "Connection closed"
        return True
    return False


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "agents" / "main" / "memory.sqlite"


async def test_a_store_handed_back_is_the_one_the_next_checkout_gets(db):
    pool = StorePool()
    async with pool.checkout(db) as first:
        assert first is not None
        await first.write(_note, "one", fence=None)
    async with pool.checkout(db) as second:
        assert second is first
        assert await second.read(_notes) == ["one"]
    async with pool.checkout(db, readonly=True) as reader:
        assert reader is not None and reader is not first and reader.readonly
    async with pool.checkout(db, readonly=True) as again:
        assert again is reader
    assert (pool.opened, pool.reused, pool.idle) == (2, 2, 2)
    await pool.close()
    assert await _is_closed(first) and await _is_closed(reader)


async def test_a_read_only_checkout_of_a_missing_database_is_none_and_creates_nothing(db):
    pool = StorePool()
    async with pool.checkout(db, readonly=True) as store:
        assert store is None
    assert not db.exists() and pool.opened == 0


async def test_overlapping_checkouts_get_stores_of_their_own(db):
    pool = StorePool(max_idle_per_key=1)
    async with pool.checkout(db) as a, pool.checkout(db) as b, pool.checkout(db) as c:
        assert len({id(a), id(b), id(c)}) == 3
    assert pool.idle == 1  # the extra ones closed as they came back
    assert sum([await _is_closed(s) for s in (a, b, c)]) == 2  # type: ignore[arg-type]
    await pool.close()


async def test_a_replaced_database_file_gets_a_fresh_store(db, tmp_path):
    await _write(db, "old")
    pool = StorePool()
    async with pool.checkout(db, readonly=True) as old:
        assert old is not None and await old.read(_notes) == ["old"]
    replacement = tmp_path / "restored.sqlite"
    await _write(replacement, "restored")
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    os.replace(replacement, db)

    async with pool.checkout(db, readonly=True) as fresh:
        assert fresh is not None and fresh is not old
        assert await fresh.read(_notes) == ["restored"]
    assert await _is_closed(old)
    await pool.close()


async def test_a_removed_database_is_none_read_only_and_a_new_file_read_write(db):
    await _write(db, "gone soon")
    pool = StorePool()
    async with pool.checkout(db, readonly=True) as reader, pool.checkout(db) as writer:
        assert reader is not None and writer is not None
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)

    async with pool.checkout(db, readonly=True) as none:
        assert none is None
    assert await _is_closed(reader)
    async with pool.checkout(db) as fresh:
        assert fresh is not None and fresh is not writer
        await fresh.write(_note, "new", fence=None)
        assert await fresh.read(_notes) == ["new"]
    assert await _is_closed(writer)
    assert db.exists()
    await pool.close()


async def test_a_file_another_connection_rewrote_gets_a_fresh_store_that_sees_it(db):
    await _write(db, "one")
    pool = StorePool()
    async with pool.checkout(db, readonly=True) as before:
        assert before is not None and await before.read(_notes) == ["one"]
    await _write(db, "two")
    async with await Store.open(db) as other:  # VACUUM goes to the WAL; the checkpoint rewrites the file
        await other.run(
            lambda conn: (conn.execute("VACUUM"), conn.execute("PRAGMA wal_checkpoint(TRUNCATE)"))
        )

    async with pool.checkout(db, readonly=True) as after:
        assert after is not None and after is not before
        assert await after.read(_notes) == ["one", "two"]
    await pool.close()


async def test_idle_stores_see_what_other_connections_commit(db):
    await _write(db, "one")
    pool = StorePool()
    async with pool.checkout(db, readonly=True) as reader, pool.checkout(db) as writer:
        assert await reader.read(_notes) == ["one"]  # type: ignore[union-attr]
        assert await writer.read(_notes) == ["one"]  # type: ignore[union-attr]
    await _write(db, "two")  # into the WAL only: the database file itself is untouched
    async with pool.checkout(db, readonly=True) as reader_again, pool.checkout(db) as writer_again:
        assert (reader_again, writer_again) == (reader, writer)
        assert await reader_again.read(_notes) == ["one", "two"]  # type: ignore[union-attr]
        await writer_again.write(_note, "three", fence=None)  # type: ignore[union-attr]
    async with pool.checkout(db, readonly=True) as reader_last:
        assert reader_last is reader and await reader_last.read(_notes) == ["one", "two", "three"]
    await pool.close()


async def test_idle_stores_block_no_checkpoint_or_vacuum_of_another_connection(db):
    """What an erasure's verification does to the file while the worker's stores sit idle."""
    await _write(db, "secret snippet")
    pool = StorePool()
    async with pool.checkout(db, readonly=True) as reader, pool.checkout(db) as writer:
        assert await reader.read(_notes) == ["secret snippet"]  # type: ignore[union-attr]
        await writer.write(_note, "kept", fence=None)  # type: ignore[union-attr]
    assert pool.idle == 2

    def erase_and_compact(conn: Connection) -> tuple[int, int]:
        conn.execute("DELETE FROM pool_probe WHERE text = 'secret snippet'")
        first = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        conn.execute("VACUUM")
        return first, conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]

    async with await Store.open(db) as other:
        assert await other.run(erase_and_compact) == (0, 0)  # no idle store holds a read mark
        assert os.path.getsize(f"{db}-wal") == 0
    assert b"secret snippet" not in db.read_bytes()
    async with pool.checkout(db, readonly=True) as after:
        assert await after.read(_notes) == ["kept"]  # type: ignore[union-attr]
    await pool.close()


async def test_a_block_that_fails_closes_its_store_instead_of_handing_it_back(db):
    pool = StorePool()
    with pytest.raises(RuntimeError):
        async with pool.checkout(db) as store:
            raise RuntimeError("the job failed")
    assert pool.idle == 0 and await _is_closed(store)  # type: ignore[arg-type]


async def test_stores_idle_past_the_limit_are_closed(db):
    pool = StorePool(idle_close_s=3600)
    async with pool.checkout(db) as kept:
        pass
    await pool.close_idle()
    assert pool.idle == 1 and not await _is_closed(kept)  # type: ignore[arg-type]

    pool.idle_close_s = 0
    await pool.close_idle()
    assert pool.idle == 0 and await _is_closed(kept)  # type: ignore[arg-type]


async def test_close_closes_idle_stores_at_once_and_checked_out_ones_as_they_return(db):
    pool = StorePool()
    async with pool.checkout(db) as idle:
        pass
    async with pool.checkout(db) as busy:
        assert busy is idle
        async with pool.checkout(db) as second:
            pass
        await pool.close()
        assert await _is_closed(second)  # type: ignore[arg-type]
        assert await busy.read(lambda conn: 1) == 1  # type: ignore[union-attr]
    assert await _is_closed(busy)  # type: ignore[arg-type]

    async with pool.checkout(db) as own:  # a closed pool opens and closes a store per block
        pass
    assert pool.idle == 0 and await _is_closed(own)  # type: ignore[arg-type]
    pool.reopen()
    async with pool.checkout(db) as pooled:
        pass
    assert pool.idle == 1 and not await _is_closed(pooled)  # type: ignore[arg-type]
    await pool.close()


async def test_the_pool_keeps_at_most_max_idle_stores_open_closing_the_least_recently_used(tmp_path):
    """A daemon serving hundreds of agents holds a bounded number of idle stores (each one a
    thread and a connection), not one per agent it touched in the last minute."""
    pool = StorePool(max_idle=3)
    paths = [tmp_path / "agents" / f"a{i}" / "memory.sqlite" for i in range(5)]
    stores = []
    for path in paths:
        async with pool.checkout(path) as store:
            assert store is not None
            stores.append(store)
    assert pool.idle == 3
    assert [await _is_closed(s) for s in stores] == [True, True, False, False, False]
    async with pool.checkout(paths[2]) as again:  # used again: now the most recent
        assert again is stores[2]
    async with pool.checkout(paths[0]) as fresh:
        assert fresh is not stores[0]
    assert pool.idle == 3 and await _is_closed(stores[3]) and not await _is_closed(stores[2])
    await pool.close()
