"""The subject model: which ingested sessions an erased scope reaches.

A user's data is everywhere the user appears: every session, of every agent, live or archived,
in which they are any participant — named in its metadata, or the sender of one of its
messages. The sources say who is in a live session; the participants recorded at ingestion
(store/participants.py) say it for archives and for sessions whose metadata is gone; and every
transcript is read whole for turns the user sent (retention/contributions.py `spoken_in`), so
a session whose metadata never named them, or whose part with their turns ingestion has not
reached yet, is found too, with every sender it names.

* `tenant:<t>` reaches every session of every agent (when `t` is `retention.tenant`);
* `tenant:<t>:user:<u>` every session in which `u` takes part;
* `tenant:<t>:user:<u>:session:<s>` session `s`, if `u` takes part in it;
* an object scope no session.

A session whose only non-agent participant is the user is theirs. One with other users too is
*shared*: memoryd's lineage is kept per session, not per message, so the session's derived
memory is removed whole (the subject's contributions cannot otherwise be made unrecoverable)
and the receipt counts it apart, as over-deletion. A legal hold on any of its participants'
scopes (`tenant:<t>:user:<p>[:session:<s>]`) blocks it. Another user's direct sessions are
never reached: the subject does not take part in them.

`subject_sessions` is pure; `gather_sessions` reads the sources and the stores.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import anyio

from memoryd.agents import agent_paths, agents_with_state
from memoryd.retention.contributions import spoken_in
from memoryd.retention.mapping import agent_kinds, is_agent, users_of
from memoryd.retention.plan import SessionTarget
from memoryd.retention.scopes import Scope, parse_scope
from memoryd.sessions.model import SessionInfo
from memoryd.sessions.source import session_source_for
from memoryd.settings import Settings
from memoryd.store.db import Store
from memoryd.store.participants import (
    ParticipantRow,
    all_recorded_sessions,
    participants_of_sessions,
    sessions_of_actors,
)


@dataclass(frozen=True, slots=True)
class SessionFacts:
    """One session of one agent, as far as it is known: its users (non-agent participants)."""

    agent_id: str
    session_id: str
    users: frozenset[str]


def _session_scope(tenant: Scope, user: str, session_id: str) -> str:
    return tenant.child("user", user).child("session", session_id).key


def subject_sessions(target: str, tenant_id: str, facts: Iterable[SessionFacts]) -> list[SessionTarget]:
    """The sessions `target` reaches (module doc), each with the scopes whose holds block it."""
    scope = parse_scope(target)
    if scope.level == "object" or scope.parts[0] != ("tenant", tenant_id):
        return []
    tenant = Scope((("tenant", tenant_id),))
    user = dict(scope.parts).get("user")
    wanted_session = dict(scope.parts).get("session")
    out: list[SessionTarget] = []
    for f in sorted(facts, key=lambda f: (f.agent_id, f.session_id)):
        if user is not None and user not in f.users:
            continue
        if wanted_session is not None and f.session_id != wanted_session:
            continue
        held_by = tuple(sorted(_session_scope(tenant, u, f.session_id) for u in f.users)) or (tenant.key,)
        own = _session_scope(tenant, user, f.session_id) if user is not None else held_by[0]
        shared = user is not None and len(f.users) > 1
        out.append(SessionTarget(f.agent_id, f.session_id, own, held_by, shared))
    return out


def _recorded_users(
    rows: Sequence[ParticipantRow], agent_id: str, kinds: frozenset[str]
) -> dict[str, set[str]]:
    users: dict[str, set[str]] = {}
    for r in rows:
        try:
            namespace = json.loads(r.namespace)
        except ValueError:
            namespace = {}
        if not is_agent(r.actor_id, namespace if isinstance(namespace, dict) else {}, agent_id, kinds):
            users.setdefault(r.session_id, set()).add(r.actor_id)
    return users


def combine(
    agent_id: str,
    live: Sequence[SessionInfo],
    archived_ids: Iterable[str],
    recorded: Sequence[ParticipantRow],
    kinds: frozenset[str],
    spoken: Mapping[str, frozenset[str]] | None = None,
) -> list[SessionFacts]:
    """One agent's sessions with their users from live metadata, recorded rows and the senders
    their transcripts name (`spoken`: session id -> senders) (pure)."""
    users: dict[str, set[str]] = {s.session_id: set(users_of(s.participants, agent_id, kinds)) for s in live}
    for sid, found in _recorded_users(recorded, agent_id, kinds).items():
        users.setdefault(sid, set()).update(found)
    for sid, senders in (spoken or {}).items():
        users.setdefault(sid, set()).update(a for a in senders if not is_agent(a, {}, agent_id, kinds))
    for sid in archived_ids:
        users.setdefault(sid, set())
    return [SessionFacts(agent_id, sid, frozenset(u)) for sid, u in users.items()]


async def _recorded_rows(
    settings: Settings, agent_id: str, user: str | None, candidates: Sequence[str], *, migrate: bool
) -> list[ParticipantRow]:
    """The recorded participants of the sessions the user took part in (all, for a tenant)."""
    path = agent_paths(settings, agent_id).db_path
    if not path.exists():
        return []
    store = await (Store.open(path) if migrate else Store.open_existing(path))
    if store is None:
        return []
    try:

        def read(conn: object) -> list[ParticipantRow]:
            found = sessions_of_actors(conn, [user]) if user is not None else all_recorded_sessions(conn)  # type: ignore[arg-type]
            return participants_of_sessions(conn, sorted(set(found) | set(candidates)))  # type: ignore[arg-type]

        return await store.read(read)
    finally:
        await store.close()


def _listing(settings: Settings, agent_id: str) -> tuple[tuple[SessionInfo, ...], list[str]]:
    source = session_source_for(settings, agent_id)
    return source.list_sessions().sessions, [a.session_id for a in source.list_archives()]


async def gather_sessions(settings: Settings, target: str, *, migrate: bool) -> list[SessionTarget]:
    """The sessions `target` reaches on this host. `migrate`: a real erasure may bring an agent
    store up to date; a dry run reads what is there and creates nothing."""
    scope = parse_scope(target)
    tenant_id = settings.retention.tenant
    if scope.level == "object" or scope.parts[0] != ("tenant", tenant_id):
        return []
    user = dict(scope.parts).get("user")
    kinds = agent_kinds(settings)
    facts: list[SessionFacts] = []
    for agent in agents_with_state(settings):
        live, archived = await anyio.to_thread.run_sync(_listing, settings, agent)
        users_live = {s.session_id: users_of(s.participants, agent, kinds) for s in live}
        spoken = await anyio.to_thread.run_sync(spoken_in, settings, agent, user) if user is not None else {}
        candidates = [
            sid for sid, users in users_live.items() if user is None or user in users or sid in spoken
        ]
        recorded = await _recorded_rows(settings, agent, user, candidates, migrate=migrate)
        relevant = set(candidates) | {r.session_id for r in recorded} | set(spoken)
        facts += combine(
            agent,
            [s for s in live if s.session_id in relevant],
            archived if user is None else [],
            recorded,
            kinds,
            spoken,
        )
    return subject_sessions(target, tenant_id, facts)
