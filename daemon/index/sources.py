"""What there is to index (reference §6.1), read from disk and the session source.

* source `memory`: `MEMORY.md`, `USER.md` (workspace root) and `memory/**/*.md`, skipping
  hidden directories (`memory/.dreams` is dreaming state, not memory) and symlinks;
* source `sessions` (when settings.index.sources has it): live transcripts and retained
  reset/delete archives. Internal transcripts (dreaming narrative, cron, heartbeat) and those
  the admission policy excludes are listed with the reason they are never indexed (an archive
  takes the policy's decision for the live session of its key: the archive has no metadata of
  its own; without a live session, its key's own rules: incognito, session-key patterns);
  forgotten ones are decided by the caller against the store. Admission here is a
  deliberate difference from the reference, whose transcript indexing ignores the policy.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from memoryd.constants import MEMORY_MARKDOWN_MAX_BYTES
from memoryd.errors import MemorydError
from memoryd.fileio import read_bytes_nofollow, sha256_hex
from memoryd.index.provenance import INTERNAL_SESSION_KINDS
from memoryd.sessions.admission import AdmissionPolicy, exclusion_reason, key_reason
from memoryd.sessions.json_store import derive_session_kind
from memoryd.sessions.model import ArchiveInfo, SessionInfo, SessionSource

ROOT_MEMORY_FILES = ("MEMORY.md", "USER.md")


@dataclass(frozen=True, slots=True)
class FileStat:
    mtime_ms: float
    size: int


@dataclass(frozen=True, slots=True)
class MemoryFile:
    rel_path: str
    abs_path: Path
    text: str
    hash: str
    stat: FileStat


@dataclass(frozen=True, slots=True)
class SessionRef:
    path: str  # index path: sessions/<agent>/<sessionId> (live) or sessions/<agent>/<archive name>
    session_id: str
    session_kind: str
    target: SessionInfo | ArchiveInfo
    stat: FileStat
    internal_reason: str | None  # set when the transcript is never indexed


def memory_file_stats(workspace: Path) -> dict[str, tuple[Path, FileStat]]:
    """rel_path -> (path, stat) of every indexable memory file; no content is read."""
    found: dict[str, tuple[Path, FileStat]] = {}
    for name in ROOT_MEMORY_FILES:
        _add(found, workspace / name, name)
    memory_dir = workspace / "memory"
    for dirpath, dirnames, filenames in os.walk(memory_dir, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.endswith(".md") and not name.startswith("."):
                path = Path(dirpath) / name
                _add(found, path, path.relative_to(workspace).as_posix())
    return found


def _add(found: dict[str, tuple[Path, FileStat]], path: Path, rel: str) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISREG(st.st_mode):  # a symlink is never followed
        found[rel] = (path, FileStat(st.st_mtime_ns / 1e6, st.st_size))


def read_memory_files(workspace: Path) -> tuple[list[MemoryFile], list[str]]:
    """Every memory file with its content and hash; unreadable ones become one-line errors."""
    files: list[MemoryFile] = []
    errors: list[str] = []
    for rel, (path, st) in memory_file_stats(workspace).items():
        if st.size > MEMORY_MARKDOWN_MAX_BYTES:
            errors.append(f"{rel}: larger than {MEMORY_MARKDOWN_MAX_BYTES} bytes; not indexed")
            continue
        try:
            data = read_bytes_nofollow(path)
        except MemorydError as exc:
            errors.append(f"{rel}: {exc}; not indexed")
            continue
        if data is None:
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            errors.append(f"{rel}: not valid UTF-8 (byte {exc.start}); not indexed")
            continue
        files.append(MemoryFile(rel, path, text, sha256_hex(data), st))
    return files, errors


def file_hash(path: Path) -> str | None:
    """The file's current sha256, or None if it is gone (the pre-publish re-check)."""
    try:
        data = read_bytes_nofollow(path)
    except MemorydError:
        return None
    return None if data is None else sha256_hex(data)


def internal_reason(kind: str, key: str | None, narrative: bool = False) -> str | None:
    """Why a transcript is never indexed (reference `isMemorySessionIndexable`), or None."""
    k = key or ""
    if narrative or "dreaming-narrative" in k:
        return "dreaming-narrative"
    if kind in INTERNAL_SESSION_KINDS:
        return kind
    if k.endswith(":heartbeat"):
        return "heartbeat"
    if k.startswith("cron:") or ":cron:" in k:
        return "cron"
    return None


def _stat_locator(locator: str, fallback_ms: int | None) -> FileStat:
    try:
        st = os.stat(locator, follow_symlinks=False)
        return FileStat(st.st_mtime_ns / 1e6, st.st_size)
    except (OSError, ValueError):
        return FileStat(float(fallback_ms or 0), 0)


def list_session_refs(
    source: SessionSource, agent_id: str, policy: AdmissionPolicy | None, only: frozenset[str] | None = None
) -> tuple[list[SessionRef], list[str]]:
    """Live sessions and retained archives, from metadata and stats only (no transcript read).
    `only`: just the live sessions of these ids (what a live sync considers), no archive."""
    listing = source.list_sessions()
    sessions = listing.sessions if only is None else [s for s in listing.sessions if s.session_id in only]
    fingerprints = source.fingerprints(sessions)
    by_key = {s.session_key: s for s in listing.sessions if s.session_key}
    refs: list[SessionRef] = []
    for session in sessions:
        fp = fingerprints.get(session.session_id)
        if fp is None:
            continue  # no transcript (yet)
        refs.append(
            SessionRef(
                session.session_path,
                session.session_id,
                session.session_kind,
                session,
                FileStat(float(fp.mtime_ms), fp.size),
                internal_reason(session.session_kind, session.session_key, session.generated_by_narrative)
                or exclusion_reason(session, policy, ()),
            )
        )
    for archive in source.list_archives() if only is None else ():
        kind = derive_session_kind(archive.session_key, {})
        live = by_key.get(archive.session_key) if archive.session_key else None
        name = archive.name or f"{archive.session_id}.{archive.reason}.{archive.created_at or 0}"
        refs.append(
            SessionRef(
                f"sessions/{agent_id}/{name}",
                archive.session_id,
                kind,
                archive,
                _stat_locator(archive.locator, archive.created_at),
                internal_reason(kind, archive.session_key)
                or (
                    exclusion_reason(live, policy, ())
                    if live is not None
                    else key_reason(archive.session_key, policy)
                ),
            )
        )
    return refs, list(listing.errors)
