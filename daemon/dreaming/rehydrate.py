"""Re-read the live source of a staged entry before it is written anywhere (reference §5.6).

Staged entries cite a session-corpus line or a daily note. Promotion relocates the snippet in
the file as it is now; a snippet that is gone or changed is skipped, so text removed from
its source (by an edit or by forget) is never resurrected into MEMORY.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from memoryd.dreaming.staged import StagedEntry
from memoryd.dreaming.text import normalize_snippet
from memoryd.errors import UsageError
from memoryd.fileio import read_bytes_nofollow

CORPUS_PATH_RE = re.compile(r"^memory/\.dreams/session-corpus/\d{4}-\d{2}-\d{2}\.(?:txt|md)$")
DAILY_PATH_RE = re.compile(r"^memory/(?:[^/]+/)*\d{4}-\d{2}-\d{2}[^/]*\.md$")
_CORPUS_LINE = re.compile(r"^\[[^\]\n]*\] (.*)$")


@dataclass(frozen=True, slots=True)
class Located:
    status: str  # ok | changed | missing
    start_line: int = 0
    end_line: int = 0


def is_short_term_path(path: str) -> bool:
    return bool(CORPUS_PATH_RE.match(path) or DAILY_PATH_RE.match(path))


def read_sources(workspace: Path, paths: Iterable[str]) -> dict[str, list[str] | None]:
    """Current lines of each cited source file (None if absent, unsafe or unreadable)."""
    out: dict[str, list[str] | None] = {}
    for rel in dict.fromkeys(paths):
        pure = PurePosixPath(rel)
        if pure.is_absolute() or ".." in pure.parts or not is_short_term_path(rel):
            out[rel] = None
            continue
        try:
            data = read_bytes_nofollow(workspace / rel)
        except (UsageError, OSError):
            data = None
        if data is None:
            out[rel] = None
            continue
        out[rel] = data.decode("utf-8", errors="replace").split("\n")
    return out


def _corpus_snippet(line: str) -> str | None:
    m = _CORPUS_LINE.match(line.rstrip("\r"))
    return m.group(1) if m else None


def locate(entry: StagedEntry, lines: list[str] | None) -> Located:
    """Pure: where the entry's snippet is in the live file, or why it is not."""
    if lines is None:
        return Located("missing")
    want = normalize_snippet(entry.snippet)
    if CORPUS_PATH_RE.match(entry.path):
        idx = entry.start_line - 1
        if 0 <= idx < len(lines) and normalize_snippet(_corpus_snippet(lines[idx]) or "") == want:
            return Located("ok", entry.start_line, entry.start_line)
        for i, line in enumerate(lines):  # the line moved (e.g. earlier lines were scrubbed)
            if normalize_snippet(_corpus_snippet(line) or "") == want:
                return Located("ok", i + 1, i + 1)
        return Located("changed")
    # Daily notes: snippets carry heading/list context, so compare normalised text.
    start, end = max(1, entry.start_line), max(entry.start_line, entry.end_line)
    cited = normalize_snippet(" ".join(lines[start - 1 : end])).lstrip("-*+ ").strip()
    if cited and cited in want:
        return Located("ok", start, end)
    whole = normalize_snippet(" ".join(lines))
    if want and want in whole:
        return Located("ok", start, end)
    leaf = want.rsplit(" > ", 1)[-1]  # the item itself, without its heading/ancestor context
    for i, line in enumerate(lines):
        if leaf and normalize_snippet(line).lstrip("-*+ ").strip() == leaf:
            return Located("ok", i + 1, i + 1)
    return Located("changed")
