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
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from daemon.errors import OperationFailed
from daemon.ids import session_id_problem
from daemon.sessions.lines import iter_lines
from daemon.sessions.model import (
    SESSION_KINDS,
    ArchiveInfo,
    Fingerprint,
    Participant,
    SessionInfo,
    SessionKind,
    SessionListing,
)

ARCHIVE_TS = r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d{3})?Z"
ARCHIVE_RE = re.compile(rf"^(?P<id>.+)\.jsonl\.(?P<reason>reset|deleted)\.(?P<ts>{ARCHIVE_TS})(?P<zst>\.zst)?$")
CHECKPOINT_RE = re.compile(r"\.checkpoint\..+\.jsonl$", re.IGNORECASE)
MAX_SESSIONS_JSON_BYTES = 256 * 1024 * 1024


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


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value != "" else None


def _ms(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and value == value and 0 <= value < 1e16:
        return int(value)
    return None


def parse_participants(entry: dict[str, Any]) -> tuple[Participant, ...]:
    raw = entry.get("participants")
    out: list[Participant] = []
    if isinstance(raw, list):
        for item in raw:
            if not isinstance(item, dict):
                continue
            actor = _str(item.get("actorId")) or _str(item.get("id"))
            if actor is None:
                continue
            ns = item.get("namespace")
            if isinstance(ns, str):
                try:
                    ns = orjson.loads(ns)
                except orjson.JSONDecodeError:
                    ns = {"type": ns}
            if not isinstance(ns, dict):
                ns = {"type": "profile"}
            ns = {k: v for k, v in ns.items() if k != "id" and isinstance(v, str | int | float | bool)}
            out.append(Participant(actor, tuple(sorted(ns.items()))))
    if not out:
        origin = entry.get("origin")
        if isinstance(origin, dict) and _str(origin.get("from")):
            out.append(Participant(origin["from"], (("type", "origin"),)))
    return tuple(dict.fromkeys(out))


def _channel(entry: dict[str, Any]) -> str | None:
    direct = _str(entry.get("channel"))
    if direct:
        return direct
    delivery = entry.get("delivery")
    if isinstance(delivery, dict):
        route = delivery.get("route")
        if isinstance(route, dict) and _str(route.get("channel")):
            return route["channel"]
    return None


def session_from_entry(agent_id: str, key: str, entry: dict[str, Any], transcript: Path) -> SessionInfo:
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
        participants=parse_participants(entry),
        created_at=_ms(entry.get("createdAt")) or _ms(entry.get("sessionStartedAt")),
        updated_at=_ms(entry.get("updatedAt")),
        generated_by_narrative="dreaming-narrative" in key,
        locator=str(transcript),
    )


class JsonSessionSource:
    kind = "json"

    def __init__(self, agent_id: str, sessions_dir: Path):
        self.agent_id = agent_id
        self.dir = sessions_dir

    @property
    def store_path(self) -> Path:
        return self.dir / "sessions.json"

    def _load_store(self) -> dict[str, Any]:
        try:
            st = os.stat(self.store_path)
        except FileNotFoundError:
            return {}
        if st.st_size > MAX_SESSIONS_JSON_BYTES:
            raise OperationFailed(f"{self.store_path}: larger than {MAX_SESSIONS_JSON_BYTES} bytes")
        try:
            data = orjson.loads(self.store_path.read_bytes())
        except orjson.JSONDecodeError as exc:
            raise OperationFailed(f"{self.store_path}: invalid JSON: {exc}") from None
        except OSError as exc:
            raise OperationFailed(f"{self.store_path}: cannot read: {exc.strerror}") from None
        if not isinstance(data, dict):
            raise OperationFailed(f"{self.store_path}: expected an object of sessionKey -> entry")
        return data

    def list_sessions(self) -> SessionListing:
        sessions: dict[str, SessionInfo] = {}
        errors: list[str] = []
        for key, entry in self._load_store().items():
            if not isinstance(entry, dict):
                errors.append(f"{self.store_path}: {key!r}: entry is not an object; skipped")
                continue
            sid = entry.get("sessionId")
            problem = session_id_problem(sid)
            if problem:
                errors.append(f"{self.store_path}: {key!r}: sessionId {sid!r} {problem}; skipped")
                continue
            file_name = f"{sid}.jsonl"
            session = session_from_entry(self.agent_id, key, entry, self.dir / file_name)
            sessions.setdefault(session.session_id, session)
        ordered = sorted(sessions.values(), key=lambda s: (s.created_at or 0, s.session_id))
        return SessionListing(tuple(ordered), tuple(errors))

    def list_archives(self) -> list[ArchiveInfo]:
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
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
            if not m or session_id_problem(m["id"]):
                continue
            out.append(ArchiveInfo(self.agent_id, m["id"], keys_by_id.get(m["id"]), m["reason"],  # type: ignore[arg-type]
                                   archive_time_ms(m["ts"]), str(self.dir / name), name))
        return out

    def transcript_location(self, session: SessionInfo) -> Path | None:
        return Path(session.locator) if session.locator else None

    def fingerprint(self, session: SessionInfo) -> Fingerprint | None:
        try:
            st = os.stat(session.locator, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(st.st_mode):
            return None  # a symlinked transcript is not read
        return Fingerprint(int(st.st_mtime_ns // 1_000_000), st.st_size)

    @contextmanager
    def open_transcript(self, session: SessionInfo | ArchiveInfo) -> Iterator[Iterator[bytes]]:
        path = Path(session.locator)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError as exc:
            raise OperationFailed(f"{path}: cannot open transcript: {exc.strerror}") from None
        raw = os.fdopen(fd, "rb", buffering=0)
        try:
            if path.name.endswith(".zst"):
                import zstandard

                reader = zstandard.ZstdDecompressor().stream_reader(raw)
                yield iter_lines(io.BufferedReader(reader))  # type: ignore[arg-type]
            else:
                yield iter_lines(raw)
        finally:
            raw.close()
