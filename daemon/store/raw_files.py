"""The bytes of a SQLite file that this process may have open through SQLite (I/O).

POSIX advisory locks belong to a process and a file: closing *any* descriptor of a database,
its WAL or its shared-memory index drops every lock the process holds on that file, those of
its own SQLite connections included (sqlite.org/howtocorrupt.html §2.2). Another process may
then take the file as unused: checkpoint, truncate the WAL and the index its connections have
mapped (the fault campaign saw the daemon die of SIGBUS after an erasure's verifier had read
the store's files), or write under a reader. So such bytes are read by a child process: its
descriptor, its locks, its close. Every raw read of a SQLite file (a store, its -wal, -shm or
-journal, a scratch database of the parallel scan) goes through here.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from memoryd.errors import OperationFailed

COMPANION_SUFFIXES = ("-wal", "-shm", "-journal")
READ_TIMEOUT_S = 600.0


def is_sqlite_file(path: Path) -> bool:
    """A file SQLite may hold open here: a `.sqlite` database or one of its companions."""
    name = path.name
    for suffix in COMPANION_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return name.endswith(".sqlite")


def read_outside(path: Path) -> bytes | None:
    """The file's bytes, read by a child process; None when it is absent, a symlink or not a
    regular file (nothing is followed)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    try:
        done = subprocess.run(
            ["cat", "--", str(path)], capture_output=True, check=False, timeout=READ_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise OperationFailed(f"{path}: cannot read: {exc}") from None
    if done.returncode != 0:
        if not path.exists():
            return None  # removed meanwhile (a checkpoint deletes a WAL)
        problem = done.stderr.decode("utf-8", "replace").strip() or f"exit {done.returncode}"
        raise OperationFailed(f"{path}: cannot read: {problem}")
    return done.stdout
