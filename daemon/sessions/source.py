"""Pick the session source for an agent: the OpenClaw agent database when present (or forced),
else the sessions.json layout."""

from __future__ import annotations

from memoryd.ids import validate_agent_id
from memoryd.sessions.json_store import JsonSessionSource, ListingCache
from memoryd.sessions.model import SessionSource
from memoryd.settings import Settings

OPENCLAW_DB_RELATIVE = ("agent", "openclaw-agent.sqlite")


def session_source_for(
    settings: Settings, agent_id: str, listings: ListingCache | None = None
) -> SessionSource:
    """The agent's source; `listings` is the process's cache of idle listings (a fresh one when
    not given: nothing is kept beyond this source)."""
    validate_agent_id(agent_id)
    agent_root = settings.sessions_root / "agents" / agent_id
    choice = settings.session_source_for(agent_id)
    db_path = agent_root.joinpath(*OPENCLAW_DB_RELATIVE)
    if choice == "openclaw" or (choice == "auto" and db_path.exists()):
        from memoryd.sessions.openclaw_store import OpenClawSessionSource

        return OpenClawSessionSource(agent_id, db_path, root=settings.sessions_root)
    return JsonSessionSource(agent_id, agent_root / "sessions", listings, root=settings.sessions_root)
