"""`memoryd run`, `memoryd status`, `memoryd jobs` (each family's command module registers its
own `memoryd enqueue <command>`, daemon/commands/_enqueue.py)."""

from __future__ import annotations

from typing import Any

import click

from memoryd.commands import (
    CliState,
    ago_iso,
    count_of,
    emit,
    json_option,
    known_agent_callback,
    pass_state,
    run_async,
    table,
    warn_missing_sessions_root,
)
from memoryd.errors import OperationFailed
from memoryd.runtime.wire import queue_name


def _status_human(report: Any) -> str:
    d = report.daemon
    if d.running is None:
        running = "unknown (its state is kept in Redis)"
    else:
        running = f"running (pid {d.pid})" if d.running else "not running"
    head = f"daemon {d.host_id}: {running}; queue {d.queue}; redis {d.redis} ({d.redis_url})"
    rows = [
        [
            a.agent,
            ago_iso(a.last_sweep_at),
            a.sessions,
            a.sessions_admitted,
            ", ".join(f"{k}={v}" for k, v in a.sessions_excluded.items()) or "-",
            count_of(a.lag, "session"),
            a.queue_depth if a.queue_depth is not None else "-",
            a.lock_holder or "-",
        ]
        for a in report.agents
    ]
    body = table(
        ["agent", "last sweep", "sessions", "admitted", "excluded", "lag", "queued", "lock"],
        rows,
        empty="no agents: none found under sessions_root, none configured",
    )
    errors = [f"  {a.agent}: {e}" for a in report.agents for e in a.errors]
    waiting = [f"  {s.line()}" for s in report.stalled_purges]
    return "\n".join(
        [head, body]
        + (["problems:"] + errors if errors else [])
        + (["purges waiting on a host that is not alive:"] + waiting if waiting else [])
    )


def _jobs_human(jobs: list[Any]) -> str:
    rows = [
        [
            j.job_id,
            j.state,
            j.tries or "-",
            ago_iso(j.enqueued_at, never="-"),
            ago_iso(j.finished_at, never="-"),
            j.error or ("report" if j.result else f"waiting: {j.waiting_on}" if j.waiting_on else "-"),
        ]
        for j in jobs
    ]
    return table(["job", "state", "tries", "enqueued", "finished", "outcome"], rows, empty="no jobs")


def register(cli: click.Group) -> None:
    @cli.command("run")
    @click.option(
        "--log-level",
        default="INFO",
        type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]),
        help="Log level for the structured log on stderr.",
    )
    @pass_state
    def run_cmd(state: CliState, log_level: str) -> None:
        from memoryd.runtime.service import configure_logging, serve

        configure_logging(log_level)
        code = run_async(serve, state.settings, state.config_path)
        if code:
            raise click.exceptions.Exit(code)

    @cli.command("status")
    @click.option("--agent", "agent_id", default=None, callback=known_agent_callback, help="Only this agent.")
    @json_option
    @pass_state
    def status_cmd(state: CliState, agent_id: str | None, as_json: bool) -> None:
        from memoryd.runtime.status import collect_status

        warn_missing_sessions_root(state.settings)
        agents = [agent_id] if agent_id else None
        report = run_async(collect_status, state.settings, agents)
        emit(report, as_json, _status_human)
        if not report.daemon.redis_ok:
            raise OperationFailed(
                f"Redis {report.daemon.redis}; start it or fix redis_url (MEMORYD_REDIS_URL), then run again"
            )

    @cli.command("jobs")
    @click.option(
        "--queue", default=None, help="Queue to list; default this host's (memoryd:queue:<host_id>)."
    )
    @click.option("--limit", default=50, type=click.IntRange(min=0), help="Finished jobs to show at most.")
    @json_option
    @pass_state
    def jobs_cmd(state: CliState, queue: str | None, limit: int, as_json: bool) -> None:
        from memoryd.runtime.client import MemorydClient

        target = queue or queue_name(state.settings.daemon.host_id)

        async def go() -> list[Any]:
            async with MemorydClient.connect(state.settings) as client:
                return await client.list_jobs(target, finished_limit=limit)

        emit(run_async(go), as_json, _jobs_human)
