"""Frozen schema migrations on real SQLite files: every historical version of both kinds of store
migrates to what a fresh store has; the steps are immutable files; a read-only open checks the
version once."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from memoryd.store import migrate
from memoryd.store.db import OperationalError, Store, sqlite3
from memoryd.store.migrate import (
    AGENT,
    RETENTION,
    Schema,
    Step,
    StoreOutdated,
    StoreTooNew,
    latest_version,
    load_steps,
    migrate_connection,
    steps,
)
from tests.conftest import REDIS_URL

ROOT = Path(__file__).resolve().parents[1]
LEGACY = Path(__file__).parent / "legacy_schema"
SCHEMAS: tuple[Schema, ...] = (AGENT, RETENTION)
# A released step is never edited: its bytes are pinned here. A new step adds its line
# (docs/architecture.md, "How to add a migration").
RELEASED = {
    "agent/0001_initial.sql": "339cb9b01a",
    "agent/0002_checkpoint_token.sql": "94f494810c",
    "agent/0003_drop_retention_tables.sql": "0d0f49b0b2",
    "agent/0004_session_participants.sql": "f41891ce5a",
    "agent/0005_erased_senders.sql": "f81e9be52d",
    "agent/0006_fts_own_content.sql": "0d6c3bdd21",
    "agent/0007_corpus_appends.sql": "a71459750d",
    "agent/0008_fts_external_content.sql": "380eab4c4e",
    "agent/0009_session_key_lookups.sql": "f032614774",
    "agent/0010_suppressed_claims.sql": "2177316ac3",
    "agent/0011_store_id.sql": "4ec09740a1",
    "agent/0012_keyed_lineage.sql": "4b7b941f98",
    "agent/0013_staged_entries_by_claim.sql": "ad4e0fc910",
    "retention/0001_initial.sql": "9f013dc772",
    "retention/0002_checkpoint_token.sql": "8cc4e70922",
    "retention/0003_drop_agent_tables.sql": "a6ea471b71",
    "retention/0004_receipt_not_found.sql": "8beb4fba8c",
    "retention/0005_erasure_journal.sql": "42e12ce9c7",
}
AGENT_ONLY = {
    "ingest_checkpoints",
    "memory_entry_origins",
    "memory_index_chunks",
    "memory_session_tombstones",
}
RETENTION_ONLY = {"retention_scopes", "retention_objects", "retention_holds", "erasure_receipts"}


def _connect(path: Path):
    return sqlite3.connect(str(path), isolation_level=None)


def _schema(conn) -> set[tuple[str, str, str, str]]:
    return set(conn.execute("SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master"))


def _tables(conn) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _fresh(tmp_path: Path, schema: Schema):
    conn = _connect(tmp_path / f"fresh-{schema}.sqlite")
    assert migrate_connection(conn, schema) == latest_version(schema)
    return conn


def _legacy_union(path: Path, version: int):
    """A store as every memoryd before version 3 left it, agent store or retention.sqlite alike."""
    conn = _connect(path)
    script = (LEGACY / "union_v1.sql").read_text()
    if version >= 2:
        script += (LEGACY / "union_v2.sql").read_text()
    conn.executescript(f"BEGIN; {script}; PRAGMA user_version = {version}; COMMIT;")
    return conn


def _at_step(path: Path, schema: Schema, version: int):
    """A store that ran this memoryd's steps up to `version`."""
    conn = _connect(path)
    for step in steps(schema)[:version]:
        migrate._run_step(conn, step)
    return conn


def test_released_steps_are_never_edited() -> None:
    folder = resources.files("memoryd.store").joinpath("migrations")
    found = {
        f"{schema}/{step.file_name}": hashlib.sha256(
            folder.joinpath(schema, step.file_name).read_bytes()
        ).hexdigest()[:10]
        for schema in SCHEMAS
        for step in steps(schema)
    }
    assert found == RELEASED


def test_a_fresh_store_of_each_kind_gets_its_own_tables_and_the_latest_version(tmp_path: Path) -> None:
    agent, retention = _fresh(tmp_path, AGENT), _fresh(tmp_path, RETENTION)
    for conn, schema in ((agent, AGENT), (retention, RETENTION)):
        assert not conn.in_transaction
        assert conn.execute("PRAGMA user_version").fetchone()[0] == latest_version(schema)
        assert migrate_connection(conn, schema) == latest_version(schema)  # up to date: nothing to do
    assert _tables(agent) >= AGENT_ONLY and not RETENTION_ONLY & _tables(agent)
    assert _tables(retention) >= RETENTION_ONLY and not AGENT_ONLY & _tables(retention)
    assert "fence" in _tables(agent) & _tables(retention)  # both kinds take fenced writes
    # the FTS table's secure-delete option, set by an INSERT in step 1, was applied
    assert agent.execute(
        "SELECT v FROM memory_index_chunks_fts_config WHERE k = 'secure-delete'"
    ).fetchone() == (1,)


@pytest.mark.parametrize("schema", SCHEMAS)
async def test_a_store_built_in_one_script_has_what_the_steps_one_by_one_build(
    tmp_path: Path, schema: Schema
) -> None:
    """Store.open builds a new store with every step in one script (migrate.build_new)."""
    store = await Store.open(tmp_path / "new.sqlite", schema=schema)
    await store.close()
    built = _connect(tmp_path / "new.sqlite")
    assert built.execute("PRAGMA user_version").fetchone()[0] == latest_version(schema)
    assert built.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert _schema(built) == _schema(_fresh(tmp_path, schema))
    with pytest.raises(ValueError, match="new, empty database"):
        migrate.build_new(built, schema)


@pytest.mark.parametrize("schema", SCHEMAS)
@pytest.mark.parametrize("legacy_version", [1, 2])
def test_a_store_of_the_old_union_schema_migrates_to_what_a_fresh_one_has(
    tmp_path: Path, schema: Schema, legacy_version: int
) -> None:
    conn = _legacy_union(tmp_path / "old.sqlite", legacy_version)
    if schema == AGENT:
        conn.execute(
            "INSERT INTO ingest_checkpoints (state_key, agent_id, session_id, session_path, mtime_ms, size, "
            "content_hash, line_count, last_content_line, updated_at) "
            "VALUES ('main:sessions/main/a', 'main', 'a', 'sessions/main/a', 1, 2, 'h', 3, 3, 4)"
        )
    conn.execute("INSERT INTO fence(workspace_key, token) VALUES ('ws', 7)")
    assert migrate_connection(conn, schema) == latest_version(schema)
    assert _schema(conn) == _schema(_fresh(tmp_path, schema))
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert conn.execute("SELECT token FROM fence").fetchall() == [(7,)]  # rows kept
    if schema == AGENT:
        assert conn.execute("SELECT count(*) FROM ingest_checkpoints").fetchone() == (1,)
        # the checkpoint token (version 2) works on a store that had only version 1
        before = conn.execute("SELECT token FROM ingest_checkpoint_token").fetchone()[0]
        conn.execute("UPDATE ingest_checkpoints SET size = 5")
        assert conn.execute("SELECT token FROM ingest_checkpoint_token").fetchone()[0] != before


@pytest.mark.parametrize("schema", SCHEMAS)
def test_a_store_at_every_step_of_this_memoryd_migrates_to_what_a_fresh_one_has(
    tmp_path: Path, schema: Schema
) -> None:
    fresh = _schema(_fresh(tmp_path, schema))
    for version in range(1, latest_version(schema)):
        conn = _at_step(tmp_path / f"{schema}-at-{version}.sqlite", schema, version)
        assert conn.execute("PRAGMA user_version").fetchone()[0] == version
        assert migrate_connection(conn, schema) == latest_version(schema)
        assert _schema(conn) == fresh, version


def test_an_index_of_version_7_keeps_its_searched_text_and_its_terms_leave_with_a_delete(
    tmp_path: Path,
) -> None:
    """Step 8 moves the searched text out of the full-text table's own content: a chunk whose
    searched text differs from its text (marker lines removed) is still found by its searched
    words only, and deleting it removes its terms from the index segments."""
    conn = _at_step(tmp_path / "agent-at-7.sqlite", AGENT, 7)
    conn.execute("PRAGMA secure_delete = ON")
    chunks = {
        1: ("alpha bravo\n<!-- memoryd:marker kilo -->", "alpha bravo"),
        2: ("charlie delta", "charlie delta"),
    }
    for rowid, (text, searched) in chunks.items():
        conn.execute(
            "INSERT INTO memory_index_chunks(rowid, id, path, source, start_line, end_line, hash, "
            "model, text, updated_at) VALUES (?, ?, 'MEMORY.md', 'memory', 1, 2, 'h', 'fts-only', ?, 0)",
            (rowid, f"c{rowid}", text),
        )
        conn.execute("INSERT INTO memory_index_chunks_fts(rowid, text) VALUES (?, ?)", (rowid, searched))
    assert migrate_connection(conn, AGENT) == latest_version(AGENT)

    def found(word: str) -> list[int]:
        sql = "SELECT rowid FROM memory_index_chunks_fts WHERE memory_index_chunks_fts MATCH ? ORDER BY rowid"
        return [r[0] for r in conn.execute(sql, (word,))]

    assert (found("alpha"), found("charlie"), found("kilo"), found("marker")) == ([1], [2], [], [])
    assert conn.execute("SELECT rowid, search_text FROM memory_index_chunks ORDER BY rowid").fetchall() == [
        (1, "alpha bravo"),
        (2, None),
    ]
    assert "memory_index_chunks_fts_content" not in _tables(conn)
    conn.execute("INSERT INTO memory_index_chunks_fts(memory_index_chunks_fts) VALUES ('integrity-check')")
    conn.execute("CREATE VIRTUAL TABLE temp.terms USING fts5vocab(main, memory_index_chunks_fts, instance)")
    conn.execute("DELETE FROM memory_index_chunks_fts WHERE rowid = 1")
    conn.execute("DELETE FROM memory_index_chunks WHERE rowid = 1")
    assert conn.execute("SELECT DISTINCT doc FROM temp.terms").fetchall() == [(2,)]


def test_a_failing_step_leaves_neither_its_objects_nor_its_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = _fresh(tmp_path, AGENT)
    latest = latest_version(AGENT)
    broken = Step(latest + 1, "broken.sql", ("CREATE TABLE step_two (x)", "CREATE TABLE broken ("))
    extended = (*steps(AGENT), broken)
    monkeypatch.setattr(migrate, "steps", lambda schema: extended)
    with pytest.raises(OperationalError):
        migrate_connection(conn, AGENT)
    assert not conn.in_transaction
    assert conn.execute("PRAGMA user_version").fetchone()[0] == latest
    assert "step_two" not in _tables(conn)


def test_a_step_another_opener_ran_meanwhile_is_not_run_twice(tmp_path: Path) -> None:
    """Two processes opening an old store at once both read the old version; under the write
    lock the second sees the step done and skips it."""
    conn = _fresh(tmp_path, AGENT)
    latest = latest_version(AGENT)
    conn.execute("CREATE TABLE done_already (x)")
    migrate._run_step(conn, Step(latest, "again.sql", ("CREATE TABLE done_already (x)",)))
    assert conn.execute("PRAGMA user_version").fetchone()[0] == latest


def test_a_store_newer_than_this_memoryd_is_refused_with_one_line(tmp_path: Path) -> None:
    conn = _fresh(tmp_path, AGENT)
    conn.execute(f"PRAGMA user_version = {latest_version(AGENT) + 1}")
    with pytest.raises(StoreTooNew, match=r"fresh-agent\.sqlite: agent store at schema version \d+, newer"):
        migrate_connection(conn, AGENT)


async def test_a_read_only_open_of_an_outdated_store_says_what_to_run_and_changes_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.sqlite"
    _legacy_union(path, 2).close()
    with pytest.raises(StoreOutdated) as err:
        await Store.open(path, readonly=True)
    message = str(err.value)
    assert str(path) in message and "schema version 2" in message and "`memoryd run`" in message
    assert "\n" not in message
    conn = _connect(path)
    assert conn.execute("PRAGMA user_version").fetchone() == (2,)  # nothing migrated
    assert _tables(conn) >= RETENTION_ONLY
    conn.close()
    store = await Store.open(path)  # for writing: migrated
    await store.close()
    store = await Store.open(path, readonly=True)
    await store.close()


def test_step_files_are_numbered_without_gaps_or_duplicates(tmp_path: Path) -> None:
    (tmp_path / "0001_first.sql").write_text("CREATE TABLE a (x);\n")
    (tmp_path / "0003_third.sql").write_text("CREATE TABLE c (x);\n")
    with pytest.raises(RuntimeError, match="0003_third.sql: steps must be named"):
        load_steps(tmp_path, "test")
    (tmp_path / "0003_third.sql").rename(tmp_path / "0002_second.sql")
    assert [s.version for s in load_steps(tmp_path, "test")] == [1, 2]
    (tmp_path / "0002_again.sql").write_text("CREATE TABLE d (x);\n")
    with pytest.raises(RuntimeError, match="no number used twice"):
        load_steps(tmp_path, "test")


def test_a_step_splits_into_whole_statements() -> None:
    sql = (
        "-- a comment; with a semicolon\nCREATE TABLE t (x); -- trailing\n"
        "CREATE TRIGGER tr AFTER INSERT ON t\nBEGIN UPDATE t SET x = 1; END;\n-- only a comment\n"
    )
    statements = migrate.split_statements(sql)
    assert len(statements) == 2 and statements[1].endswith("END;")
    assert migrate.split_statements("-- nothing for this store\n") == ()


@pytest.mark.parametrize(
    "command",
    [["checkpoints", "--agent", "main"], ["forget", "--agent", "main", "--session", "s", "--dry-run"]],
)
def test_a_command_on_an_outdated_store_prints_one_line_and_no_traceback(
    tmp_path: Path, command: list[str]
) -> None:
    state = tmp_path / "state"
    (state / "agents" / "main").mkdir(parents=True)
    (tmp_path / "sessions").mkdir()
    _legacy_union(state / "agents" / "main" / "memory.sqlite", 2).close()
    config = tmp_path / "memoryd.toml"
    config.write_text(
        f'state_dir = "{state}"\nsessions_root = "{tmp_path / "sessions"}"\nredis_url = "{REDIS_URL}"\n'
    )
    env = {**os.environ, "MEMORYD_CONFIG": str(config)}
    result = subprocess.run(
        [sys.executable, "-m", "memoryd.cli", *command], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("memoryd: error: "), result.stderr
    assert "agent store at schema version 2" in result.stderr


def test_step_4_of_retention_keeps_every_receipt_and_accepts_not_found(tmp_path: Path) -> None:
    conn = _at_step(tmp_path / "r.sqlite", RETENTION, 3)
    conn.execute(
        "INSERT INTO erasure_receipts(receipt_id, day, state, body) VALUES ('r1', 'd', 'complete', '{}')"
    )
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(
            "INSERT INTO erasure_receipts(receipt_id, day, state, body) VALUES ('r2', 'd', 'not_found', '')"
        )
    assert migrate_connection(conn, RETENTION) == latest_version(RETENTION)
    conn.execute(
        "INSERT INTO erasure_receipts(receipt_id, day, state, body) VALUES ('r2', 'd', 'not_found', '')"
    )
    assert conn.execute("SELECT seq, receipt_id, state FROM erasure_receipts ORDER BY seq").fetchall() == [
        (1, "r1", "complete"),
        (2, "r2", "not_found"),
    ]


def test_step_6_of_agent_replaces_the_tombstoning_fts_table_and_empties_the_index(tmp_path: Path) -> None:
    """The contentless_delete table kept a deleted chunk's terms in its segments; the new one
    keeps its content, so a delete takes the terms out. The index is rebuilt by the next run."""
    conn = _at_step(tmp_path / "a.sqlite", AGENT, 5)
    conn.execute(
        "INSERT INTO memory_index_sources(path, source, hash, mtime, size) VALUES ('MEMORY.md', 'memory', 'h', 1, 2)"
    )
    conn.execute(
        "INSERT INTO memory_index_chunks(rowid, id, path, start_line, end_line, hash, model, text, updated_at) "
        "VALUES (1, 'c1', 'MEMORY.md', 1, 1, 'h', 'fts-only', 'the quillowhisk key', 0)"
    )
    conn.execute("INSERT INTO memory_index_chunks_fts(rowid, text) VALUES (1, 'the quillowhisk key')")
    conn.execute("DELETE FROM memory_index_chunks_fts WHERE rowid = 1")  # a tombstone: the term stays
    assert any(
        b"quillowhisk" in bytes(r[0]) for r in conn.execute("SELECT block FROM memory_index_chunks_fts_data")
    )
    revision = conn.execute("SELECT revision FROM memory_index_state").fetchone()[0]

    migrate._run_step(conn, steps(AGENT)[5])  # step 8 replaces this table again
    assert conn.execute("PRAGMA user_version").fetchone() == (6,)
    counts = [
        conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in ("memory_index_sources", "memory_index_chunks")
    ]
    assert counts == [0, 0]
    assert conn.execute("SELECT revision FROM memory_index_state").fetchone()[0] > revision
    assert not any(
        b"quillowhisk" in bytes(r[0]) for r in conn.execute("SELECT block FROM memory_index_chunks_fts_data")
    )
    conn.execute("INSERT INTO memory_index_chunks_fts(rowid, text) VALUES (2, 'a brambleforth mat')")
    conn.execute("DELETE FROM memory_index_chunks_fts WHERE rowid = 2")
    assert not any(
        b"brambleforth" in bytes(r[0]) for r in conn.execute("SELECT block FROM memory_index_chunks_fts_data")
    )


def test_step_12_moves_claim_origins_and_seen_hashes_into_keyed_lines(tmp_path: Path) -> None:
    """Every origin and seen hash reads back the same through the repositories: claim origins
    become lines of numbered sessions (one number per session id and key), seen hashes lines
    numbered by their seq, and a dream diary's origin stays where it was."""
    from memoryd.store.origins import EntryOrigin, origins_for_entries, origins_for_sessions
    from memoryd.store.seen_hashes import load_seen

    conn = _at_step(tmp_path / "a.sqlite", AGENT, 11)
    claim_a, claim_b = "memory:claim:00000000abcd", "memory:claim:fedcba987654"
    origins = [
        EntryOrigin(claim_a, "main", "s1", "agent:main:one", "owner", 10),
        EntryOrigin(claim_b, "main", "s1", "agent:main:one", "agent", 11),
        EntryOrigin(claim_a, "main", "s2", None, "untrusted", 12),
        EntryOrigin(claim_b, "main", "s2", "agent:main:two", "owner", 13),  # s2 under two keys
        EntryOrigin("memory:light:" + "9" * 64, "main", "s1", "agent:main:one", "system", 14),
    ]
    conn.executemany(
        "INSERT INTO memory_entry_origins (entry_key, agent_id, session_id, session_key, origin_class, "
        "observed_at) VALUES (?, ?, ?, ?, ?, ?)",
        [tuple(o.__getattribute__(f) for f in EntryOrigin.__dataclass_fields__) for o in origins],
    )
    seen = {"main:s1": {"h1", "h2"}, "main:s3": {"h3"}}
    conn.executemany(
        "INSERT INTO ingest_seen_hashes (scope, hash, seq) VALUES (?, ?, ?)",
        [(scope, h, i) for scope, hashes in seen.items() for i, h in enumerate(sorted(hashes), 1)],
    )
    assert migrate_connection(conn, AGENT) == latest_version(AGENT)
    keys = sorted({o.entry_key for o in origins})
    by_key = sorted(origins, key=lambda o: (o.entry_key, o.session_id))
    assert origins_for_entries(conn, "main", keys) == by_key
    assert origins_for_sessions(conn, "main", ["s1", "s2", "s3"]) == by_key
    assert load_seen(conn, ["main:s1", "main:s2", "main:s3"]) == seen  # s2 has none
    assert conn.execute("SELECT entry_key FROM memory_entry_origins").fetchall() == [(keys[-1],)]
    sessions = conn.execute("SELECT session_id, session_key FROM ingest_sessions ORDER BY 1, 2").fetchall()
    assert sessions == [("s1", "agent:main:one"), ("s2", None), ("s2", "agent:main:two"), ("s3", None)]
    assert "ingest_seen_hashes" not in _tables(conn)
