"""After a forget: earlier job arguments and results in Redis that name what it forgot.

Results stored today are content-free (daemon/stored_form.py), but one kept from before, or a
queued job's arguments (a forget or erase naming the same sessions), may still hold the
forgotten sessions' ids or text; Redis is outside the stores, so the forget reaches it here.
The needles are the erasure's (daemon/retention/needles.py): the sessions' ids and exact
snippets of their transcripts, less text that the agent's other sessions also hold. A running
job's arguments are kept (it is running them).

Knowing what the other sessions hold means reading every other transcript of the agent: that
read grows with the store, not with the forget, so it is done only when some value names the
forgotten sessions before that text is set aside (dropping needles can only spare values: a
value that even the whole set of needles misses is never deleted). With no job value in Redis
at all (a host whose results have expired, commands run in the foreground) nothing is read.
"""

from __future__ import annotations

from dataclasses import replace

import anyio
from redis.asyncio import Redis

from memoryd.redis_values import keys_naming, purge_naming, purgeable_keys
from memoryd.sessions.model import ArchiveInfo, SessionInfo
from memoryd.sessions.source import session_source_for
from memoryd.settings import Settings

Sessions = list[SessionInfo | ArchiveInfo]


def split_sessions(settings: Settings, agent: str, session_ids: list[str]) -> tuple[Sessions, Sessions]:
    """(the live windows and archives of the forgotten ids, those of every other session of the
    agent): transcripts are never deleted, and the others' text may stay through them."""
    wanted = set(session_ids)
    source = session_source_for(settings, agent)
    forgotten: Sessions = []
    surviving: Sessions = []
    every: Sessions = [*source.list_sessions().sessions, *source.list_archives()]
    for s in every:
        (forgotten if s.session_id in wanted else surviving).append(s)
    return forgotten, surviving


def forgotten_sessions(settings: Settings, agent: str, session_ids: list[str]) -> Sessions:
    """The live windows and archives of the forgotten ids (the source reads only those)."""
    wanted = set(session_ids)
    source = session_source_for(settings, agent)
    every: Sessions = [*source.list_selectable(session_ids, (), ()).sessions, *source.list_archives()]
    return [s for s in every if s.session_id in wanted]


async def purge_forgotten_from_redis(
    settings: Settings, redis: Redis, agent: str, session_ids: list[str]
) -> int:
    """Delete earlier job arguments and results naming the forgotten sessions; how many."""
    if not session_ids or not await purgeable_keys(redis, spare_running=True):
        return 0  # no job value to look into: no transcript read, no needle compiled
    # Imported here: a forget with no job value in Redis never loads the erasure's modules.
    from memoryd.retention.contributions import session_voices
    from memoryd.retention.erase import session_subject
    from memoryd.retention.needles import compile_needles

    forgotten = await anyio.to_thread.run_sync(forgotten_sessions, settings, agent, session_ids)
    subject = await session_subject(settings, forgotten, include_ids=False)
    # Ids are looked for even when no transcript is left (an unresolved session).
    subject = subject.merge(type(subject)(ids=tuple(session_ids)))
    # Compiled off the event loop: the pattern holds every snippet of the forgotten transcripts.
    unshared = await anyio.to_thread.run_sync(compile_needles, subject)
    if not await keys_naming(redis, lambda v: unshared.hits(v) > 0, unshared.may_hit, spare_running=True):
        return 0
    _, surviving = await anyio.to_thread.run_sync(split_sessions, settings, agent, session_ids)
    left = await anyio.to_thread.run_sync(session_voices, settings, surviving)
    kept = replace(subject, shared=tuple(left.texts), shared_ids=tuple(left.ids))
    needles = await anyio.to_thread.run_sync(compile_needles, kept)
    return await purge_naming(redis, lambda v: needles.hits(v) > 0, needles.may_hit, spare_running=True)
