"""Retention expiry (seed 001, "retention expiry"): a scope past its TTL becomes unreadable —
reads, search and dreaming skip it — while its rows and the provenance edges citing it stay
resolvable for audit. Held scopes are not expired. Optionally, expired data is purged
`retention.expired_purge_after_days` after expiry; edges citing purged scopes are then
neutralised exactly as an erasure does, so a purge never leaves a derivable orphan.
"""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis

from memoryd.constants import DAY_MS
from memoryd.retention.models import ExpireReport
from memoryd.retention.request import ExpireRequest
from memoryd.retention.scopes import covering, is_within
from memoryd.retention.state import now_ms, open_for_write
from memoryd.settings import Settings
from memoryd.store import retention as repo
from memoryd.store.db import Connection


@dataclass(frozen=True, slots=True)
class ExpiryPlan:
    expire: tuple[str, ...]
    held: tuple[str, ...]


def plan_expiry(due: list[str], holds: list[str]) -> ExpiryPlan:
    """Due scopes minus those a hold covers or that contain a held scope (expiring a parent
    would hide the held child with it)."""
    hold_set = set(holds)
    expire: list[str] = []
    held: list[str] = []
    for scope in due:
        blocked = covering(scope, hold_set) is not None or any(is_within(h, scope) for h in holds)
        (held if blocked else expire).append(scope)
    return ExpiryPlan(tuple(expire), tuple(held))


def plan_purge(expired: list[str], holds: list[str], subtree_of: dict[str, list[str]]) -> tuple[str, ...]:
    """Purge-due scopes that no hold reaches (a hold may be placed after expiry)."""
    plan = plan_expiry(expired, holds)
    allowed = set(plan.expire)
    # A scope row goes only with its whole subtree; objects go either way.
    return tuple(s for s in plan.expire if all(c in allowed for c in subtree_of.get(s, [])))


def _expire_txn(conn: Connection, now: int, purge_after_days: int | None) -> ExpireReport:
    holds = [h.scope for h in repo.all_holds(conn)]
    plan = plan_expiry([r.scope for r in repo.due_for_expiry(conn, now)], holds)
    expired = repo.mark_expired(conn, plan.expire, now)
    purged_objects = purged_scopes = rewritten = 0
    if purge_after_days is not None:
        due = [r.scope for r in repo.expired_before(conn, now - purge_after_days * DAY_MS)]
        due_plan = plan_expiry(due, holds)
        purge_objects_of = list(due_plan.expire)
        subtree = {
            s: [r.scope for r in repo.subtree_scopes(conn, s) if r.scope != s] for s in purge_objects_of
        }
        purge_rows = plan_purge(purge_objects_of, holds, subtree)
        victims = repo.objects_in_scopes(conn, purge_objects_of)
        victim_ids = {o.object_id for o in victims}
        citing = [
            e.object_id for e in repo.citing_edges(conn, purge_objects_of) if e.object_id not in victim_ids
        ]
        rewritten = repo.rewrite_provenance(conn, citing)
        purged_objects = repo.delete_objects(conn, sorted(victim_ids))
        purged_scopes = repo.delete_scopes(conn, sorted(purge_rows, key=len, reverse=True))
    return ExpireReport(
        now=now,
        expired_scopes=expired,
        held_skipped=len(plan.held),
        purged_objects=purged_objects,
        purged_scopes=purged_scopes,
        provenance_rewritten=rewritten,
    )


async def run_expire(
    settings: Settings, redis: Redis, request: ExpireRequest | None = None, *, now: int | None = None
) -> ExpireReport:
    """Mark due scopes expired (and purge old expired data if configured). Reruns converge."""
    del request  # no options yet; validated by the job for unknown fields
    ts = now if now is not None else now_ms()
    async with open_for_write(settings, redis) as (store, lease):
        return await store.write(
            _expire_txn, ts, settings.retention.expired_purge_after_days, fence=lease.fence
        )


async def run_retention_sweep(
    settings: Settings, redis: Redis, *, agent: str | None = None, now: int | None = None
) -> ExpireReport:
    """The scheduled `retention_sweep`. Retention state is host-wide, so the sweep of any agent
    expires every scope; running it once per agent per interval is harmless (it converges)."""
    del agent
    return await run_expire(settings, redis, now=now)
