"""What expiry hides, for the readers outside this package (search, dreaming, promotion).

    gate = await load_gate(settings)
    if gate.hides_session(session): skip it

A snapshot of the expired scopes; reading it never creates the retention store.
"""

from __future__ import annotations

from dataclasses import dataclass

from daemon.retention import store as repo
from daemon.retention.mapping import session_scope
from daemon.retention.scopes import covering
from daemon.retention.state import open_for_read
from daemon.sessions.model import SessionInfo
from daemon.settings import Settings


@dataclass(frozen=True, slots=True)
class RetentionGate:
    settings: Settings
    expired: frozenset[str]

    def hides_scope(self, scope: str) -> bool:
        return bool(self.expired) and covering(scope, self.expired) is not None

    def hides_session(self, session: SessionInfo) -> bool:
        return self.hides_scope(session_scope(self.settings, session))


async def load_gate(settings: Settings) -> RetentionGate:
    async with open_for_read(settings) as store:
        expired = await store.read(repo.expired_scope_keys) if store else set()
    return RetentionGate(settings, frozenset(expired))
