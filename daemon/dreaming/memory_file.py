"""MEMORY.md: read a snapshot, parse marked entries, build an append, commit with a hash check.

Pure parsing/building functions take text and return text; the only I/O is `read_memory_file`
(no symlinks, size cap, UTF-8 check) and `commit_memory` (memoryd.fileio.commit_file with the
hash of the snapshot the new content was built from, so a concurrent edit is a WriteConflict).
A file that is not valid UTF-8 or exceeds the size cap is never rewritten.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from memoryd.constants import MEMORY_MARKDOWN_MAX_BYTES
from memoryd.fileio import ABSENT, commit_file, read_bytes_nofollow, sha256_hex
from memoryd.markers import lineage_key, lineage_marker, promotion_key, promotion_keys_in, promotion_marker

MEMORY_HEADER = "# Long-Term Memory"
_BULLET = re.compile(r"^[-*+]\s")
_CONTINUATION = re.compile(r"^\s+\S")


@dataclass(frozen=True, slots=True)
class MemorySnapshot:
    path: Path
    relative_path: str
    content_hash: str  # sha256 hex of the bytes read, or fileio.ABSENT
    text: str | None  # None when the file cannot be rewritten (see `problem`)
    problem: str | None = None

    @property
    def writable(self) -> bool:
        return self.problem is None and self.text is not None


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    """A top-level bullet line and the markers directly above it."""

    keys: tuple[str, ...]  # promotion keys of the consecutive marker lines above the entry
    lineage_key: str | None  # lineage marker directly above the first promotion marker
    line_index: int
    text: str
    has_continuation: bool


@dataclass(frozen=True, slots=True)
class AppendItem:
    entry_key: str
    entry_line: str  # "- …", one line
    lineage_key: str | None = None


def memory_path(workspace: Path) -> tuple[Path, str]:
    """MEMORY.md, or an existing lowercase memory.md when MEMORY.md is absent."""
    upper = workspace / "MEMORY.md"
    lower = workspace / "memory.md"
    if not upper.exists() and lower.is_file() and not lower.is_symlink():
        return lower, "memory.md"
    return upper, "MEMORY.md"


def read_memory_file(workspace: Path) -> MemorySnapshot:
    path, rel = memory_path(workspace)
    return read_snapshot(path, rel)


def read_snapshot(path: Path, rel: str) -> MemorySnapshot:
    """A markdown file as text with its hash; unwritable (with the reason) if too big or not UTF-8."""
    data = read_bytes_nofollow(path)  # refuses a symlink with a UsageError naming the file
    if data is None:
        return MemorySnapshot(path, rel, ABSENT, "")
    digest = sha256_hex(data)
    if len(data) > MEMORY_MARKDOWN_MAX_BYTES:
        return MemorySnapshot(
            path, rel, digest, None, f"{rel} exceeds {MEMORY_MARKDOWN_MAX_BYTES} bytes; left unchanged"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return MemorySnapshot(path, rel, digest, None, f"{rel} is not valid UTF-8; left unchanged")
    return MemorySnapshot(path, rel, digest, text)


def commit_memory(snapshot: MemorySnapshot, new_text: str, workspace: Path) -> str:
    """Commit `new_text` if the file still hashes as the snapshot; return the new hash."""
    if not snapshot.writable:
        raise ValueError(snapshot.problem or "memory file is not writable")
    commit_file(
        snapshot.path,
        new_text,
        expected_hash=snapshot.content_hash,
        root=workspace,
        conflict_message=f"{snapshot.relative_path} changed before the dreaming write could commit",
    )
    return sha256_hex(new_text)


def parse_entries(text: str) -> list[MemoryEntry]:
    lines = text.split("\n")
    entries: list[MemoryEntry] = []
    for i, raw in enumerate(lines):
        line = raw.rstrip("\r")
        if not _BULLET.match(line):
            continue
        keys: list[str] = []
        j = i - 1
        while j >= 0 and (key := promotion_key(lines[j])) is not None:
            keys.append(key)
            j -= 1
        lineage = lineage_key(lines[j]) if j >= 0 else None
        cont = i + 1 < len(lines) and bool(_CONTINUATION.match(lines[i + 1]))
        entries.append(MemoryEntry(tuple(reversed(keys)), lineage, i, line, cont))
    return entries


def marker_keys(text: str) -> set[str]:
    return set(promotion_keys_in(text))


def build_append(text: str, heading: str, items: list[AppendItem], max_chars: int) -> tuple[str, list[str]]:
    """Append `items` under a new `## heading` section, as many as fit in `max_chars`.

    Returns the new text and the keys appended, in order; an item that does not fit is left
    out (it stays eligible). Nothing is appended if not even one item fits.
    """
    base = text
    if not base.strip():
        base = MEMORY_HEADER + "\n"
    elif not base.endswith("\n"):
        base += "\n"
    section = f"\n## {heading}\n"
    body = ""
    appended: list[str] = []
    for item in items:
        block = "\n"
        if item.lineage_key:
            block += lineage_marker(item.lineage_key) + "\n"
        block += promotion_marker(item.entry_key) + "\n" + item.entry_line + "\n"
        if len(base) + len(section) + len(body) + len(block) > max_chars:
            continue  # a smaller later item may still fit; this one stays eligible
        body += block
        appended.append(item.entry_key)
    if not appended:
        return text, []
    return base + section + body, appended
