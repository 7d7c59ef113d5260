"""OpenClaw's own session store, read-only (reference: openclaw-session-store.md):

    <sessions_root>/agents/<agent>/agent/openclaw-agent.sqlite
        session_nodes                 sessionKey -> current session id + SessionEntry JSON
        session_windows               one row per session id (transcript generation)
        session_participants          (session_key, identity namespace JSON, actor id)
        transcript_events             (session_id, seq) -> event JSON, plain or zstd
        session_transcript_archives   retained reset/deleted generations (identity or zstd)

memoryd never writes to this database or its directory. Two ways of reading keep that true:

* OpenClaw has the database open (its `-wal` and `-shm` files exist): a `mode=ro` connection
  with `query_only` joins the WAL protocol, and each session is read in one read transaction,
  a consistent snapshot while OpenClaw appends.
* The database is at rest (no `-wal`): a `mode=ro` connection would create `-wal` and `-shm`
  next to it and leave them behind, so it is opened `immutable=1` (no shared memory, no
  locks, no files) and the main file's stat is compared before and after each read. A writer
  that starts meanwhile writes to its new WAL and leaves the main file alone until it
  checkpoints; a read that overlapped a checkpoint is retried (or, for a transcript already
  partly yielded, refused with SourceChanged: it is read again next sweep).

Its SQL is the one exception to "SQL lives in store/": it reads another program's schema, which
memoryd neither owns nor migrates, with its own connection rules (above); like the JSON reader
beside it, it is a session source, and its queries change only with OpenClaw's format.
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson

from memoryd.constants import (
    MAX_TRANSCRIPT_LINE_BYTES,
    OPENCLAW_EVENT_CHUNK_ROWS,
    OPENCLAW_FINGERPRINT_SCAN_MIN,
    OPENCLAW_READ_ATTEMPTS,
)
from memoryd.errors import OperationFailed, SourceChanged
from memoryd.ids import session_source_problem
from memoryd.sessions.files import stat_regular
from memoryd.sessions.json_store import derive_session_kind
from memoryd.sessions.lines import iter_lines
from memoryd.sessions.model import (
    ArchiveInfo,
    Fingerprint,
    OversizedLine,
    Participant,
    SessionInfo,
    SessionListing,
)
from memoryd.store.engine import ANY_SQLITE_ERROR, Connection, sqlite3

# SessionEntry.hookExternalContentSource values; the window column only knows gmail|webhook.
ENTRY_HOOK_SOURCES = frozenset({"email", "gmail", "webhook"})
# The only window-column value trusted on its own: `webhook` is what `email` is persisted as,
# so a coarse webhook column says nothing exact (reference, "Selection semantics").
TRUSTED_COLUMN_HOOK_SOURCES = frozenset({"gmail"})

# octet_length (SQLite 3.43+) sizes a TEXT value without loading it; older builds cast.
_BYTES = "octet_length({})" if sqlite3.sqlite_version_info >= (3, 43, 0) else "length(CAST({} AS BLOB))"

# An empty text is read as NULL (an unset field), here rather than per value in Python.
_WINDOWS_SQL = """
SELECT nullif(w.session_id, ''), nullif(w.session_key, ''), w.created_at, w.updated_at,
       w.session_entry_provenance, nullif(w.hook_external_content_source, ''),
       nullif(w.chat_type, ''), nullif(w.channel, ''), nullif(w.account_id, ''),
       nullif(w.spawned_by, ''), nullif(n.current_session_id, ''), nullif(n.entry_json, ''),
       nullif(n.created_via, ''), nullif(n.spawned_by, '')
FROM session_windows AS w LEFT JOIN session_nodes AS n ON n.session_key = w.session_key
ORDER BY w.created_at, w.session_id
"""
_PARTICIPANTS_SQL = """
SELECT session_key, identity_namespace, actor_id FROM session_participants
ORDER BY session_key, actor_id, identity_namespace
"""
# The windows a forget selection can reach (`list_selectable`), a superset that the exact rules
# of the listing and of forget/select.py then narrow: ids and keys by their indexes, the keys a
# participant took part in by the participants' primary key (one covering scan, no row in
# Python), and, by substring tests in SQLite's C, every window whose metadata may name a hook source
# or an internal kind. They match the raw entry JSON, so any entry with an escape
# (`\u…`, which could spell a key or value) is listed too, and the JSON parser decides.
_SELECTABLE_WINDOWS_SQL = _WINDOWS_SQL.replace(
    "ORDER BY",
    """WHERE w.session_id IN (SELECT value FROM json_each(:refs))
   OR w.session_key IN (SELECT value FROM json_each(:refs))
   OR w.session_key IN (SELECT session_key FROM session_participants
                        WHERE actor_id IN (SELECT value FROM json_each(:actors)))
   OR (:hooks AND (w.hook_external_content_source IS NOT NULL
                   OR instr(n.entry_json, 'hookExternalContentSource') > 0))
   OR instr(w.session_key, 'cron') > 0 OR instr(w.session_key, 'heartbeat') > 0
   OR instr(w.session_key, 'dreaming-narrative') > 0 OR n.created_via = 'cron'
   OR instr(n.entry_json, 'cron') > 0 OR instr(n.entry_json, 'heartbeat') > 0
   OR instr(n.entry_json, '\\u') > 0
ORDER BY""",
)
_SELECTABLE_PARTICIPANTS_SQL = _PARTICIPANTS_SQL.replace(
    "ORDER BY", "WHERE session_key IN (SELECT value FROM json_each(:keys))\nORDER BY"
)
_ARCHIVES_SQL = """
SELECT session_id, generation, session_key, reason, created_at, archive_name
FROM session_transcript_archives ORDER BY created_at, session_id, generation
"""
# Sizes come from the row header (octet_length / event_utf8_bytes): nothing is decompressed.
_FINGERPRINT_SQL = f"""
SELECT (SELECT transcript_updated_at FROM session_windows WHERE session_id = :sid),
       count(*), max(created_at),
       sum(coalesce(event_utf8_bytes, {_BYTES.format("event_json")}, 0) + 1)
FROM transcript_events WHERE session_id = :sid
"""
# The same, for every session at once: one pass over the events' row headers.
_ALL_FINGERPRINTS_SQL = f"""
SELECT e.session_id, w.transcript_updated_at, e.n, e.newest, e.size
FROM (SELECT session_id, count(*) AS n, max(created_at) AS newest,
             sum(coalesce(event_utf8_bytes, {_BYTES.format("event_json")}, 0) + 1) AS size
      FROM transcript_events GROUP BY session_id) AS e
LEFT JOIN session_windows AS w ON w.session_id = e.session_id
"""
# What changes when a session, a window, a transcript or an archive does: OpenClaw's writers
# set a window's transcript_updated_at and updated_at to the time of each change, so their
# sums move with any one of them (integer sums: a float total would round at this size); event
# rows are counted and their newest rowid kept (a trimmed transcript). Aggregates in SQLite's C:
# no row reaches Python.
_TABLES_REVISION_SQL = """
SELECT (SELECT count(*) FROM session_windows),
       (SELECT sum(transcript_updated_at) FROM session_windows),
       (SELECT sum(updated_at) FROM session_windows),
       (SELECT count(*) FROM session_nodes), (SELECT sum(updated_at) FROM session_nodes),
       (SELECT count(*) FROM transcript_events), (SELECT max(rowid) FROM transcript_events),
       (SELECT count(*) FROM session_transcript_archives),
       (SELECT max(rowid) FROM session_transcript_archives)
"""
# An event over the line cap is not loaded at all: its payload column is selected as NULL.
_EVENTS_SQL = f"""
SELECT seq,
       CASE WHEN {_BYTES.format("event_json")} <= :cap THEN event_json END,
       {_BYTES.format("event_json")},
       CASE WHEN event_utf8_bytes <= :cap THEN event_zstd END,
       event_utf8_bytes
FROM transcript_events WHERE session_id = :sid AND seq > :after ORDER BY seq LIMIT :limit
"""
_ARCHIVE_BLOB_SQL = """
SELECT encoding, archive_blob FROM session_transcript_archives WHERE session_id = ? AND generation = ?
"""

StatKey = tuple[int, int, int, int]
_DB_HEADER_BYTES = 100  # the file change counter is bytes 24-27
_WAL_HEADER_BYTES = 32  # magic, format, page size, checkpoint sequence, salts, checksums
_OPEN_ERRORS: tuple[type[BaseException], ...] = (OSError, *ANY_SQLITE_ERROR)


def _stat_key(path: Path) -> StatKey:
    st = os.stat(path)
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _text(raw: bytes | str) -> str:
    # Metadata columns are compared as strings; undecodable bytes must not abort a listing.
    return raw if raw.__class__ is str else raw.decode("utf-8", "replace")  # type: ignore[union-attr]


class _Snapshot:
    """One read-only connection inside one read transaction."""

    def __init__(self, db_path: Path, trace: Callable[[str], None] | None, root: Path):
        self.db_path = db_path
        # SQLite's own open would block on a FIFO and follow any symlink: look first. (A swap in
        # the instant between the look and the open is not caught.)
        try:
            stat_regular(root, db_path)
        except OSError as exc:
            raise OperationFailed(f"{db_path}: cannot open OpenClaw agent database: {exc.strerror}") from None
        wal = Path(f"{db_path}-wal")
        shm = Path(f"{db_path}-shm")
        # OpenClaw has the database open: join its WAL (no file is created, both exist). Were
        # OpenClaw to close it in the instant between this look and the open, SQLite would
        # recreate the two files; that window is a few microseconds wide.
        self.shared = wal.exists() and shm.exists()
        uri = f"file:{quote(str(db_path))}?mode=ro" + ("" if self.shared else "&immutable=1")
        try:
            self.before: StatKey | None = None if self.shared else _stat_key(db_path)
            self.conn: Connection = sqlite3.connect(
                uri, uri=True, isolation_level=None, check_same_thread=False
            )
        except _OPEN_ERRORS as exc:
            raise OperationFailed(f"{db_path}: cannot open OpenClaw agent database: {exc}") from None
        try:
            self.conn.text_factory = bytes
            if trace is not None:
                self.conn.set_trace_callback(trace)
            self.conn.execute("PRAGMA query_only = ON")
            self.conn.execute("PRAGMA busy_timeout = 5000")
            self.conn.execute("BEGIN")
        except ANY_SQLITE_ERROR as exc:
            self.conn.close()
            raise OperationFailed(f"{db_path}: cannot open OpenClaw agent database: {exc}") from None

    def unchanged(self) -> bool:
        """True if what was read so far is one consistent state of the database."""
        if self.before is None:
            return True  # a WAL read transaction is a snapshot by itself
        try:
            return _stat_key(self.db_path) == self.before
        except FileNotFoundError:
            return False

    def close(self) -> None:
        try:
            self.conn.execute("ROLLBACK")
        except ANY_SQLITE_ERROR:
            pass
        self.conn.close()


@dataclass(frozen=True, slots=True)
class _WindowRow:
    session_id: str
    session_key: str
    created_at: int | None
    updated_at: int | None
    entry_provenance: int
    hook_column: str | None
    chat_type: str | None
    channel: str | None
    account_id: str | None
    spawned_by: str | None
    current_session_id: str | None
    entry_json: str | None
    created_via: str | None
    node_spawned_by: str | None


def _opt(value: Any) -> Any:
    if isinstance(value, bytes):
        text = _text(value)
        return text if text != "" else None
    return value


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value != "" else None


def _entry_channel(entry: dict[str, Any]) -> tuple[str | None, str | None]:
    """(channel, accountId) from `entry.delivery` — what the writer projects into the window."""
    delivery = entry.get("delivery")
    if isinstance(delivery, dict) and delivery.get("kind") == "external":
        route = delivery.get("route")
        if isinstance(route, dict):
            return _str(route.get("channel")), _str(route.get("accountId"))
    return _str(entry.get("channel")), _str(entry.get("accountId"))


def effective_hook_source(
    window_session_id: str,
    entry: dict[str, Any],
    current_session_id: str | None,
    column: str | None,
    entry_provenance: int,
) -> str | None:
    """The session's exact hook source, as OpenClaw's selection resolves it.

    The current entry's hookExternalContentSource when this window is the entry's current
    session id; failing that, the window column, trusted only when the entry writer projected
    it (`session_entry_provenance=1`) and only for `gmail`. A coarse `webhook` column never
    matches: it may stand for `email`.
    """
    entry_sid = _str(entry.get("sessionId")) or current_session_id
    if entry_sid == window_session_id:
        value = entry.get("hookExternalContentSource")
        if isinstance(value, str) and value in ENTRY_HOOK_SOURCES:
            return value
    if entry_provenance == 1 and column in TRUSTED_COLUMN_HOOK_SOURCES:
        return column
    return None


def _namespace(namespace_json: str) -> tuple[tuple[tuple[str, Any], ...], str | None]:
    """identity = {...JSON.parse(namespace), id: actor_id}: the namespace part, as sorted
    items, and what is wrong with it (a bad namespace is kept empty)."""
    try:
        ns = orjson.loads(namespace_json)
    except orjson.JSONDecodeError:
        return (), "identity_namespace is not valid JSON"
    if not isinstance(ns, dict):
        return (), "identity_namespace is not a JSON object"
    items = []
    for k, v in ns.items():
        if k == "id":
            continue
        # Participant is hashable: nested values are kept as their canonical JSON text.
        if isinstance(v, dict | list):
            v = orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode()
        items.append((k, v))
    return tuple(sorted(items)), None


def _decoded_rows(conn: Any, read: Callable[[Any], Any]) -> tuple[Any, bool]:  # a pysqlite3 connection
    """`read(conn)` and whether SQLite decoded the text: should a value not be UTF-8, all of it
    is read as bytes, which `_text` decodes with replacement."""
    conn.text_factory = str
    try:
        return read(conn), True
    except sqlite3.OperationalError as exc:
        if "decode" not in str(exc):
            raise
    finally:
        conn.text_factory = bytes
    return read(conn), False


def _listing_rows(conn: Any) -> tuple[list[Any], list[Any], bool]:
    """Every window and participant row (see `_decoded_rows`)."""
    (windows, participants), decoded = _decoded_rows(
        conn, lambda c: (c.execute(_WINDOWS_SQL).fetchall(), c.execute(_PARTICIPANTS_SQL).fetchall())
    )
    return windows, participants, decoded


def _selectable_rows(
    conn: Any, refs: Collection[str], actors: Collection[str], hooks: bool
) -> tuple[list[Any], list[Any], bool]:
    """The window rows `_SELECTABLE_WINDOWS_SQL` picks and their keys' participant rows."""

    def read(c: Any) -> tuple[list[Any], list[Any]]:
        params = {"refs": _json_list(refs), "actors": _json_list(actors), "hooks": int(hooks)}
        windows = c.execute(_SELECTABLE_WINDOWS_SQL, params).fetchall()
        keys = sorted({_text(w[1]) for w in windows if w[1] is not None})
        return windows, c.execute(_SELECTABLE_PARTICIPANTS_SQL, {"keys": _json_list(keys)}).fetchall()

    (windows, participants), decoded = _decoded_rows(conn, read)
    return windows, participants, decoded


def _json_list(values: Collection[str]) -> str:
    return orjson.dumps(sorted(values)).decode()


class OpenClawSessionSource:
    """One agent's sessions in its OpenClaw agent database. Every method opens its own
    read-only connection and closes it before returning (or when the transcript is closed),
    so memoryd never holds OpenClaw's database open between calls; inside `reading()` the
    transcripts a thread opens share one, closed when the block ends."""

    kind = "openclaw"

    def __init__(
        self,
        agent_id: str,
        db_path: Path,
        *,
        trace: Callable[[str], None] | None = None,
        root: Path | None = None,
    ):
        self.agent_id = agent_id
        self.db_path = Path(db_path)
        # The database is checked as a regular file reached from here without symlinks.
        self.root = root if root is not None else self.db_path.parent
        self._trace = trace  # receives every SQL statement run (diagnostics, tests)
        # An archive's locator names its row; no file has that name (a '#' component never
        # exists beside the database), so code that stats a locator finds nothing there.
        self._archive_prefix = f"{self.db_path}#archive="
        self._borrowed = threading.local()  # .snap: the snapshot `reading()` shares, or None

    # -- reading -----------------------------------------------------------------------------

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Transcripts this thread opens inside the block read from one read snapshot, opened at
        the first and closed at the end, instead of a connection each (most of the cost of a
        short transcript). A snapshot found changed is dropped and the next one opened afresh."""
        if hasattr(self._borrowed, "snap"):  # nested: the outer block owns it
            yield
            return
        self._borrowed.snap = None
        try:
            yield
        finally:
            snap = self._borrowed.snap
            del self._borrowed.snap
            if snap is not None:
                snap.close()

    def _lend(self) -> _Snapshot | None:
        """The snapshot of the enclosing `reading()` block (opened now if needed), or None."""
        if not hasattr(self._borrowed, "snap"):
            return None
        if self._borrowed.snap is None:
            self._borrowed.snap = _Snapshot(self.db_path, self._trace, self.root)
        snap: _Snapshot = self._borrowed.snap
        return snap

    def _drop_lent(self, snap: _Snapshot) -> None:
        if getattr(self._borrowed, "snap", None) is snap:
            self._borrowed.snap = None
            snap.close()

    def _read(self, fn: Callable[[Connection], Any]) -> Any:
        """`fn(conn)` in one read transaction; retried if it overlapped a checkpoint."""
        for _ in range(OPENCLAW_READ_ATTEMPTS):
            snap = _Snapshot(self.db_path, self._trace, self.root)
            try:
                result = fn(snap.conn)
            except ANY_SQLITE_ERROR as exc:
                if snap.unchanged():
                    raise OperationFailed(
                        f"{self.db_path}: cannot read OpenClaw agent database: {exc}"
                    ) from None
                continue  # a torn read of a file being checkpointed; read again
            finally:
                snap.close()
            if snap.unchanged():
                return result
        raise OperationFailed(
            f"{self.db_path}: the database changed during each of {OPENCLAW_READ_ATTEMPTS} reads; try again"
        )

    # -- SessionSource -----------------------------------------------------------------------

    def list_sessions(self) -> SessionListing:
        if not self.db_path.exists():
            return SessionListing(())
        return self._listing(*self._read(_listing_rows))

    def list_selectable(
        self, refs: Collection[str], actors: Collection[str], hook_sources: Collection[str]
    ) -> SessionListing:
        """The windows whose id or key is in `refs`, that an actor of `actors` took part in or
        that may have a hook source, and every internal window; a few others may come along."""
        if not self.db_path.exists():
            return SessionListing(())
        return self._listing(
            *self._read(lambda conn: _selectable_rows(conn, refs, actors, bool(hook_sources)))
        )

    def _listing(self, windows: list[Any], participants: list[Any], decoded: bool) -> SessionListing:
        errors: list[str] = []
        by_key: dict[str, list[Participant]] = {}
        namespaces: dict[str, tuple[tuple[tuple[str, Any], ...], str | None]] = {}
        for raw_key, raw_ns, raw_actor in participants:
            key, actor, ns_text = _text(raw_key), _text(raw_actor), _text(raw_ns)
            # A few namespaces (one per channel account) recur in every session: parse each once.
            parsed = namespaces.get(ns_text)
            if parsed is None:
                parsed = namespaces[ns_text] = _namespace(ns_text)
            namespace, problem = parsed
            participant = Participant(actor, namespace)
            if problem:
                errors.append(
                    f"{self.db_path}: session_participants {key!r} {actor!r}: {problem}; "
                    "kept with an empty namespace"
                )
            by_key.setdefault(key, []).append(participant)
        sessions: list[SessionInfo] = []
        for raw in windows:
            row = _WindowRow(*raw) if decoded else _WindowRow(*map(_opt, raw))
            problem = session_source_problem(row.session_id)
            if problem:
                errors.append(
                    f"{self.db_path}: session_windows {row.session_id!r}: session id {problem}; skipped"
                )
                continue
            entry = self._entry(row, errors)
            sessions.append(self._session(row, entry, tuple(dict.fromkeys(by_key.get(row.session_key, ())))))
        sessions.sort(key=lambda s: (s.created_at or 0, s.session_id))
        return SessionListing(tuple(sessions), tuple(errors))

    def _entry(self, row: _WindowRow, errors: list[str]) -> dict[str, Any]:
        if row.entry_json is None:
            return {}
        try:
            entry = orjson.loads(row.entry_json)
        except orjson.JSONDecodeError:
            errors.append(
                f"{self.db_path}: session_nodes {row.session_key!r}: entry_json is not valid JSON; "
                "window columns used alone"
            )
            return {}
        if not isinstance(entry, dict):
            errors.append(
                f"{self.db_path}: session_nodes {row.session_key!r}: entry_json is not an object; "
                "window columns used alone"
            )
            return {}
        return entry

    def _session(
        self, row: _WindowRow, entry: dict[str, Any], participants: tuple[Participant, ...]
    ) -> SessionInfo:
        current = (_str(entry.get("sessionId")) or row.current_session_id) == row.session_id
        # The window's own columns describe its generation; the entry only fills gaps for the
        # current window (whose columns the writer projected from that same entry).
        chat_type, channel, account_id = row.chat_type, row.channel, row.account_id
        if current:
            entry_channel, entry_account = _entry_channel(entry)
            chat_type = chat_type or _str(entry.get("chatType"))
            channel = channel or entry_channel
            account_id = account_id or entry_account
        facts = dict(entry)
        if row.created_via and "createdVia" not in facts:
            facts["createdVia"] = row.created_via
        spawned_by = row.spawned_by or row.node_spawned_by
        if spawned_by and "spawnedBy" not in facts:
            facts["spawnedBy"] = spawned_by
        return SessionInfo(
            agent_id=self.agent_id,
            session_id=row.session_id,
            session_key=row.session_key,
            session_kind=derive_session_kind(row.session_key, facts),
            chat_type=chat_type,
            channel=channel,
            account_id=account_id,
            hook_source=effective_hook_source(
                row.session_id, entry, row.current_session_id, row.hook_column, row.entry_provenance
            ),
            participants=participants,
            created_at=row.created_at,
            updated_at=row.updated_at,
            generated_by_narrative="dreaming-narrative" in row.session_key,
            locator=row.session_id,
        )

    def list_archives(self) -> list[ArchiveInfo]:
        if not self.db_path.exists():
            return []
        rows = self._read(lambda conn: conn.execute(_ARCHIVES_SQL).fetchall())
        out: list[ArchiveInfo] = []
        for raw in rows:
            sid, generation, key, reason, created_at, name = (_opt(v) for v in raw)
            if session_source_problem(sid):
                continue
            out.append(
                ArchiveInfo(
                    self.agent_id,
                    sid,
                    key,
                    reason,
                    created_at,
                    self._archive_prefix + generation,
                    name,
                )
            )
        return out

    def transcript_location(self, session: SessionInfo) -> Path | None:
        return None  # transcripts are rows, not files

    def fingerprint(self, session: SessionInfo) -> Fingerprint | None:
        """The transcript revision (transcript_updated_at, else the newest event) and its size
        as JSONL bytes, from row headers only; None when the session has no events."""
        if not self.db_path.exists():
            return None
        revision, count, newest, size = self._read(
            lambda conn: conn.execute(_FINGERPRINT_SQL, {"sid": session.session_id}).fetchone()
        )
        return _fingerprint(revision, count, newest, size)

    def revision(self) -> str | None:
        """The database file's revision and its session tables' (`unchanged_since` compares
        both); None when the tables cannot be read."""
        try:
            tables = self._tables_revision()
        except OperationFailed:
            return None
        return f"{self._file_revision()}#{tables}"

    def unchanged_since(self, revision: str) -> bool:
        """Nothing a listing or a fingerprint reads changed since `revision`: the file is as it
        was (no connection opened), or another part of the database changed but the session
        tables did not (one read: OpenClaw keeps its own memory index in this database)."""
        file_revision, _, tables = revision.partition("#")
        if self._file_revision() == file_revision:
            return True
        try:
            return self._tables_revision() == tables
        except OperationFailed:
            return False

    def _file_revision(self) -> str:
        """Changes with every commit, without opening the database: the main file's stat and
        its header's change counter (a commit without WAL), and the WAL's size and header
        (between two WAL resets a commit only appends frames; a reset draws new salts)."""
        try:
            main = _stat_key(self.db_path)
            with open(self.db_path, "rb") as f:
                counter = f.read(_DB_HEADER_BYTES)[24:28].hex()
        except FileNotFoundError:
            return "absent"
        try:
            with open(f"{self.db_path}-wal", "rb") as f:
                wal = f"{os.fstat(f.fileno()).st_size}:{f.read(_WAL_HEADER_BYTES).hex()}"
        except FileNotFoundError:
            wal = "none"
        return f"openclaw:{':'.join(map(str, main))}:{counter}:{wal}"

    def _tables_revision(self) -> str:
        if not self.db_path.exists():
            return "absent"
        row = self._read(lambda conn: conn.execute(_TABLES_REVISION_SQL).fetchone())
        return ":".join(map(str, row))

    def fingerprints(self, sessions: Sequence[SessionInfo]) -> dict[str, Fingerprint]:
        """`fingerprint` of each session that has events, all from one read transaction: one
        pass over the events for many sessions, one indexed query each for a few."""
        if not self.db_path.exists() or not sessions:
            return {}
        wanted = {s.session_id for s in sessions}
        if len(wanted) < OPENCLAW_FINGERPRINT_SCAN_MIN:
            ids = sorted(wanted)
            rows = self._read(
                lambda conn: [(sid, *conn.execute(_FINGERPRINT_SQL, {"sid": sid}).fetchone()) for sid in ids]
            )
        else:
            rows = [
                (_text(raw_sid), *rest)
                for raw_sid, *rest in self._read(lambda conn: conn.execute(_ALL_FINGERPRINTS_SQL).fetchall())
            ]
        out: dict[str, Fingerprint] = {}
        for sid, revision, count, newest, size in rows:
            fp = _fingerprint(revision, count, newest, size)
            if fp is not None and sid in wanted:
                out[sid] = fp
        return out

    @contextmanager
    def open_transcript(self, session: SessionInfo | ArchiveInfo) -> Iterator[Iterator[bytes]]:
        if not self.db_path.exists():
            raise OperationFailed(f"{self.db_path}: OpenClaw agent database does not exist")
        if isinstance(session, ArchiveInfo):
            yield self._archive_lines(session)
            return
        snaps: list[_Snapshot] = []
        try:
            yield self._event_lines(session.session_id, snaps)
        finally:
            for snap in snaps:
                snap.close()

    # -- transcripts -------------------------------------------------------------------------

    def _event_lines(self, session_id: str, snaps: list[_Snapshot]) -> Iterator[bytes]:
        """Each event's JSON bytes in seq order, all from one read transaction."""
        after = -1
        yielded = False
        attempts = 0
        snap = self._lend()
        if snap is None:
            snap = _Snapshot(self.db_path, self._trace, self.root)
            snaps.append(snap)
        while True:
            try:
                rows = snap.conn.execute(
                    _EVENTS_SQL,
                    {
                        "sid": session_id,
                        "after": after,
                        "cap": MAX_TRANSCRIPT_LINE_BYTES,
                        "limit": OPENCLAW_EVENT_CHUNK_ROWS,
                    },
                ).fetchall()
                valid = snap.unchanged()
            except ANY_SQLITE_ERROR as exc:
                if snap.unchanged():
                    raise OperationFailed(
                        f"{self.db_path}: session {session_id!r}: cannot read transcript: {exc}"
                    ) from None
                valid = False
            if not valid:
                if yielded:
                    raise SourceChanged(
                        f"{self.db_path}: session {session_id!r}: the database was checkpointed "
                        "while its transcript was read; it is read again next time"
                    )
                attempts += 1
                if attempts >= OPENCLAW_READ_ATTEMPTS:
                    raise OperationFailed(
                        f"{self.db_path}: session {session_id!r}: the database changed during "
                        f"each of {OPENCLAW_READ_ATTEMPTS} reads; try again"
                    )
                if snaps and snaps[-1] is snap:
                    snaps.pop().close()
                else:
                    self._drop_lent(snap)  # stale for every later transcript too
                snap = _Snapshot(self.db_path, self._trace, self.root)
                snaps.append(snap)
                continue
            for seq, text, text_bytes, blob, utf8_bytes in rows:
                yielded = True
                yield _event_bytes(seq, text, text_bytes, blob, utf8_bytes)
                after = seq
            if len(rows) < OPENCLAW_EVENT_CHUNK_ROWS:
                return

    def _archive_lines(self, archive: ArchiveInfo) -> Iterator[bytes]:
        if not archive.locator.startswith(self._archive_prefix):
            raise OperationFailed(
                f"{self.db_path}: archive {archive.name or archive.session_id!r} is not from this database"
            )
        generation = archive.locator[len(self._archive_prefix) :]
        row = self._read(
            lambda conn: conn.execute(_ARCHIVE_BLOB_SQL, (archive.session_id, generation)).fetchone()
        )
        if row is None:
            raise OperationFailed(
                f"{self.db_path}: archive {archive.name or archive.session_id!r} no longer exists"
            )
        encoding, blob = _text(row[0]), row[1]
        if encoding == "zstd":
            import zstandard

            reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(blob))
            return iter_lines(io.BufferedReader(reader))
        return iter_lines(io.BytesIO(blob))


def _fingerprint(
    revision: int | None, count: int, newest: int | None, size: int | None
) -> Fingerprint | None:
    if not count:
        return None
    return Fingerprint(max(revision or 0, newest or 0), int(size or 0))


def _event_bytes(
    seq: int, text: bytes | None, text_bytes: int | None, blob: bytes | None, utf8_bytes: int | None
) -> bytes:
    if text_bytes is not None:
        if text is None:
            return OversizedLine(text_bytes)
        data = text
    elif blob is None:
        return OversizedLine(utf8_bytes or 0)
    else:
        import zstandard

        try:
            data = zstandard.ZstdDecompressor().decompress(blob, max_output_size=utf8_bytes or 0)
        except zstandard.ZstdError:
            # Not JSON on purpose: the reader counts it as a malformed line and goes on.
            return b"<event seq %d: zstd payload could not be decompressed>" % seq
    # Valid JSON holds a raw newline only as whitespace; one event stays one line.
    return data.replace(b"\n", b" ") if b"\n" in data else data
