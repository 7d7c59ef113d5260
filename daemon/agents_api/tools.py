"""The tools' arguments and results: pydantic models whose JSON schemas the server lists.

Results are the CLI's and the jobs' own reports (the search and entry reports of
daemon/index/search_report.py and the forget report, plain dataclasses whose schema pydantic
reads; the memory-tool API's read and write results, models).
Arguments are the models below; `forget_request` is the one place a tool's arguments become
the forget job's request: a `key` becomes the forget of that one entry (`entries`), a `session`
the forget of that session.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

from memoryd.constants import CHUNK_KEY_PREFIX, SEARCH_MAX_LIMIT
from memoryd.errors import RefusedError, UsageError
from memoryd.forget.request import ForgetRequest
from memoryd.index.recall_scope import RecallScope
from memoryd.retention.scopes import parse_scope

Participant = Annotated[
    str | None,
    Field(
        default=None,
        min_length=1,
        description="The actor id of the person in the current conversation: recall returns only "
        "what derives from sessions they took part in, and owner-level memory.",
    ),
]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SearchArgs(_Args):
    query: str = Field(min_length=1, description="Words or a question to find memory by.")
    limit: int = Field(default=10, ge=1, le=SEARCH_MAX_LIMIT, description="Hits at most.")
    participant: Participant = None


class GetArgs(_Args):
    key: str = Field(min_length=1, description="A hit's `key`, as memory_search returned it.")
    participant: Participant = None


class ForgetArgs(_Args):
    key: str | None = Field(default=None, description="A hit's `key`: forget that one memory.")
    session: str | None = Field(
        default=None, description="A session id or key (exact), e.g. one a hit's `sessions` names."
    )
    dry_run: StrictBool = Field(default=False, description="Report what would be removed; change nothing.")
    participant: Participant = None

    @model_validator(mode="after")
    def _one_target(self) -> ForgetArgs:
        if (self.key is None) == (self.session is None):
            raise ValueError("give exactly one of key or session")
        return self


class ReadArgs(_Args):
    scope: str = Field(description="tenant:<t>[:user:<u>[:session:<s>[:object:<o>]]]")
    participant: Participant = None


class WriteArgs(_Args):
    scope: str = Field(
        description="tenant:<t>[:user:<u>[:session:<s>[:object:<o>]]]; missing ancestors are created."
    )
    content: str = Field(description="The memory text (credentials are redacted).")
    provenance_parent: str | None = Field(default=None, description="The scope this memory derives from.")
    retention_days: int | None = Field(
        default=None, ge=1, description="TTL in days (clamped to the parent's)."
    )
    participant: Participant = None


def asking(scope: RecallScope, fixed: str | None, given: str | None) -> str | None:
    """Who a call recalls for: the server's participant, or the one the call names. Pure.

    Under `recall.scope = "participant"` someone must be named; a server started for one
    participant answers for no other. Under "agent" nothing is required, and a name narrows."""
    if fixed is not None and given is not None and given != fixed:
        raise RefusedError(f"participant: this server recalls for {fixed!r} only, not {given!r}")
    who = fixed if fixed is not None else given
    if who is None and scope == "participant":
        raise UsageError(
            "participant: recall.scope is 'participant': name the conversation's participant "
            "(or start `memoryd mcp --participant ACTOR`)"
        )
    return who


def forget_request(agent: str, args: ForgetArgs) -> ForgetRequest:
    """The forget job's request for a memory_forget call: the one mapping of its arguments."""
    if args.key is not None:
        if args.key.startswith(CHUNK_KEY_PREFIX):
            raise UsageError(
                f"key: {args.key[:40]!r} is a piece of a transcript, not one memory; forget the "
                "session it derives from (the hit's `sessions`) with `session`"
            )
        return ForgetRequest(agent=agent, entries=[args.key], dry_run=args.dry_run)
    assert args.session is not None
    return ForgetRequest(agent=agent, sessions=[args.session], dry_run=args.dry_run)


def check_scope_for(scope: str, participant: str | None, field: str = "scope") -> str:
    """A memory-tool scope a participant may use: under their own user, when one is asking."""
    parsed = parse_scope(scope, field=field)
    if participant is not None and ("user", participant) not in parsed.parts:
        raise RefusedError(
            f"{field}: {parsed.key} is not under user:{participant}; a participant reads and "
            "writes only their own scopes"
        )
    return parsed.key
