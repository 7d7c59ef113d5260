"""The SQLite engine: which sqlite3 module is in use, the connection type every repository
function takes, its errors, and how a connection is set up.

pysqlite3-binary (SQLite 3.51: FTS5 secure-delete, loadable extensions)
when installed, else the standard library's module (DESIGN §3).
"""

from __future__ import annotations

import sqlite3 as _stdlib_sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

try:  # SQLite 3.51 with FTS5 secure-delete and loadable extensions.
    import pysqlite3.dbapi2 as _engine  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # pragma: no cover - other platforms fall back to the stdlib build
    _engine = _stdlib_sqlite3
sqlite3 = _engine  # the module every repository uses (exported by this name)

SQLITE_VERSION: str = sqlite3.sqlite_version
DatabaseError = sqlite3.DatabaseError
IntegrityError = sqlite3.IntegrityError
OperationalError = sqlite3.OperationalError
# The stdlib module's errors are distinct classes; catch both where either can surface.
ANY_SQLITE_ERROR: tuple[type[BaseException], ...] = (sqlite3.Error, _stdlib_sqlite3.Error)

# Primary result codes that say the file or the disk under a store is the problem (full, I/O
# error, damaged, cannot be opened or written), not the statement: a fault of the environment.
_ENVIRONMENT_CODES = frozenset({13, 10, 11, 26, 14, 8})  # FULL, IOERR, CORRUPT, NOTADB, CANTOPEN, READONLY


def storage_problem(exc: BaseException) -> str | None:
    """The one-line cause when `exc` is SQLite saying its file or disk is unusable, else None."""
    if not isinstance(exc, ANY_SQLITE_ERROR):
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None or code & 0xFF not in _ENVIRONMENT_CODES:
        return None
    return f"database: {exc}; free space or fix the file, then run again"


BUSY_TIMEOUT_MS = 30_000
WAL_TRUNCATE_WAIT_MS = 2_000
SQLITE_SOFT_HEAP_LIMIT_BYTES = 32 * 1024 * 1024

Params = Sequence[Any] | Mapping[str, Any]


class Cursor(Protocol):
    """What a statement's result offers (the DB-API cursor of either sqlite3 module)."""

    @property
    def rowcount(self) -> int: ...

    @property
    def lastrowid(self) -> int | None: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """A connection of either sqlite3 module, as the repositories use it (the two modules'
    classes are unrelated types with the same API)."""

    @property
    def total_changes(self) -> int: ...

    @property
    def in_transaction(self) -> bool: ...

    def execute(self, sql: str, parameters: Params = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Params], /) -> Cursor: ...

    def executescript(self, sql_script: str, /) -> Cursor: ...

    def create_function(
        self, name: str, narg: int, func: Callable[..., Any] | None, /, *, deterministic: bool = False
    ) -> None: ...

    def close(self) -> None: ...


def connect(path: str, *, readonly: bool) -> Connection:
    """A connection to the database file at `path`, with memoryd's PRAGMAs. Read-only: the file
    must exist and nothing can be written through the connection."""
    conn: Connection
    if readonly:
        conn = sqlite3.connect(
            f"file:{path}?mode=ro", uri=True, check_same_thread=False, isolation_level=None
        )
    else:
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30.0)
    try:
        _configure(conn, readonly=readonly)
    except BaseException:
        # Closed now, never left to the collector: a connection alive after its WAL and -shm
        # were removed (another process's last close) would hand its stale shared-memory index
        # to this process's next connections to the file, which then read garbage ("disk I/O
        # error", "malformed") and commit into a deleted WAL. A PRAGMA fails so on a full disk.
        conn.close()
        raise
    return conn


def _configure(conn: Connection, *, readonly: bool) -> None:
    if readonly:
        conn.execute("PRAGMA query_only = ON")
    else:
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


def _load_vector_extension(conn: Any) -> None:
    try:
        import sqlite_vec  # type: ignore[import-not-found, unused-ignore]
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


def inserted_rowid(cur: Cursor) -> int:
    """The rowid the INSERT behind `cur` assigned (set whenever a row was inserted)."""
    rowid = cur.lastrowid
    if rowid is None:
        raise OperationalError("the INSERT assigned no rowid")
    return rowid


def database_file(conn: Connection) -> str:
    """The file of `conn`'s main database ("" for an in-memory one)."""
    row = conn.execute("PRAGMA database_list").fetchone()
    return str(row[2] or "") if row else ""


def user_version(conn: Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


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
    return bool(busy == 0)
