"""Schema migrations: numbered, immutable SQL files per kind of store, applied by PRAGMA
user_version.

    daemon/store/migrations/agent/NNNN_<what>.sql      state_dir/agents/<agent>/memory.sqlite
    daemon/store/migrations/retention/NNNN_<what>.sql  state_dir/retention.sqlite

A store's user_version is the last step it ran. An open for writing runs the missing steps in
order in one transaction that ends with the new version, so a store killed while it migrates
reopens at its old version or at the new one, never between; an open read-only checks the version once
(`check_current`) and creates nothing. A released step is never edited: a change is a new file
with the next number (docs/architecture.md, "How to add a migration").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from memoryd.errors import OperationFailed
from memoryd.store.engine import Connection, sqlite3, user_version

Schema = Literal["agent", "retention"]
AGENT: Schema = "agent"
RETENTION: Schema = "retention"

STEP_FILE = re.compile(r"(\d{4})_[a-z0-9_]+\.sql")


class StoreMissing(FileNotFoundError):
    """No store at the path: no file, or a file without a schema (user_version 0, what an opener
    killed between creating a file and migrating it left, before creation was atomic)."""


class StoreTooNew(OperationFailed):
    """The store was migrated by a newer memoryd than this one."""


class StoreOutdated(OperationFailed):
    """A store opened read-only has not run every migration of this memoryd yet."""


@dataclass(frozen=True, slots=True)
class Step:
    version: int
    file_name: str
    statements: tuple[str, ...]


def split_statements(sql: str) -> tuple[str, ...]:
    """The script's statements, whole (a trigger's BEGIN … END is one), comments kept."""
    statements: list[str] = []
    pending = ""
    for line in sql.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    if pending.strip() and not _only_comments(pending):
        raise ValueError(f"unterminated statement: {pending.strip()[:60]!r}")
    return tuple(statements)


def _only_comments(text: str) -> bool:
    return all(not line.strip() or line.strip().startswith("--") for line in text.splitlines())


# The SQL files beside this module (memoryd is installed as files, never zipped). A plain path,
# not importlib.resources: every read-only command checks a store's version, and importing
# importlib.resources (zipfile, bz2, lzma with it) was a noticeable part of a dry run's start-up.
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


@cache
def steps(schema: Schema) -> tuple[Step, ...]:
    """The schema's steps in order, read once per process."""
    return load_steps(MIGRATIONS_DIR / schema, schema)


def load_steps(folder: Path, label: str) -> tuple[Step, ...]:
    """The steps in `folder`: numbered 0001, 0002, … without a gap, and no number twice (a second
    file with a used number is refused, as a registry refuses a second registration)."""
    names = sorted(entry.name for entry in folder.iterdir() if entry.name.endswith(".sql"))
    out: list[Step] = []
    for expected, name in enumerate(names, 1):
        match = STEP_FILE.fullmatch(name)
        if match is None or int(match[1]) != expected:
            raise RuntimeError(
                f"migrations/{label}/{name}: steps must be named 0001_<what>.sql, 0002_<what>.sql, … "
                "with no gap and no number used twice"
            )
        out.append(Step(expected, name, split_statements(folder.joinpath(name).read_text("utf-8"))))
    return tuple(out)


def latest_version(schema: Schema) -> int:
    return len(steps(schema))


def migrate_connection(conn: Connection, schema: Schema = AGENT) -> int:
    """Run the steps `conn`'s store has not run yet, all in one transaction; its version after.
    An up-to-date store costs one PRAGMA read."""
    current = user_version(conn)
    latest = latest_version(schema)
    if current > latest:
        raise StoreTooNew(_too_new(conn, schema, current))
    if current < latest:
        _run_steps(conn, steps(schema))
    return latest


def build_new(conn: Connection, schema: Schema) -> int:
    """Run every step on a new database nobody else can open yet (Store.open builds one in a
    private temporary file): the steps in order as one script, one transaction, C speed."""
    if user_version(conn) != 0:
        raise ValueError("build_new takes a new, empty database")
    latest = latest_version(schema)
    script = "\n".join(statement for step in steps(schema) for statement in step.statements)
    conn.executescript(f"BEGIN;\n{script}\nPRAGMA user_version = {latest};\nCOMMIT;")
    return latest


def _run_steps(conn: Connection, chain: tuple[Step, ...]) -> None:
    """Run the steps of `chain` the store has not run, then set the last one's version, in one
    transaction: a step that fails or a process killed part-way leaves the store as it was."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Another process may have run steps since the version was read (both opened an old
        # store at once): under the write lock the version is the truth.
        todo = [step for step in chain if step.version > user_version(conn)]
        for step in todo:
            for statement in step.statements:
                conn.execute(statement)
        if todo:
            conn.execute(f"PRAGMA user_version = {todo[-1].version}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _run_step(conn: Connection, step: Step) -> None:
    """Run one step (and its version) in one transaction: the tests' way to build a store as an
    older memoryd left it."""
    _run_steps(conn, (step,))


def check_current(conn: Connection, schema: Schema) -> None:
    """For a read-only open: the store has run exactly this memoryd's steps, else one line that
    says what to do (a read-only open never migrates: a dry run writes nothing)."""
    found = user_version(conn)
    latest = latest_version(schema)
    if found == 0:
        raise StoreMissing(_path(conn))
    if found > latest:
        raise StoreTooNew(_too_new(conn, schema, found))
    if found < latest:
        raise StoreOutdated(
            f"{_path(conn)}: {schema} store at schema version {found}, this memoryd needs {latest}; "
            "start `memoryd run` once (it migrates the stores of this host) or run a command that "
            "writes this store, then retry"
        )


def _too_new(conn: Connection, schema: Schema, found: int) -> str:
    return (
        f"{_path(conn)}: {schema} store at schema version {found}, newer than this memoryd's "
        f"{latest_version(schema)}; upgrade memoryd to open it"
    )


def _path(conn: Connection) -> str:
    row = conn.execute("PRAGMA database_list").fetchone()
    return str(Path(row[2])) if row and row[2] else "database"
