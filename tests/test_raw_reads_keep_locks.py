"""Reading a SQLite file's raw bytes (the verifier's physical check, its scan of the state
directory and of scratch databases) never drops this process's SQLite locks: a descriptor of
ours closed on the file would (POSIX locks are per process), and another process could then
checkpoint and truncate the WAL under a reader of ours — the fault campaign saw the daemon die of
SIGBUS so. Real SQLite files, a real second process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from memoryd.retention.needles import VerifySubject, compile_needles
from memoryd.retention.raw_bytes import raw_hits
from memoryd.store.engine import sqlite3
from memoryd.store.raw_files import is_sqlite_file, read_outside

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINT = (
    "import sys; from memoryd.store.engine import sqlite3; "
    "c = sqlite3.connect(sys.argv[1], timeout=0); "
    "print(c.execute('PRAGMA wal_checkpoint(TRUNCATE)').fetchone()[0])"
)


def _checkpoint_elsewhere(db: Path) -> int:
    """1 when another process's TRUNCATE checkpoint is blocked by our reader (our locks hold)."""
    done = subprocess.run(
        [sys.executable, "-c", CHECKPOINT, str(db)], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return int(done.stdout)


def _reader_on(db: Path):
    writer = sqlite3.connect(str(db), isolation_level=None)
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("CREATE TABLE IF NOT EXISTS t (x TEXT)")
    writer.execute("INSERT INTO t VALUES ('the violet mongoose launch is on Friday at noon')")
    reader = sqlite3.connect(str(db), isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM t").fetchone()  # a read transaction: its WAL mark held
    writer.execute("INSERT INTO t VALUES ('a later frame the reader does not see')")
    return writer, reader


@pytest.mark.parametrize("read", ["raw_hits", "shm"])
def test_reading_a_store_raw_keeps_our_readers_locks(tmp_path: Path, read: str) -> None:
    db = tmp_path / "memory.sqlite"
    writer, reader = _reader_on(db)
    try:
        assert _checkpoint_elsewhere(db) == 1  # our reader blocks it
        if read == "raw_hits":
            needles = compile_needles(VerifySubject(contents=("the violet mongoose launch is on Friday",)))
            assert raw_hits(db, needles)  # found the bytes
        else:
            assert read_outside(Path(f"{db}-shm"))
        assert _checkpoint_elsewhere(db) == 1  # still blocked: no lock of ours was dropped
    finally:
        reader.execute("ROLLBACK")
        reader.close()
        writer.close()


def test_which_files_are_read_outside() -> None:
    for name in ("memory.sqlite", "memory.sqlite-wal", "retention.sqlite-shm", "1-feed-w2.sqlite-journal"):
        assert is_sqlite_file(Path(name)), name
    for name in ("MEMORY.md", "forgotten.key", "sqlite-notes.txt", "x.sqlite.tmp-1"):
        assert not is_sqlite_file(Path(name)), name
