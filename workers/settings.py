"""The arq worker configuration of memoryd (arq's `WorkerSettings`, built from Settings).

Values follow reference/perf-limits.md: arq's default poll of 0.5 s caps a worker at about
2 jobs/s and makes a round trip take 0.5 s, so `poll_delay` is set explicitly
(daemon.poll_delay_s). Results are JSON and kept `daemon.keep_result_s`, except erase
results, which hold a subject's ids and so live only `retention.erase_result_ttl_s`.
"""

from __future__ import annotations

from typing import Any

from arq.constants import result_key_prefix
from arq.worker import Function, Worker, func

from daemon.jobs import ERASE, deserialize, job_name_of, serialize
from daemon.settings import Settings
from workers.backfill import backfill
from workers.dream import dream
from workers.erase import erase
from workers.expire import expire
from workers.forget import forget
from workers.index_sync import index_sync
from workers.ingest_sweep import ingest_sweep
from workers.retention_sweep import retention_sweep

JOB_FUNCTIONS = (forget, erase, expire, ingest_sweep, index_sync, dream, backfill, retention_sweep)
# arq retries a job only when it is cancelled (drain, Retry); a failing job is not retried, so
# the try limit bounds how often a job is interrupted by restarts before it is given up.
MAX_TRIES = 5


def functions(settings: Settings) -> list[Function]:
    out = []
    for fn in JOB_FUNCTIONS:
        keep = settings.retention.erase_result_ttl_s if fn.__name__ == ERASE else settings.daemon.keep_result_s
        out.append(func(fn, name=fn.__name__, keep_result=keep, max_tries=MAX_TRIES))  # type: ignore[arg-type]
    return out


def worker_kwargs(settings: Settings, queue: str, ctx: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments for MemorydWorker (or a plain arq Worker); the redis pool is the caller's."""
    d = settings.daemon
    return {
        "functions": functions(settings),
        "queue_name": queue,
        "handle_signals": False,  # the service owns SIGTERM/SIGHUP (drain, reload)
        "poll_delay": d.poll_delay_s,
        "max_jobs": d.max_jobs,
        "job_timeout": d.job_timeout_s,
        "keep_result": d.keep_result_s,
        "max_tries": MAX_TRIES,
        "job_serializer": serialize,
        "job_deserializer": deserialize,
        "log_results": False,  # results are reports about memory; the job log line has counts only
        "health_check_interval": 60,
        "ctx": ctx,
    }



class MemorydWorker(Worker):
    """arq's Worker, with erase results kept short on every path. arq applies a function's
    `keep_result` when the function ran, but a job it gives up on before running (too many
    tries, expired) is stored with the worker-wide default — with its arguments."""

    async def start_jobs(self, job_ids: list[bytes]) -> None:
        # Redis can lose a running job's in-progress key (a restart without persistence). If the
        # job is then enqueued again, arq would start a second copy in this same worker, and the
        # copies' bookkeeping collides (`del job_tasks[id]` fails one of them with a KeyError).
        # A job this worker is still running stays queued: the running copy's result finishes it.
        running = {job_id for job_id, task in self.tasks.items() if not task.done()}
        await super().start_jobs([j for j in job_ids if j.decode() not in running])

    async def finish_failed_job(self, job_id: str, result_data: bytes | None) -> None:
        await super().finish_failed_job(job_id, result_data)
        if job_name_of(job_id) == ERASE:
            ttl_s = self.ctx["settings"].retention.erase_result_ttl_s
            await self.pool.pexpire(result_key_prefix + job_id, ttl_s * 1000)
