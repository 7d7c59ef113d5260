"""Identifier validation. Ids become file names and SQL keys, so they are checked at every edge."""

from __future__ import annotations

import re

from memoryd.errors import UsageError

_AGENT_ID = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\Z")  # \Z: no trailing newline
MAX_SESSION_ID_CHARS = 512
# Anything session_id_problem objects to: one regex search clears a good id (a listing checks
# every id of sessions.json on each sweep); a bad one takes the ordered checks for its message.
_SESSION_ID_SUSPECT = re.compile(r"[\x00-\x1f/\\\ud800-\udfff]|\.\.|^\.$")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def validate_agent_id(agent_id: str, *, field: str = "agent") -> str:
    if not isinstance(agent_id, str) or not _AGENT_ID.fullmatch(agent_id) or ".." in agent_id:
        raise UsageError(f"{field}: invalid agent id {agent_id!r} (letters, digits, '_', '-', '.'; no '..')")
    return agent_id


def session_id_problem(session_id: object) -> str | None:
    """Why a session id is unsafe to use, or None. Session ids name transcript files."""
    if not isinstance(session_id, str) or not session_id:
        return "must be a non-empty string"
    if len(session_id) <= MAX_SESSION_ID_CHARS and _SESSION_ID_SUSPECT.search(session_id) is None:
        return None
    if len(session_id) > MAX_SESSION_ID_CHARS:
        return f"longer than {MAX_SESSION_ID_CHARS} characters"
    if "/" in session_id or "\\" in session_id:
        return "contains a path separator"
    if session_id in (".", "..") or ".." in session_id:
        return "contains '..'"
    if any(ord(c) < 32 for c in session_id):
        return "contains a control character"
    if has_surrogate(session_id):
        return "contains a lone surrogate (not valid UTF-8)"
    return None


def has_surrogate(text: str) -> bool:
    """A lone surrogate (invalid UTF-8 in argv decodes to one) cannot be stored or sent as JSON."""
    return _SURROGATE.search(text) is not None


def validate_session_id(session_id: str, *, field: str = "session") -> str:
    problem = session_id_problem(session_id)
    if problem:
        raise UsageError(f"{field}: invalid session id {session_id!r}: {problem}")
    return session_id


# Session references in memoryd's text artifacts (corpus lines `[<agent>/sessions/<agent>/<id>#L<n>]`,
# keys and scopes `<agent>:<id>`, `Session ID: <id>` labels; daemon/forget/refs.py) end at
# whitespace, `]`, `#`, `;` and `:`, and a reference that looks like a transcript file name is
# reduced to its session id. An id holding one of those cannot be referenced unambiguously: it
# is refused where sessions are listed, so it is never ingested (and never left behind).
_REFERENCE_STOPS = re.compile(r"[\s\]#;:]")
# (A checkpoint twin, `<id>.checkpoint.<x>`, is never ingested: daemon/sessions/admission.py.)
_FILE_NAME_LIKE = re.compile(r"\.jsonl$|\.jsonl\.(?:reset|deleted)\.|(?i:\.trajectory)$")


def session_reference_problem(session_id: str) -> str | None:
    """Why memoryd's session references could not name this id unambiguously, or None."""
    if (stop := _REFERENCE_STOPS.search(session_id)) is not None:
        return f"contains {stop.group()!r}, which ends a session reference in memory files"
    if _FILE_NAME_LIKE.search(session_id) is not None:
        return "looks like a transcript file name, which a session reference reduces to its stem"
    return None


def session_source_problem(session_id: object) -> str | None:
    """Why a session store's id is not taken in: unsafe (session_id_problem), or one that
    memoryd's references could not name (session_reference_problem)."""
    problem = session_id_problem(session_id)
    if problem is None and isinstance(session_id, str):
        problem = session_reference_problem(session_id)
    return problem
