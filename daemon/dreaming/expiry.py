"""Retention expiry in dreaming: staged entries whose origin sessions all belong to expired
scopes are not selected for the diary nor promoted (seed 001: expiry hides from dreaming).

Only the given entries' origin sessions are judged, and nothing is looked up unless some
scope has expired. The entries stay staged: expiry hides, it does not delete.
"""

from __future__ import annotations

from collections.abc import Sequence

from memoryd.dreaming.staged import StagedEntry
from memoryd.retention.gate import hidden_entries, load_visibility
from memoryd.sessions.model import SessionSource
from memoryd.settings import Settings


async def drop_expired(
    settings: Settings, sessions: SessionSource, entries: Sequence[StagedEntry]
) -> tuple[list[StagedEntry], int]:
    """The entries still visible, and how many were hidden."""
    origins = [o for e in entries for o in e.origins]
    visibility = await load_visibility(settings, sessions) if origins else None
    if visibility is None:
        return list(entries), 0
    hidden = hidden_entries(origins, visibility.hidden_sessions(o.session_id for o in origins))
    kept = [e for e in entries if e.entry_key not in hidden]
    return kept, len(entries) - len(kept)
