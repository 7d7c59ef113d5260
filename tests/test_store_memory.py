"""The bounds on a process's memory that every entry point gets: glibc's thresholds fixed at
start-up, SQLite's caches under one process-wide soft limit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from memoryd.store.db import SQLITE_SOFT_HEAP_LIMIT_BYTES, Store

PROBE = "import memoryd.allocator as a; print(a.tune_allocator())"


def _probe(**env: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **env},
        cwd=Path(__file__).resolve().parents[1],
    )
    return result.stdout.strip()


def test_the_allocator_is_tuned_on_glibc_unless_the_operator_chose_a_threshold() -> None:
    libc, _ = os.confstr("CS_GNU_LIBC_VERSION").split(" ", 1) if hasattr(os, "confstr") else ("", "")
    assert _probe() == ("True" if libc == "glibc" else "False")
    assert _probe(MALLOC_MMAP_THRESHOLD_="65536") == "False"
    assert _probe(GLIBC_TUNABLES="glibc.malloc.mmap_threshold=65536") == "False"


async def test_every_store_connection_carries_the_process_wide_sqlite_limit(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "memory.sqlite")
    try:
        limit = await store.run(lambda conn: conn.execute("PRAGMA soft_heap_limit").fetchone()[0])
    finally:
        await store.close()
    assert limit == SQLITE_SOFT_HEAP_LIMIT_BYTES
