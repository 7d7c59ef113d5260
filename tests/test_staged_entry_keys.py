"""The staged entries' key index (agent schema version 13, store/short_term.py): a claim's key is
held as its claim hash's 6 bytes, any other key as its text. Every lookup by key uses the index,
the Python and SQL forms of an index value agree for any key, keys stay unique, and a purged
entry leaves no stored form of its claim in the file."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memoryd.store import short_term
from memoryd.store.engine import connect, sqlite3
from memoryd.store.inspect import integer_byte_forms
from memoryd.store.migrate import AGENT as AGENT_SCHEMA
from memoryd.store.migrate import migrate_connection
from memoryd.store.short_term import ShortTermEntry, index_value, key_index

HEX = "0123456789abcdef"


def _entry(key: str, n: int = 0) -> ShortTermEntry:
    return ShortTermEntry(
        key, "memory/.dreams/session-corpus/2026-01-01.txt", n, n, f"snippet {key} {n}", 0, 1, 0, 1.0, 1.0,
        5, 5, ("q",), ("2026-01-01",), (), "owner", "direct", 6, key[13:] or None, None, None,
    )  # fmt: skip


@pytest.fixture
def conn(tmp_path: Path) -> Any:
    c = connect(str(tmp_path / "memory.sqlite"), readonly=False)
    migrate_connection(c, AGENT_SCHEMA)
    yield c
    c.close()


keys = st.one_of(
    st.text(HEX, min_size=12, max_size=12).map(lambda h: "memory:claim:" + h),  # a claim's key
    st.text(HEX + "ABCDEFxyz:", min_size=0, max_size=14).map(lambda h: "memory:claim:" + h),  # near ones
    st.text(),  # any other key
)


@given(keys)
def test_the_sql_and_python_forms_of_an_index_value_agree_for_any_key(key: str) -> None:
    with sqlite3.connect(":memory:") as c:
        (found,) = c.execute(f"SELECT {key_index('?1')}", (key,)).fetchone()
    assert found == index_value(key)
    assert isinstance(found, bytes) == (
        len(key) == 25 and key.startswith("memory:claim:") and all(ch in HEX for ch in key[13:])
    )


def _lookups(c: Any) -> dict[str, Callable[[], object]]:
    k = ["memory:claim:0123456789ab", "diary:2026-01-01"]
    return {
        "load_entries": lambda: short_term.load_entries(c, k),
        "load_raw_rows": lambda: short_term.load_raw_rows(c, k),
        "load_raw_row": lambda: short_term.load_raw_row(c, k[0]),
        "existing_keys": lambda: short_term.existing_keys(c, k),
        "upsert_signals": lambda: short_term.upsert_signals(c, [_entry(k[0], 9)]),
        "add_grounded_signal": lambda: short_term.add_grounded_signal(
            c, k[0], 1.0, 7, "[]", "[]", "owner", 7
        ),
        "restore_raw_row": lambda: short_term.restore_raw_row(c, short_term.load_raw_row(c, k[0])),
        "read_with_signals": lambda: short_term.read_with_signals(c, k),
        "mark_promoted": lambda: short_term.mark_promoted(c, k, 8),
        "texts_by_key": lambda: short_term.texts_by_key(c, k),
        "purge_entries": lambda: short_term.purge_entries(c, [k[1]]),
    }


def test_every_lookup_by_key_searches_the_key_index_and_never_scans_the_table(conn: Any) -> None:
    rng = random.Random(13)
    entries = [_entry("memory:claim:" + "".join(rng.choices(HEX, k=12)), n) for n in range(300)]
    entries += [_entry("memory:claim:0123456789ab"), _entry("diary:2026-01-01")]
    short_term.upsert_signals(conn, entries)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    for name, call in _lookups(conn).items():
        statements.clear()
        call()
        plans = [
            " | ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", _blank_args(sql)))
            for sql in statements
            if "short_term_entries" in sql
            and not sql.lstrip().upper().startswith(("CREATE", "INSERT INTO TEMP"))
        ]
        assert plans, name
        for plan in plans:
            assert "SCAN short_term_entries" not in plan and "SCAN e" not in plan, (name, plan)


def _blank_args(sql: str) -> list[None]:
    # The traced statement has its values expanded; any left placeholders are bound to NULL.
    return [None] * sql.count("?")


def test_keys_stay_unique_and_an_upsert_merges_into_the_existing_entry(conn: Any) -> None:
    key = "memory:claim:00000000beef"
    short_term.upsert_signals(conn, [_entry(key, 1)])
    short_term.upsert_signals(conn, [_entry(key, 2)])
    assert conn.execute("SELECT count(*) FROM short_term_entries").fetchone() == (1,)
    with pytest.raises(sqlite3.IntegrityError):
        short_term.insert_raw_row(conn, short_term.load_raw_row(conn, key))
    assert short_term.existing_keys(conn, [key, "memory:claim:00000000BEEF"]) == {key}


def test_purged_entries_leave_no_stored_form_of_their_claims_in_the_file(tmp_path: Path) -> None:
    """Entries staged in rounds at random places of the key index (its pages split), then some
    purged: none of their claims' byte forms is left in the database or its WAL, and every
    survivor's is there."""
    rng = random.Random(35)
    path = tmp_path / "memory.sqlite"
    conn = connect(str(path), readonly=False)
    migrate_connection(conn, AGENT_SCHEMA)
    claims: list[int] = []
    for _round in range(8):
        conn.execute("BEGIN IMMEDIATE")
        batch = [rng.randrange(1 << 40, 1 << 48) for _ in range(400)]
        claims += batch
        short_term.upsert_signals(conn, [_entry(f"memory:claim:{c:012x}") for c in batch])
        conn.execute("COMMIT")
    doomed = rng.sample(claims, 200)
    conn.execute("BEGIN IMMEDIATE")
    short_term.purge_entries(conn, [f"memory:claim:{c:012x}" for c in doomed])
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert [c for c in doomed if integer_byte_forms(c)[0] in data] == []
    assert all(integer_byte_forms(c)[0] in data for c in set(claims) - set(doomed))
