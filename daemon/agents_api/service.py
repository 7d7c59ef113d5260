"""What each tool does, for one agent: the calls behind the MCP tools, without the protocol.

Reads (search, get, read) use a read-only store kept open for the server's life: each is one
read transaction, takes no lock and never waits for a purge; forgotten records are read in
that same transaction, so a purge that has committed them is never answered around. A forget
goes through the job queue to the host that owns the agent (the workspace lock, the same
purge as everywhere else); a write takes the retention lease as `memoryd mem write` does.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

from pydantic import BaseModel

from memoryd.agent_runtime import AgentRuntime, agent_runtime
from memoryd.agents_api.tools import (
    ForgetArgs,
    GetArgs,
    ReadArgs,
    SearchArgs,
    WriteArgs,
    asking,
    check_scope_for,
    forget_request,
)
from memoryd.constants import MCP_FORGET_WAIT_S
from memoryd.errors import OperationFailed, RefusedError
from memoryd.settings import Settings
from memoryd.store.checkpoints import recorded_session_keys
from memoryd.store.db import Connection
from memoryd.store.participants import participants_of_sessions


def _actors_of_session(conn: Connection, session: str) -> set[str]:
    """Recorded participants of a session named by id or key."""
    ids = {sid for sid, _key in recorded_session_keys(conn, [session], [session])} | {session}
    return {p.actor_id for p in participants_of_sessions(conn, sorted(ids))}


class AgentsApi:
    """The tools of one agent. `participant`: the one this server recalls for, if started so."""

    def __init__(self, settings: Settings, agent_id: str, participant: str | None = None):
        self.settings = settings
        self.agent_id = agent_id
        self.participant = participant
        self.scope = settings.recall.scope
        self._rt: AgentRuntime | None = None
        self._rt_stack: AsyncExitStack | None = None
        self._redis: Any = None

    async def __aenter__(self) -> AgentsApi:
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            if self._redis is not None:
                await self._redis.aclose()
        finally:
            if self._rt_stack is not None:
                await self._rt_stack.aclose()

    async def _reader(self) -> AgentRuntime:
        """The read-only runtime; reopened until the agent's store exists (a new agent)."""
        if self._rt is None or self._rt.store is None:
            if self._rt_stack is not None:
                await self._rt_stack.aclose()
                self._rt, self._rt_stack = None, None
            stack = AsyncExitStack()
            self._rt = await stack.enter_async_context(
                agent_runtime(self.settings, self.agent_id, readonly=True, redis=False)
            )
            self._rt_stack = stack
        return self._rt

    def _who(self, given: str | None) -> str | None:
        return asking(self.scope, self.participant, given)

    async def search(self, args: SearchArgs) -> Any:
        from memoryd.index.search import run_search

        who = self._who(args.participant)
        return await run_search(await self._reader(), args.query, args.limit, participant=who)

    async def get(self, args: GetArgs) -> Any:
        from memoryd.index.entry import get_entry

        return await get_entry(await self._reader(), args.key, participant=self._who(args.participant))

    async def forget(self, args: ForgetArgs) -> dict[str, Any]:
        from memoryd.ops import forget as forget_op
        from memoryd.runtime.client import MemorydClient

        who = self._who(args.participant)
        request = forget_request(self.agent_id, args)
        if who is not None:
            await self._check_forgettable_by(who, args)
        async with MemorydClient.connect(self.settings) as client:
            job = await client.submit(forget_op.OP, request)
            report = await client.wait(job.job_id, queue=job.queue, timeout_s=MCP_FORGET_WAIT_S)
        if report.state != "complete" or report.result is None:
            raise OperationFailed(f"forget job {job.job_id}: {report.error or report.state}")
        problem = report.outcome()
        if problem is not None:
            raise problem
        return report.result

    async def _check_forgettable_by(self, who: str, args: ForgetArgs) -> None:
        """A participant forgets only what derives from sessions they took part in: a session
        of theirs, or a memory whose every session is one (owner-level memory is not theirs)."""
        from memoryd.index.entry import get_entry

        rt = await self._reader()
        if args.session is not None:
            sessions, what = (
                [args.session],
                f"session: {args.session!r} is not a session {who!r} took part in",
            )
        else:
            assert args.key is not None
            entry = await get_entry(rt, args.key)
            sessions = [s.session_id for s in entry.sessions]
            what = f"key: {args.key!r} is not memory of sessions {who!r} took part in"
        for session in sessions:
            if who not in (await rt.store.read(_actors_of_session, session) if rt.store else set()):
                sessions = []
                break
        if not sessions:
            raise RefusedError(f"{what}; a participant forgets only memory of their own sessions")

    async def read(self, args: ReadArgs) -> BaseModel:
        from memoryd.retention import api

        scope = check_scope_for(args.scope, self._who(args.participant))
        return await api.read_scope(self.settings, scope)

    async def write(self, args: WriteArgs) -> BaseModel:
        from memoryd.retention import api

        who = self._who(args.participant)
        scope = check_scope_for(args.scope, who)
        parent = None
        if args.provenance_parent is not None:
            parent = check_scope_for(args.provenance_parent, who, "provenance_parent")
        if self._redis is None:
            from memoryd.redis_conn import redis_client

            self._redis = redis_client(self.settings)
        return await api.write_object(
            self.settings, self._redis, scope, args.content, parent, args.retention_days
        )
