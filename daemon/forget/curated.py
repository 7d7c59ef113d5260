"""Curated writes (reference §7.7): memory files a selected session wrote directly.

Reported for review, never edited: a file-level record says a session wrote (or tried to
write) the file, not which lines came from it. Two sources, merged by relative path with the
observer's record first: the `curated_writes` table (write observer) and the write/edit/
apply_patch tool calls in the selected sessions' transcripts.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

_TOOL_CALL_TYPES = frozenset({"toolCall", "tool_call", "tool_use"})
_WRITE_TOOLS = frozenset({"apply_patch", "write", "edit"})
_PATCH_FILE_RE = re.compile(r"^\*\*\* (?:(?:Add|Update|Delete) File|Move to): (.+)$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class CuratedWrite:
    relative_path: str
    observed_at: int  # Unix ms


def is_curated_path(relative_path: str) -> bool:
    return relative_path in ("MEMORY.md", "USER.md") or relative_path.startswith("memory/")


def merge_curated(
    observed: Iterable[CuratedWrite], from_transcripts: Iterable[CuratedWrite]
) -> list[CuratedWrite]:
    out: dict[str, CuratedWrite] = {}
    for w in observed:
        out.setdefault(w.relative_path, w)
    for w in from_transcripts:
        out.setdefault(w.relative_path, w)
    return list(out.values())


def _arguments(item: dict[str, Any]) -> dict[str, Any] | None:
    args = item.get("arguments")
    if args is None:
        args = item.get("input")
    if isinstance(args, str):
        try:
            args = orjson.loads(args)
        except orjson.JSONDecodeError:
            return {"input": args} if item.get("name") == "apply_patch" else None
    return args if isinstance(args, dict) else None


def _candidates(name: str, args: dict[str, Any]) -> Iterator[str]:
    for field in ("path", "file_path", "filePath"):
        if isinstance(args.get(field), str):
            yield args[field]
    if name != "apply_patch":
        return
    for field in ("input", "patch"):
        if isinstance(args.get(field), str):
            yield from (m.group(1).strip() for m in _PATCH_FILE_RE.finditer(args[field]))
    changes = args.get("changes")
    if isinstance(changes, list):
        for change in changes:
            if not isinstance(change, dict):
                continue
            if isinstance(change.get("path"), str):
                yield change["path"]
            kind = change.get("kind")
            if isinstance(kind, dict) and isinstance(kind.get("move_path"), str):
                yield kind["move_path"]
    elif isinstance(changes, dict):
        yield from (k for k in changes if isinstance(k, str))


def _timestamp_ms(event: dict[str, Any], message: dict[str, Any]) -> int:
    ts = message.get("timestamp")
    if isinstance(ts, int | float) and not isinstance(ts, bool):
        return int(ts)
    raw = event.get("timestamp")
    if isinstance(raw, str):
        try:
            return int(datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            pass
    return 0


def _relative(workspace: str, cwd: Any, candidate: str) -> str | None:
    base = os.path.join(workspace, cwd) if isinstance(cwd, str) and cwd else workspace
    full = os.path.normpath(os.path.join(base, candidate))
    rel = os.path.relpath(full, workspace)
    if rel == ".." or rel.startswith("../") or os.path.isabs(rel):
        return None
    rel = rel.replace(os.sep, "/")
    return rel if is_curated_path(rel) else None


def transcript_writes(lines: Iterable[bytes], workspace: str) -> list[CuratedWrite]:
    """Writes of memory files recorded as tool calls in one transcript; first occurrence wins."""
    found: dict[str, CuratedWrite] = {}
    for raw in lines:
        if not raw or b"tool" not in raw:
            continue  # cheap skip: only lines with a tool call can name a write
        try:
            event = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        message = event.get("message") if isinstance(event, dict) else None
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for item in content:
            if not (
                isinstance(item, dict)
                and item.get("type") in _TOOL_CALL_TYPES
                and item.get("name") in _WRITE_TOOLS
            ):
                continue
            args = _arguments(item)
            if args is None:
                continue
            for candidate in _candidates(item["name"], args):
                rel = _relative(workspace, args.get("cwd"), candidate)
                if rel is not None and rel not in found:
                    found[rel] = CuratedWrite(rel, _timestamp_ms(event, message))
    return list(found.values())
