"""Where an agent's state lives, and which agents this host knows."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from memoryd.constants import INGEST_SCRATCH_DIR
from memoryd.ids import validate_agent_id
from memoryd.settings import Settings


@dataclass(frozen=True, slots=True)
class AgentPaths:
    agent_id: str
    state_dir: Path  # state_dir/agents/<agent>
    db_path: Path  # memory.sqlite
    secret_path: Path  # key for hashed forgotten-session records (outside the database)
    workspace: Path

    @property
    def memory_dir(self) -> Path:
        return self.workspace / "memory"

    @property
    def corpus_dir(self) -> Path:
        return self.workspace / "memory" / ".dreams" / "session-corpus"

    @property
    def scratch_dir(self) -> Path:
        """The parallel scan's scratch files (memory text until merged: forget, erase and the
        verifier reach it)."""
        return self.state_dir / INGEST_SCRATCH_DIR


def agent_paths(settings: Settings, agent_id: str) -> AgentPaths:
    validate_agent_id(agent_id)
    base = settings.state_dir / "agents" / agent_id
    return AgentPaths(
        agent_id, base, base / "memory.sqlite", base / "forgotten.key", settings.workspace_for(agent_id)
    )


def list_agents(settings: Settings) -> list[str]:
    """Configured agents plus every agent directory under sessions_root/agents."""
    found = set(settings.agents)
    root = settings.sessions_root / "agents"
    try:
        with os.scandir(root) as entries:
            # A symlinked agent directory may lead out of sessions_root: it is not an agent here.
            names = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
    except (FileNotFoundError, NotADirectoryError):
        names = []
    for name in names:
        try:
            found.add(validate_agent_id(name))
        except Exception:
            continue
    return sorted(found)


def missing_sessions_root(settings: Settings) -> str | None:
    """A warning when sessions_root does not exist: the host then serves no agent found there,
    which is easy to miss (under systemd the default ~/.openclaw is the service user's)."""
    if settings.sessions_root.is_dir():
        return None
    return (
        f"sessions_root {settings.sessions_root} does not exist: no agent is found there until it "
        "does; set sessions_root in the config (MEMORYD_SESSIONS_ROOT) to where the sessions live"
    )


def agents_with_state(settings: Settings) -> list[str]:
    """Every listed agent and every agent with a state directory (a store can outlive its
    sessions directory): what an erasure and its verifier must look at."""
    names = set(list_agents(settings))
    try:
        names.update(os.listdir(settings.state_dir / "agents"))
    except FileNotFoundError:
        pass
    out = []
    for name in sorted(names):
        try:
            out.append(validate_agent_id(name))
        except Exception:
            continue
    return out
