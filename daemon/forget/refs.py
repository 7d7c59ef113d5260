"""Does a piece of text reference one of the selected sessions? (reference §7.5)

Two grammars count as a reference:

* a session path or scope: `sessions/<agent>/<id>` or `<agent>:<id>` after a delimiter
  (start, whitespace, `[`, `/`, `:`); `<id>` may be a transcript file name, which is reduced to
  its session id (`target.jsonl.reset.<ts>.zst` → `target`) or else compared verbatim;
* a `Session ID: <id>` label (case-insensitive).

Matching is exact string equality: `prefix` never matches `prefix-survivor`, `PREFIX` or
`prefix.jsonl.other`.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from functools import lru_cache

from daemon.sessions.json_store import ARCHIVE_TS

_SESSION_ID_LABEL_RE = re.compile(r"\bSession ID:\s*([^;\s]+)", re.IGNORECASE)
_ARCHIVE_MARKER_RE = re.compile(r"\.jsonl\.(?:reset|deleted)\.")
_ARCHIVE_TS_RE = re.compile(rf"^{ARCHIVE_TS}$")
# Compaction checkpoint twins and trajectory side files are not usage-counted transcripts.
_NON_PRIMARY_RE = re.compile(r"\.(?:checkpoint\.[^/]+|trajectory)\.jsonl$", re.IGNORECASE)
_COMPRESSION_SUFFIX = ".zst"


@lru_cache(maxsize=64)
def _path_ref_re(agent_id: str) -> re.Pattern[str]:
    agent = re.escape(agent_id)
    return re.compile(rf"(?:^|[\s\[/:])(?:sessions/{agent}/|{agent}:(?!sessions/))([^\s\]#;:/]+)")


def session_id_from_file_name(name: str) -> str | None:
    """`<id>.jsonl` → id; `<id>.jsonl.reset|deleted.<ts>[.zst]` → id; anything else → None."""
    if name.endswith(".jsonl") and not _NON_PRIMARY_RE.search(name):
        stem = name[: -len(".jsonl")]
        return stem or None
    base = name[: -len(_COMPRESSION_SUFFIX)] if name.endswith(_COMPRESSION_SUFFIX) else name
    # The last archive marker wins: an id may itself contain ".jsonl.reset." in theory.
    markers = list(_ARCHIVE_MARKER_RE.finditer(base))
    if not markers:
        return None
    last = markers[-1]
    if not _ARCHIVE_TS_RE.match(base[last.end() :]):
        return None
    return base[: last.start()] or None


def references_session(value: str, agent_id: str, session_ids: Collection[str]) -> bool:
    if not session_ids or not value:
        return False
    for match in _path_ref_re(agent_id).finditer(value):
        ref = match.group(1)
        if (session_id_from_file_name(ref) or ref) in session_ids:
            return True
    return any(m.group(1) in session_ids for m in _SESSION_ID_LABEL_RE.finditer(value))
