"""Scheduled sweeps (DESIGN §2.3): which jobs are due, and enqueuing them.

Time is cut into slots of each family's interval; the job id names the family, the agent
and the slot (`ingest_sweep:main:sched:5781234`). So a restart, or a second daemon on the
same queue, within one slot enqueues nothing new (arq refuses a known id), and a slow
sweep is not enqueued again while its previous slot's job is still queued or running.
The planning (`due`) is pure; `Scheduler.tick` does the Redis part.

A slot never goes back: after the last enqueued slot, the next comes when the wall clock says
so or when the monotonic clock says an interval has passed, whichever is first. So a wall
clock stepped back (NTP, a VM restored) keeps the sweeps coming at their interval, with ids
past every one used, instead of stopping until the clock passes the last slot again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from arq.connections import ArqRedis
from arq.jobs import Job, JobStatus

from memoryd.job_ids import scheduled_job_id
from memoryd.ops.op import Routing
from memoryd.ops.registry import OPS, op_named
from memoryd.runtime import metrics
from memoryd.runtime.wire import deserialize
from memoryd.settings import Settings

log = logging.getLogger("memoryd.scheduler")


@dataclass(frozen=True, slots=True)
class Schedule:
    job: str
    interval_s: float
    per_agent: bool = True  # False: one job per host (retention state is host-wide)


@dataclass(frozen=True, slots=True)
class Due:
    job: str
    agent: str | None  # None for a host-wide job
    slot: int
    job_id: str
    previous_job_id: str | None  # the job of the last slot we enqueued, if any


def schedules(settings: Settings) -> tuple[Schedule, ...]:
    """The scheduled operations of the registry, in its order, with their intervals now."""
    out = []
    for op in OPS:
        interval = op.policy.scheduled(settings)
        if interval is not None:
            out.append(Schedule(op.contract.name, interval, per_agent=op.contract.routing is Routing.AGENT))
    return tuple(out)


def due(
    now_s: float,
    plan: Iterable[Schedule],
    agents: Iterable[str],
    host: str,
    deployment: str,
    last_slots: Mapping[tuple[str, str], int],
    since_last_s: Mapping[tuple[str, str], float] | None = None,
) -> list[Due]:
    """Jobs whose current slot has not been enqueued yet, in schedule order then agent order.
    A host-wide job's id names the host where a per-agent job's names the agent; both name the
    deployment.
    `since_last_s`: monotonic seconds since each last enqueue (a wall clock stepped back)."""
    out: list[Due] = []
    agent_list = sorted(agents)
    for schedule in plan:
        wall_slot = int(now_s // schedule.interval_s)
        targets: list[tuple[str | None, str]] = (
            [(a, a) for a in agent_list] if schedule.per_agent else [(None, host)]
        )
        for agent, target in targets:
            last = last_slots.get((schedule.job, target))
            slot = wall_slot
            if last is not None and since_last_s is not None and (schedule.job, target) in since_last_s:
                slot = max(slot, last + int(since_last_s[(schedule.job, target)] // schedule.interval_s))
            if last is not None and last >= slot:
                continue
            previous_slot = last if last is not None else slot - 1
            previous = scheduled_job_id(schedule.job, target, previous_slot, deployment)
            job_id = scheduled_job_id(schedule.job, target, slot, deployment)
            out.append(Due(schedule.job, agent, slot, job_id, previous))
    return out


def payload_for(job: str, agent: str | None) -> dict[str, Any]:
    """The payload of a scheduled job: its request with only the agent given (none host-wide)."""
    op = op_named(job)
    return op.contract.payload(op.contract.parse({} if agent is None else {"agent": agent}))


_PENDING = (JobStatus.queued, JobStatus.deferred, JobStatus.in_progress)


class Scheduler:
    """Enqueues due sweeps on this host's queue. One instance per daemon."""

    def __init__(self, redis: ArqRedis, queue: str, host: str, deployment: str):
        self.redis = redis
        self.queue = queue
        self.host = host
        self.deployment = deployment
        self.last_slots: dict[tuple[str, str], int] = {}
        self.enqueued_at: dict[tuple[str, str], float] = {}  # monotonic time of each last enqueue

    async def tick(
        self, now_s: float, plan: Iterable[Schedule], agents: Iterable[str], *, mono_s: float | None = None
    ) -> list[str]:
        """Enqueue what is due; returns the ids enqueued (tests and logs)."""
        mono = time.monotonic() if mono_s is None else mono_s
        since = {key: mono - at for key, at in self.enqueued_at.items()}
        enqueued: list[str] = []
        for item in due(now_s, plan, agents, self.host, self.deployment, self.last_slots, since):
            if item.previous_job_id is not None:
                previous = Job(
                    item.previous_job_id, self.redis, _queue_name=self.queue, _deserializer=deserialize
                )
                if await previous.status() in _PENDING:
                    # Still queued or running: try again next tick rather than pile up sweeps.
                    metrics.SCHEDULED.labels(family=item.job, decision="skipped_busy").inc()
                    continue
            job = await self.redis.enqueue_job(
                item.job, payload_for(item.job, item.agent), _job_id=item.job_id, _queue_name=self.queue
            )
            self.last_slots[(item.job, item.agent or self.host)] = item.slot
            self.enqueued_at[(item.job, item.agent or self.host)] = mono
            metrics.SCHEDULED.labels(
                family=item.job, decision="enqueued" if job else "already_enqueued"
            ).inc()
            if job is not None:
                enqueued.append(item.job_id)
                log.info("scheduled %s", item.job_id)
        return enqueued
