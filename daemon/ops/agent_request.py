"""The payload of a job that names only its agent (and a few flags): the sweeps and dreaming."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from daemon.ids import validate_agent_id


class AgentRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str = Field(description="The agent whose memory the job works on.")

    @field_validator("agent")
    @classmethod
    def _agent(cls, v: str) -> str:
        return validate_agent_id(v)
