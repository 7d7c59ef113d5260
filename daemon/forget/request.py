"""The forget request: one model for the CLI and the `forget` job, so they cannot drift
(validated through its operation, daemon.ops.forget).

Selectors are exact strings, never patterns. Every problem raises UsageError naming the field.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

from daemon.constants import MAX_SELECTORS
from daemon.errors import UsageError
from daemon.ids import has_surrogate, session_id_problem, validate_agent_id

NO_SELECTOR_MESSAGE = (
    "memory forget requires a session, hook source, or participant selector "
    "(--session, --hook-source or --participant)"
)
_DATE_ONLY_RE = re.compile(r"\A\d{4}-\d{2}-\d{2}\Z")
_NUMBER_RE = re.compile(r"\A-?\d+(?:\.\d+)?\Z")


def _clean_values(field: str, values: list[str]) -> list[str]:
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
        raise UsageError(f"since: Invalid memory session date: {shown}") from None


class ForgetRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str = Field(description="The agent whose memory to purge.")
    sessions: list[str] = Field(default_factory=list, description="Session ids or keys (exact).")
    participants: list[str] = Field(default_factory=list, description="Recorded actor ids (exact).")
    hook_sources: list[str] = Field(default_factory=list, description="Recorded hook sources (exact).")
    since: str | None = Field(default=None, description="Only sessions created at or after this date.")
    dry_run: StrictBool = Field(default=False, description="Report only: no lock, no writes.")

    @field_validator("agent")
    @classmethod
    def _agent(cls, v: str) -> str:
        return validate_agent_id(v, field="agent")

    @field_validator("sessions")
    @classmethod
    def _sessions(cls, v: list[str]) -> list[str]:
        for value in v:
            problem = session_id_problem(value)
            if problem:
                raise UsageError(f"sessions: invalid session id or key {value!r}: {problem}")
        return _clean_values("sessions", v)

    @field_validator("participants")
    @classmethod
    def _participants(cls, v: list[str]) -> list[str]:
        return _clean_values("participants", v)

    @field_validator("hook_sources")
    @classmethod
    def _hook_sources(cls, v: list[str]) -> list[str]:
        return _clean_values("hook_sources", v)

    @field_validator("since")
    @classmethod
    def _since(cls, v: str | None) -> str | None:
        if v is not None:
            parse_since(v)
        return v

    @model_validator(mode="after")
    def _selector(self) -> ForgetRequest:
        if not (self.sessions or self.participants or self.hook_sources):
            raise UsageError(NO_SELECTOR_MESSAGE)
        named = len(self.sessions) + len(self.participants) + len(self.hook_sources)
        if named > MAX_SELECTORS:
            raise UsageError(
                f"selectors: {named} given; at most {MAX_SELECTORS} per forget "
                "(send several forgets, or select by participant or hook source)"
            )
        return self

    @property
    def since_ms(self) -> int | None:
        return None if self.since is None else parse_since(self.since)
