"""The payload of a job that names only its agent (and a few flags): the sweeps and dreaming."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator

from memoryd.ids import validate_agent_id

# A live job's hint generation (daemon/ingest/live_hints.py): a number, never a session id.
LiveGeneration = Annotated[
    StrictInt | None,
    Field(
        ge=0,
        description="Set by the daemon's watcher: consider only the sessions it saw change, "
        "if this process still holds that hint (otherwise every session).",
    ),
]


class AgentRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str = Field(description="The agent whose memory the job works on.")

    @field_validator("agent")
    @classmethod
    def _agent(cls, v: str) -> str:
        return validate_agent_id(v)
