"""`memoryd status`: per agent the last sweep, admitted/excluded sessions by reason, lag,
queue depth and lock holder; and whether this host's daemon runs. Works without a daemon:
it reads the stores read-only and Redis directly. The daemon uses the same numbers for its
gauges.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import anyio
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel
from redis.asyncio import Redis
from redis.exceptions import RedisError

from memoryd.agents import agent_paths, list_agents
from memoryd.constants import AGENT_OWNER_KEY, HOST_KEY, HOST_KEY_TTL_S
from memoryd.errors import MemorydError
from memoryd.ingest.last_sweep import last_sweep_ms
from memoryd.lock import WorkspaceLock
from memoryd.redaction import redact_text
from memoryd.redis_conn import redis_client, redis_target
from memoryd.redis_problem import redis_problem
from memoryd.retention.gate import REASON_EXPIRED
from memoryd.runtime.hosts import parse_route
from memoryd.runtime.stalled import StalledPurges, read_stalled
from memoryd.runtime.wire import queue_name
from memoryd.sessions.admission import AdmissionPolicy, admission_reason
from memoryd.sessions.json_store import ListingCache
from memoryd.sessions.model import SessionInfo
from memoryd.sessions.source import session_source_for
from memoryd.settings import Settings
from memoryd.store.checkpoints import CheckpointSummary, checkpoint_summaries
from memoryd.store.db import ANY_SQLITE_ERROR, Store
from memoryd.store.tombstones import forgotten_ids


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)


class AgentStatus(_Model):
    agent: str
    last_sweep_at: str | None  # when the last ingest sweep ended, ISO 8601 UTC
    sessions: int  # live sessions in the agent's source
    sessions_admitted: int
    sessions_excluded: dict[str, int]  # reason -> count
    lag: int  # admitted live sessions the next sweep would read (never swept, or changed)
    queue: str | None  # the owning host's queue, as published in Redis
    queue_depth: int | None
    lock_holder: str | None
    errors: list[str]


class DaemonStatus(_Model):
    host_id: str
    queue: str
    running: bool | None  # None: unknown, Redis (where daemons report) could not be asked
    pid: int | None
    started_at: str | None
    heartbeat_age_s: float | None
    redis: str  # "ok", "unreachable at HOST:PORT (<reason>)" or "refused the password at HOST:PORT"
    redis_url: str

    @property
    def redis_ok(self) -> bool:
        return self.redis == "ok"


class StatusReport(_Model):
    daemon: DaemonStatus
    agents: list[AgentStatus]
    # Purges waiting on a host that is not alive (daemon/runtime/stalled.py); empty without Redis.
    stalled_purges: list[StalledPurges] = []


@dataclass(frozen=True, slots=True)
class SweepSummary:
    """Pure summary of one agent's checkpoints against its live sessions."""

    last_sweep_ms: int | None
    live: int
    admitted: int
    excluded: dict[str, int] = field(default_factory=dict)
    lag: int = 0


def summarize(
    checkpoints: list[CheckpointSummary],
    live: dict[str, tuple[int, int] | None],
    kept_out: Mapping[str, str] | None = None,
    last_sweep_ms: int | None = None,
) -> SweepSummary:
    """`live` maps each live session id to its (mtime_ms, size), None if the transcript is
    missing; `kept_out` maps the live sessions the next sweep would not read (excluded by the
    policy, forgotten, erased) to the reason. Every live session is either admitted or excluded
    by one reason, so the two add up to `live` whatever the checkpoints hold (a purge deletes
    its sessions' checkpoints, and an erased session never gets one). A checkpoint's reason
    counts only for what status cannot re-decide (a scope's expiry). Lag is what remains to be
    swept: admitted sessions never swept or changed since their checkpoint. `last_sweep_ms` is
    the end of the last sweep as recorded; without one, the newest checkpoint write."""
    kept_out = kept_out or {}
    by_session: dict[str, CheckpointSummary] = {}
    for row in checkpoints:
        seen = by_session.get(row.session_id)
        if seen is None or row.updated_at > seen.updated_at:
            by_session[row.session_id] = row
    excluded: Counter[str] = Counter()
    lag = 0
    for sid, fp in live.items():
        checkpoint = by_session.get(sid)
        reason = kept_out.get(sid)
        if reason is None and checkpoint is not None and checkpoint.excluded_reason == REASON_EXPIRED:
            reason = REASON_EXPIRED
        if reason is not None:
            excluded[reason] += 1
            continue
        if fp is None:  # no transcript: nothing the next sweep would read
            continue
        if checkpoint is None or checkpoint.excluded_reason or (checkpoint.mtime_ms, checkpoint.size) != fp:
            lag += 1
    admitted = len(live) - sum(excluded.values())
    newest_write = max((r.updated_at for r in checkpoints), default=None)
    last = last_sweep_ms if last_sweep_ms is not None else newest_write
    return SweepSummary(last, len(live), admitted, dict(sorted(excluded.items())), lag)


_STORE_ERRORS: tuple[type[BaseException], ...] = (MemorydError, *ANY_SQLITE_ERROR)


def _iso(ms: int | None) -> str | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")


def _live_sessions(
    settings: Settings, agent: str, listings: ListingCache | None
) -> tuple[list[SessionInfo], dict[str, tuple[int, int] | None], list[str]]:
    sessions: list[SessionInfo] = []
    live: dict[str, tuple[int, int] | None] = {}
    errors: list[str] = []
    try:
        source = session_source_for(settings, agent, listings)
        listing = source.list_sessions()
        errors.extend(listing.errors)
        sessions = list(listing.sessions)
        fingerprints = source.fingerprints(sessions)
        for session in sessions:
            fp = fingerprints.get(session.session_id)
            live[session.session_id] = None if fp is None else (fp.mtime_ms, fp.size)
    except MemorydError as exc:
        errors.append(str(exc))
    except OSError as exc:  # an agent's files are another program's: never end the caller
        errors.append(f"sessions of agent {agent}: {exc}")
    return sessions, live, errors


def _secret(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


async def sweep_summary(
    settings: Settings, agent: str, listings: ListingCache | None = None
) -> tuple[SweepSummary, list[str]]:
    """`listings`: the process's kept listings (the daemon's, so its gauges cost a stat of an
    idle agent's sessions.json); a one-off status parses it."""
    # Listing and stat-ing every transcript is blocking file I/O: keep it off the event loop
    # (the daemon's watchdog pings come from that loop).
    sessions, live, errors = await anyio.to_thread.run_sync(_live_sessions, settings, agent, listings)
    paths = agent_paths(settings, agent)
    checkpoints: list[CheckpointSummary] = []
    forgotten: set[str] = set()
    try:
        store = await Store.open_existing(paths.db_path)
        if store is not None:
            try:
                checkpoints = await store.read(checkpoint_summaries)
                secret = await anyio.to_thread.run_sync(_secret, paths.secret_path)
                forgotten = await store.read(forgotten_ids, list(live), secret)
            finally:
                await store.close()
    except _STORE_ERRORS as exc:
        errors.append(f"{paths.db_path}: {exc}")
    policy = AdmissionPolicy.from_settings(settings.memory_policy.exclude_sessions)
    reasons = {s.session_id: admission_reason(s, policy, forgotten) for s in sessions}
    kept_out = {sid: reason for sid, reason in reasons.items() if reason is not None}
    last = await anyio.to_thread.run_sync(last_sweep_ms, paths.state_dir)
    return summarize(checkpoints, live, kept_out, last), errors


async def _daemon_status(settings: Settings, redis: Redis | None, redis_state: str) -> DaemonStatus:
    host = settings.daemon.host_id
    record: dict[str, str] = {}
    if redis is not None:
        raw = await redis.hgetall(HOST_KEY.format(host=host))  # type: ignore[misc]
        record = {k.decode(): v.decode() for k, v in raw.items()}
    heartbeat = float(record["heartbeat"]) if "heartbeat" in record else None
    age = None if heartbeat is None else round(max(0.0, time.time() - heartbeat), 3)
    running = record.get("state") == "running" and age is not None and age <= HOST_KEY_TTL_S
    return DaemonStatus(
        host_id=host,
        queue=queue_name(host),
        running=running if redis is not None else None,
        pid=int(record["pid"]) if running and "pid" in record else None,
        started_at=record.get("started_at") if running else None,
        heartbeat_age_s=age,
        redis=record.get("redis", redis_state) if running else redis_state,
        redis_url=redis_target(settings).shown,
    )


async def collect_status(settings: Settings, agents: list[str] | None = None) -> StatusReport:
    agent_ids = agents if agents is not None else list_agents(settings)
    redis: Redis | None = redis_client(settings)
    redis_state = "ok"
    try:
        await redis.ping()  # type: ignore[union-attr]
    except (RedisError, OSError) as exc:
        # "Redis unreachable at …" → "unreachable at …": the field names Redis already.
        redis_state = redact_text(redis_problem(settings.redis_url, exc)).removeprefix("Redis ")
        await redis.aclose()  # type: ignore[union-attr]
        redis = None
    try:
        owners: dict[str, str] = {}
        if redis is not None:
            raw_owners = await redis.hgetall(AGENT_OWNER_KEY)  # type: ignore[misc]
            owners = {
                k.decode(errors="replace"): route.queue
                for k, v in raw_owners.items()
                if (route := parse_route(v)) is not None and route.deployment == settings.deployment
            }
        out: list[AgentStatus] = []
        for agent in agent_ids:
            summary, errors = await sweep_summary(settings, agent)
            queue = owners.get(agent)
            depth = holder = None
            if redis is not None:
                if queue is not None:
                    depth = int(await redis.zcard(queue))
                holder = await WorkspaceLock(redis, settings.workspace_for(agent)).holder_info()
            out.append(
                AgentStatus(
                    agent=agent,
                    last_sweep_at=_iso(summary.last_sweep_ms),
                    sessions=summary.live,
                    sessions_admitted=summary.admitted,
                    sessions_excluded=summary.excluded,
                    lag=summary.lag,
                    queue=queue,
                    queue_depth=depth,
                    lock_holder=holder,
                    errors=errors,
                )
            )
        waiting = await read_stalled(redis) if redis is not None else []
        return StatusReport(
            daemon=await _daemon_status(settings, redis, redis_state), agents=out, stalled_purges=waiting
        )
    finally:
        if redis is not None:
            await redis.aclose()
