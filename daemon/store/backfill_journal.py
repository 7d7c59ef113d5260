"""Session backfill runs and their rollback journal (`backfill_runs`, `backfill_journal`,
reference §5.8). A run is undone by `backfill --rollback` from its journal; `rolled_back_at`
marks it done so a rerun of the rollback converges. The journal's kinds:

    origin        key=entry_key, payload=session_id (an origin row the run inserted)
    staged_new    key=entry_key (a staged entry the run created)
    staged_prior  key=entry_key, payload=the row as JSON before the run changed it
    corpus_line   key=relative corpus path, payload=the rendered line appended
    diary_key     key=diary entry key written into the DREAMS.md backfill block
    diary_created key='DREAMS.md' (the run created the diary file)
    day           key=YYYY-MM-DD processed by the run (the backfill cursor)

Each function runs inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from memoryd.store.batched import execute_in, select_in
from memoryd.store.engine import Connection, inserted_rowid

# Kinds whose key is an entry key (forget removes them with the entry).
ENTRY_KINDS = ("origin", "staged_new", "staged_prior", "diary_key")


def begin_run(conn: Connection, now_ms: int, mode: str, from_day: str | None, to_day: str | None) -> int:
    """A new run; its id."""
    return inserted_rowid(
        conn.execute(
            "INSERT INTO backfill_runs(created_at, mode, from_day, to_day) VALUES (?, ?, ?, ?)",
            (now_ms, mode, from_day, to_day),
        )
    )


def add_journal_rows(conn: Connection, run_id: int, rows: Sequence[tuple[str, str, str]]) -> None:
    """(kind, key, payload) rows of `run_id`."""
    conn.executemany(
        "INSERT INTO backfill_journal(run_id, kind, key, payload) VALUES (?, ?, ?, ?)",
        [(run_id, kind, key, payload) for kind, key, payload in rows],
    )


def processed_days(conn: Connection) -> list[tuple[str, str]]:
    """(key, session id) of the cursor rows of runs not rolled back: the key is `<day>#<line>`,
    the last transcript line of that session the runs read for that day; rows of older runs
    hold the bare day and no session (the whole day, every session)."""
    return conn.execute(
        "SELECT j.key, j.payload FROM backfill_journal j JOIN backfill_runs r ON r.id = j.run_id "
        "WHERE j.kind = 'day' AND r.rolled_back_at IS NULL"
    ).fetchall()


def active_run_ids(conn: Connection) -> tuple[int, ...]:
    """Runs not rolled back, newest first."""
    return tuple(
        r
        for (r,) in conn.execute("SELECT id FROM backfill_runs WHERE rolled_back_at IS NULL ORDER BY id DESC")
    )


def journal_rows(conn: Connection, run_ids: Sequence[int]) -> list[tuple[int, str, str, str]]:
    """(run_id, kind, key, payload) of these runs, newest run first, each run in journal order."""
    return select_in(
        conn,
        "SELECT run_id, kind, key, payload FROM backfill_journal WHERE run_id IN ({marks}) "
        "ORDER BY run_id DESC, rowid",
        run_ids,
    )


def mark_rolled_back(conn: Connection, run_ids: Iterable[int], now_ms: int) -> None:
    conn.executemany(
        "UPDATE backfill_runs SET rolled_back_at = ? WHERE id = ?", [(now_ms, r) for r in run_ids]
    )


# --- forget ---------------------------------------------------------------------------------------


def delete_origin_rows_of_sessions(conn: Connection, session_ids: Sequence[str]) -> int:
    """The rows naming these sessions: their origins, and the days the cursor marked for them."""
    return execute_in(
        conn,
        "DELETE FROM backfill_journal WHERE kind IN ('origin', 'day') AND payload IN ({marks})",
        session_ids,
    )


def delete_rows_of_entries(conn: Connection, entry_keys: Sequence[str]) -> int:
    kinds = ", ".join(f"'{kind}'" for kind in ENTRY_KINDS)
    return execute_in(
        conn, f"DELETE FROM backfill_journal WHERE kind IN ({kinds}) AND key IN ({{marks}})", entry_keys
    )


def corpus_line_rows(conn: Connection) -> list[tuple[int, str]]:
    """(rowid, rendered line) of every journalled corpus line (as many as backfill appended)."""
    return conn.execute("SELECT rowid, payload FROM backfill_journal WHERE kind = 'corpus_line'").fetchall()


def delete_rows(conn: Connection, rowids: Sequence[int]) -> int:
    return execute_in(conn, "DELETE FROM backfill_journal WHERE rowid IN ({marks})", rowids)
