"""Live ingestion: sweep an agent as soon as a change to its sessions settles, then index it.

* The watchers (daemon/runtime/watch.py) say which agent changed and, from the file names,
  which of its sessions; they read no session. Those sessions are kept as a hint in this
  worker's context (daemon/ingest/live_hints.py, shared with the worker's jobs under
  memoryd.runtime.jobs.LIVE_HINTS) and the job carries only the hint's
  generation: the sweep stats, and the index sync that follows lists and plans, those
  sessions alone. A change of anything else (sessions.json, an archive, the OpenClaw
  database), a backlog, the catch-up at start and a job that finds no hint consider them all.
* One pending sweep per agent: any number of requests while a sweep is queued or running fold
  into one more sweep after it, so a burst of writes is a few sweeps, never a storm of jobs.
  The sweeps are ordinary `ingest_sweep` jobs on this host's queue: admission, forgotten
  records, the caps, the lock and the checkpoints are the sweep's own; this decides only when
  one runs.
* A sweep that read something asks for an index sync (coalesced the same way) when the index
  has the transcripts (`index.sources` with "sessions"; the staged corpus is dreaming state that
  the index never reads, so without them there is nothing new to index); one that left
  work behind (the per-sweep or per-file cap) asks for the next sweep at once. Scheduled
  sweeps are followed too, so a backlog drains sweep after sweep instead of interval after
  interval.
* Nothing is enqueued while the daemon drains or Redis is away; the request is kept and
  tried again (the interval sweeps remain the safety net either way).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc
from redis.exceptions import RedisError

from memoryd.constants import LIVE_WAIT_SLACK_S, REDIS_RETRY_MIN_S
from memoryd.errors import MemorydError
from memoryd.failpoints import failpoint
from memoryd.ingest.live_hints import LiveHints
from memoryd.ingest.report import IngestReport
from memoryd.job_ids import SCHEDULED, job_name_of, live_job_id, parse_job_id
from memoryd.ops import index_sync as index_op
from memoryd.ops import ingest_sweep as ingest_op
from memoryd.runtime import metrics
from memoryd.runtime.client import MemorydClient
from memoryd.runtime.watch import SessionsWatch
from memoryd.settings import Settings

log = logging.getLogger("memoryd.live")


@dataclass(frozen=True, slots=True)
class FollowUp:
    sweep_again: bool  # the sweep left work behind: the next one runs at once
    index: bool  # the sweep read something: the index syncs it


def follow_up(report: IngestReport | None, *, indexes_transcripts: bool) -> FollowUp:
    """What a finished sweep's report asks for next (None: no report to read)."""
    if report is None:
        return FollowUp(False, False)
    read = report.sessions_scanned > 0 or report.messages_staged > 0
    return FollowUp(report.backlog > 0, read and indexes_transcripts)


def scheduled_sweep_agents(job_ids: Iterable[str], agents: Iterable[str]) -> list[tuple[str, str]]:
    """(agent, job id) of the scheduled ingest sweeps among `job_ids` (`ingest_sweep:<agent>:sched:<slot>`)."""
    served = set(agents)
    out = []
    for job_id in job_ids:
        parsed = parse_job_id(job_id)
        if (
            parsed.family == ingest_op.OP.contract.name
            and parsed.kind == SCHEDULED
            and parsed.agent in served
        ):
            out.append((parsed.agent, job_id))
    return out


class Wanted:
    """A request any number of callers make and one taker clears: what coalesces a burst."""

    def __init__(self) -> None:
        self._event = anyio.Event()
        self.reason = ""

    def set(self, reason: str) -> None:
        if not self._event.is_set():
            self.reason = reason
        self._event.set()

    async def take(self) -> str:
        await self._event.wait()
        self._event = anyio.Event()
        return self.reason


class LiveIngest:
    """Per agent a sweep loop and an index loop, each running one job at a time."""

    def __init__(
        self,
        settings: Settings,
        client: MemorydClient,
        queue: str,
        agents: list[str],
        may_enqueue: Callable[[], bool],
        hints: LiveHints,
    ):
        self.settings = settings
        self.hints = hints  # the worker's (its context's LIVE_HINTS): what its live jobs read
        self.client = client
        self.queue = queue
        self.agents = list(agents)
        self.may_enqueue = may_enqueue  # false while draining or while Redis is away
        self.sweeps = {a: Wanted() for a in agents}
        self.indexes = {a: Wanted() for a in agents}
        self._tg: anyio.abc.TaskGroup | None = None
        self._watch: SessionsWatch | None = None  # one for every agent (daemon/runtime/watch.py)
        self._redis_failing = False

    def changed(self, agent: str, sessions: frozenset[str] | None = None) -> None:
        """A change to `sessions` of `agent` (None: to any of them) settled."""
        self.hints.note(ingest_op.OP.contract.name, agent, sessions)
        self.sweeps[agent].set("change")

    async def run(self, *, watch: bool) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            for agent in self.agents:
                self._start(agent)
            if watch:
                if self._watch is None:
                    # The watch waits for its changes in a worker thread of its own: add that
                    # thread to the pool (once, across restarts of this loop) so that it never
                    # takes the place of file and store I/O.
                    anyio.to_thread.current_default_thread_limiter().total_tokens += 1
                    self._watch = SessionsWatch(self.settings, self.agents, self.changed)
                tg.start_soon(self._watch.run)
            # Open for the agents found later (add), even when none is served yet.
            await anyio.sleep_forever()

    def add(self, agent: str) -> None:
        """Serve `agent` too (found after the start); its watch reports once in place, so its
        catch-up sweep runs at once."""
        if agent in self.sweeps:
            return
        self.agents.append(agent)
        self.sweeps[agent] = Wanted()
        self.indexes[agent] = Wanted()
        if self._watch is not None:
            self._watch.add(agent)
        if self._tg is not None:
            self._start(agent)

    def _start(self, agent: str) -> None:
        assert self._tg is not None
        self._tg.start_soon(self._loop, agent, ingest_op.OP.contract.name, self.sweeps[agent])
        self._tg.start_soon(self._loop, agent, index_op.OP.contract.name, self.indexes[agent])

    def follow_scheduled(self, job_ids: Iterable[str]) -> None:
        """Follow up the scheduled sweeps among `job_ids` as the live ones are."""
        if self._tg is None:
            return
        for agent, job_id in scheduled_sweep_agents(job_ids, self.agents):
            self._tg.start_soon(self._follow, agent, job_id)

    async def _loop(self, agent: str, family: str, wanted: Wanted) -> None:
        while True:
            reason = await wanted.take()
            if not self.may_enqueue():
                await anyio.sleep(REDIS_RETRY_MIN_S)
                wanted.set(reason)  # kept for when the daemon can enqueue again
                continue
            failpoint("live.enqueue")
            generation = self.hints.seal(family, agent)
            payload: dict[str, Any] = {"agent": agent}
            if generation is not None:
                payload["live"] = generation
            try:
                job = await self.client.enqueue(
                    family, payload, queue=self.queue, job_id=live_job_id(family, agent)
                )
            except (RedisError, OSError) as exc:
                self.hints.note(family, agent, self.hints.finish(family, agent, generation))  # for the retry
                self._redis_error(agent, exc)
                await anyio.sleep(REDIS_RETRY_MIN_S)
                wanted.set(reason)
                continue
            metrics.LIVE_JOBS.labels(family=family, reason=reason).inc()
            await self._follow(agent, job.job_id, generation)

    async def _follow(self, agent: str, job_id: str, generation: int | None = None) -> None:
        """Wait for the job; a sweep's report may ask for the next sweep or an index sync (of the
        sessions the sweep considered)."""
        family = job_name_of(job_id)
        complete = False
        try:
            done = await self.client.wait(
                job_id, queue=self.queue, timeout_s=self.settings.daemon.job_timeout_s + LIVE_WAIT_SLACK_S
            )
            complete = done.state == "complete"
        except (RedisError, OSError) as exc:
            self._redis_error(agent, exc)
            return
        except MemorydError as exc:  # given up on (lost with Redis): the next change or interval sweeps
            log.warning("agent %s: %s", agent, exc)
            return
        finally:
            considered = self.hints.finish(family, agent, generation)
            if not complete:  # the next job of the family looks at these sessions too
                self.hints.note(family, agent, considered)
        self._redis_failing = False
        if family != ingest_op.OP.contract.name or not complete:
            return
        next_steps = follow_up(
            done.result_as(IngestReport), indexes_transcripts="sessions" in self.settings.index.sources
        )
        if next_steps.sweep_again:
            self.hints.note(family, agent, None)  # what was left may be anywhere: a full sweep
            self.sweeps[agent].set("backlog")
        if next_steps.index:
            self.hints.note(index_op.OP.contract.name, agent, considered)
            self.indexes[agent].set("follow")

    def _redis_error(self, agent: str, exc: BaseException) -> None:
        if not self._redis_failing:
            log.warning("agent %s: live sweep not enqueued, Redis error (%s); retrying", agent, exc)
        self._redis_failing = True
