"""The backfill request: one model for the CLI and the `backfill` job (light: no domain code)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator, model_validator

from memoryd.constants import BACKFILL_DEFAULT_LIMIT_DAYS
from memoryd.errors import UsageError
from memoryd.ids import validate_agent_id

_DAY = re.compile(r"\A\d{4}-\d{2}-\d{2}\Z")
Mode = Literal["preview", "rem", "apply", "rollback"]


class BackfillRequest(BaseModel):
    """One request model for the CLI and the `backfill` job."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str
    from_day: str | None = Field(default=None, description="First day (YYYY-MM-DD), inclusive.")
    to_day: str | None = Field(default=None, description="Last day (YYYY-MM-DD), inclusive.")
    limit_days: StrictInt = Field(default=BACKFILL_DEFAULT_LIMIT_DAYS, ge=1, le=10_000)
    mode: Mode = "preview"

    @field_validator("agent")
    @classmethod
    def _agent(cls, v: str) -> str:
        return validate_agent_id(v)

    @field_validator("from_day", "to_day")
    @classmethod
    def _day(cls, v: str | None) -> str | None:
        if v is not None and not _DAY.match(v):
            raise ValueError(f"expected YYYY-MM-DD, got {v!r}")
        return v

    @model_validator(mode="after")
    def _range(self) -> BackfillRequest:
        if self.from_day and self.to_day and self.from_day > self.to_day:
            raise UsageError(f"from_day: {self.from_day} is after to_day {self.to_day}")
        return self
