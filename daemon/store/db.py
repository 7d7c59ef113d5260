"""The per-agent SQLite store.

One aiosqlite connection per store. Work is shipped to its thread as a whole synchronous
function (`Store.read` / `Store.write`), so a transaction of a thousand statements costs one
thread hop instead of a thousand (about 50 µs each on these machines).

Writes run inside `BEGIN IMMEDIATE` and check the workspace fence first (DESIGN §4): a lease
holder whose lease silently expired carries a stale token and its commit is refused.
"""

from __future__ import annotations

import os
import sqlite3 as _stdlib_sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from daemon.constants import FILE_MODE
from daemon.errors import FencedOut, OperationFailed
from daemon.fileio import make_private_dirs

try:  # SQLite 3.51 with FTS5 contentless_delete, secure-delete and loadable extensions.
    import pysqlite3.dbapi2 as sqlite3  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - other platforms fall back to the stdlib build
    import sqlite3  # type: ignore[no-redef]

T = TypeVar("T")
Connection = Any  # a DB-API connection of whichever sqlite3 module is in use

SQLITE_VERSION: str = sqlite3.sqlite_version
DatabaseError = sqlite3.DatabaseError
IntegrityError = sqlite3.IntegrityError
OperationalError = sqlite3.OperationalError
# The stdlib module's errors are distinct classes; catch both where either can surface.
ANY_SQLITE_ERROR: tuple[type[BaseException], ...] = (sqlite3.Error, _stdlib_sqlite3.Error)


BUSY_TIMEOUT_MS = 30_000
WAL_TRUNCATE_WAIT_MS = 2_000
SQLITE_SOFT_HEAP_LIMIT_BYTES = 32 * 1024 * 1024


def _connect_raw(path: str, *, readonly: bool) -> Connection:
    if readonly:
        conn = sqlite3.connect(
            f"file:{path}?mode=ro", uri=True, check_same_thread=False, isolation_level=None
        )
        conn.execute("PRAGMA query_only = ON")
    else:
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30.0)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    # Deleted content is overwritten with zeros instead of lingering in free pages (erasure).
    conn.execute("PRAGMA secure_delete = ON")
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA cache_size = -65536")
    # Process-wide: however many stores are open (the worker keeps some), SQLite's caches
    # together stay near this; above it, pages are recycled instead of the heap growing.
    conn.execute(f"PRAGMA soft_heap_limit = {SQLITE_SOFT_HEAP_LIMIT_BYTES}")
    return conn


def _load_vector_extension(conn: Connection) -> None:
    try:
        import sqlite_vec  # type: ignore[import-not-found]
    except ImportError:
        return
    try:
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
    except (AttributeError, sqlite3.Error):
        pass  # exact cosine in-process is used instead (index/vectors.py)


def has_vector_extension(conn: Connection) -> bool:
    """Whether sqlite-vec's functions work on `conn`, loading it on the first ask: most
    connections (sweeps, forgets, previews) never need it, and loading costs ~0.25 ms an open."""
    if _vector_functions_work(conn):
        return True
    _load_vector_extension(conn)
    return _vector_functions_work(conn)


def _vector_functions_work(conn: Connection) -> bool:
    try:
        conn.execute("SELECT vec_version()").fetchone()
        return True
    except ANY_SQLITE_ERROR:
        return False


class Store:
    """An open per-agent database. Use `await Store.open(path)`; close with `await store.close()`."""

    def __init__(self, path: Path, db: aiosqlite.Connection, readonly: bool):
        self.path = path
        self._db = db
        self.readonly = readonly

    @classmethod
    async def open(cls, path: Path, *, readonly: bool = False, migrate: bool = True) -> Store:
        """Open (creating and migrating unless readonly) the database at `path`.

        A read-only open never creates a file or a table: a dry run writes nothing.
        """
        from daemon.store.migrations import migrate_connection

        if readonly and not path.exists():
            raise FileNotFoundError(path)
        if not readonly:
            make_private_dirs(path.parent)
            if not path.exists():
                fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_NOFOLLOW, FILE_MODE)
                os.close(fd)

        def connect() -> Connection:
            conn = _connect_raw(str(path), readonly=readonly)
            if migrate and not readonly:
                # On the connection's own thread as it opens: no second hop to the thread, and
                # an up-to-date schema costs one PRAGMA read (migrate_connection skips the rest).
                try:
                    migrate_connection(conn)
                except BaseException:
                    conn.close()
                    raise
            return conn

        db = aiosqlite.Connection(connect, 64)
        try:
            await db
        except ANY_SQLITE_ERROR as exc:
            raise OperationFailed(f"{path}: cannot open database: {exc}") from exc
        return cls(path, db, readonly)

    async def close(self) -> None:
        await self._db.close()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(conn, *args)` on the store's thread, outside any transaction."""
        # aiosqlite's own queue runs callables on its connection thread; using it keeps one
        # thread per connection, which SQLite connections require.
        return await self._db._execute(fn, self._db._conn, *args)  # type: ignore[no-any-return]

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(conn, *args)` inside one read transaction (a consistent snapshot under WAL)."""
        return await self.run(_in_read_txn, fn, *args)

    async def write(self, fn: Callable[..., T], *args: Any, fence: FenceToken | None) -> T:
        """Run `fn(conn, *args)` inside BEGIN IMMEDIATE … COMMIT, after checking the fence.

        `fence` is the lease's token; None is only for writes that no lock protects (tests of
        the store itself, and the store's own housekeeping).
        """
        if self.readonly:
            raise OperationFailed(f"{self.path}: store is open read-only")
        return await self.run(_in_write_txn, fn, fence, *args)


class FenceToken:
    """A workspace lease's fencing token, as carried into store writes."""

    __slots__ = ("workspace_key", "token")

    def __init__(self, workspace_key: str, token: int):
        self.workspace_key = workspace_key
        self.token = token

    def __repr__(self) -> str:
        return f"FenceToken({self.workspace_key[:12]}…, {self.token})"


def check_and_store_fence(conn: Connection, fence: FenceToken) -> None:
    row = conn.execute("SELECT token FROM fence WHERE workspace_key = ?", (fence.workspace_key,)).fetchone()
    if row is not None and row[0] > fence.token:
        raise FencedOut(
            f"write refused: fence token {fence.token} is older than {row[0]} "
            "(the workspace lease expired and another writer took it)"
        )
    conn.execute(
        "INSERT INTO fence(workspace_key, token) VALUES (?, ?) "
        "ON CONFLICT(workspace_key) DO UPDATE SET token = excluded.token",
        (fence.workspace_key, fence.token),
    )


def _in_read_txn(conn: Connection, fn: Callable[..., T], *args: Any) -> T:
    conn.execute("BEGIN")
    try:
        return fn(conn, *args)
    finally:
        conn.execute("ROLLBACK")


def _in_write_txn(conn: Connection, fn: Callable[..., T], fence: FenceToken | None, *args: Any) -> T:
    conn.execute("BEGIN IMMEDIATE")
    try:
        if fence is not None:
            check_and_store_fence(conn, fence)
        result = fn(conn, *args)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return result


def table_exists(conn: Connection, name: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE name = ? AND type IN ('table', 'view')", (name,)
    ).fetchone()
    return row is not None


def truncate_wal(conn: Connection) -> bool:
    """Copy the WAL into the database and cut it to zero bytes, so frames written before a purge
    (rows it has since deleted) do not outlive it in the -wal file while connections stay open.
    Waits at most WAL_TRUNCATE_WAIT_MS for readers; False if one still held an older snapshot
    (the frames then go at the next checkpoint or when the last connection closes)."""
    conn.execute(f"PRAGMA busy_timeout = {WAL_TRUNCATE_WAIT_MS}")
    try:
        busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
    finally:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return busy == 0
