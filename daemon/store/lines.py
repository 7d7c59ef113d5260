"""Ingestion's keyed lineage (`ingest_sessions`, `ingest_lines`, migration 12): each session id
with the session key it was staged under is stored once and numbered; each staged line is one
row keyed (session_no, line_no) that is both the origin of its claim (the claim hash's 48 bits
as an integer) and the session's seen hash. The origin of a claim in a session is the first line
of that session with that claim (store/origins.py reads it so); a seen hash is a line's `seen`.
Integer keys, so a staged message inserts where its session's lines are, not at random places
in trees of text keys.

A line's claim is set to NULL when its origin is removed (a forgotten entry, `forget --entry`)
and its `seen` when it falls past the session's newest MAX_TRACKED_MESSAGES_PER_SESSION; a line
with neither is deleted. Each function runs inside the caller's transaction.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from memoryd.constants import MAX_TRACKED_MESSAGES_PER_SESSION
from memoryd.store.batched import execute_in, select_in
from memoryd.store.engine import Connection

CLAIM_KEY_PREFIX = "memory:claim:"  # a staged claim's entry key: this and its claim hash's 12 hex digits
_CLAIM_KEY = re.compile(r"memory:claim:[0-9a-f]{12}")


def claim_of_key(entry_key: str) -> int | None:
    """The claim number an entry key stands for (None: not a claim key)."""
    if _CLAIM_KEY.fullmatch(entry_key) is None:
        return None
    return int(entry_key[len(CLAIM_KEY_PREFIX) :], 16)


def key_of_claim(claim: int) -> str:
    return f"{CLAIM_KEY_PREFIX}{claim:012x}"


def split_keys(entry_keys: Iterable[str]) -> tuple[dict[int, str], list[str]]:
    """(claim number -> key) of the claim keys, and the other keys."""
    claims: dict[int, str] = {}
    others: list[str] = []
    for key in entry_keys:
        claim = claim_of_key(key)
        if claim is None:
            others.append(key)
        else:
            claims[claim] = key
    return claims, others


class Line(NamedTuple):
    """A staged line to record: its session, the claim it is an origin of (None: none) with the
    origin's class and time, and its seen hash (None: none)."""

    session_id: str
    session_key: str | None
    claim: int | None
    origin_class: str | None
    observed_at: int | None
    seen: str | None


# A line as read: (line_no, session id, session key, claim, origin class, observed at, seen).
LineRow = tuple[int, str, str | None, int, str, int, str | None]


# --- sessions ----------------------------------------------------------------------------------------


def session_numbers(
    conn: Connection, pairs: Iterable[tuple[str, str | None]]
) -> dict[tuple[str, str | None], int]:
    """The number of each (session id, session key), made for those that have none."""
    out: dict[tuple[str, str | None], int] = {}
    for sid, key in dict.fromkeys(pairs):
        row = conn.execute(
            "SELECT min(session_no) FROM ingest_sessions WHERE session_id = ? AND session_key IS ?",
            (sid, key),
        ).fetchone()
        if row[0] is None:
            cur = conn.execute(
                "INSERT INTO ingest_sessions (session_id, session_key) VALUES (?, ?)", (sid, key)
            )
            out[(sid, key)] = int(cur.lastrowid or 0)
        else:
            out[(sid, key)] = int(row[0])
    return out


def numbers_of_sessions(conn: Connection, session_ids: Sequence[str]) -> dict[int, str]:
    """session_no -> session id of every number of these sessions (index on session_id)."""
    rows = select_in(
        conn, "SELECT session_no, session_id FROM ingest_sessions WHERE session_id IN ({marks})", session_ids
    )
    return {int(no): sid for no, sid in rows}


def delete_sessions(conn: Connection, session_ids: Sequence[str]) -> int:
    """Forget these sessions' numbers with every line of theirs; the lines removed."""
    numbers = sorted(numbers_of_sessions(conn, session_ids))
    if not numbers:
        return 0
    before = conn.total_changes
    purged = _line_keys_of_numbers(conn, numbers)
    conn.executemany("DELETE FROM ingest_lines WHERE session_no = ?", [(n,) for n in numbers])
    lines = conn.total_changes - before
    conn.executemany("DELETE FROM ingest_sessions WHERE session_no = ?", [(n,) for n in numbers])
    rewrite_line_pages(conn, purged, whole_sessions=True)
    return lines


# --- lines ---------------------------------------------------------------------------------------------


def _line_keys_of_numbers(conn: Connection, numbers: Sequence[int]) -> list[tuple[int, int]]:
    return [
        (int(a), int(b))
        for a, b in select_in(
            conn, "SELECT session_no, line_no FROM ingest_lines WHERE session_no IN ({marks})", numbers
        )
    ]


def add_lines(conn: Connection, lines: Sequence[Line], keep: int = MAX_TRACKED_MESSAGES_PER_SESSION) -> None:
    """Record `lines` (each session's in staging order) after the lines their sessions have;
    then keep the seen hashes of each session's newest `keep` lines only."""
    if not lines:
        return
    numbers = session_numbers(conn, ((ln.session_id, ln.session_key) for ln in lines))
    sids = list(dict.fromkeys(ln.session_id for ln in lines))
    tops = _tops(conn, sids)
    rows = []
    for ln in lines:
        tops[ln.session_id] += 1
        rows.append(
            (
                numbers[(ln.session_id, ln.session_key)],
                tops[ln.session_id],
                ln.claim,
                ln.origin_class,
                ln.observed_at,
                ln.seen,
            )
        )
    conn.executemany(
        "INSERT INTO ingest_lines (session_no, line_no, claim, origin_class, observed_at, seen) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        rows,
    )
    trim_seen(conn, sids, keep)


def _tops(conn: Connection, session_ids: Sequence[str]) -> dict[str, int]:
    """Each session's highest line number (0: none), over all its numbers."""
    tops = dict.fromkeys(session_ids, 0)
    rows = select_in(
        conn,
        "SELECT s.session_id, max(l.line_no) FROM ingest_sessions s JOIN ingest_lines l "
        "ON l.session_no = s.session_no WHERE s.session_id IN ({marks}) GROUP BY s.session_id",
        session_ids,
    )
    for sid, top in rows:
        tops[sid] = max(0, int(top))
    return tops


def trim_seen(
    conn: Connection, session_ids: Sequence[str], keep: int = MAX_TRACKED_MESSAGES_PER_SESSION
) -> None:
    """Keep the seen hashes of each session's newest `keep` lines; a line left with no claim and
    no seen hash goes."""
    by_sid: dict[str, list[int]] = {}
    for no, sid in numbers_of_sessions(conn, session_ids).items():
        by_sid.setdefault(sid, []).append(no)
    for numbers in by_sid.values():
        marks = ",".join("?" * len(numbers))
        count, top = conn.execute(
            f"SELECT count(*), max(line_no) FROM ingest_lines WHERE session_no IN ({marks}) AND seen IS NOT NULL",
            numbers,
        ).fetchone()
        if count <= keep:
            continue
        cutoff = conn.execute(
            f"SELECT line_no FROM ingest_lines WHERE session_no IN ({marks}) AND seen IS NOT NULL "
            "ORDER BY line_no DESC LIMIT 1 OFFSET ?",
            (*numbers, keep),
        ).fetchone()[0]
        conn.execute(
            f"DELETE FROM ingest_lines WHERE session_no IN ({marks}) AND line_no <= ? AND claim IS NULL",
            (*numbers, cutoff),
        )
        conn.execute(
            f"UPDATE ingest_lines SET seen = NULL WHERE session_no IN ({marks}) AND line_no <= ? "
            "AND seen IS NOT NULL",
            (*numbers, cutoff),
        )
        del top


def lines_of_sessions(conn: Connection, session_ids: Sequence[str]) -> list[LineRow]:
    """(line_no, session id, session key, claim, origin class, observed at, seen) of these
    sessions' lines that are an origin (claim set)."""
    return select_in(
        conn,
        "SELECT l.line_no, s.session_id, s.session_key, l.claim, l.origin_class, l.observed_at, l.seen "
        "FROM ingest_sessions s JOIN ingest_lines l ON l.session_no = s.session_no "
        "WHERE s.session_id IN ({marks}) AND l.claim IS NOT NULL",
        session_ids,
    )


def lines_of_claims(conn: Connection, claims: Sequence[int]) -> list[LineRow]:
    """The same, of the lines of these claims (claim index)."""
    return select_in(
        conn,
        "SELECT l.line_no, s.session_id, s.session_key, l.claim, l.origin_class, l.observed_at, l.seen "
        "FROM ingest_lines l JOIN ingest_sessions s ON s.session_no = l.session_no WHERE l.claim IN ({marks})",
        claims,
    )


def claims_of_sessions(conn: Connection, session_ids: Sequence[str]) -> set[int]:
    """The claims these sessions' lines are origins of (session index, then key ranges)."""
    rows = select_in(
        conn,
        "SELECT DISTINCT l.claim FROM ingest_sessions s JOIN ingest_lines l ON l.session_no = s.session_no "
        "WHERE s.session_id IN ({marks}) AND l.claim IS NOT NULL",
        session_ids,
    )
    return {int(c) for (c,) in rows}


def sessions_of_claims(conn: Connection, claims: Sequence[int]) -> set[tuple[int, str]]:
    """(claim, session id) of every origin of these claims (claim index)."""
    rows = select_in(
        conn,
        "SELECT DISTINCT l.claim, s.session_id FROM ingest_lines l JOIN ingest_sessions s "
        "ON s.session_no = l.session_no WHERE l.claim IN ({marks})",
        claims,
    )
    return {(int(c), str(sid)) for c, sid in rows}


def seen_of_sessions(conn: Connection, session_ids: Sequence[str]) -> list[tuple[str, str]]:
    """(session id, seen hash) of every line of these sessions that has one."""
    return select_in(
        conn,
        "SELECT s.session_id, l.seen FROM ingest_sessions s JOIN ingest_lines l ON l.session_no = s.session_no "
        "WHERE s.session_id IN ({marks}) AND l.seen IS NOT NULL",
        session_ids,
    )


def sessions_with_seen(conn: Connection, session_ids: Sequence[str]) -> set[str]:
    rows = select_in(
        conn,
        "SELECT DISTINCT s.session_id FROM ingest_sessions s WHERE s.session_id IN ({marks}) AND EXISTS "
        "(SELECT 1 FROM ingest_lines l WHERE l.session_no = s.session_no AND l.seen IS NOT NULL)",
        session_ids,
    )
    return {sid for (sid,) in rows}


def sessions_with_lines(conn: Connection, session_ids: Sequence[str]) -> set[str]:
    """Which of these sessions have any line with a positive number (a staged line, seen or not)."""
    rows = select_in(
        conn,
        "SELECT DISTINCT s.session_id FROM ingest_sessions s WHERE s.session_id IN ({marks}) AND EXISTS "
        "(SELECT 1 FROM ingest_lines l WHERE l.session_no = s.session_no AND l.line_no > 0)",
        session_ids,
    )
    return {sid for (sid,) in rows}


def forget_seen(conn: Connection, session_ids: Sequence[str]) -> int:
    """Drop these sessions' seen hashes (their origins stay until the origin purge); how many."""
    numbers = sorted(numbers_of_sessions(conn, session_ids))
    if not numbers:
        return 0
    purged = [
        (int(a), int(b))
        for a, b in select_in(
            conn,
            "SELECT session_no, line_no FROM ingest_lines WHERE session_no IN ({marks}) AND seen IS NOT NULL",
            numbers,
        )
    ]
    # A seen hash is no derivation of the text alone (daemon/derivations.py): no page rewrite.
    conn.executemany(
        "DELETE FROM ingest_lines WHERE session_no = ? AND line_no = ? AND claim IS NULL", purged
    )
    conn.executemany("UPDATE ingest_lines SET seen = NULL WHERE session_no = ? AND line_no = ?", purged)
    _drop_empty_sessions(conn, numbers)
    return len(purged)


def _drop_empty_sessions(conn: Connection, numbers: Sequence[int]) -> None:
    """A session number left with no line goes (its id and key with it)."""
    conn.executemany(
        "DELETE FROM ingest_sessions WHERE session_no = ? "
        "AND NOT EXISTS (SELECT 1 FROM ingest_lines WHERE session_no = ?)",
        [(n, n) for n in numbers],
    )


def forget_claims(
    conn: Connection, claims: Sequence[int], session_ids: Sequence[str] | None = None
) -> list[tuple[int, str]]:
    """Remove the origins of these claims (of these sessions only, if given): each line's claim
    goes, and a line left with no seen hash with it. The (claim, session id) origins removed."""
    rows = select_in(
        conn,
        "SELECT l.session_no, l.line_no, l.claim, s.session_id FROM ingest_lines l "
        "JOIN ingest_sessions s ON s.session_no = l.session_no WHERE l.claim IN ({marks})",
        claims,
    )
    if session_ids is not None:
        wanted = set(session_ids)
        rows = [r for r in rows if r[3] in wanted]
    purged = sorted((int(no), int(line)) for no, line, _c, _s in rows)
    if session_ids is None:  # every line of these claims: set-based, by the claim index
        execute_in(conn, "DELETE FROM ingest_lines WHERE claim IN ({marks}) AND seen IS NULL", claims)
        execute_in(
            conn,
            "UPDATE ingest_lines SET claim = NULL, origin_class = NULL, observed_at = NULL "
            "WHERE claim IN ({marks})",
            claims,
        )
    else:
        conn.executemany(
            "DELETE FROM ingest_lines WHERE session_no = ? AND line_no = ? AND seen IS NULL", purged
        )
        conn.executemany(
            "UPDATE ingest_lines SET claim = NULL, origin_class = NULL, observed_at = NULL "
            "WHERE session_no = ? AND line_no = ?",
            purged,
        )
    rewrite_line_pages(conn, purged)
    _drop_empty_sessions(conn, sorted({no for no, _ in purged}))
    return sorted({(int(c), str(s)) for _no, _line, c, s in rows})


def record_origin_lines(conn: Connection, rows: Sequence[tuple[str, str | None, int, str, int]]) -> None:
    """Origins of claims recorded without a staged line of their own (dreaming's and backfill's
    lineage): (session id, session key, claim, origin class, observed at) each as a line numbered
    below the session's first, with no seen hash."""
    if not rows:
        return
    numbers = session_numbers(conn, ((sid, key) for sid, key, *_ in rows))
    lows: dict[int, int] = {}
    out = []
    for sid, key, claim, origin_class, observed_at in rows:
        no = numbers[(sid, key)]
        if no not in lows:
            low = conn.execute(
                "SELECT min(line_no) FROM ingest_lines WHERE session_no = ?", (no,)
            ).fetchone()[0]
            lows[no] = min(1, int(low)) if low is not None else 1
        lows[no] -= 1
        out.append((no, lows[no], claim, origin_class, observed_at))
    conn.executemany(
        "INSERT INTO ingest_lines (session_no, line_no, claim, origin_class, observed_at) VALUES (?, ?, ?, ?, ?)",
        out,
    )


# --- the page rewrite around a purge ---------------------------------------------------------------

MAX_LINE_NEIGHBOURS = 128  # lines looked at on either side (a 4 KiB page holds fewer)
_COLUMNS = "session_no, line_no, claim, origin_class, observed_at, seen"
# A line's stored bytes, a lower bound of its cell (daemon/store/pages.py): its cell pointer (2),
# payload size (1), record header (7), both key numbers (1 each at least), a claim (6 at least)
# and its texts.
_LINE_BYTES = (
    "12 + (CASE WHEN claim IS NULL THEN 0 ELSE 6 END) + length(coalesce(origin_class, '')) "
    "+ length(coalesce(seen, ''))"
)


def rewrite_line_pages(
    conn: Connection, purged: Sequence[tuple[int, int]], *, whole_sessions: bool = False
) -> int:
    """Delete and reinsert the lines that shared a page with the purged ones (in key order, a
    page's worth of bytes on either side of each run), so no older copy of a purged line (its
    claim number) stays in a page's free gap (store/pages.py says why); the lines rewritten.
    `whole_sessions`: every line of each purged key's session went, so a session is looked
    around once."""
    if not purged:
        return 0
    page = int(conn.execute("PRAGMA page_size").fetchone()[0])
    keys = sorted(set(purged))
    around: dict[tuple[int, int], tuple[object, ...]] = {}
    before = (
        f"SELECT {_COLUMNS}, {_LINE_BYTES} FROM ingest_lines WHERE (session_no, line_no) < (?, ?) "
        "ORDER BY session_no DESC, line_no DESC LIMIT ?"
    )
    after = (
        f"SELECT {_COLUMNS}, {_LINE_BYTES} FROM ingest_lines WHERE (session_no, line_no) > (?, ?) "
        "ORDER BY session_no, line_no LIMIT ?"
    )
    for first, last in _runs(keys, whole_sessions):
        for sql, key in ((before, first), (after, last)):
            size = 0
            for row in conn.execute(sql, (*key, MAX_LINE_NEIGHBOURS)).fetchall():
                if size >= page:
                    break
                around[(int(row[0]), int(row[1]))] = tuple(row[:6])
                size += int(row[6])
    for key in keys:
        around.pop(key, None)
    rows = [around[key] for key in sorted(around)]
    # Each side's lines are consecutive in key order: one range delete per run of them.
    spans: list[list[tuple[int, int]]] = []
    for key in sorted(around):
        if spans and _next_to(conn, spans[-1][-1], key):
            spans[-1].append(key)
        else:
            spans.append([key])
    conn.executemany(
        "DELETE FROM ingest_lines WHERE (session_no, line_no) BETWEEN (?, ?) AND (?, ?)",
        [(*span[0], *span[-1]) for span in spans],
    )
    conn.executemany(f"INSERT INTO ingest_lines ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)", rows)
    return len(rows)


def _next_to(conn: Connection, a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether line `b` follows line `a` with no line between them."""
    if a[0] == b[0] and a[1] + 1 == b[1]:
        return True
    row = conn.execute(
        "SELECT session_no, line_no FROM ingest_lines WHERE (session_no, line_no) > (?, ?) "
        "ORDER BY session_no, line_no LIMIT 1",
        a,
    ).fetchone()
    return row is not None and (int(row[0]), int(row[1])) == b


def _runs(
    keys: Sequence[tuple[int, int]], whole_sessions: bool
) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(first, last) of each run of purged keys with no live line between them: consecutive line
    numbers of one session, or a whole session."""
    runs: list[tuple[tuple[int, int], tuple[int, int]]] = []
    for key in keys:
        last = runs[-1][1] if runs else None
        if last is not None and last[0] == key[0] and (whole_sessions or last[1] + 1 == key[1]):
            runs[-1] = (runs[-1][0], key)
        else:
            runs.append((key, key))
    return runs


def claim_lines(conn: Connection) -> Mapping[int, int]:
    """claim -> lines (every claim's count): for tests and the fault campaign's oracle."""
    return {
        int(c): int(n)
        for c, n in conn.execute(
            "SELECT claim, count(*) FROM ingest_lines WHERE claim IS NOT NULL GROUP BY claim"
        )
    }
