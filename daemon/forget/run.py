"""The entry points of the forget pipeline.

* `preview_forget(rt, request)` (dry run): no lock, no writes, not even the schema; a missing
  store reads as an empty one.
* `purge(rt, request, lease)`: the whole plan and apply under the workspace lease the caller
  holds (the `forget` operation holds it for the job, an erasure for the agent's sessions), so
  a job acquires the lock once. A preview is not a plan: the purge recomputes it from current
  state; sessions are resolved once, and if the lineage changes under us the plan is
  recomputed under the same lease, keeping every entry key seen.
* `run_forget(rt, request)`: either, taking the lock itself for a purge (tests, benchmarks).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from memoryd.agent_runtime import AgentRuntime, agent_runtime
from memoryd.errors import OperationFailed, UsageError
from memoryd.forget.entries import NO_ENTRIES, EntrySelection
from memoryd.forget.plan import ForgetPlan, plan_forget
from memoryd.forget.report import ForgetReport, build_report
from memoryd.forget.select import Selectors, SessionSelection, select_sessions, suggest_close
from memoryd.forget.snapshot import SessionCatalog, read_catalog, read_entry_selection, read_snapshot
from memoryd.settings import Settings
from memoryd.store.db import truncate_wal

if TYPE_CHECKING:
    # Typing only: a dry run never loads the Redis client or the lock, and a dry run from the
    # CLI no pydantic model either (the request is one).
    from redis.asyncio import Redis

    from memoryd.forget.request import ForgetRequest
    from memoryd.lock import Lease

# Each round re-plans after another writer changed the lineage mid-apply; a workspace whose
# lineage keeps changing under the lock points at a writer that ignores the lock.
MAX_PLAN_ROUNDS = 8


def _selectors(request: ForgetRequest) -> Selectors:
    return Selectors(
        tuple(request.sessions),
        tuple(request.participants),
        tuple(request.hook_sources),
        request.since_ms,
        tuple(request.entries),
        request.match,
    )


async def _resolve(
    rt: AgentRuntime, selectors: Selectors
) -> tuple[SessionCatalog, SessionSelection, EntrySelection]:
    """The sessions the selectors name, or the entries (one kind per request: rules.py)."""
    if selectors.by_entry:
        catalog = await read_catalog(rt, selectors)
        return catalog, SessionSelection((), ()), await read_entry_selection(rt, selectors)
    catalog, selection = await _resolve_sessions(rt, selectors)
    return catalog, selection, NO_ENTRIES


async def _resolve_sessions(
    rt: AgentRuntime, selectors: Selectors
) -> tuple[SessionCatalog, SessionSelection]:
    catalog = await read_catalog(rt, selectors)
    selection = select_sessions(catalog.sessions, catalog.archives, selectors, catalog.recorded)
    if selection.unmatched:
        # A selector matched nothing (a typo, most likely): the whole listing, read only then,
        # names the known values closest to it.
        listing = await anyio.to_thread.run_sync(rt.sessions.list_sessions)
        selection = suggest_close(selection, listing.sessions, catalog.archives, catalog.recorded)
    return catalog, selection


async def plan_for(
    rt: AgentRuntime,
    catalog: SessionCatalog,
    selection: SessionSelection,
    carried_keys: frozenset[str] = frozenset(),
    entries: EntrySelection = NO_ENTRIES,
) -> ForgetPlan:
    return plan_forget(await read_snapshot(rt, catalog, selection, carried_keys, entries))


def _check_agent(rt: AgentRuntime, request: ForgetRequest) -> None:
    if rt.agent_id != request.agent:
        raise UsageError(f"agent: request is for {request.agent!r} but the runtime is for {rt.agent_id!r}")


async def preview_plan(rt: AgentRuntime, selectors: Selectors) -> ForgetPlan:
    """What a purge would remove now (a dry run's plan; nothing is written)."""
    catalog, selection, entries = await _resolve(rt, selectors)
    return await plan_for(rt, catalog, selection, entries=entries)


async def preview_forget(rt: AgentRuntime, request: ForgetRequest) -> ForgetReport:
    """The report of a dry run: what a purge would remove now."""
    _check_agent(rt, request)
    return build_report(await preview_plan(rt, _selectors(request)), dry_run=True)


async def purge(rt: AgentRuntime, request: ForgetRequest, lease: Lease) -> ForgetReport:
    """Plan and apply the forget under `lease`, the workspace lease the caller holds."""
    _check_agent(rt, request)
    store = rt.require_store()
    if store.readonly:
        raise UsageError("forget: a real purge needs a writable store (open the runtime with readonly=False)")
    # A dry run applies nothing, and has no scratch files or uncommitted appends to remove.
    from memoryd.forget.apply import apply_plan
    from memoryd.ingest.pending_appends import cut_off_uncommitted
    from memoryd.store.scratch import remove_scratch

    # Scratch files of the parallel scan hold memory text until merged; a sweep whose file goes
    # stages nothing of that batch (merge.py checks), so none survives the purge.
    remove_scratch(rt.paths.scratch_dir)
    # Lines an interrupted ingest appended and never committed go first: a rewrite of their day
    # file would carry them where no cut-back finds them, and the ingest's retry stages them again.
    await cut_off_uncommitted(rt.agent_id, store, rt.paths.workspace, lease.fence)
    catalog, selection, entries = await _resolve(rt, _selectors(request))
    carried: frozenset[str] = frozenset()
    tombstoned = False
    secret = _existing_secret(rt)
    for _ in range(MAX_PLAN_ROUNDS):
        plan = await plan_for(rt, catalog, selection, carried, entries)
        report = build_report(plan, dry_run=False)
        if not plan.selects_anything:
            return report
        outcome = await apply_plan(
            store, rt.paths.workspace, plan, lease.fence, tombstoned=tombstoned, secret=secret
        )
        if outcome.complete:
            # The purge's rows are gone from the database pages (secure delete), but frames
            # written before it may still sit in the WAL while any connection stays open.
            await store.run(truncate_wal)
            return report
        tombstoned = outcome.tombstoned
        carried = plan.lineage.entry_keys
    raise OperationFailed(
        f"forget: the lineage of agent {rt.agent_id!r} kept changing during "
        f"{MAX_PLAN_ROUNDS} plans; the forgotten records are in force, rerun the same forget"
    )


async def run_forget(rt: AgentRuntime, request: ForgetRequest) -> ForgetReport:
    """A preview, or a purge under a lease taken here."""
    if request.dry_run:
        return await preview_forget(rt, request)
    _check_agent(rt, request)
    async with rt.lock().hold() as lease:
        return await purge(rt, request, lease)


def _existing_secret(rt: AgentRuntime) -> bytes | None:
    # No key file means no erasure ever hashed a record of this agent: nothing to look up.
    try:
        return rt.paths.secret_path.read_bytes()
    except FileNotFoundError:
        return None


async def forget(settings: Settings, request: ForgetRequest, *, redis: bool | Redis = True) -> ForgetReport:
    """Open the agent's runtime the way the request needs it and run it.

    A dry run opens the store read-only and without Redis; a purge opens it for writing.
    `redis` may be a connected client (the job passes the worker's).
    """
    if request.dry_run:
        async with agent_runtime(settings, request.agent, readonly=True, redis=False) as rt:
            return await run_forget(rt, request)
    async with agent_runtime(settings, request.agent, redis=redis) as rt:
        return await run_forget(rt, request)
