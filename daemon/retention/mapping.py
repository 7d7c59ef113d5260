"""Who a session belongs to (pure): its non-agent participants.

A participant is an agent, not a user, when it is the agent itself or its `senderKind`/`type`
is one of `retention.agent_participant_kinds`. A session with exactly one other participant is
that user's: its scope is `tenant:<t>:user:<u>:session:<sessionId>`. A session with none (cron,
heartbeat, an agent alone) or with several (a group chat) belongs to the tenant: expiring or
holding one user's scope does not reach a conversation other people took part in. Erasure finds
a user in every session they take part in, shared ones included (retention/subjects.py).
Agent-curated memory (MEMORY.md, diaries, corpus, index) belongs to the agent; what of it
derives from a session is reached through lineage by the forget pipeline.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from memoryd.retention.scopes import Scope
from memoryd.sessions.model import Participant, SessionInfo
from memoryd.settings import Settings


def is_agent(actor_id: str, namespace: dict[str, Any], agent_id: str, agent_kinds: frozenset[str]) -> bool:
    kinds = {str(namespace.get("senderKind", "")).lower(), str(namespace.get("type", "")).lower()}
    return actor_id == agent_id or bool(kinds & agent_kinds)


def agent_kinds(settings: Settings) -> frozenset[str]:
    return frozenset(k.lower() for k in settings.retention.agent_participant_kinds)


def users_of(participants: Iterable[Participant], agent_id: str, kinds: frozenset[str]) -> list[str]:
    """The non-agent participants' actor ids, in order, each once."""
    out: dict[str, None] = {}
    for p in participants:
        if not is_agent(p.actor_id, dict(p.namespace), agent_id, kinds):
            out[p.actor_id] = None
    return list(out)


def session_scope(settings: Settings, session: SessionInfo) -> str:
    tenant = Scope((("tenant", settings.retention.tenant),))
    users = users_of(session.participants, session.agent_id, agent_kinds(settings))
    if len(users) != 1:
        return tenant.key
    scope: Scope = tenant.child("user", users[0]).child("session", session.session_id)
    return scope.key
