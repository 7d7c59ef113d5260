"""Scratch files of the parallel scan: each worker process writes the rows of the sessions it
read into a private SQLite file under `state_dir/agents/<agent>/ingest-scratch/`; the sweep's
process attaches the files and moves the rows into the store with `INSERT … SELECT`, then
removes them.

A scratch file holds memory text (snippets, corpus lines) until it is merged, so it is an
artifact forget and erase must reach: `remove_scratch` runs before every purge and when the
daemon starts, a sweep removes the files of sweeps whose process is gone, and the erasure
verifier reads the directory's bytes.

The rows of one candidate (`cand`), in the order the serial sweep would stage them:
`task` and `seq` (the worker's task and the order inside it: session order, then transcript
order), `idx` (1-based among the session's candidates), `day_idx` (0-based among the task's
candidates of the same day: the corpus line is the day's first new line plus it, less the
first `day_idx` of the batch's part), `seen_seq` (the seen-hash sequence of a session staged
in one batch: its rank in day order). Functions here run on the caller's connection; the
write functions inside the caller's transaction.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from memoryd.constants import DIR_MODE, FILE_MODE
from memoryd.store.engine import Connection, sqlite3
from memoryd.store.lines import Line, seen_of_sessions, sessions_with_lines
from memoryd.store.short_term import key_index

SCRATCH_SUFFIX = ".sqlite"
# <sweep process pid>-<sweep token>-w<worker pid>.sqlite (and SQLite's -journal beside it).
_NAME = re.compile(r"^(\d+)-[0-9a-f]+-w\d+\.sqlite")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS cand (
  seq INTEGER PRIMARY KEY,
  task INTEGER NOT NULL,
  session_id TEXT NOT NULL,
  session_key TEXT,
  idx INTEGER NOT NULL,
  seen_seq INTEGER NOT NULL,
  day TEXT NOT NULL,
  day_idx INTEGER NOT NULL,
  path TEXT NOT NULL,
  entry_key TEXT NOT NULL,
  snippet TEXT NOT NULL,
  origin_class TEXT NOT NULL,
  session_kind TEXT NOT NULL,
  observed_at INTEGER NOT NULL,
  claim_hash TEXT NOT NULL,
  query_hash TEXT NOT NULL,
  seen_hash TEXT NOT NULL,
  line TEXT NOT NULL
);
"""  # no index: a part is a seq (rowid) range, and `task` only confirms the rows are that task's

COLUMNS = (
    "task, session_id, session_key, idx, seen_seq, day, day_idx, path, entry_key, snippet, origin_class, "
    "session_kind, observed_at, claim_hash, query_hash, seen_hash, line"
)


class CandRow(NamedTuple):
    """One candidate as a worker writes it (COLUMNS order)."""

    task: int
    session_id: str
    session_key: str | None
    idx: int
    seen_seq: int
    day: str
    day_idx: int
    path: str
    entry_key: str
    snippet: str  # as staged (STAGED_SNIPPET_MAX_CHARS at most)
    origin_class: str
    session_kind: str
    observed_at: int
    claim_hash: str
    query_hash: str
    seen_hash: str
    line: str  # the rendered corpus line


class Part(NamedTuple):
    """The rows of one task a batch commits: `seq` in [lo, hi] of `task` in the file `path`."""

    path: str
    task: int
    lo: int
    hi: int


# --- the worker's side ---------------------------------------------------------------------------


def write_rows(path: Path, rows: Sequence[CandRow]) -> tuple[int, int]:
    """Append `rows` to the scratch file at `path` (created 0600 if missing) in one transaction;
    the (first, last) seq they got. The file is private and thrown away whole on any failure:
    no journal on disk, no fsync."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
        os.close(fd)
    except FileExistsError:
        pass
    conn = sqlite3.connect(str(path), isolation_level=None, timeout=60.0)
    try:
        conn.execute("PRAGMA journal_mode = MEMORY")
        conn.execute("PRAGMA synchronous = OFF")
        conn.executescript(_SCHEMA)
        conn.execute("BEGIN IMMEDIATE")
        top = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM cand").fetchone()[0]
        conn.executemany(f"INSERT INTO cand ({COLUMNS}) VALUES ({','.join('?' * 17)})", rows)
        conn.execute("COMMIT")
    finally:
        conn.close()
    return top + 1, top + len(rows)


# --- the sweep's side ----------------------------------------------------------------------------


def attach(conn: Connection, paths: Sequence[str]) -> list[str]:
    """Attach each scratch file as s0, s1, …, outside any transaction; their schema names."""
    names = []
    for i, path in enumerate(paths):
        name = f"s{i}"
        conn.execute(f"ATTACH DATABASE ? AS {name}", (path,))
        conn.execute(f"PRAGMA {name}.journal_mode = MEMORY")
        names.append(name)
    return names


def detach(conn: Connection, names: Iterable[str]) -> None:
    for name in names:
        try:
            conn.execute(f"DETACH DATABASE {name}")
        except sqlite3.OperationalError:
            pass  # never attached (the attach failed part-way)


_RANGE = "task = ? AND seq BETWEEN ? AND ?"


def part_present(conn: Connection, name: str, part: Part) -> bool:
    """Whether the part's rows are in the file: its first and last rows, with its task's number (a
    task's rows are one transaction of consecutive seqs; a file removed and written again by its
    worker starts its seqs afresh under other tasks)."""
    if conn.execute(f"SELECT 1 FROM {name}.sqlite_schema WHERE name = 'cand'").fetchone() is None:
        return False  # the file went: ATTACH made an empty one in its place
    row = conn.execute(
        f"SELECT COUNT(*) FROM {name}.cand WHERE seq IN (?, ?) AND task = ?", (part.lo, part.hi, part.task)
    ).fetchone()
    return int(row[0]) == (1 if part.lo == part.hi else 2)


def part_days(conn: Connection, name: str, part: Part) -> list[tuple[str, str, int, int]]:
    """(day, corpus path, rows, first day_idx) of each day of the part."""
    return conn.execute(
        f"SELECT day, path, COUNT(*), MIN(day_idx) FROM {name}.cand WHERE {_RANGE} GROUP BY day ORDER BY day",
        part[1:],
    ).fetchall()


def part_session_files(conn: Connection, name: str, part: Part) -> list[tuple[str, str]]:
    return conn.execute(
        f"SELECT DISTINCT session_id, path FROM {name}.cand WHERE {_RANGE}", part[1:]
    ).fetchall()


def part_lines(conn: Connection, name: str, part: Part) -> list[tuple[str, str]]:
    """(day, corpus line) of the part, by day, then in staging order."""
    return conn.execute(
        f"SELECT day, line FROM {name}.cand WHERE {_RANGE} ORDER BY day, seq", part[1:]
    ).fetchall()


def part_rows(conn: Connection, name: str, part: Part) -> list[tuple[Any, ...]]:
    """Every row of the part in seq order (COLUMNS order): the row-by-row path."""
    return conn.execute(f"SELECT {COLUMNS} FROM {name}.cand WHERE {_RANGE} ORDER BY seq", part[1:]).fetchall()


def part_keys(conn: Connection, name: str, part: Part) -> list[str]:
    return [k for (k,) in conn.execute(f"SELECT entry_key FROM {name}.cand WHERE {_RANGE}", part[1:])]


def part_existing_keys(conn: Connection, name: str, part: Part) -> set[str]:
    """The part's entry keys the store already has a staged entry for."""
    rows = conn.execute(
        f"SELECT DISTINCT c.entry_key FROM {name}.cand c JOIN main.short_term_entries e "
        f"ON {key_index('e.entry_key')} = {key_index('c.entry_key')} WHERE c.task = ? AND c.seq BETWEEN ? AND ?",
        part[1:],
    )
    return {k for (k,) in rows}


def part_staged_since(conn: Connection, name: str, part: Part) -> set[tuple[str, str]]:
    """(session id, seen hash) of the part's rows whose hash the store has now: lines another
    sweep staged since the workers read them."""
    sids = [
        sid
        for (sid,) in conn.execute(f"SELECT DISTINCT session_id FROM {name}.cand WHERE {_RANGE}", part[1:])
    ]
    seen = {(sid, digest) for sid, digest in seen_of_sessions(conn, sids)}
    if not seen:
        return set()
    rows = conn.execute(f"SELECT session_id, seen_hash FROM {name}.cand WHERE {_RANGE}", part[1:]).fetchall()
    return {(sid, digest) for sid, digest in rows if (sid, digest) in seen}


def part_suppressed(conn: Connection, name: str, part: Part) -> set[tuple[str, str]]:
    """(session id, seen hash) of the part's rows whose claim is suppressed from their session
    (store/suppressions.py)."""
    rows = conn.execute(
        f"SELECT DISTINCT c.session_id, c.seen_hash FROM {name}.cand c JOIN main.suppressed_claims s "
        "ON s.claim_hash = c.claim_hash AND s.session_id = c.session_id "
        "WHERE c.task = ? AND c.seq BETWEEN ? AND ?",
        part[1:],
    ).fetchall()
    return {(sid, digest) for sid, digest in rows}


def part_rows_of_keys(conn: Connection, name: str, part: Part, keys: Sequence[str]) -> list[tuple[Any, ...]]:
    """Rows whose entry key is among `keys` (COLUMNS order), by day, then seq."""
    return conn.execute(
        f"SELECT {COLUMNS} FROM {name}.cand WHERE {_RANGE} AND entry_key IN (SELECT value FROM json_each(?)) "
        "ORDER BY day, seq",
        (*part[1:], orjson.dumps(list(keys)).decode()),
    ).fetchall()


def part_lines_of_sessions(conn: Connection, name: str, part: Part, session_ids: Sequence[str]) -> list[Line]:
    """The staged lines of these sessions' rows, in staging order (day, then seq)."""
    rows = conn.execute(
        f"SELECT session_id, session_key, claim_hash, origin_class, observed_at, seen_hash FROM {name}.cand "
        f"WHERE {_RANGE} AND session_id IN (SELECT value FROM json_each(?)) ORDER BY day, seq",
        (*part[1:], orjson.dumps(list(session_ids)).decode()),
    ).fetchall()
    return [
        Line(sid, key, int(claim, 16), origin, observed, seen)
        for sid, key, claim, origin, observed, seen in rows
    ]


def part_sessions_with_lines(conn: Connection, name: str, part: Part) -> set[str]:
    """The part's sessions that have staged lines in the store already."""
    sids = [
        sid
        for (sid,) in conn.execute(f"SELECT DISTINCT session_id FROM {name}.cand WHERE {_RANGE}", part[1:])
    ]
    return set(sessions_with_lines(conn, sids))


def merge_lines(conn: Connection, name: str, part: Part, rowwise: Sequence[str]) -> None:
    """The part's staged lines (store/lines.py) of its sessions but `rowwise`: the others are
    each staged whole in this part with no line stored before, so a row's line number is its
    seen_seq (its rank in staging order); their session numbers are made first."""
    conn.create_function("memoryd_claim_number", 1, _claim_number, deterministic=True)
    skip = orjson.dumps(list(rowwise)).decode()
    conn.execute(
        "INSERT INTO main.ingest_sessions (session_id, session_key) "
        f"SELECT DISTINCT c.session_id, c.session_key FROM {name}.cand c "
        "WHERE c.task = ? AND c.seq BETWEEN ? AND ? AND c.session_id NOT IN (SELECT value FROM json_each(?)) "
        "AND NOT EXISTS (SELECT 1 FROM main.ingest_sessions s "
        "WHERE s.session_id = c.session_id AND s.session_key IS c.session_key)",
        (*part[1:], skip),
    )
    conn.execute(
        "INSERT INTO main.ingest_lines (session_no, line_no, claim, origin_class, observed_at, seen) "
        "SELECT (SELECT min(s.session_no) FROM main.ingest_sessions s "
        "WHERE s.session_id = c.session_id AND s.session_key IS c.session_key), "
        "c.seen_seq, memoryd_claim_number(c.claim_hash), c.origin_class, c.observed_at, c.seen_hash "
        f"FROM {name}.cand c WHERE c.task = ? AND c.seq BETWEEN ? AND ? "
        "AND c.session_id NOT IN (SELECT value FROM json_each(?))",
        (*part[1:], skip),
    )


def _claim_number(claim_hash: str) -> int:
    return int(claim_hash, 16)


# A part's corpus line bases by day, keyed: the claims' join looks each row's day up here (a
# `json_each` of them re-read the JSON for every row). Days and numbers only, no memory text.
_BASES = "temp.merge_line_bases"
_BASES_SCHEMA = "CREATE TEMP TABLE IF NOT EXISTS merge_line_bases (day TEXT PRIMARY KEY, base INTEGER NOT NULL) WITHOUT ROWID"


def merge_new_claims(
    conn: Connection,
    name: str,
    part: Part,
    line_bases: dict[str, int],
    skip_keys: Sequence[str],
    day_bucket: str,
    now_ms: int,
    score: float,
) -> None:
    """Staged entries of the part's claims that got one signal and are new to the store (as
    store/short_term.py's insert_new_claims writes them); `line_bases[day]` plus a row's day_idx
    is its corpus line; `skip_keys` are written by the caller (repeated or already staged)."""
    days = orjson.dumps([day_bucket]).decode().replace("'", "''")
    conn.execute(_BASES_SCHEMA)
    conn.execute(f"DELETE FROM {_BASES}")
    conn.executemany(f"INSERT INTO {_BASES} (day, base) VALUES (?, ?)", line_bases.items())
    # CROSS JOIN keeps the part's seq range the outer loop (its rows come in the ORDER BY's seq
    # order); a query hash is hex, so '["' || it || '"]' is its json_array().
    conn.execute(
        "INSERT INTO main.short_term_entries (entry_key, path, start_line, end_line, snippet, daily_count, "
        "total_score, max_score, first_recalled_at, last_recalled_at, query_hashes, recall_days, origin_class, "
        "session_kind, observed_at, claim_hash) "
        f"SELECT c.entry_key, c.path, c.day_idx + b.base, c.day_idx + b.base, c.snippet, 1, {float(score)!r}, "
        f"{float(score)!r}, {int(now_ms)}, {int(now_ms)}, '[\"' || c.query_hash || '\"]', '{days}', "
        f"c.origin_class, c.session_kind, c.observed_at, c.claim_hash FROM {name}.cand c "
        f"CROSS JOIN {_BASES} b ON b.day = c.day "
        f"WHERE c.task = ? AND c.seq BETWEEN ? AND ? AND c.entry_key NOT IN (SELECT value FROM json_each(?)) "
        "ORDER BY c.day, c.seq",
        (*part[1:], orjson.dumps(list(skip_keys)).decode()),
    )


def delete_part(conn: Connection, name: str, part: Part) -> None:
    """Drop a merged part's rows from its scratch file (its pages are reused by later tasks)."""
    conn.execute(f"DELETE FROM {name}.cand WHERE {_RANGE}", part[1:])


# --- files -----------------------------------------------------------------------------------------


def scratch_name(sweep_pid: int, token: str, worker_pid: int) -> str:
    return f"{sweep_pid}-{token}-w{worker_pid}{SCRATCH_SUFFIX}"


def ensure_scratch_dir(path: Path) -> None:
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    os.chmod(path, DIR_MODE)


def remove_scratch(path: Path, *, only_orphans: bool = False) -> int:
    """Remove the scratch files under `path` (every one, or with `only_orphans` those whose sweep
    process is gone); how many. A purge removes every one: a sweep whose file went fails its
    merge and stages nothing of it."""
    try:
        entries = list(os.scandir(path))
    except (FileNotFoundError, NotADirectoryError):
        return 0
    removed = 0
    for entry in entries:
        if only_orphans:
            m = _NAME.match(entry.name)
            if m is not None and _alive(int(m.group(1))):
                continue
        try:
            os.unlink(entry.path)
            removed += 1
        except FileNotFoundError:
            continue
        except IsADirectoryError:
            continue
    return removed


def remove_sweep_scratch(path: Path, sweep_pid: int, token: str) -> None:
    """Remove one sweep's scratch files (after its last merge, and however it ended)."""
    prefix = f"{sweep_pid}-{token}-"
    try:
        entries = list(os.scandir(path))
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        if entry.name.startswith(prefix):
            try:
                os.unlink(entry.path)
            except FileNotFoundError:
                pass


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
