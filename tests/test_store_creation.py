"""A store appears with its whole schema or not at all: creation is atomic with the migration,
so a reader racing the first writer (a dream job and the first retention sweep) never finds an
empty database, and a read-only open takes no half-created file for a store."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from memoryd.store.db import Store, sqlite3
from memoryd.store.migrate import AGENT, RETENTION, Schema, latest_version

ROOT = Path(__file__).resolve().parents[1]
CREATOR = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from memoryd.store.db import Store

    async def main() -> None:
        for name in sys.argv[3:]:
            store = await Store.open(Path(sys.argv[1]) / name, schema=sys.argv[2])
            await store.close()

    asyncio.run(main())
    """
)


def _schema_of(path: Path) -> tuple[int, int]:
    """(user_version, tables) as a plain reader opening the file right now sees them."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
        return version, tables
    finally:
        conn.close()


@pytest.mark.parametrize("schema", [AGENT, RETENTION])
def test_a_reader_in_another_process_never_sees_a_store_without_its_schema(
    tmp_path: Path, schema: Schema
) -> None:
    names = [f"{schema}-{i}.sqlite" for i in range(30)]
    creator = subprocess.Popen([sys.executable, "-c", CREATOR, str(tmp_path), schema, *names], cwd=ROOT)
    seen: list[tuple[str, int, int]] = []
    try:
        deadline = time.monotonic() + 60
        for name in names:
            path = tmp_path / name
            while not path.exists():  # look as soon as the name appears: the race of the issue
                assert creator.poll() in (None, 0) and time.monotonic() < deadline, "creator stopped"
            seen.append((name, *_schema_of(path)))
    finally:
        assert creator.wait(timeout=60) == 0
    empty = [(name, version, tables) for name, version, tables in seen if version == 0 or tables == 0]
    assert not empty, f"a reader saw stores without their schema: {empty[:3]}"
    assert all(version == latest_version(schema) for _, version, _ in seen)


async def test_a_half_created_file_is_no_store_for_a_read_only_open(tmp_path: Path) -> None:
    """An empty file (what an opener of an older memoryd left when it was killed between
    creating the file and migrating it) is not taken for a store with no tables."""
    path = tmp_path / "memory.sqlite"
    path.touch(mode=0o600)
    assert await Store.open_existing(path) is None
    assert await Store.open_existing(tmp_path / "absent.sqlite") is None
    store = await Store.open(path)  # a writer migrates it in place
    await store.close()
    store = await Store.open_existing(path)
    assert store is not None
    await store.close()


async def test_creation_leaves_no_temporary_file_and_keeps_the_file_private(tmp_path: Path) -> None:
    for schema, name in ((AGENT, "memory.sqlite"), (RETENTION, "retention.sqlite")):
        store = await Store.open(tmp_path / name, schema=schema)
        await store.close()
        assert os.stat(tmp_path / name).st_mode & 0o777 == 0o600
        assert _schema_of(tmp_path / name)[0] == latest_version(schema)
    assert not [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name]


async def test_two_openers_creating_one_store_at_once_both_get_it(tmp_path: Path) -> None:
    import anyio

    path = tmp_path / "memory.sqlite"
    stores: list[Store] = []

    async def open_one() -> None:
        stores.append(await Store.open(path))

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(open_one)
    for store in stores:
        assert await store.read(lambda c: c.execute("PRAGMA user_version").fetchone()[0]) == latest_version(
            AGENT
        )
        await store.close()
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith("memory.sqlite-")] == [
        "memory.sqlite"
    ]
