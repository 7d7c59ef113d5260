"""Requests of the retention jobs: one model each for the CLI and the job, so they cannot drift."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from memoryd.errors import UsageError
from memoryd.retention.scopes import parse_scope

REQUEST_ID_MAX_CHARS = 128


class EraseRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    scope: str = Field(description="The scope to erase, with everything structurally under it.")
    allow_partial: StrictBool = Field(
        default=False, description="Erase what no legal hold blocks; list the rest."
    )
    request_id: str | None = Field(default=None, description="The caller's reference, copied to the receipt.")
    dry_run: StrictBool = Field(
        default=False, description="Plan and report only: no lock, no writes, no receipt."
    )

    @field_validator("scope")
    @classmethod
    def _scope(cls, v: str) -> str:
        return parse_scope(v).key

    @field_validator("request_id")
    @classmethod
    def _request_id(cls, v: str | None) -> str | None:
        if v is not None and (
            not v or len(v) > REQUEST_ID_MAX_CHARS or v != v.strip() or any(ord(c) < 32 for c in v)
        ):
            raise UsageError(f"request_id: {v!r} must be 1-{REQUEST_ID_MAX_CHARS} printable characters")
        return v


class ExpireRequest(BaseModel):
    """The `expire` job's payload. Expiry is host-wide and takes no arguments today; the model
    exists so unknown fields are rejected like every other job's."""

    model_config = ConfigDict(extra="forbid", frozen=True)
