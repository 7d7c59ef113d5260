"""What expiry hides, for the readers outside this package (search, dreaming, promotion, ingest).

    gate = await load_gate(settings)
    if gate.hides_session(session): skip it

    visibility = await load_visibility(settings, rt.sessions)   # None: nothing is expired
    hidden = visibility.hidden_sessions(candidate_session_ids)
    hidden_keys = hidden_entries(origins_of_candidate_entries, hidden)

A snapshot of the expired scopes; reading it never creates the retention store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import anyio

from memoryd.retention.mapping import session_scope
from memoryd.retention.scopes import Scope, covering
from memoryd.retention.state import open_for_read
from memoryd.sessions.model import SessionInfo, SessionSource
from memoryd.settings import Settings
from memoryd.store import retention as repo
from memoryd.store.origins import EntryOrigin

# Ingest's exclusion reason for a session whose scope has expired (it is not newly staged).
REASON_EXPIRED = "expired"


@dataclass(frozen=True, slots=True)
class RetentionGate:
    settings: Settings
    expired: frozenset[str]

    @property
    def active(self) -> bool:
        """Whether anything is expired at all (readers skip every lookup when not)."""
        return bool(self.expired)

    def hides_scope(self, scope: str) -> bool:
        return bool(self.expired) and covering(scope, self.expired) is not None

    def hides_session(self, session: SessionInfo) -> bool:
        return self.hides_scope(session_scope(self.settings, session))

    def hides_tenant(self) -> bool:
        return self.hides_scope(Scope((("tenant", self.settings.retention.tenant),)).key)


async def load_gate(settings: Settings) -> RetentionGate:
    async with open_for_read(settings) as store:
        expired = await store.read(repo.expired_scope_keys) if store else set()
    return RetentionGate(settings, frozenset(expired))


@dataclass(frozen=True, slots=True)
class SessionVisibility:
    """The gate plus the agent's session metadata, to judge session ids (what stores hold).

    A session the source no longer lists (reset, deleted) has no participants to map; like any
    session without a user it belongs to the tenant, so only an expired tenant hides it.
    """

    gate: RetentionGate
    sessions: Mapping[str, SessionInfo]

    def hidden_sessions(self, session_ids: Iterable[str]) -> frozenset[str]:
        tenant_hidden = self.gate.hides_tenant()
        hidden: set[str] = set()
        for sid in set(session_ids):
            info = self.sessions.get(sid)
            if self.gate.hides_session(info) if info is not None else tenant_hidden:
                hidden.add(sid)
        return frozenset(hidden)


async def load_visibility(settings: Settings, source: SessionSource) -> SessionVisibility | None:
    """None when no scope is expired, so the common case costs one small read and nothing else."""
    gate = await load_gate(settings)
    if not gate.active:
        return None
    listing = await anyio.to_thread.run_sync(source.list_sessions)
    return SessionVisibility(gate, {s.session_id: s for s in listing.sessions})


def hidden_entries(origins: Iterable[EntryOrigin], hidden_sessions: frozenset[str]) -> frozenset[str]:
    """Entry keys all of whose origin sessions are hidden (pure).

    An entry that also came from a visible session stays visible: that subject's retention
    contract still holds, and expiry only hides, it never deletes.
    """
    sessions_of: dict[str, set[str]] = {}
    for o in origins:
        sessions_of.setdefault(o.entry_key, set()).add(o.session_id)
    return frozenset(k for k, sids in sessions_of.items() if sids <= hidden_sessions)
