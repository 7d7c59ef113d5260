"""Prometheus metrics of the daemon (DESIGN §2.5), served on `daemon.metrics_listen`.

Labels carry only operator-chosen names — job family, agent id, outcome, exclusion reason
(a configured policy value), artifact kind — never memory content, session ids or the ids
of people. deploy/alerts.yml and deploy/grafana-dashboard.json use these names; a test
checks that every metric they mention is defined here.
"""

from __future__ import annotations

import logging
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from memoryd.settings import parse_listen

log = logging.getLogger("memoryd.metrics")

# A registry of our own: the default one also carries process/platform collectors, and tests
# that import this module many times must not collide with other registries.
REGISTRY = CollectorRegistry(auto_describe=True)

_SWEEP_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900)
_WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

UP = Gauge("memoryd_up", "1 while the daemon serves its queue.", registry=REGISTRY)
REDIS_UP = Gauge("memoryd_redis_up", "1 when the last Redis round trip succeeded, else 0.", registry=REGISTRY)
REDIS_RECONNECTS = Counter(
    "memoryd_redis_reconnects_total", "Reconnects after Redis was lost.", registry=REGISTRY
)
WORKER_RESTARTS = Counter(
    "memoryd_worker_restarts_total",
    "Restarts of the job worker after an error other than a lost Redis.",
    registry=REGISTRY,
)
LOOP_RESTARTS = Counter(
    "memoryd_loop_restarts_total",
    "Restarts of a background loop (scheduler, live ingest, heartbeat, gauges) after an error it "
    "did not expect; each is one log line naming the class and where it was raised.",
    ["loop"],
    registry=REGISTRY,
)
JOBS = Gauge(
    "memoryd_jobs_by_state",
    "Jobs of this host's queue by state (queued, running).",
    ["state"],
    registry=REGISTRY,
)
JOBS_TOTAL = Counter(
    "memoryd_jobs_total",
    "Jobs finished, by family and outcome (complete, failed, retried).",
    ["family", "outcome"],
    registry=REGISTRY,
)
JOB_DURATION = Histogram(
    "memoryd_job_duration_seconds",
    "Wall time of a job, by family.",
    ["family"],
    buckets=_SWEEP_BUCKETS,
    registry=REGISTRY,
)
SWEEP_DURATION = Histogram(
    "memoryd_sweep_duration_seconds",
    "Wall time of a sweep (ingest_sweep, dream, index_sync, retention_sweep).",
    ["family", "agent"],
    buckets=_SWEEP_BUCKETS,
    registry=REGISTRY,
)
LAST_SWEEP = Gauge(
    "memoryd_last_sweep_success_timestamp_seconds",
    "Unix time of the last successful sweep, by family and agent (ingest: from start, the last "
    "recorded sweep or the start, so sweeps failing from the start go stale).",
    ["family", "agent"],
    registry=REGISTRY,
)
SCHEDULED = Counter(
    "memoryd_scheduled_jobs_total",
    "Scheduler decisions per family: enqueued, or skipped because one is still pending.",
    ["family", "decision"],
    registry=REGISTRY,
)
SESSIONS_SCANNED = Counter(
    "memoryd_sessions_scanned_total", "Sessions an ingest sweep looked at.", ["agent"], registry=REGISTRY
)
SESSIONS_ADMITTED = Gauge(
    "memoryd_sessions_admitted",
    "Live sessions the admission policy admits (lag: those not read yet).",
    ["agent"],
    registry=REGISTRY,
)
SESSIONS_EXCLUDED = Gauge(
    "memoryd_sessions_excluded",
    "Sessions kept out by the admission policy, by reason.",
    ["agent", "reason"],
    registry=REGISTRY,
)
INGEST_LAG = Gauge(
    "memoryd_ingest_lag_sessions",
    "Sessions changed since their checkpoint (or never swept).",
    ["agent"],
    registry=REGISTRY,
)
INGEST_BACKLOG = Gauge(
    "memoryd_ingest_backlog_sessions",
    "Sessions the next ingest sweep would read (the lag; recomputed when a sweep of this host ends).",
    ["agent"],
    registry=REGISTRY,
)
WATCHING = Gauge(
    "memoryd_watching",
    "1 while the agent's sessions are watched, 0 while only the interval sweeps cover them.",
    ["agent"],
    registry=REGISTRY,
)
LIVE_JOBS = Counter(
    "memoryd_live_jobs_total",
    "Jobs the daemon enqueued itself beside the schedule, by family and why "
    "(change: a watched write settled; backlog: the last sweep left work; follow: a sweep read something).",
    ["family", "reason"],
    registry=REGISTRY,
)
SOURCE_PROBLEMS = Gauge(
    "memoryd_source_problems",
    "Files or entries of the agent's sessions that could not be read (skipped) at the last refresh.",
    ["agent"],
    registry=REGISTRY,
)
LOCK_WAIT = Histogram(
    "memoryd_lock_wait_seconds",
    "Time a job waited for the workspace lock.",
    ["family"],
    buckets=_WAIT_BUCKETS,
    registry=REGISTRY,
)
LOCK_TIMEOUTS = Counter(
    "memoryd_lock_timeouts_total",
    "Jobs refused because the workspace lock stayed busy.",
    ["family"],
    registry=REGISTRY,
)
PURGES = Counter(
    "memoryd_purges_total",
    "Purges (forget, erase, expire, retention_sweep) that ran, by outcome; not dry runs or refused payloads.",
    ["family", "outcome"],
    registry=REGISTRY,
)
JOBS_NOT_RUN = Counter(
    "memoryd_jobs_not_run_total",
    "Jobs given up without running their function: an unreadable or undeserializable record, "
    "an unknown function, expired, or out of tries; `reason` is the error class stored as its result.",
    ["family", "reason"],
    registry=REGISTRY,
)
PURGES_WAITING = Gauge(
    "memoryd_purges_waiting",
    "Purge jobs waiting on a queue whose host is not alive (every daemon reports every queue).",
    ["host"],
    registry=REGISTRY,
)
PURGED_ARTIFACTS = Counter(
    "memoryd_purged_artifacts_total",
    "Artifacts removed by purges, by kind.",
    ["family", "artifact"],
    registry=REGISTRY,
)


def serve(listen: str) -> tuple[Any, int]:
    """Start the exporter thread; returns (server, bound port) — port 0 picks a free one."""
    host, port = parse_listen(listen)
    server, _thread = start_http_server(port, addr=host, registry=REGISTRY)
    return server, int(server.server_port)


def count_purged(job: str, artifacts: dict[str, Any]) -> None:
    """Add a purge report's artifact counters (ints only; anything else is not a count)."""
    for kind, value in artifacts.items():
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            PURGED_ARTIFACTS.labels(family=job, artifact=kind).inc(value)
