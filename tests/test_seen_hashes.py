"""Seen-message hashes (store/seen_hashes.py): what a batch's commit asks before staging."""

from __future__ import annotations

from pathlib import Path

from memoryd.store.db import Store
from memoryd.store.seen_hashes import add_seen, seen_among


async def test_seen_among_finds_the_pairs_already_stored_whatever_scopes_are_asked(tmp_path: Path) -> None:
    store = await Store.open(tmp_path / "memory.sqlite")
    try:
        await store.write(add_seen, {"main:a": ["h1", "h2"], "main:b": ["h3"]}, fence=None)
        asked = [("main:a", "h1"), ("main:a", "h9"), ("main:c", "h1"), ("main:b", "h3"), ("main:c", "h3")]
        assert await store.read(seen_among, asked) == {("main:a", "h1"), ("main:b", "h3")}
        assert await store.read(seen_among, [("main:new", "h1"), ("main:new", "h2")]) == set()
        assert await store.read(seen_among, []) == set()
    finally:
        await store.close()
