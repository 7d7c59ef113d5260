"""The `sessions.json` + `<sessionId>.jsonl` layout (DESIGN §3, reference §3):

    <sessions_root>/agents/<agent>/sessions/sessions.json      sessionKey -> SessionEntry
    <sessions_root>/agents/<agent>/sessions/<sessionId>.jsonl  transcript (pi v3 JSONL)
    <sessionId>.jsonl.reset.<ts>[.zst] / .deleted.<ts>[.zst]   retained archives
    <parentId>.checkpoint.<uuid>.jsonl                         compaction twins (never ingested)

Read-only: nothing here opens a file for writing.
"""

from __future__ import annotations

import io
import os
import re
import time
from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial
from pathlib import Path
from stat import S_ISLNK
from typing import Any

import orjson

from memoryd.errors import OperationFailed
from memoryd.ids import session_source_problem
from memoryd.sessions import json_text
from memoryd.sessions.files import open_dir_below, open_regular, read_regular, stat_regular
from memoryd.sessions.lines import iter_lines
from memoryd.sessions.model import (
    SESSION_KINDS,
    ArchiveInfo,
    Fingerprint,
    Participant,
    SessionInfo,
    SessionKind,
    SessionListing,
)

ARCHIVE_TS = r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d{3})?Z"
ARCHIVE_RE = re.compile(
    rf"^(?P<id>.+)\.jsonl\.(?P<reason>reset|deleted)\.(?P<ts>{ARCHIVE_TS})(?P<zst>\.zst)?$"
)
CHECKPOINT_RE = re.compile(r"\.checkpoint\..+\.jsonl$", re.IGNORECASE)
MAX_SESSIONS_JSON_BYTES = 256 * 1024 * 1024
# A sessions.json whose stat shows no change for this long before it was read is trusted by its
# stat afterwards: file times are coarse (a write a few ms after a read can keep the same
# mtime), so a file changed just before it was read is parsed again on every listing.
LISTING_SETTLED_NS = 2_000_000_000
_SCALAR = (str, int, float, bool)  # a tuple, not `str | int`: that builds a union on every call
_NAMESPACE_MEMO_MAX = 4096  # distinct strings kept per parse, each at most _NAMESPACE_MEMO_KEY_MAX chars
_NAMESPACE_MEMO_KEY_MAX = 256
NamespaceMemo = dict[str, tuple[tuple[str, Any], ...]]
_new_fingerprint = partial(tuple.__new__, Fingerprint)  # Fingerprint(*t) without a Python-level call


def archive_time_ms(ts: str) -> int | None:
    from datetime import datetime

    try:
        date, time_part = ts.rstrip("Z").split("T")
        hms = time_part.split(".")[0].replace("-", ":")
        frac = time_part.split(".")[1] if "." in time_part else "000"
        dt = datetime.fromisoformat(f"{date}T{hms}.{frac}+00:00")
        return int(dt.timestamp() * 1000)
    except (ValueError, IndexError):
        return None


def derive_session_kind(key: str | None, entry: dict[str, Any]) -> SessionKind:
    kind = entry.get("sessionKind")
    if isinstance(kind, str) and kind in SESSION_KINDS:
        return kind  # type: ignore[return-value]
    k = key or ""
    if k.startswith("cron:") or ":cron:" in k:
        return "cron"
    if k.endswith(":heartbeat"):
        return "heartbeat"
    if ":subagent:" in k or entry.get("spawnedBy"):
        return "subagent"
    if entry.get("createdVia") == "cron":
        return "cron"
    return "interactive"


_NUMBER = (int, float)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value != "" else None


def _ms(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, _NUMBER) and value == value and 0 <= value < 1e16:
        return int(value)
    return None


def parse_participants(entry: dict[str, Any], memo: NamespaceMemo | None = None) -> tuple[Participant, ...]:
    raw = entry.get("participants")
    out: list[Participant] = []
    if isinstance(raw, list):
        for item in raw:
            if not isinstance(item, dict):
                continue
            actor = _str(item.get("actorId")) or _str(item.get("id"))
            if actor is None:
                continue
            out.append(Participant(actor, _namespace_items(item.get("namespace"), memo)))
    if not out:
        origin = entry.get("origin")
        if isinstance(origin, dict) and _str(origin.get("from")):
            out.append(Participant(origin["from"], (("type", "origin"),)))
    return tuple(dict.fromkeys(out))


def _namespace_items(ns: Any, memo: NamespaceMemo | None) -> tuple[tuple[str, Any], ...]:
    """A participant's namespace as sorted (key, scalar) items without `id`. A namespace given as a
    JSON string is parsed once per distinct short string of a listing (`memo`; a store repeats a
    handful of them)."""
    if not isinstance(ns, str):
        return _scalar_items(ns)
    if memo is None:
        memo = {}
    items = memo.get(ns)
    if items is None:
        try:
            parsed = orjson.loads(ns)
        except orjson.JSONDecodeError:
            parsed = {"type": ns}
        items = _scalar_items(parsed)
        if len(ns) <= _NAMESPACE_MEMO_KEY_MAX and len(memo) < _NAMESPACE_MEMO_MAX:
            memo[ns] = items
    return items


def _scalar_items(ns: Any) -> tuple[tuple[str, Any], ...]:
    if not isinstance(ns, dict):
        ns = {"type": "profile"}
    return tuple(sorted((k, v) for k, v in ns.items() if k != "id" and isinstance(v, _SCALAR)))


def _channel(entry: dict[str, Any]) -> str | None:
    direct = _str(entry.get("channel"))
    if direct:
        return direct
    delivery = entry.get("delivery")
    if isinstance(delivery, dict):
        route = delivery.get("route")
        channel = _str(route.get("channel")) if isinstance(route, dict) else None
        if channel:
            return channel
    return None


def session_from_entry(
    agent_id: str, key: str, entry: dict[str, Any], transcript: Path | str, memo: NamespaceMemo | None = None
) -> SessionInfo:
    raw_origin = entry.get("origin")
    origin: dict[str, Any] = raw_origin if isinstance(raw_origin, dict) else {}
    return SessionInfo(
        agent_id=agent_id,
        session_id=entry["sessionId"],
        session_key=key,
        session_kind=derive_session_kind(key, entry),
        chat_type=_str(entry.get("chatType")) or _str(origin.get("chatType")),
        channel=_channel(entry),
        account_id=_str(entry.get("accountId")) or _str(origin.get("accountId")),
        hook_source=_str(entry.get("hookExternalContentSource")),
        participants=parse_participants(entry, memo),
        created_at=_ms(entry.get("createdAt")) or _ms(entry.get("sessionStartedAt")),
        updated_at=_ms(entry.get("updatedAt")),
        generated_by_narrative="dreaming-narrative" in key,
        locator=str(transcript),
    )


class ListingCache:
    """Listings of idle agents, (agent, sessions.json path) -> (stat key, listing), kept by a
    long-lived process between operations (sources are built per operation). A sessions.json
    seen unchanged by two listings in a row is kept parsed (about 1.2 kB per session), so each
    later re-sweep of that agent costs a stat of the file instead of a parse of every entry. A
    file that changes between listings (a busy agent) is never kept: its parse could not be
    reused anyway, and a single pass (a first sweep) holds no listing beyond its own. Entries are
    replaced whole (sources on several threads may share one)."""

    CACHE_NAME = "listings"  # its key in ProcessCaches.sizes()

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], tuple[tuple[int, ...], SessionListing | None]] = {}

    def __len__(self) -> int:
        return sum(1 for _, listing in self._entries.values() if listing is not None)

    def get(self, key: tuple[str, str]) -> tuple[tuple[int, ...], SessionListing | None] | None:
        return self._entries.get(key)

    def put(self, key: tuple[str, str], stat_key: tuple[int, ...], listing: SessionListing | None) -> None:
        self._entries[key] = (stat_key, listing)

    def drop(self, key: tuple[str, str]) -> None:
        self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()


class JsonSessionSource:
    kind = "json"

    def __init__(
        self,
        agent_id: str,
        sessions_dir: Path,
        listings: ListingCache | None = None,
        root: Path | None = None,
    ):
        self.agent_id = agent_id
        self.dir = sessions_dir
        self.listings = listings if listings is not None else ListingCache()
        # Files are opened walking down from here without following symlinks (sessions/files.py).
        self.root = root if root is not None else sessions_dir

    @property
    def store_path(self) -> Path:
        return self.dir / "sessions.json"

    def _stat_store(self) -> os.stat_result | None:
        try:
            return stat_regular(self.root, self.store_path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise OperationFailed(f"{self.store_path}: cannot read: {exc.strerror}") from None

    def _load_store(self) -> dict[str, Any]:
        try:
            data, _st = read_regular(self.root, self.store_path, MAX_SESSIONS_JSON_BYTES)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise OperationFailed(f"{self.store_path}: cannot read: {exc.strerror}") from None
        try:
            store = json_text.loads(data)  # a lone surrogate is read as the reference reads it
        except orjson.JSONDecodeError as exc:
            raise OperationFailed(f"{self.store_path}: invalid JSON: {exc}") from None
        if not isinstance(store, dict):
            raise OperationFailed(f"{self.store_path}: expected an object of sessionKey -> entry")
        return store

    def list_sessions(self) -> SessionListing:
        path = self.store_path
        cache_key = (self.agent_id, str(path))
        st = self._stat_store()
        if st is None:
            self.listings.drop(cache_key)
            return SessionListing(())
        stat_key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        cached = self.listings.get(cache_key)
        if cached is not None and cached[0] == stat_key and cached[1] is not None:
            return cached[1]
        read_at = time.time_ns()
        listing = self._listing(self._load_store())
        # Trusted only when the file had settled before it was read (see LISTING_SETTLED_NS) and
        # its stat did not move while it was read.
        after = self._stat_store()
        if (
            after is not None
            and stat_key == (after.st_dev, after.st_ino, after.st_size, after.st_mtime_ns, after.st_ctime_ns)
            and max(st.st_mtime_ns, st.st_ctime_ns) < read_at - LISTING_SETTLED_NS
        ):
            idle = cached is not None and cached[0] == stat_key
            self.listings.put(cache_key, stat_key, listing if idle else None)
        else:
            self.listings.drop(cache_key)
        return listing

    def list_selectable(
        self, refs: Collection[str], actors: Collection[str], hook_sources: Collection[str]
    ) -> SessionListing:
        return self.list_sessions()  # sessions.json is parsed whole (and cached) either way

    def _listing(self, store: dict[str, Any]) -> SessionListing:
        sessions: dict[str, SessionInfo] = {}
        errors: list[str] = []
        directory = str(self.dir)
        memo: NamespaceMemo = {}
        for key, entry in store.items():
            if not isinstance(entry, dict):
                errors.append(f"{self.store_path}: {key!r}: entry is not an object; skipped")
                continue
            sid = entry.get("sessionId")
            problem = session_source_problem(sid)
            if problem:
                errors.append(f"{self.store_path}: {key!r}: sessionId {sid!r} {problem}; skipped")
                continue
            # The id has no separator (checked above): joining strings gives str(self.dir / name).
            session = session_from_entry(self.agent_id, key, entry, f"{directory}/{sid}.jsonl", memo)
            sessions.setdefault(session.session_id, session)
        ordered = sorted(sessions.values(), key=lambda s: (s.created_at or 0, s.session_id))
        return SessionListing(tuple(ordered), tuple(errors))

    def list_archives(self) -> list[ArchiveInfo]:
        try:
            dir_fd = open_dir_below(self.root, self.dir)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise OperationFailed(f"{self.dir}: cannot list: {exc.strerror}") from None
        try:
            names = os.listdir(dir_fd)
        finally:
            os.close(dir_fd)
        keys_by_id = {}
        try:
            for key, entry in self._load_store().items():
                if isinstance(entry, dict) and isinstance(entry.get("sessionId"), str):
                    keys_by_id[entry["sessionId"]] = key
        except OperationFailed:
            pass
        out: list[ArchiveInfo] = []
        for name in sorted(names):
            m = ARCHIVE_RE.match(name)
            if not m or session_source_problem(m["id"]):
                continue
            out.append(
                ArchiveInfo(
                    self.agent_id,
                    m["id"],
                    keys_by_id.get(m["id"]),
                    m["reason"],  # type: ignore[arg-type]
                    archive_time_ms(m["ts"]),
                    str(self.dir / name),
                    name,
                )
            )
        return out

    def transcript_location(self, session: SessionInfo) -> Path | None:
        return Path(session.locator) if session.locator else None

    def fingerprint(self, session: SessionInfo) -> Fingerprint | None:
        # Called once per session by every sweep (a quiet re-sweep is little else), so kept to
        # one lstat and a tuple built in C.
        try:
            st = os.lstat(session.locator)
        except OSError:  # gone, or a path component is a file or a symlink loop
            return None
        if S_ISLNK(st.st_mode):
            return None  # a symlinked transcript is not read
        return _new_fingerprint((st.st_mtime_ns // 1_000_000, st.st_size))

    def revision(self) -> str | None:
        return None  # an append to a transcript shows only in that file's own stat

    def unchanged_since(self, revision: str) -> bool:
        return False

    def fingerprints(self, sessions: Sequence[SessionInfo]) -> dict[str, Fingerprint]:
        fingerprint = self.fingerprint
        return {s.session_id: fp for s in sessions if (fp := fingerprint(s)) is not None}

    def reading(self) -> AbstractContextManager[None]:
        return nullcontext()  # files: nothing to share between transcripts

    @contextmanager
    def open_transcript(self, session: SessionInfo | ArchiveInfo) -> Iterator[Iterator[bytes]]:
        path = session.locator  # a normalised path string (built by this source)
        try:
            fd, _st = open_regular(self.root, path)
        except OSError as exc:
            raise OperationFailed(f"{path}: cannot open transcript: {exc.strerror}") from None
        raw = os.fdopen(fd, "rb", buffering=0)
        try:
            if path.endswith(".zst"):
                import zstandard

                reader = zstandard.ZstdDecompressor().stream_reader(raw)
                yield iter_lines(io.BufferedReader(reader))
            else:
                yield iter_lines(raw)
        finally:
            raw.close()
