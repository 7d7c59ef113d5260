"""The per-agent SQLite store.

One aiosqlite connection per store. Work is shipped to its thread as a whole synchronous
function (`Store.read` / `Store.write`), so a transaction of a thousand statements costs one
thread hop instead of a thousand (about 50 µs each on these machines).

Writes run inside `BEGIN IMMEDIATE` and check the workspace fence first (DESIGN §4): a lease
holder whose lease silently expired carries a stale token and its commit is refused.

The engine underneath (sqlite3 module, Connection type, connection setup) is `engine.py`;
the schema steps are `migrate.py` and the SQL files under `migrations/`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, TypeVarTuple, cast

import aiosqlite
import anyio

from memoryd.constants import FILE_MODE
from memoryd.errors import FencedOut, OperationFailed
from memoryd.fileio import atomic_temp, fsync_dir, make_private_dirs, remove_leftover_temps
from memoryd.store.engine import (
    ANY_SQLITE_ERROR,
    SQLITE_SOFT_HEAP_LIMIT_BYTES,
    SQLITE_VERSION,
    Connection,
    DatabaseError,
    IntegrityError,
    OperationalError,
    connect,
    has_vector_extension,
    sqlite3,
    truncate_wal,
)
from memoryd.store.migrate import AGENT, Schema, StoreMissing, build_new, check_current, migrate_connection

# How long a failed open waits for aiosqlite's thread to end (it ends at once; a bound anyway).
THREAD_JOIN_S = 5.0

# The engine's names most callers need, importable from here with the Store.
__all__ = [
    "ANY_SQLITE_ERROR",
    "SQLITE_SOFT_HEAP_LIMIT_BYTES",
    "SQLITE_VERSION",
    "Connection",
    "DatabaseError",
    "FenceToken",
    "IntegrityError",
    "OperationalError",
    "Store",
    "check_and_store_fence",
    "has_vector_extension",
    "sqlite3",
    "truncate_wal",
]

T = TypeVar("T")
Ts = TypeVarTuple("Ts")  # a store function's arguments after the connection: checked at each call


LOW_SPACE_BYTES = 1024 * 1024  # below this, a store that cannot open is said to be on a full disk


def _why(exc: BaseException) -> str:
    """SQLite's message with its extended code when that says more (an I/O error's kind)."""
    name = getattr(exc, "sqlite_errorname", None)
    code = getattr(exc, "sqlite_errorcode", None)
    if not name or code is None or code == code & 0xFF:  # a primary code: the message says it all
        return str(exc)
    return f"{exc} ({name})"


def _space_note(path: Path) -> str:
    """What to do when the filesystem holding `path` is (nearly) full: SQLite says "disk I/O
    error" when it cannot grow its shared-memory file there, which names neither cause nor cure."""
    try:
        st = os.statvfs(path.parent)
    except OSError:
        return ""
    free = st.f_bavail * st.f_frsize
    if free >= LOW_SPACE_BYTES:
        return ""
    return f"; its filesystem is full ({free:,} bytes free): free space, then run again"


class Store:
    """An open store: a per-agent database, or the host's retention database. Use
    `await Store.open(path)`; close with `await store.close()`."""

    def __init__(self, path: Path, db: aiosqlite.Connection, readonly: bool, schema: Schema = AGENT):
        self.path = path
        self._db = db
        self.readonly = readonly
        self.schema = schema

    @classmethod
    async def open(cls, path: Path, *, readonly: bool = False, schema: Schema = AGENT) -> Store:
        """Open the database at `path`: for writing, created and migrated as needed; read-only,
        it must exist and have run every migration of `schema` (see migrate.check_current).

        A read-only open never creates a file or a table: a dry run writes nothing. A new store
        appears at `path` with its whole schema (see `_create`): a reader never finds it empty.
        """
        if readonly and not path.exists():
            raise StoreMissing(path)
        if not readonly:
            make_private_dirs(path.parent)

        refused: list[Exception] = []

        def open_connection() -> Connection:
            # On the connection's own thread as it opens: no second hop to the thread, and an
            # up-to-date schema costs one PRAGMA read.
            if not readonly and not path.exists():
                _create(path, schema)
            conn = connect(str(path), readonly=readonly)
            try:
                if readonly:
                    check_current(conn, schema)
                else:
                    migrate_connection(conn, schema)
            except Exception as exc:
                # Handed over once the connection is open, so that it and its thread are closed
                # before the error is raised: a connector that fails leaves aiosqlite's thread
                # answering a loop that a one-shot command may have closed by then.
                refused.append(exc)
            except BaseException:
                conn.close()
                raise
            return conn

        # aiosqlite is typed for the stdlib's connection class; pysqlite3's has the same API.
        db = aiosqlite.Connection(cast(Callable[[], Any], open_connection), 64)
        try:
            await db
        except ANY_SQLITE_ERROR as exc:
            # The connect itself failed (a full disk fails its first PRAGMA): aiosqlite stops
            # its thread, but the thread's last answer can reach a loop a one-shot command has
            # closed by then, and prints a traceback after the one-line error. Wait for it.
            await anyio.to_thread.run_sync(db._thread.join, THREAD_JOIN_S)
            raise OperationFailed(f"{path}: cannot open database: {_why(exc)}{_space_note(path)}") from exc
        if refused:
            await db.close()
            try:
                raise refused[0]
            except ANY_SQLITE_ERROR as exc:
                raise OperationFailed(
                    f"{path}: cannot open database: {_why(exc)}{_space_note(path)}"
                ) from exc
        return cls(path, db, readonly, schema)

    @classmethod
    async def open_existing(cls, path: Path, *, schema: Schema = AGENT) -> Store | None:
        """The store at `path` read-only, or None when there is none (see migrate.StoreMissing)."""
        try:
            return await cls.open(path, readonly=True, schema=schema)
        except StoreMissing:
            return None

    async def close(self) -> None:
        await self._db.close()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def run(self, fn: Callable[[Connection, *Ts], T], *args: *Ts) -> T:
        """Run `fn(conn, *args)` on the store's thread, outside any transaction."""
        # aiosqlite's own queue runs callables on its connection thread; using it keeps one
        # thread per connection, which SQLite connections require.
        return await self._db._execute(fn, self._db._conn, *args)  # type: ignore[no-any-return, no-untyped-call]

    async def read(self, fn: Callable[[Connection, *Ts], T], *args: *Ts) -> T:
        """Run `fn(conn, *args)` inside one read transaction (a consistent snapshot under WAL)."""
        return await self.run(_in_read_txn, fn, *args)

    async def write(self, fn: Callable[[Connection, *Ts], T], *args: *Ts, fence: FenceToken | None) -> T:
        """Run `fn(conn, *args)` inside BEGIN IMMEDIATE … COMMIT, after checking the fence.

        `fence` is the lease's token; None is only for writes that no lock protects (tests of
        the store itself, and the store's own housekeeping).
        """
        if self.readonly:
            raise OperationFailed(f"{self.path}: store is open read-only")
        return await self.run(_in_write_txn, fn, fence, *args)


def _create(path: Path, schema: Schema) -> None:
    """Build a new store in a temporary file beside `path`, migrated and closed, then link it into
    place: the name appears with the whole schema or not at all (a reader racing the first writer
    never sees an empty database). A link, not a rename, so a store another opener created first
    is never replaced; the temporary name goes either way."""
    remove_leftover_temps(path.parent, of=path.name)
    with atomic_temp(path) as tmp:
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, FILE_MODE)
        os.close(fd)
        conn: Connection = sqlite3.connect(str(tmp), isolation_level=None)
        try:
            # A private file: no journal to roll back to (a failed build is thrown away) and no
            # sync per commit; one fsync below makes it durable before its name appears.
            conn.execute("PRAGMA journal_mode = OFF")
            conn.execute("PRAGMA synchronous = OFF")
            build_new(conn, schema)
        finally:
            conn.close()
        fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        fsync_dir(path.parent)


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
            f"write refused: fence token {fence.token} is older than {row[0]}, which this store "
            "already saw: another writer took the workspace lock after this one's lease expired "
            "(a pause or a slow step outlived it); nothing was written — rerun the operation"
        )
    conn.execute(
        "INSERT INTO fence(workspace_key, token) VALUES (?, ?) "
        "ON CONFLICT(workspace_key) DO UPDATE SET token = excluded.token",
        (fence.workspace_key, fence.token),
    )


def stored_fence(path: Path, workspace_key: str) -> int | None:
    """The newest fence token the store at `path` has seen for the workspace, or None (no store
    yet, or none seen). Blocking: call it from a thread."""
    if not path.exists():
        return None
    try:
        conn = connect(str(path), readonly=True)
    except ANY_SQLITE_ERROR:
        return None
    try:
        row = conn.execute("SELECT token FROM fence WHERE workspace_key = ?", (workspace_key,)).fetchone()
    except ANY_SQLITE_ERROR:
        return None  # not migrated yet: it has seen no token
    finally:
        conn.close()
    return None if row is None else int(row[0])


def _in_read_txn(conn: Connection, fn: Callable[[Connection, *Ts], T], *args: *Ts) -> T:
    conn.execute("BEGIN")
    try:
        return fn(conn, *args)
    finally:
        _rollback(conn)


def _in_write_txn(
    conn: Connection, fn: Callable[[Connection, *Ts], T], fence: FenceToken | None, *args: *Ts
) -> T:
    conn.execute("BEGIN IMMEDIATE")
    try:
        if fence is not None:
            check_and_store_fence(conn, fence)
        result = fn(conn, *args)
    except BaseException:
        _rollback(conn)
        raise
    conn.execute("COMMIT")
    return result


def _rollback(conn: Connection) -> None:
    """Roll back what is open. SQLite may have ended the transaction already (a full disk or an
    I/O error rolls it back by itself): a ROLLBACK then fails with "no transaction is active"
    and would hide the error that matters."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")
