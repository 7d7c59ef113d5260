"""`memoryd run`, `memoryd status`, `memoryd jobs`, `memoryd enqueue forget|erase|ingest|index`."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import click

from daemon.commands import CliState, emit, emit_json, json_option, pass_state, run_async, table
from daemon.commands.forget import forget_request, selector_options
from daemon.commands.retention import erase_options, erase_request
from daemon.runtime.wire import queue_name


def _status_human(report: Any) -> str:
    d = report.daemon
    running = f"running (pid {d.pid})" if d.running else "not running"
    head = f"daemon {d.host_id}: {running}; queue {d.queue}; redis {d.redis} ({d.redis_url})"
    rows = [
        [
            a.agent,
            a.last_sweep_at or "never",
            a.sessions,
            a.sessions_admitted,
            ", ".join(f"{k}={v}" for k, v in a.sessions_excluded.items()) or "-",
            a.lag,
            a.queue_depth if a.queue_depth is not None else "-",
            a.lock_holder or "-",
        ]
        for a in report.agents
    ]
    body = table(["agent", "last sweep", "sessions", "admitted", "excluded", "lag", "queued", "lock"], rows)
    errors = [f"  {a.agent}: {e}" for a in report.agents for e in a.errors]
    return "\n".join([head, body] + (["problems:"] + errors if errors else []))


def _jobs_human(jobs: list[Any]) -> str:
    rows = [
        [
            j.job_id,
            j.state,
            j.tries or "-",
            j.enqueued_at or "-",
            j.finished_at or "-",
            j.error or ("report" if j.result else "-"),
        ]
        for j in jobs
    ]
    return table(["job", "state", "tries", "enqueued", "finished", "outcome"], rows) if rows else "no jobs"


def _enqueue_and_maybe_wait(
    state: CliState,
    action: Callable[[Any], Awaitable[Any]],
    wait: bool,
    timeout_s: float | None,
    as_json: bool,
) -> None:
    from daemon.runtime.client import MemorydClient

    async def go() -> tuple[Any, Any]:
        async with MemorydClient.connect(state.settings) as client:
            job = await action(client)
            report = await client.wait(job.job_id, timeout_s=timeout_s) if wait else None
            return job, report

    job, report = run_async(go)
    if report is None:
        if as_json:
            emit_json(job)
        else:
            click.echo(
                job.job_id
                + (" (deduplicated: an identical request is already known)" if job.deduplicated else "")
            )
        return
    click.echo(f"job {job.job_id}: {report.state}", err=True)
    if report.state != "complete":
        click.echo(f"memoryd: error: job {job.job_id} failed: {report.error}", err=True)
        raise click.exceptions.Exit(report.exit_code())
    if as_json:
        emit_json(report.result)
    else:
        click.echo(json.dumps(report.result, indent=2))
    problem = report.outcome()  # the direct command's exit code and message for the same report
    if problem is not None:
        raise problem


wait_option = click.option("--wait", is_flag=True, help="Wait for the job and print its report.")
timeout_option = click.option(
    "--timeout",
    "timeout_s",
    type=float,
    default=None,
    help="With --wait: give up after this many seconds (exit 1).",
)
request_id_option = click.option(
    "--request-id",
    default=None,
    help="Distinguish this request from an identical earlier one (else deduplicated).",
)


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
        """Run the daemon: worker, scheduler, metrics; systemd notify protocol (Type=notify)."""
        from daemon.runtime.service import configure_logging, serve

        configure_logging(log_level)
        code = run_async(serve, state.settings, state.config_path)
        if code:
            raise click.exceptions.Exit(code)

    @cli.command("status")
    @click.option("--agent", "agent_id", default=None, help="Only this agent.")
    @json_option
    @pass_state
    def status_cmd(state: CliState, agent_id: str | None, as_json: bool) -> None:
        """Per agent: last sweep, admitted/excluded sessions, lag, queue depth, lock holder."""
        from daemon.ids import validate_agent_id
        from daemon.status import collect_status

        agents = [validate_agent_id(agent_id)] if agent_id else None
        emit(run_async(collect_status, state.settings, agents), as_json, _status_human)

    @cli.command("jobs")
    @click.option(
        "--queue", default=None, help="Queue to list; default this host's (memoryd:queue:<host_id>)."
    )
    @click.option("--limit", default=50, type=click.IntRange(min=0), help="Finished jobs to show at most.")
    @json_option
    @pass_state
    def jobs_cmd(state: CliState, queue: str | None, limit: int, as_json: bool) -> None:
        """Queued, running and finished jobs of a queue, with their results."""
        from daemon.runtime.client import MemorydClient

        target = queue or queue_name(state.settings.daemon.host_id)

        async def go() -> list[Any]:
            async with MemorydClient.connect(state.settings) as client:
                return await client.list_jobs(target, finished_limit=limit)

        emit(run_async(go), as_json, _jobs_human)

    @cli.group("enqueue")
    def enqueue_group() -> None:
        """Send a job to the daemon that owns the agent (validated like the direct command)."""

    @enqueue_group.command("forget")
    @click.option("--agent", "agent_id", required=True, help="The agent whose memory to purge.")
    @selector_options
    @request_id_option
    @wait_option
    @timeout_option
    @json_option
    @pass_state
    def enqueue_forget(
        state: CliState,
        agent_id: str,
        sessions: tuple[str, ...],
        participants: tuple[str, ...],
        hook_sources: tuple[str, ...],
        since: str | None,
        dry_run: bool,
        request_id: str | None,
        wait: bool,
        timeout_s: float | None,
        as_json: bool,
    ) -> None:
        """Enqueue a forget (same selectors as `memoryd forget`)."""
        # Validated here, before any connection: a bad request exits 2 and enqueues nothing.
        request = forget_request(agent_id, sessions, participants, hook_sources, since, dry_run)
        _enqueue_and_maybe_wait(
            state, lambda c: c.enqueue_forget(request, request_id=request_id), wait, timeout_s, as_json
        )

    @enqueue_group.command("erase")
    @erase_options("Your reference, copied to the receipt (a new one also makes a new job).")
    @click.option("--queue", default=None, help="Target queue when several hosts share Redis.")
    @wait_option
    @timeout_option
    @json_option
    @pass_state
    def enqueue_erase(
        state: CliState,
        scope: str,
        allow_partial: bool,
        request_id: str | None,
        dry_run: bool,
        queue: str | None,
        wait: bool,
        timeout_s: float | None,
        as_json: bool,
    ) -> None:
        """Enqueue an erasure (same flags as `memoryd erase`); its arguments and result are kept in
        Redis only retention.erase_result_ttl_s."""
        request = erase_request(scope, allow_partial, request_id, dry_run)
        _enqueue_and_maybe_wait(
            state, lambda c: c.enqueue_erase(request, queue=queue), wait, timeout_s, as_json
        )

    @enqueue_group.command("ingest")
    @click.option("--agent", "agent_id", required=True, help="The agent to sweep.")
    @request_id_option
    @wait_option
    @timeout_option
    @json_option
    @pass_state
    def enqueue_ingest(
        state: CliState,
        agent_id: str,
        request_id: str | None,
        wait: bool,
        timeout_s: float | None,
        as_json: bool,
    ) -> None:
        """Enqueue an ingest sweep of one agent."""
        from daemon.ids import validate_agent_id

        validate_agent_id(agent_id)
        _enqueue_and_maybe_wait(
            state, lambda c: c.enqueue_ingest(agent_id, request_id=request_id), wait, timeout_s, as_json
        )

    @enqueue_group.command("index")
    @click.option("--agent", "agent_id", required=True, help="The agent whose index to sync.")
    @click.option("--force", is_flag=True, help="Re-chunk and re-embed even unchanged sources.")
    @request_id_option
    @wait_option
    @timeout_option
    @json_option
    @pass_state
    def enqueue_index(
        state: CliState,
        agent_id: str,
        force: bool,
        request_id: str | None,
        wait: bool,
        timeout_s: float | None,
        as_json: bool,
    ) -> None:
        """Enqueue an index sync of one agent."""
        from daemon.ids import validate_agent_id

        validate_agent_id(agent_id)
        _enqueue_and_maybe_wait(
            state,
            lambda c: c.enqueue_index(agent_id, force=force, request_id=request_id),
            wait,
            timeout_s,
            as_json,
        )
