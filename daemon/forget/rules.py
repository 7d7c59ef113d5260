"""The rules of a forget request, as plain functions: the request model (memoryd.forget.request)
validates with them, and so does a dry run from the CLI, which builds no pydantic model (a
preview is the command an operator runs most, and pydantic's import was most of its start-up).

Selectors are exact strings, never patterns. Every problem raises UsageError naming the field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import UTC, datetime

from memoryd.constants import MAX_SELECTORS, STAGED_SNIPPET_MAX_CHARS
from memoryd.errors import UsageError
from memoryd.ids import has_surrogate, session_id_problem, validate_agent_id

NO_SELECTOR_MESSAGE = (
    "memory forget requires a session, hook source, or participant selector "
    "(--session, --hook-source or --participant), or an entry (--entry or --match)"
)
MIXED_SELECTOR_MESSAGE = (
    "entries/match: forget one fact (--entry, --match) or whole sessions (--session, --participant, "
    "--hook-source, --since), not both in one request; send two forgets"
)
VERIFY_DRY_RUN_MESSAGE = (
    "verify: --verify cannot be combined with --dry-run (a preview removes nothing to verify)"
)
VERIFY_ENTRIES_MESSAGE = (
    "verify: --verify checks forgotten sessions; with --entry or --match their sessions are kept "
    "(run 'memoryd verify' for an erasure)"
)
_DATE_ONLY_RE = re.compile(r"\A\d{4}-\d{2}-\d{2}\Z")
_NUMBER_RE = re.compile(r"\A-?\d+(?:\.\d+)?\Z")


def clean_values(field: str, values: Sequence[str]) -> list[str]:
    out: list[str] = []
    for value in values:
        if not value or value != value.strip() or any(ord(c) < 32 for c in value):
            raise UsageError(
                f"{field}: invalid selector {value!r} (non-empty, no surrounding "
                "spaces or control characters; selectors are exact strings)"
            )
        if has_surrogate(value):
            raise UsageError(
                f"{field}: invalid selector {value!r}: contains a lone surrogate (not valid UTF-8)"
            )
        out.append(value)
    return list(dict.fromkeys(out))


def clean_sessions(values: Sequence[str]) -> list[str]:
    for value in values:
        problem = session_id_problem(value)
        if problem:
            raise UsageError(f"sessions: invalid session id or key {value!r}: {problem}")
    return clean_values("sessions", values)


# The reference's wording names the bad value; this says what would have been taken.
SINCE_FORMS = (
    "use a date (2024-05-01, UTC midnight), a date-time (2024-05-01T09:30:00Z, "
    "2024-05-01T09:30:00+02:00; no offset = UTC) or Unix milliseconds (1714550400000)"
)


def parse_since(since: str) -> int:
    """`--since` as Unix ms: an ISO date (UTC midnight), an ISO date-time, or a number of ms."""
    text = since.strip()
    try:
        if _NUMBER_RE.match(text):
            value = float(text)
            if not math.isfinite(value):
                raise ValueError
            return int(value)
        if _DATE_ONLY_RE.match(text):
            return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return int(parsed.timestamp() * 1000)
    except ValueError:
        shown = since if since.isprintable() else repr(since)  # the error stays one line
        raise UsageError(f"since: Invalid memory session date: {shown}; {SINCE_FORMS}") from None


def clean_match(text: str | None) -> str | None:
    """`--match`: the whole text of an entry (exact; surrounding spaces are not part of it)."""
    if text is None:
        return None
    if not text.strip() or any(ord(c) < 32 and c not in "\t" for c in text):
        raise UsageError(
            f"match: invalid text {text!r} (the non-empty text of one entry, on one line; "
            "`memoryd search` shows entries)"
        )
    if has_surrogate(text):
        raise UsageError(f"match: invalid text {text!r}: contains a lone surrogate (not valid UTF-8)")
    if len(text) > STAGED_SNIPPET_MAX_CHARS:
        raise UsageError(
            f"match: text of {len(text)} characters; an entry holds at most {STAGED_SNIPPET_MAX_CHARS}"
        )
    return text


def check_selector_count(
    sessions: Sequence[str],
    participants: Sequence[str],
    hook_sources: Sequence[str],
    entries: Sequence[str] = (),
    match: str | None = None,
    since: str | None = None,
) -> None:
    by_entry = bool(entries) or match is not None
    if by_entry and (sessions or participants or hook_sources or since is not None):
        raise UsageError(MIXED_SELECTOR_MESSAGE)
    if not (sessions or participants or hook_sources or by_entry):
        raise UsageError(NO_SELECTOR_MESSAGE)
    named = len(sessions) + len(participants) + len(hook_sources) + len(entries)
    if named > MAX_SELECTORS:
        raise UsageError(
            f"selectors: {named} given; at most {MAX_SELECTORS} per forget "
            "(send several forgets, or select by participant or hook source)"
        )


def check_verify(verify: bool, dry_run: bool, entries: Sequence[str], match: str | None) -> None:
    """`verify` runs the verifier over the sessions a real forget recorded as forgotten."""
    if not verify:
        return
    if dry_run:
        raise UsageError(VERIFY_DRY_RUN_MESSAGE)
    if entries or match is not None:
        raise UsageError(VERIFY_ENTRIES_MESSAGE)


def check_agent(agent: str) -> str:
    return validate_agent_id(agent, field="agent")
