"""The forget request: one model for the CLI and the `forget` job, so they cannot drift
(validated through its operation, memoryd.ops.forget), by the rules of memoryd.forget.rules.

Selectors are exact strings, never patterns. Every problem raises UsageError naming the field.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

from memoryd.forget.rules import (
    check_agent,
    check_selector_count,
    check_verify,
    clean_match,
    clean_sessions,
    clean_values,
    parse_since,
)


class ForgetRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str = Field(description="The agent whose memory to purge.")
    sessions: list[str] = Field(default_factory=list, description="Session ids or keys (exact).")
    participants: list[str] = Field(default_factory=list, description="Recorded actor ids (exact).")
    hook_sources: list[str] = Field(default_factory=list, description="Recorded hook sources (exact).")
    since: str | None = Field(default=None, description="Only sessions created at or after this date.")
    entries: list[str] = Field(
        default_factory=list,
        description="Entry keys (exact, as search and the preview show them): forget these facts "
        "and what was derived from them, and never stage them again from the same sessions.",
    )
    match: str | None = Field(
        default=None,
        description="The whole text of a staged or promoted entry (exact, whitespace collapsed; "
        "a leading `User: ` or `Assistant: ` may be left out): forget every entry with that text.",
    )
    dry_run: StrictBool = Field(default=False, description="Report only: no lock, no writes.")
    verify: StrictBool = Field(
        default=False,
        description="After the purge, run the erasure verifier over the forgotten sessions' content "
        "(this agent's store and workspace, and Redis); the report gains `verification`. Not with "
        "`dry_run`, `entries` or `match`.",
    )

    @field_validator("agent")
    @classmethod
    def _agent(cls, v: str) -> str:
        return check_agent(v)

    @field_validator("sessions")
    @classmethod
    def _sessions(cls, v: list[str]) -> list[str]:
        return clean_sessions(v)

    @field_validator("participants")
    @classmethod
    def _participants(cls, v: list[str]) -> list[str]:
        return clean_values("participants", v)

    @field_validator("hook_sources")
    @classmethod
    def _hook_sources(cls, v: list[str]) -> list[str]:
        return clean_values("hook_sources", v)

    @field_validator("entries")
    @classmethod
    def _entries(cls, v: list[str]) -> list[str]:
        return clean_values("entries", v)

    @field_validator("match")
    @classmethod
    def _match(cls, v: str | None) -> str | None:
        return clean_match(v)

    @field_validator("since")
    @classmethod
    def _since(cls, v: str | None) -> str | None:
        if v is not None:
            parse_since(v)
        return v

    @model_validator(mode="after")
    def _selector(self) -> ForgetRequest:
        check_selector_count(
            self.sessions, self.participants, self.hook_sources, self.entries, self.match, self.since
        )
        check_verify(self.verify, self.dry_run, self.entries, self.match)
        return self

    @property
    def since_ms(self) -> int | None:
        return None if self.since is None else parse_since(self.since)
