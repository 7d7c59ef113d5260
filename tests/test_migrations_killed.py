"""A store killed while it migrates: a real child process migrates a store of every historical
version, with rows in its lineage and ingest tables, and is killed (SIGKILL) at a random point.
Reopened, the store is at its old version with its old rows, or at the new version with the rows
a migration that was not killed gives, never between (daemon/store/migrate.py runs the missing
steps in one transaction)."""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memoryd.store import migrate
from memoryd.store.db import sqlite3
from memoryd.store.migrate import AGENT, latest_version, steps

LEGACY = Path(__file__).parent / "legacy_schema"
KILLS_PER_VERSION = 3
# Random values a step makes (a store id, the checkpoint token): never equal between two stores.
RANDOM_ROWS = {"store_meta": "key <> 'store_id'", "ingest_checkpoint_token": "0"}

# The child: migrate the store at argv[1], slowed by a progress handler so that a kill at a
# random moment lands inside a statement as often as between two; it prints its migrating time.
CHILD = """
import sys, time
from memoryd.store.db import sqlite3
from memoryd.store.migrate import migrate_connection
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA journal_mode = WAL")
conn.set_progress_handler(lambda: time.sleep(0.0002) or 0, 500)
print("go", flush=True)
t0 = time.perf_counter()
migrate_connection(conn)
print(time.perf_counter() - t0, flush=True)
"""


def _connect(path: Path):
    return sqlite3.connect(str(path), isolation_level=None)


def _historical(path: Path, version: str) -> None:
    """A store as a memoryd of `version` left it: `union1`, `union2` (the shared schema before
    step 3) or a step number of this chain; with rows in the tables every version has."""
    conn = _connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    if version.startswith("union"):
        n = int(version[-1])
        script = "".join((LEGACY / f"union_v{v}.sql").read_text() for v in range(1, n + 1))
        conn.executescript(f"BEGIN; {script}; PRAGMA user_version = {n}; COMMIT;")
    else:
        for step in steps(AGENT)[: int(version)]:
            migrate._run_step(conn, step)
    _seed(conn)
    conn.close()


def _seed(conn) -> None:
    """Sessions with staged lines, origins, seen hashes and checkpoints, a forgotten record; the
    lineage in the tables of the store's version (keyed lines from version 12 on)."""
    rng = random.Random(35)
    keyed = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'ingest_lines'").fetchone() is not None
    conn.execute("BEGIN")
    for s in range(40):
        sid = f"{rng.getrandbits(64):016x}-session-{s}"
        scope = f"main:{sid}"
        conn.execute(
            "INSERT INTO ingest_checkpoints (state_key, agent_id, session_id, session_key, session_path, "
            "mtime_ms, size, content_hash, line_count, last_content_line, updated_at) "
            "VALUES (?, 'main', ?, ?, ?, 1, 2, 'h', 30, 30, 4)",
            (f"main:sessions/{sid}.jsonl", sid, f"agent:main:direct:{s}", f"sessions/{sid}.jsonl"),
        )
        for line in range(1, 31):
            claim = f"{rng.getrandbits(48):012x}" if line % 7 else "0000000000aa"  # a shared claim
            key = f"memory:claim:{claim}"
            origin_class = "owner" if line % 2 else "agent"
            seen = f"{rng.getrandbits(160):040x}"
            if keyed:
                if line == 1:
                    conn.execute(
                        "INSERT INTO ingest_sessions (session_no, session_id, session_key) VALUES (?, ?, ?)",
                        (s + 1, sid, f"agent:main:direct:{s}"),
                    )
                conn.execute(
                    "INSERT INTO ingest_lines (session_no, line_no, claim, origin_class, observed_at, seen) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (s + 1, line, int(claim, 16), origin_class, 1000 + line, seen),
                )
            else:
                conn.execute(
                    "INSERT INTO memory_entry_origins (entry_key, agent_id, session_id, session_key, "
                    "origin_class, observed_at) VALUES (?, 'main', ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (key, sid, f"agent:main:direct:{s}", origin_class, 1000 + line),
                )
                conn.execute(
                    "INSERT INTO ingest_seen_hashes (scope, hash, seq) VALUES (?, ?, ?)", (scope, seen, line)
                )
            conn.execute(
                "INSERT INTO short_term_entries (entry_key, path, start_line, end_line, snippet, "
                "first_recalled_at, last_recalled_at, origin_class, observed_at, claim_hash) "
                "VALUES (?, 'memory/.dreams/session-corpus/2026-01-01.txt', ?, ?, ?, 5, 5, 'owner', 6, ?) "
                "ON CONFLICT DO NOTHING",
                (key, s * 30 + line, s * 30 + line, f"message {line} of session {s}", claim),
            )
    conn.execute(
        "INSERT INTO memory_session_tombstones (session_id, agent_id, reason, created_at) "
        "VALUES ('gone', 'main', 'forget', 0)"
    )
    conn.execute("COMMIT")


def _rows(path: Path) -> dict[str, list[tuple]]:
    """Every ordinary table's rows, sorted (the random ones left out)."""
    conn = _connect(path)
    try:
        names = [
            n
            for (n,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'"
            )
        ]
        out = {}
        for name in names:
            where = RANDOM_ROWS.get(name, "1")
            out[name] = sorted(map(repr, conn.execute(f'SELECT * FROM "{name}" WHERE {where}')))  # noqa: S608
        return out
    finally:
        conn.close()


def _state(path: Path) -> tuple[int, str, dict[str, list[tuple]]]:
    conn = _connect(path)
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        check = conn.execute("PRAGMA integrity_check").fetchone()[0]
        schema = sorted(map(repr, conn.execute("SELECT type, name, sql FROM sqlite_master")))
    finally:
        conn.close()
    return version, check, {"schema": schema, **_rows(path)}  # type: ignore[dict-item]


def _child(path: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "go"
    return proc


def _copy(src: Path, dst: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{src}{suffix}").exists():
            shutil.copyfile(f"{src}{suffix}", f"{dst}{suffix}")


VERSIONS = ["union1", "union2", *(str(v) for v in range(1, latest_version(AGENT)))]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_store_killed_while_it_migrates_reopens_at_the_old_or_the_new_version(
    tmp_path: Path, version: str
) -> None:
    original = tmp_path / "original.sqlite"
    _historical(original, version)
    old_version, _, old = _state(original)
    # The migration run to its end, once: the new state, and how long it takes.
    whole = tmp_path / "whole.sqlite"
    _copy(original, whole)
    proc = _child(whole)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    seconds = float(out.strip())
    new_version, check, new = _state(whole)
    assert (new_version, check) == (latest_version(AGENT), "ok")
    rng = random.Random(f"{version}-kills")
    outcomes = set()
    for kill in range(KILLS_PER_VERSION):
        killed = tmp_path / f"killed-{kill}.sqlite"
        _copy(original, killed)
        proc = _child(killed)
        time.sleep(rng.uniform(0, seconds * 1.1))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        found_version, check, found = _state(killed)
        assert check == "ok"
        assert found_version in (old_version, new_version), (version, kill, found_version)
        assert found == (old if found_version == old_version else new), (version, kill)
        outcomes.add(found_version)
    assert outcomes  # each kill reopened at one of the two
