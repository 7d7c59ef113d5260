"""Does a piece of text reference one of the selected sessions? (reference §7.5)

Two grammars count as a reference:

* a session path or scope: `sessions/<agent>/<id>` or `<agent>:<id>` after a delimiter
  (start, whitespace, `[`, `/`, `:`); `<id>` may be a transcript file name, which is reduced to
  its session id (`target.jsonl.reset.<ts>.zst` → `target`) or else compared verbatim;
* a `Session ID: <id>` label (case-insensitive).

Matching is exact string equality: `prefix` never matches `prefix-survivor`, `PREFIX` or
`prefix.jsonl.other`.

The grammar stops at whitespace, `]`, `#`, `;` and `:`; ingestion refuses ids holding them
(daemon/ids.py, session_reference_problem). A store ingested before that may still hold such
an id, so the whole forms memoryd writes are also matched as they are: a corpus line's head
`[<agent>/sessions/<agent>/<id>#L<n>]`, and a scope, state key or index path that is
`<agent>:<id>`, `<agent>:sessions/<agent>/<id>` or `sessions/<agent>/<id>` in full.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from functools import lru_cache

from memoryd.sessions.json_store import ARCHIVE_TS

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


@lru_cache(maxsize=64)
def _corpus_head_re(agent_id: str) -> re.Pattern[str]:
    agent = re.escape(agent_id)
    return re.compile(rf"^\[{agent}/sessions/{agent}/(.+?)#L\d+\]")


def _written_form_id(value: str, agent_id: str) -> str | None:
    """The id of a corpus line, scope or state key as memoryd writes them, whatever it holds."""
    head = _corpus_head_re(agent_id).match(value)
    if head is not None:
        return head.group(1)
    rest = value.removeprefix(f"{agent_id}:").removeprefix(f"sessions/{agent_id}/")
    return None if rest == value else rest


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


def corpus_line_session(line: str, agent_id: str) -> str | None:
    """The session id of a corpus line as memoryd writes it (`[<agent>/sessions/<agent>/<id>#L<n>]`)."""
    head = _corpus_head_re(agent_id).match(line)
    if head is None:
        return None
    ref = head.group(1)
    return session_id_from_file_name(ref) or ref


def references_session(value: str, agent_id: str, session_ids: Collection[str]) -> bool:
    if not session_ids or not value:
        return False
    for match in _path_ref_re(agent_id).finditer(value):
        ref = match.group(1)
        if (session_id_from_file_name(ref) or ref) in session_ids:
            return True
    if any(m.group(1) in session_ids for m in _SESSION_ID_LABEL_RE.finditer(value)):
        return True
    return _written_form_id(value, agent_id) in session_ids
