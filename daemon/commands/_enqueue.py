"""`memoryd enqueue <command>`: the same request as `memoryd <command>`, sent to the daemon.

A family's command module declares its flags and how they become a request once, and
registers both commands from them (`register_enqueue`), so the two cannot drift: the same
validation before anything is sent (a bad request exits 2 and enqueues nothing) and, with
`--wait`, the same report and the same exit code as the direct command.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import click

from memoryd.commands import CliState, command_name, emit_json, json_option, pass_state, run_async
from memoryd.ops.op import Op, Routing

if TYPE_CHECKING:
    from memoryd.runtime.client import UnroutedAgent

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]

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
    help=(
        "Your unguessable reference for this request (a UUID; never a subject's id): sent again, "
        "it is answered by its queued, running or successful run; a failed one runs again."
    ),
)
queue_option = click.option("--queue", default=None, help="Target queue when several hosts share Redis.")
queue_anyway_option = click.option(
    "--queue-anyway",
    is_flag=True,
    help="Queue the job even though its host sends no heartbeat (it runs when the host is back).",
)


def enqueue_group(cli: click.Group) -> click.Group:
    """The `memoryd enqueue` group, created by whichever family registers first."""
    group = cli.commands.get("enqueue")
    if isinstance(group, click.Group):
        return group

    @cli.group("enqueue")
    def enqueue() -> None:
        """Send a job to the daemon that owns the agent (validated like the direct command)."""

    return enqueue


def _duration(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 1:
        return f"{int(seconds)} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours else f"{minutes} min"


def _dedup_note(stands_s: float | None) -> str:
    """What a deduplicated request means: which earlier run of its request id answers it, and
    for how long."""
    if stands_s is None:
        return (
            " (deduplicated: this request id's job is still queued or running; its report answers this one)"
        )
    return (
        f" (deduplicated: this request id's job ran already; its result stands for another "
        f"{_duration(stands_s)}; pass a new --request-id to run it again)"
    )


def _refuse_unrouted(state: CliState, exc: UnroutedAgent) -> NoReturn:
    """No host serves the agent. When this host's config lists agents and the name is not one
    of them it is most likely a typo: say so against those names; else the client's refusal
    (which lists the agents the hosts serve)."""
    from memoryd.commands._environment import known_agents, require_known_agent

    if known_agents(state.settings):
        require_known_agent(state.settings, exc.agent)
    raise exc


def enqueue_and_maybe_wait(
    state: CliState,
    action: Callable[[Any], Awaitable[Any]],
    wait: bool,
    timeout_s: float | None,
    as_json: bool,
    human: Callable[[dict[str, Any]], str] | None = None,
) -> None:
    from memoryd.runtime.client import MemorydClient

    async def go() -> tuple[Any, Any, float | None]:
        async with MemorydClient.connect(state.settings) as client:
            job = await action(client)
            stands_s = await client.result_stands_s(job.job_id) if job.deduplicated else None
            report = await client.wait(job.job_id, queue=job.queue, timeout_s=timeout_s) if wait else None
            return job, report, stands_s

    from memoryd.runtime.client import UnroutedAgent

    try:
        job, report, stands_s = run_async(go)
    except UnroutedAgent as exc:
        _refuse_unrouted(state, exc)
    if report is None:
        if as_json:
            emit_json(job)
        else:
            click.echo(job.job_id + (_dedup_note(stands_s) if job.deduplicated else ""))
        return
    click.echo(f"job {job.job_id}: {report.state}", err=True)
    if report.state != "complete":
        click.echo(f"memoryd: error: job {job.job_id} failed: {report.error}", err=True)
        raise click.exceptions.Exit(report.exit_code())
    if as_json or human is None:
        emit_json(report.result)
    else:
        click.echo(human(report.result))
    problem = report.outcome()  # the direct command's exit code and message for the same report
    if problem is not None:
        raise problem


def register_enqueue(
    cli: click.Group,
    op: Op[Any],
    options: Sequence[Decorator],
    fields: Callable[..., dict[str, Any]],
    human: Callable[[Any], str],
    everywhere: Callable[[CliState, Any, str | None, bool, bool, float | None, bool], None] | None = None,
    details: str | None = None,
) -> None:
    """`memoryd enqueue <op's command>`: `options` are the direct command's flags, `fields`
    turns them into the request's fields, `human` is the direct command's rendering of the
    report (what `--wait` prints without `--json`); `details` is the help after the command's line
    in ENQUEUE_COMMANDS (daemon/commands/__init__.py). A request whose model has no `request_id`
    of its own gets `--request-id` (what makes a request sent again one job); a host-wide one gets
    `--queue`; each gets `--queue-anyway` (queued for a host that is not alive). `everywhere`:
    what a host-wide request without `--queue` does instead of going to the only host's queue
    (an erasure goes to every host: state, request, request id, queue anyway, wait, timeout, json)."""

    def render(result: dict[str, Any]) -> str:
        from memoryd.ops.result import read_result

        report = read_result(op.contract.result(), result)
        if report is None:  # a result of another memoryd version: show it as it is
            import orjson

            return orjson.dumps(result, option=orjson.OPT_INDENT_2).decode()
        return human(report)

    own_request_id = "request_id" not in op.contract.request.model_fields
    host_wide = op.contract.routing is Routing.HOST

    def enqueue_cmd(
        state: CliState, wait: bool, timeout_s: float | None, as_json: bool, **flags: Any
    ) -> None:
        request_id = flags.pop("request_id", None) if own_request_id else None
        queue = flags.pop("queue", None) if host_wide else None
        queue_anyway = bool(flags.pop("queue_anyway", False))
        # Validated here, before any connection: a bad request exits 2 and enqueues nothing.
        request = op.contract.parse(fields(**flags))
        if everywhere is not None and queue is None:
            everywhere(state, request, request_id, queue_anyway, wait, timeout_s, as_json)
            return
        enqueue_and_maybe_wait(
            state,
            lambda c: c.submit(op, request, queue=queue, request_id=request_id, queue_anyway=queue_anyway),
            wait,
            timeout_s,
            as_json,
            render,
        )

    enqueue_cmd.__doc__ = details
    decorated: Callable[..., Any] = pass_state(enqueue_cmd)
    extra = [
        *([request_id_option] if own_request_id else []),
        *([queue_option] if host_wide else []),
        queue_anyway_option,
    ]
    for option in reversed([*options, *extra, wait_option, timeout_option, json_option]):
        decorated = option(decorated)
    enqueue_group(cli).command(command_name(op))(decorated)
