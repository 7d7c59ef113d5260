"""The rule that places an ingested session in a scope (pure).

Default: tenant = `retention.tenant`; user = the session's first participant that is not an
agent (by `senderKind`/`type` in `retention.agent_participant_kinds`, or the agent's own id);
the scope is `tenant:<t>:user:<u>:session:<sessionId>`. A session with no such participant
belongs to the tenant directly (`tenant:<t>`): erasing the tenant covers it, erasing a user not.
Agent-curated memory (MEMORY.md, diaries, corpus, index) belongs to the agent; what of it
derives from a session is reached through lineage by the forget pipeline.
"""

from __future__ import annotations

from collections.abc import Iterable

from daemon.retention.scopes import Scope, is_within
from daemon.sessions.model import Participant, SessionInfo
from daemon.settings import Settings


def _is_agent(p: Participant, agent_id: str, agent_kinds: frozenset[str]) -> bool:
    ns = dict(p.namespace)
    kinds = {str(ns.get("senderKind", "")).lower(), str(ns.get("type", "")).lower()}
    return p.actor_id == agent_id or bool(kinds & agent_kinds)


def session_user(session: SessionInfo, agent_kinds: Iterable[str]) -> str | None:
    kinds = frozenset(k.lower() for k in agent_kinds)
    for p in session.participants:
        if not _is_agent(p, session.agent_id, kinds):
            return p.actor_id
    return None


def session_scope(settings: Settings, session: SessionInfo) -> str:
    tenant = Scope((("tenant", settings.retention.tenant),))
    user = session_user(session, settings.retention.agent_participant_kinds)
    if user is None:
        return tenant.key
    scope: Scope = tenant.child("user", user).child("session", session.session_id)
    return scope.key


def sessions_within(
    settings: Settings, sessions: Iterable[SessionInfo], root: str
) -> list[tuple[SessionInfo, str]]:
    """The sessions whose scope is `root` or under it, with their scope.

    A session attached to the tenant only is within `root` only when `root` is the tenant.
    """
    out: list[tuple[SessionInfo, str]] = []
    for s in sessions:
        scope = session_scope(settings, s)
        if is_within(scope, root):
            out.append((s, scope))
    return out
