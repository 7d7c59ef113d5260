"""`memoryd run`: the service lifecycle (DESIGN §2).

1. Load settings; check the state directory; connect to Redis; open and migrate every
   agent's store. Anything unusable → one line naming it, exit 1, before READY; but an agent
   whose store cannot be opened (damaged, a full disk) is only left out, in one line, and
   tried again at every heartbeat: one agent's store never keeps the others from being served.
2. Publish `agent → queue` in Redis (routing for clients) and a host record (status).
3. Run arq's Worker in this process on `memoryd:queue:<host_id>` (JSON, handle_signals=False),
   the scheduler, the heartbeat, the watchdog and the metrics exporter; then READY=1. Each
   heartbeat looks for agents that appeared under sessions_root since (or whose directory was
   not a directory at the start) and serves them as those found at start. A background loop
   that fails on something it did not expect logs one line and starts again; it never ends
   the daemon.
4. Redis lost after start: STATUS= says so, the metric drops to 0, reconnects back off
   exponentially up to `daemon.redis_retry_max_s`; the worker resumes when Redis returns.
5. SIGTERM/SIGINT drain: STOPPING=1 with EXTEND_TIMEOUT_USEC, no new jobs, the running job
   gets `shutdown_grace_s` to finish, else it is cancelled — arq puts it back in the queue
   and the lock's `finally` releases the lease — then exit 0. SIGHUP reloads the admission
   policy (`memory_policy`) from the config file; other changes need a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
import socket
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import orjson
from arq.connections import ArqRedis
from redis.exceptions import RedisError

from memoryd.agents import agent_paths, list_agents, missing_sessions_root
from memoryd.constants import (
    DRAIN_CANCEL_WAIT_S,
    HEARTBEAT_S,
    HEARTBEATS_KEY,
    HOST_KEY,
    HOST_KEY_TTL_S,
    LIVE_POLL_S,
    RECEIPT_SETTLE_S,
    REDIS_RETRY_MIN_S,
    SCHEDULER_TICK_S,
    STATUS_REFRESH_S,
)
from memoryd.errors import MemorydError, OperationFailed
from memoryd.fileio import make_private_dirs, remove_leftover_temps, remove_leftover_temps_under
from memoryd.ingest.last_sweep import last_sweep_ms
from memoryd.ingest.live_hints import LiveHints
from memoryd.ops import ingest_sweep as ingest_op
from memoryd.redis_conn import connect_redis, connection_pool, redis_target
from memoryd.retention.state import retention_db_path
from memoryd.runtime import interrupted, metrics
from memoryd.runtime.client import MemorydClient
from memoryd.runtime.hosts import (
    ALIVE,
    OTHER_DEPLOYMENT,
    OTHER_STORE,
    KeptRoute,
    claim_routes,
    heartbeat_value,
    other_daemon,
    parse_host_record,
)
from memoryd.runtime.jobs import LIVE_HINTS
from memoryd.runtime.live import LiveIngest
from memoryd.runtime.scheduler import Scheduler, schedules
from memoryd.runtime.sdnotify import Notifier, watchdog_interval_s
from memoryd.runtime.served import SERVED, ServedAgents
from memoryd.runtime.stalled import read_stalled
from memoryd.runtime.status import sweep_summary
from memoryd.runtime.supervise import keep_running
from memoryd.runtime.wire import deserialize, queue_name, serialize
from memoryd.runtime.worker import MemorydWorker, quiet_job_logs, worker_kwargs
from memoryd.sessions.json_store import ListingCache
from memoryd.settings import Settings, load_settings
from memoryd.store.db import ANY_SQLITE_ERROR, Store
from memoryd.store.migrate import AGENT, RETENTION, Schema
from memoryd.store.scratch import remove_scratch
from memoryd.store.store_identity import store_id

log = logging.getLogger("memoryd.service")


def check_state_dir(path: Path) -> None:
    """The state directory exists (created 0700 if missing) and takes a file; else one line."""
    try:
        make_private_dirs(path)
        fd, probe = tempfile.mkstemp(dir=path, prefix=".memoryd-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise OperationFailed(f"state_dir {path} is unusable ({exc.strerror or exc})") from None


async def migrate_store(path: Path, schema: Schema) -> str | None:
    """Open the store at `path` for writing, which migrates it: read-only openers later find it
    current. Returns an agent store's id (store_meta). OperationFailed (one line naming the
    file) when it cannot be opened."""
    try:
        store = await Store.open(path, schema=schema)
        try:
            return await store.read(store_id) if schema == AGENT else None
        finally:
            await store.close()
    except OSError as exc:
        raise OperationFailed(f"{path}: cannot open store: {exc.strerror or exc}") from None
    except ANY_SQLITE_ERROR as exc:
        raise OperationFailed(f"{path}: cannot open store: {exc}") from None


async def open_agent_stores(settings: Settings, agents: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Each agent's store migrated (created if new), for the id its route names. Returns agent ->
    store id for the stores that opened, and why each other one did not (damaged, a full disk):
    one agent's store never keeps the others from being served."""
    ids: dict[str, str] = {}
    refused: dict[str, str] = {}
    for agent in agents:
        try:
            found = await migrate_store(agent_paths(settings, agent).db_path, AGENT)
        except OperationFailed as exc:
            refused[agent] = str(exc)
            continue
        assert found is not None  # an agent store always has one once migrated
        ids[agent] = found
    return ids, refused


async def remove_leftovers(settings: Settings, agents: list[str]) -> None:
    """Before an agent is served here (its route won): the scratch files and the temp files of
    atomic writes a killed process left behind, in its state directory and its workspace (they
    hold memory text: they go before any job runs). Never before the route is won: on shared
    storage they may be the live owner's writes in progress."""
    for agent in agents:
        paths = agent_paths(settings, agent)
        remove_scratch(paths.scratch_dir, only_orphans=True)
        for root in (paths.state_dir, paths.workspace):
            await anyio.to_thread.run_sync(remove_leftover_temps_under, root)


async def migrate_retention_store(settings: Settings) -> None:
    """The host's retention store, if it exists, migrated now; if it cannot be opened, the
    erasures that need it fail in one line each (they open it themselves), nothing else."""
    path = retention_db_path(settings)
    remove_leftover_temps(path.parent, of=path.name)
    if not path.exists():
        return
    try:
        await migrate_store(path, RETENTION)
    except OperationFailed as exc:
        log.warning("%s; erasures fail until it can be opened", exc)


def arq_pool(settings: Settings, queue: str) -> ArqRedis:
    pool = connection_pool(settings)  # the daemon's own user (deploy/redis.conf)
    return ArqRedis(pool, job_serializer=serialize, job_deserializer=deserialize, default_queue_name=queue)


@dataclass
class ServiceState:
    host_id: str
    queue: str
    agents: list[str]
    started_at: str
    redis_ok: bool = True
    redis_error: str = ""
    draining: bool = False
    metrics_port: int | None = None
    policy_reloaded_at: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    lag: dict[str, int] = field(default_factory=dict)  # agent -> sessions changed since their checkpoint

    def summary(self) -> str:
        redis = "redis ok" if self.redis_ok else f"redis unreachable ({self.redis_error}), retrying"
        jobs = ", ".join(f"{k} {v}" for k, v in self.counts.items()) or "no jobs yet"
        mode = "draining" if self.draining else f"serving {len(self.agents)} agent(s) on {self.queue}"
        return f"{mode}; {redis}; {jobs}; {self.backlog()}"

    def backlog(self) -> str:
        behind = {a: n for a, n in self.lag.items() if n}
        if not behind:
            return "ingest backlog 0"
        worst = max(behind, key=lambda a: behind[a])
        return f"ingest backlog {sum(behind.values())} session(s), most on agent {worst} ({behind[worst]})"


def _why_kept(kept: KeptRoute, *, now: bool = False) -> tuple[str, str]:
    """What a route left alone names, and what the operator can do, for one log line."""
    if kept.reason == ALIVE:
        whose = f"its route is now host {kept.host}'s" if now else f"already served by host {kept.host}"
        return f"{whose}, which is alive", "one host serves an agent at a time: stop it there first"
    if kept.reason == OTHER_DEPLOYMENT:
        of = f"deployment {kept.deployment}" if kept.deployment else "an older memoryd (no deployment)"
        return (
            f"its route names host {kept.host} of {of}",
            "give each deployment its own Redis database or distinct agent names; a route of an "
            "older memoryd is republished when that host restarts",
        )
    if kept.reason == OTHER_STORE:
        return (
            f"its route names host {kept.host}, which served another store of this agent",
            "an agent moves to another host with its store; to start it anew here, delete its "
            "route (HDEL memoryd:agents <agent>) once that host is stopped for good",
        )
    return "its route is unreadable", "delete it (HDEL memoryd:agents <agent>); it is claimed again"


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class Service:
    def __init__(self, settings: Settings, config_path: str | None, notifier: Notifier | None = None):
        self.settings = settings
        self.config_path = config_path
        self.notifier = notifier or Notifier()
        host = settings.daemon.host_id
        self.state = ServiceState(host, queue_name(host), [], _now_iso())
        self._problems: dict[str, int] = {}  # per agent, at the last gauge refresh
        self._elsewhere: dict[str, KeptRoute] = {}  # agent -> the route it was left to, last seen
        self._store_ids: dict[str, str] = {}  # agent -> the id of its store here (its route names it)
        self._discovery_problem: str | None = None  # why the last look for new agents failed
        self._refused: dict[str, str] = {}  # agent -> why its store could not be opened, last seen
        self.served = ServedAgents()  # updated in place: running jobs read it (memoryd.runtime.served)
        self.hints = LiveHints()  # noted by live ingestion, read by the worker's live jobs
        self.ctx: dict[str, Any] = {
            "settings": settings,
            "host_id": host,
            SERVED: self.served,
            LIVE_HINTS: self.hints,
        }
        self.pool: ArqRedis | None = None
        self.worker: MemorydWorker | None = None
        self.live: LiveIngest | None = None
        self._metrics_server: Any = None
        self._gauges_due: anyio.Event | None = None  # set when a sweep ends: gauges are recomputed

    # --- start -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Everything before READY; raises OperationFailed (one line) when something is unusable."""
        s = self.settings
        check_state_dir(s.state_dir)
        probe = await connect_redis(s)
        try:
            try:
                await self._refuse_a_second_daemon(probe)
                missing = missing_sessions_root(s)
                if missing is not None:
                    log.warning("%s", missing)
                listed = list_agents(s)
                opened, refused = await open_agent_stores(s, listed)
                self._store_ids = dict(opened)
                self._note_refused(refused)
                # An agent whose store did not open is routed here too (with no store id), so its
                # jobs come here and are refused saying why.
                elsewhere = await self._claim_routes(probe, listed)
            except (RedisError, OSError) as exc:  # Redis went away after the probe, or an ACL refuses
                raise OperationFailed(
                    f"redis_url {redis_target(s).shown}: cannot publish this host: {exc}"
                ) from None
            try:
                await self._open([a for a in listed if a in opened], elsewhere)
            except BaseException:
                # The claim beat this host's heartbeat: say it stopped, so clients refuse its
                # agents' jobs at once and another host may claim them.
                with contextlib.suppress(RedisError, OSError):
                    await probe.hset(
                        HEARTBEATS_KEY, self.state.host_id, heartbeat_value(time.time(), stopped=True)
                    )  # type: ignore[misc]
                raise
        finally:
            await probe.aclose()
        assert self.pool is not None  # opened by _open
        agents = self.state.agents
        self.worker = MemorydWorker(**worker_kwargs(s, self.state.queue, self.ctx), redis_pool=self.pool)
        if s.daemon.schedule:
            client = MemorydClient(self.pool, s, poll_delay_s=LIVE_POLL_S)
            self.live = LiveIngest(s, client, self.state.queue, agents, self._may_enqueue, self.hints)
        quiet_job_logs()
        metrics.UP.set(1)
        metrics.REDIS_UP.set(1)

    async def _open(self, opened: list[str], elsewhere: dict[str, KeptRoute]) -> None:
        """The agents this host won cleaned up, the arq pool, metrics, the host record."""
        s = self.settings
        self._note_elsewhere(elsewhere)
        agents = [a for a in opened if a not in elsewhere]
        await remove_leftovers(s, agents)
        await migrate_retention_store(s)
        self.state.agents = agents
        self.served.agents = frozenset(agents)
        self._seed_sweep_gauges(agents)
        self.pool = arq_pool(s, self.state.queue)
        if s.daemon.metrics_listen:
            try:
                self._metrics_server, self.state.metrics_port = metrics.serve(s.daemon.metrics_listen)
            except (OSError, ValueError) as exc:
                raise OperationFailed(f"daemon.metrics_listen {s.daemon.metrics_listen}: {exc}") from None
        try:
            await self._publish()
        except (RedisError, OSError) as exc:  # Redis went away after the probe, or an ACL refuses
            raise OperationFailed(
                f"redis_url {redis_target(s).shown}: cannot publish this host: {exc}"
            ) from None

    def _note_refused(self, refused: dict[str, str]) -> None:
        """One line per agent whose store cannot be opened, when its reason changes."""
        for agent, why in refused.items():
            if self._refused.get(agent) != why:
                log.warning(
                    "agent %s: not served until its store opens (tried at every heartbeat): %s", agent, why
                )
        # The same map in the worker's context: its refusals of their jobs say why.
        self._refused = dict(refused)
        self.served.refused = dict(refused)

    def _note_elsewhere(self, elsewhere: dict[str, KeptRoute]) -> None:
        """One line per agent whose route this host left alone, when it changes (not at every beat)."""
        for agent, kept in elsewhere.items():
            if self._elsewhere.get(agent) != kept:
                log.warning("agent %s: %s; not served here (%s)", agent, *_why_kept(kept))
        self._elsewhere = dict(elsewhere)

    async def _serve_new_agents(self) -> None:
        """Serve the agents listed now that are not served yet: a new agent directory, one that
        was not a directory at the start (a symlink, since put back), or one whose host stopped.
        Its store is opened (created, migrated) before its route is claimed, as the route names
        the store's id, so no job for it is refused here; what a killed process left in its
        directories is removed only once the route is won."""
        s = self.settings
        assert self.pool is not None
        listed = await anyio.to_thread.run_sync(list_agents, s)
        wanted = [a for a in listed if a not in self.state.agents]
        if not wanted:
            self._elsewhere = {}
            self._note_refused({})
            return
        # A store opened once is not migrated again at every beat while its route stays elsewhere.
        opened, refused = await open_agent_stores(s, [a for a in wanted if a not in self._store_ids])
        self._store_ids |= opened
        self._note_refused(refused)
        claim = [a for a in wanted if a in self._store_ids]
        elsewhere = await self._claim_routes(self.pool, claim) if claim else {}
        self._note_elsewhere(elsewhere)
        won = [a for a in claim if a not in elsewhere]
        if not won:
            return
        await remove_leftovers(s, won)
        self.state.agents = sorted({*self.state.agents, *won})
        self.served.agents = frozenset(self.state.agents)
        self._seed_sweep_gauges(won)
        for agent in won:
            log.info("agent %s: found under sessions_root; served from now on", agent)
            if self.live is not None:
                self.live.add(agent)

    async def _claim_routes(
        self, redis: Any, agents: list[str], *, held: bool = False, stopped: bool = False
    ) -> dict[str, KeptRoute]:
        """Claim the routes of `agents` (with their stores' ids) and beat the heartbeat, atomically
        (hosts.CLAIM_ROUTES); returns those left alone (agent -> whose, and why). `held`: the
        agents served here now, whose route another deployment's host never holds by right."""
        st = self.state
        now = time.time()
        return await claim_routes(
            redis,
            queue=st.queue,
            host=st.host_id,
            beat=heartbeat_value(now, stopped=stopped),
            now_s=now,
            deployment=self.settings.deployment,
            held=held,
            stores={agent: self._store_ids.get(agent, "") for agent in agents},
        )

    async def _refuse_a_second_daemon(self, redis: Any) -> None:
        host = self.state.host_id
        try:
            raw = await redis.hgetall(HOST_KEY.format(host=host))
        except (RedisError, OSError) as exc:  # an ACL that refuses reads, or Redis went away
            raise OperationFailed(
                f"redis_url {redis_target(self.settings).shown}: cannot publish this host (reading its record): {exc}"
            ) from None
        other = other_daemon(parse_host_record(host, raw), time.time(), socket.gethostname(), os.getpid())
        if other is not None:
            where = "" if other.machine == socket.gethostname() else f" on {other.machine}"
            raise OperationFailed(
                f"host {host} already running, pid {other.pid}{where}; stop it first, or give this "
                "daemon a daemon.host_id of its own"
            )

    async def _publish(self, *, stopped: bool = False) -> None:
        """Routing (`memoryd:agents`), the heartbeat and the host record; refreshed by the
        heartbeat loop. An agent whose route another live host holds now (it started while this
        daemon was stalled past its heartbeat) is theirs: it is no longer served here."""
        assert self.pool is not None
        st = self.state
        taken = await self._claim_routes(self.pool, st.agents, held=True, stopped=stopped)
        for agent, kept in taken.items():
            log.warning("agent %s: %s; no longer served here (%s)", agent, *_why_kept(kept, now=True))
        if taken:
            st.agents = [a for a in st.agents if a not in taken]
            self.served.agents = frozenset(st.agents)
        record = {
            "pid": os.getpid(),
            "machine": socket.gethostname(),
            "queue": st.queue,
            "agents": orjson.dumps(st.agents).decode(),
            "started_at": st.started_at,
            "heartbeat": f"{time.time():.3f}",
            "state": "stopped" if stopped else "draining" if st.draining else "running",
            "redis": "ok" if st.redis_ok else f"unreachable: {st.redis_error}",
            "metrics_port": st.metrics_port or "",
            "policy_reloaded_at": st.policy_reloaded_at or "",
            "status": st.summary(),
        }
        key = HOST_KEY.format(host=st.host_id)
        async with self.pool.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping=record)
            pipe.expire(key, int(HOST_KEY_TTL_S))
            await pipe.execute()

    # --- run -------------------------------------------------------------------------------

    async def run(self) -> int:
        await self.start()
        try:
            # The handlers go in before READY: systemd may send SIGHUP (`systemctl reload`) the
            # moment it reads READY, and SIGHUP's default action would end the process.
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(keep_running, "worker", self._supervise_worker)
                    if self.settings.daemon.schedule:
                        tg.start_soon(keep_running, "scheduler", self._schedule_loop)
                    if self.live is not None:
                        live = partial(self.live.run, watch=self.settings.ingest.watch)
                        tg.start_soon(keep_running, "live ingest", live)
                    tg.start_soon(keep_running, "heartbeat", self._heartbeat_loop)
                    tg.start_soon(keep_running, "gauges", self._gauge_loop)
                    tg.start_soon(keep_running, "receipts", self._settle_loop)
                    interval = watchdog_interval_s()
                    if interval:
                        # Not restarted: if it fails, systemd's watchdog restarts the daemon.
                        tg.start_soon(self._watchdog_loop, interval)
                    self.notifier.ready(self.state.summary())
                    log.info("ready: %s", self.state.summary())
                    await self._signal_loop(signals)
                    tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self._shutdown()
        return 0

    async def _signal_loop(self, signals: AsyncIterator[int]) -> None:
        """Returns after a drain (SIGTERM/SIGINT); SIGHUP reloads the admission policy."""
        async for signum in signals:
            if signum == signal.SIGHUP:
                self.reload_policy()
                continue
            log.info("received %s: draining", signal.Signals(signum).name)
            await self.drain()
            return

    def reload_policy(self) -> None:
        try:
            fresh = load_settings(self.config_path)
        except MemorydError as exc:
            log.error("SIGHUP: config not reloaded, keeping the current policy: %s", exc)
            return
        current: Settings = self.ctx["settings"]
        self.ctx["settings"] = dataclasses.replace(current, memory_policy=fresh.memory_policy)
        self.settings = self.ctx["settings"]
        self.state.policy_reloaded_at = _now_iso()
        p = fresh.memory_policy.exclude_sessions
        log.info(
            "SIGHUP: admission policy reloaded (%d hook sources, %d channels, %d chat types excluded)",
            len(p.hook_external_content_sources),
            len(p.channels),
            len(p.chat_types),
        )

    async def drain(self) -> None:
        """Stop taking jobs; give the running ones `shutdown_grace_s`; cancel the rest (they return
        to the queue for the next start); locks are released by their holders' `finally`."""
        assert self.worker is not None
        worker = self.worker
        grace = self.settings.daemon.shutdown_grace_s
        self.state.draining = True
        worker.allow_pick_jobs = False
        self.notifier.stopping(self.state.summary(), grace + DRAIN_CANCEL_WAIT_S + 5)
        running = [t for t in worker.tasks.values() if not t.done()]
        if running:
            log.info("draining: waiting up to %.1fs for %d running job(s)", grace, len(running))
            await asyncio.wait(running, timeout=grace)
        left = [t for t in worker.tasks.values() if not t.done()]
        for task in left:
            task.cancel()
        if left:
            log.info("draining: %d job(s) did not finish in time; returned to the queue for retry", len(left))
            with anyio.move_on_after(DRAIN_CANCEL_WAIT_S):
                await asyncio.gather(*left, return_exceptions=True)

    async def _shutdown(self) -> None:
        metrics.UP.set(0)
        if self.pool is not None:
            try:
                await self._publish(stopped=True)
                if self.worker is not None:
                    await interrupted.unregister(self.pool, self.state.queue, self.worker.instance)
            except (RedisError, OSError):
                pass
            await self.pool.aclose(close_connection_pool=True)
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
        self.notifier.close()
        log.info("stopped")

    # --- background loops ------------------------------------------------------------------

    async def _supervise_worker(self) -> None:
        assert self.worker is not None and self.pool is not None
        delay = REDIS_RETRY_MIN_S
        while True:
            try:
                await self.worker.main()
                return
            except (RedisError, OSError) as exc:
                self._redis_lost(exc)
            except Exception as exc:
                # A job fails alone (MemorydWorker); anything else that ends arq's loop must not
                # end the daemon: the worker starts again after a pause.
                log.error("worker stopped on %s; starting it again", type(exc).__name__)
                metrics.WORKER_RESTARTS.inc()
                await anyio.sleep(delay)
                continue
            while True:  # back off until Redis answers again
                await anyio.sleep(delay)
                delay = min(delay * 2, self.settings.daemon.redis_retry_max_s)
                try:
                    await self.pool.ping()
                except (RedisError, OSError) as exc:
                    self._redis_lost(exc)
                    continue
                break
            delay = REDIS_RETRY_MIN_S
            self.state.redis_ok = True
            metrics.REDIS_UP.set(1)
            metrics.REDIS_RECONNECTS.inc()
            self.notifier.status(self.state.summary())
            log.info("Redis is back: %s", redis_target(self.settings).shown)

    def _redis_lost(self, exc: BaseException) -> None:
        first = self.state.redis_ok
        self.state.redis_ok = False
        self.state.redis_error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        metrics.REDIS_UP.set(0)
        self.notifier.status(self.state.summary())
        if first:
            log.warning(
                "Redis unreachable (%s): %s; retrying with backoff",
                redis_target(self.settings).shown,
                self.state.redis_error,
            )

    async def _schedule_loop(self) -> None:
        assert self.pool is not None
        scheduler = Scheduler(self.pool, self.state.queue, self.state.host_id, self.settings.deployment)
        while True:
            if self.state.redis_ok and not self.state.draining:
                try:
                    enqueued = await scheduler.tick(time.time(), schedules(self.settings), self.state.agents)
                    if self.live is not None:
                        self.live.follow_scheduled(enqueued)
                except (RedisError, OSError) as exc:
                    log.warning("scheduler: Redis error: %s", exc)
                except Exception as exc:  # one bad job record must not end the schedule
                    log.error("scheduler: tick failed on %s; next tick as usual", type(exc).__name__)
            await anyio.sleep(SCHEDULER_TICK_S)

    def _may_enqueue(self) -> bool:
        return self.state.redis_ok and not self.state.draining

    async def _heartbeat_loop(self) -> None:
        assert self.pool is not None
        while True:
            if self.state.redis_ok and not self.state.draining:
                await self._serve_new_agents_or_say_why()
            try:
                await self._refresh_job_counts()
                await self._publish()
            except (RedisError, OSError) as exc:
                self._redis_lost(exc)
            except Exception as exc:
                log.error("heartbeat failed on %s; next beat as usual", type(exc).__name__)
            self.notifier.status(self.state.summary())
            await anyio.sleep(HEARTBEAT_S)

    async def _serve_new_agents_or_say_why(self) -> None:
        # Apart from the heartbeat: a new agent whose store cannot be created (a full disk) must
        # not keep this host from beating for the agents it serves.
        problem = None
        try:
            await self._serve_new_agents()
        except RedisError as exc:
            self._redis_lost(exc)
        except MemorydError as exc:
            problem = str(exc)
        except Exception as exc:  # the listing itself (sessions_root/agents unreadable), SQLite
            problem = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        if problem is not None and problem != self._discovery_problem:
            log.warning("agents found under sessions_root not served yet: %s; tried at every beat", problem)
        self._discovery_problem = problem

    async def _refresh_job_counts(self) -> None:
        assert self.pool is not None and self.worker is not None
        queued = int(await self.pool.zcard(self.state.queue))
        running = sum(not t.done() for t in self.worker.tasks.values())
        metrics.JOBS.labels(state="queued").set(max(queued - running, 0))
        metrics.JOBS.labels(state="running").set(running)
        w = self.worker
        self.state.counts = {
            "done": w.jobs_complete,
            "failed": w.jobs_failed,
            "retried": w.jobs_retried,
            "queued": max(queued - running, 0),
        }

    def _seed_sweep_gauges(self, agents: list[str]) -> None:
        """The last successful ingest sweep of each newly served agent, from its state (or, if
        it never had one, now): a gauge absent until a first success would let sweeps that fail
        from the start never go stale, and MemorydIngestSweepStalled never fire. Only when this
        host schedules sweeps: one that only runs what clients send has nothing overdue."""
        if not self.settings.daemon.schedule:
            return
        now_s = time.time()
        for agent in agents:
            last_ms = last_sweep_ms(agent_paths(self.settings, agent).state_dir)
            seeded = now_s if last_ms is None else last_ms / 1000
            metrics.LAST_SWEEP.labels(family=ingest_op.OP.contract.name, agent=agent).set(seeded)

    def _refresh_gauges(self) -> None:
        if self._gauges_due is not None:
            self._gauges_due.set()

    async def _gauge_loop(self) -> None:
        """Per-agent lag and exclusion gauges, from the same numbers `memoryd status` shows;
        recomputed every STATUS_REFRESH_S and as soon as a sweep of this host ends."""
        self._gauges_due = anyio.Event()
        self.ctx["refresh_gauges"] = self._refresh_gauges
        while True:
            for agent in self.state.agents:
                try:
                    caches = self.worker.caches if self.worker is not None else None
                    summary, errors = await sweep_summary(
                        self.settings, agent, caches.part(ListingCache) if caches is not None else None
                    )
                except MemorydError as exc:
                    log.warning("status of agent %s: %s", agent, exc)
                    continue
                except Exception as exc:  # one agent's files must not end the gauges of all
                    log.error("status of agent %s failed on %s", agent, type(exc).__name__)
                    continue
                self._count_problems(agent, len(errors))
                metrics.INGEST_LAG.labels(agent=agent).set(summary.lag)
                # The backlog is the lag: what the next sweep would read, whoever swept last
                # (a foreground `memoryd ingest` included).
                metrics.INGEST_BACKLOG.labels(agent=agent).set(summary.lag)
                self.state.lag[agent] = summary.lag
                metrics.SESSIONS_ADMITTED.labels(agent=agent).set(summary.admitted)
                for reason, n in summary.excluded.items():
                    metrics.SESSIONS_EXCLUDED.labels(agent=agent, reason=reason).set(n)
            await self._refresh_stalled_purges()
            with anyio.move_on_after(STATUS_REFRESH_S):
                await self._gauges_due.wait()
            self._gauges_due = anyio.Event()

    async def _settle_loop(self) -> None:
        """Erasure receipts waiting for queued purge jobs pass once those have run (settle.py)."""
        from memoryd.retention.settle import settle_waiting_receipts

        while True:
            if self.pool is not None and self.state.redis_ok:
                try:
                    settled = await settle_waiting_receipts(self.settings, self.pool)
                except (RedisError, OSError, MemorydError) as exc:
                    log.warning("receipts waiting for queued purges: %s", exc)
                else:
                    if settled:
                        log.info(
                            "%d erasure receipt(s) verified: the queued purges they waited for have run",
                            settled,
                        )
            await anyio.sleep(RECEIPT_SETTLE_S)

    async def _refresh_stalled_purges(self) -> None:
        """memoryd_purges_waiting: purges queued for a host that is not alive (an alert fires)."""
        if self.pool is None:
            return
        try:
            waiting = await read_stalled(self.pool)
        except (RedisError, OSError):
            return  # Redis is away: the reconnect loop reports it; the gauge keeps its last value
        metrics.PURGES_WAITING.clear()
        for queue in waiting:
            metrics.PURGES_WAITING.labels(host=queue.host).set(queue.total)

    def _count_problems(self, agent: str, problems: int) -> None:
        """A gauge, and one line when the count changes. The line gives the count only: the
        problems name session keys, which may name people (`memoryd status` lists them)."""
        metrics.SOURCE_PROBLEMS.labels(agent=agent).set(problems)
        if problems != self._problems.get(agent, 0):
            log.warning(
                "agent %s: %d file(s) or entries of its sessions skipped; `memoryd status` names them",
                agent,
                problems,
            )
        self._problems[agent] = problems

    async def _watchdog_loop(self, interval_s: float) -> None:
        # Pinged from the event loop itself: a wedged loop stops the pings and systemd restarts us.
        while True:
            self.notifier.watchdog()
            await anyio.sleep(interval_s)


class OwnDebugOnly(logging.Filter):
    """Debug lines of memoryd's own loggers only. The libraries' debug lines name what they
    touch — watchfiles the changed transcripts, aiosqlite each call with its arguments — and
    journald, where the log goes, is out of reach of forget and erase."""

    def filter(self, record: logging.LogRecord) -> bool:
        return (
            record.levelno >= logging.INFO or record.name == "memoryd" or record.name.startswith("memoryd.")
        )


class LocalTimeFormatter(logging.Formatter):
    """Each line starts with its local time in ISO 8601, to the millisecond, with the offset."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        from datetime import datetime

        return datetime.fromtimestamp(record.created).astimezone().isoformat(timespec="milliseconds")


def configure_logging(level: str = "INFO") -> None:
    """One line per event on stderr. Under journald (JOURNAL_STREAM set), which adds the
    timestamp and unit, the line is bare; elsewhere it starts with its time. No line names a
    session, key, transcript path or participant: agents and counts only."""
    handler = logging.StreamHandler()
    handler.addFilter(OwnDebugOnly())
    if os.environ.get("JOURNAL_STREAM"):
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    else:
        handler.setFormatter(LocalTimeFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


async def serve(settings: Settings, config_path: str | None) -> int:
    return await Service(settings, config_path).run()
