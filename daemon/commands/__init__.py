"""CLI command families, one module each. Shared plumbing for them lives here."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import click
import orjson
from pydantic import BaseModel

from daemon.ops.op import Op, ProgressFn, R
from daemon.settings import Settings, load_settings, resolve_config_path

T = TypeVar("T")


class CliState:
    """Carried on the click context: the config path, and settings loaded on first use."""

    def __init__(self, config_path: str | None):
        self.config_path = config_path
        self._settings: Settings | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            from daemon.commands import _environment as env

            settings = load_settings(self.config_path)
            if resolve_config_path(self.config_path) is None:
                click.echo(f"memoryd: {env.no_config_notice(settings)}", err=True)
                env.check_default_sessions_root(settings)
            env.check_state_dir(settings)
            self._settings = settings
        return self._settings


pass_state = click.make_pass_decorator(CliState)

json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")


def known_agent_callback(ctx: click.Context, _param: click.Parameter, agent_id: str | None) -> str | None:
    from daemon.commands._environment import require_known_agent

    if agent_id is None:
        return None
    return require_known_agent(ctx.find_object(CliState).settings, agent_id)  # type: ignore[union-attr]


# A command run here refuses an agent this host does not know (exit 2) before it creates
# anything; `memoryd enqueue` takes the name as given (its route decides, on the serving host).
agent_option = click.option(
    "--agent", "agent_id", required=True, callback=known_agent_callback, help="The agent whose memory to use."
)
agent_name_option = click.option("--agent", "agent_id", required=True, help="The agent whose memory to use.")


def run_async(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    return anyio.run(fn, *args)


def command_name(op: Op[Any]) -> str:
    """The `memoryd <command>` of an operation (the registry names it)."""
    if op.command is None:
        raise RuntimeError(f"operation {op.name} has no command")
    return op.command


def run_op(state: CliState, op: Op[R], request: R, progress: ProgressFn | None = None) -> Any:
    """Run an operation in the foreground, as the daemon's job would (daemon.ops.execute)."""
    from daemon.ops.execute import run_locally

    async def go() -> Any:
        return await run_locally(op, state.settings, request, progress=progress)

    return run_async(go)


def emit_report(op: Op[Any], report: BaseModel, as_json: bool, human: Callable[[Any], str]) -> None:
    """Print an operation's report, then raise what it means for the exit code (a refused
    erasure exits 3), exactly as `memoryd enqueue … --wait` does with the job's result."""
    emit(report, as_json, human)
    problem = op.outcome(report.model_dump(mode="json", by_alias=True))
    if problem is not None:
        raise problem


def to_jsonable(obj: Any) -> Any:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json", by_alias=True)
    if isinstance(obj, list):
        return [to_jsonable(o) for o in obj]
    return obj


def emit_json(obj: Any) -> None:
    """One JSON document on stdout; key order is the model's field order."""
    click.echo(orjson.dumps(to_jsonable(obj), option=orjson.OPT_INDENT_2).decode())


def emit(obj: Any, as_json: bool, human: Callable[[Any], str]) -> None:
    if as_json:
        emit_json(obj)
    else:
        click.echo(human(obj))


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """A plain aligned text table (stable in logs and pipes, unlike a boxed one)."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
