"""Store transactions are type-checked: `Store.read`/`write`/`run` take a function of the
connection and exactly its further arguments, so mypy refuses a call whose arguments or result
do not fit (before, they accepted any callable and any arguments)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROBE = """
from memoryd.store.db import Store
from memoryd.store.engine import Connection


def rows(conn: Connection, limit: int, table: str) -> list[int]:
    return [limit]


async def calls(store: Store) -> None:
    fine: list[int] = await store.read(rows, 1, "t")
    wrong_result: list[str] = await store.read(rows, 1, "t")  # refused
    await store.read(rows, "1", "t")  # refused
    await store.write(rows, 1, fence=None)  # refused
"""


def test_mypy_refuses_a_store_call_whose_arguments_or_result_do_not_fit(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--follow-imports=silent", str(probe)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    refused = [n for n, line in enumerate(PROBE.splitlines(), 1) if line.endswith("# refused")]
    assert [int(line.split(":")[1]) for line in errors] == refused, done.stdout
