"""What a sweep decides from a listing and the admission policy alone, and the per-agent record
of the last such decision (DecidedListings), kept by a long-lived process between sweeps.

An idle agent's source returns the very same listing object sweep after sweep, so a quiet
re-sweep reuses the order, state keys and policy reasons of ~10k sessions instead of deciding
them again. Forgotten records and retention expiry change without the listing, so they are
applied every sweep (`apply_forgotten_and_expiry`).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from functools import partial

from memoryd.ingest.checkpoints import state_key
from memoryd.retention.gate import REASON_EXPIRED, RetentionGate
from memoryd.sessions.admission import AdmissionPolicy, admission_reason
from memoryd.sessions.model import SessionInfo, SessionListing
from memoryd.store.tombstones import REASON_FORGOTTEN


@dataclass(frozen=True)
class DecidedListing:
    """What a sweep derives from a listing and the admission policy alone, in session_path
    order: the admitted sessions (state key, session) and the excluded ones (state key,
    session, policy/eligibility reason)."""

    listing: weakref.ref[SessionListing]
    policy: AdmissionPolicy | None
    admitted: list[tuple[str, SessionInfo]]
    excluded: list[tuple[str, SessionInfo, str]]
    session_ids: list[str]
    keys: frozenset[str]


class DecidedListings:
    """Per agent, the last decided listing. An entry lives only as long as its listing: a listing
    the source did not keep (a first sweep's, a changed file's) takes its entry with it instead
    of pinning ~1 KB per session for nothing. Event-loop only."""

    CACHE_NAME = "decided"  # its key in ProcessCaches.sizes()

    def __init__(self) -> None:
        self._by_agent: dict[str, DecidedListing] = {}

    def __contains__(self, agent: str) -> bool:
        return agent in self._by_agent

    def __len__(self) -> int:
        return len(self._by_agent)

    def get(
        self, agent: str, listing: SessionListing, policy: AdmissionPolicy | None
    ) -> DecidedListing | None:
        """The decision for exactly this listing object and policy, if it is the last one made."""
        cached = self._by_agent.get(agent)
        if cached is not None and cached.listing() is listing and cached.policy == policy:
            return cached
        return None

    def put(self, agent: str, decided: DecidedListing) -> None:
        self._by_agent[agent] = decided

    def drop(self, agent: str, ref: weakref.ref[SessionListing]) -> None:
        """Forget the agent's entry if it is still the one of the listing `ref` pointed to."""
        cached = self._by_agent.get(agent)
        if cached is not None and cached.listing is ref:
            del self._by_agent[agent]

    def clear(self) -> None:
        self._by_agent.clear()


def decide_listing(
    decisions: DecidedListings, agent: str, listing: SessionListing, policy: AdmissionPolicy | None
) -> DecidedListing:
    cached = decisions.get(agent, listing, policy)
    if cached is not None:
        return cached
    # One agent's session paths share their prefix, so this is the order of session_path.
    ordered = sorted(listing.sessions, key=lambda s: s.session_id)
    keys = [state_key(agent, s.session_path) for s in ordered]
    admitted: list[tuple[str, SessionInfo]] = []
    excluded: list[tuple[str, SessionInfo, str]] = []
    for key, session in zip(keys, ordered, strict=True):
        reason = admission_reason(session, policy, ())
        if reason is None:
            admitted.append((key, session))
        else:
            excluded.append((key, session, reason))
    decided = DecidedListing(
        weakref.ref(listing, partial(decisions.drop, agent)),
        policy,
        admitted,
        excluded,
        [s.session_id for s in ordered],
        frozenset(keys),
    )
    decisions.put(agent, decided)
    return decided


def apply_forgotten_and_expiry(
    decided: DecidedListing, forgotten: set[str], gate: RetentionGate | None
) -> tuple[list[tuple[str, SessionInfo]], list[tuple[str, SessionInfo, str]]]:
    """The decided split with this sweep's forgotten records and expired scopes applied (they
    change without the listing). Forgotten comes first, as in admission_reason's order."""
    admitted: list[tuple[str, SessionInfo]] = []
    excluded = [
        (key, session, REASON_FORGOTTEN if session.session_id in forgotten else reason)
        for key, session, reason in decided.excluded
    ]
    for key, session in decided.admitted:
        if session.session_id in forgotten:
            excluded.append((key, session, REASON_FORGOTTEN))
        elif gate is not None and gate.hides_session(session):
            excluded.append((key, session, REASON_EXPIRED))  # reads skip it, so nothing new is derived
        else:
            admitted.append((key, session))
    return admitted, excluded
