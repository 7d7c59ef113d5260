"""CLI command families, one module each. Shared plumbing for them lives here.

This package is imported by every command and by `memoryd --version`, so it imports only
click: settings, pydantic, anyio and orjson are loaded by the functions that use them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from memoryd.ops.op import Op, ProgressFn, R, Report
    from memoryd.settings import Settings

T = TypeVar("T")

# Each top-level command: the module of daemon/commands that registers it, and its one-line
# help (what `memoryd --help` lists without importing the module; tests/test_cli_help.py
# checks both against the commands themselves).
COMMANDS: dict[str, tuple[str, str]] = {
    "backfill": ("dream", "Backfill memory from historical sessions."),
    "checkpoints": (
        "ingest",
        "List ingestion checkpoints: fingerprint, cursor and why a session was kept out.",
    ),
    "config": ("config", "Inspect the configuration."),
    "demo": ("demo", "Example data to try memoryd without an agent."),
    "dream": ("dream", "Run a dreaming sweep: light and REM diary blocks, deep promotion into MEMORY.md."),
    "erase": (
        "retention",
        "Erase a data subject: structural cascade, provenance rewrite, or hold-blocked refusal.",
    ),
    "erasure": ("retention", "The receipt of an erasure sent to every host, read from their results now."),
    "expire": (
        "retention",
        "Hide scopes past their TTL (held ones excepted); purge old expired data if configured.",
    ),
    "forget": (
        "forget",
        "Remove everything memoryd derived from the selected sessions and record them as forgotten.",
    ),
    "hold": (
        "retention",
        "Legal holds: a held scope (and all under it) is not expired, erased or rewritten.",
    ),
    "index": ("index", "Index the agent's memory files (and transcripts, if configured) for search."),
    "ingest": ("ingest", "Run one ingest sweep in the foreground (needs Redis for the workspace lock)."),
    "jobs": ("service", "Queued, running and finished jobs of a queue, with their results."),
    "mcp": ("mcp", "Serve the agent's memory to agents over MCP (stdio, or HTTP with --http)."),
    "mem": ("retention", "The memory-tool API over scopes tenant:<t>[:user:<u>[:session:<s>[:object:<o>]]]."),
    "promote": (
        "dream",
        "Rank staged entries and append those passing every gate to MEMORY.md (deep phase only).",
    ),
    "receipts": ("retention", "Erasure receipts, oldest first."),
    "reset": (
        "index",
        "Clear the agent's derived index and embedding cache; keep lineage and forgotten records.",
    ),
    "run": ("service", "Run the daemon: worker, scheduler, metrics; systemd notify protocol (Type=notify)."),
    "search": (
        "index",
        "Search the agent's indexed memory (BM25, plus vectors when an embedder is configured).",
    ),
    "sessions": (
        "ingest",
        "List an agent's sessions from metadata (no transcript is read) and their admission.",
    ),
    "status": (
        "service",
        "Per agent: last sweep, admitted/excluded sessions, lag, queue depth, lock holder.",
    ),
    "verify": (
        "retention",
        "Check the erasure invariants now: provenance edges, compaction, physical bytes.",
    ),
}
# `memoryd enqueue <command>`, registered by the same module as `memoryd <command>`.
ENQUEUE_COMMANDS: dict[str, tuple[str, str]] = {
    "backfill": ("dream", "Enqueue a backfill of one agent (same flags as `memoryd backfill`)."),
    "dream": ("dream", "Enqueue a dreaming sweep of one agent (same phases as `memoryd dream`)."),
    "erase": (
        "retention",
        "Enqueue an erasure (same flags as `memoryd erase`) on every host that serves an agent on "
        "this Redis, or on one host's queue with --queue.",
    ),
    "expire": ("retention", "Enqueue an expiry run (as `memoryd expire`) on the host's queue."),
    "forget": ("forget", "Enqueue a forget (same selectors and --verify as `memoryd forget`)."),
    "index": ("index", "Enqueue an index sync of one agent."),
    "ingest": ("ingest", "Enqueue an ingest sweep of one agent."),
}


class CliState:
    """Carried on the click context: the config path, and settings loaded on first use."""

    def __init__(self, config_path: str | None):
        self.config_path = config_path
        self._settings: Settings | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            from memoryd.commands import _environment as env
            from memoryd.settings import load_settings, resolve_config_path

            settings = load_settings(self.config_path)
            if resolve_config_path(self.config_path) is None:
                notice = env.no_config_notice(settings)
                if notice is not None:
                    click.echo(f"memoryd: {notice}", err=True)
                env.check_default_sessions_root(settings)
            env.check_state_dir(settings)
            self._settings = settings
        return self._settings


pass_state = click.make_pass_decorator(CliState)


def warn_missing_sessions_root(settings: Settings) -> None:
    from memoryd.agents import missing_sessions_root

    warning = missing_sessions_root(settings)
    if warning is not None:
        click.echo(f"memoryd: warning: {warning}", err=True)


json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")


def known_agent_callback(ctx: click.Context, _param: click.Parameter, agent_id: str | None) -> str | None:
    from memoryd.commands._environment import require_known_agent

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
    import anyio

    return anyio.run(fn, *args)


def command_name(op: Op[Any]) -> str:
    """The `memoryd <command>` of an operation (the registry names it)."""
    if op.contract.command is None:
        raise RuntimeError(f"operation {op.contract.name} has no command")
    return op.contract.command


def run_op(state: CliState, op: Op[R], request: R, progress: ProgressFn | None = None) -> Any:
    """Run an operation in the foreground, as the daemon's job would (memoryd.ops.execute)."""
    from memoryd.ops.execute import run_locally

    async def go() -> Any:
        return await run_locally(op, state.settings, request, progress=progress)

    return run_async(go)


def emit_report(op: Op[Any], report: Report, as_json: bool, human: Callable[[Any], str]) -> None:
    """Print an operation's report, then raise what it means for the exit code (a refused
    erasure exits 3), exactly as `memoryd enqueue … --wait` does with the job's result."""
    from memoryd.plain_report import report_json

    emit(report, as_json, human)
    problem = op.contract.outcome(report_json(report))
    if problem is not None:
        raise problem


def to_jsonable(obj: Any) -> Any:
    if isinstance(obj, list):
        return [to_jsonable(o) for o in obj]
    if isinstance(obj, dict | str | int | float | None):  # already JSON
        return obj
    from memoryd.plain_report import report_json

    return report_json(obj)  # a report: a plain one's `to_json`, a model's dump by alias


def emit_json(obj: Any) -> None:
    """One JSON document on stdout; key order is the model's field order."""
    import orjson

    click.echo(orjson.dumps(to_jsonable(obj), option=orjson.OPT_INDENT_2).decode())


def emit(obj: Any, as_json: bool, human: Callable[[Any], str]) -> None:
    if as_json:
        emit_json(obj)
    else:
        click.echo(human(obj))


def iso_time(ms: int | None, never: str = "never") -> str:
    """Unix milliseconds as ISO 8601 UTC (an exact moment in a sentence; JSON keeps the number)."""
    from datetime import UTC, datetime

    if ms is None:
        return never
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.isoformat(timespec="milliseconds" if ms % 1000 else "seconds").replace("+00:00", "Z")


# Each unit is used up to 1.5 of the next, so "90 s ago" reads before "2 min ago".
_SPANS = ((86_400, "d"), (3_600, "h"), (60, "min"), (1, "s"))


def ago(ms: int | None, now_ms: int | None = None, never: str = "never") -> str:
    """Unix milliseconds as a person reads them in a table: "12 s ago", "in 3 d"."""
    if ms is None:
        return never
    if now_ms is None:
        import time

        now_ms = int(time.time() * 1000)
    delta_s = abs(now_ms - ms) / 1000
    if delta_s < 1:
        return "just now"
    count, unit = round(delta_s), "s"
    for size, name in _SPANS:
        if delta_s >= size * 1.5 or size == 1:
            count, unit = round(delta_s / size), name
            break
    return f"{count} {unit} ago" if ms <= now_ms else f"in {count} {unit}"


def ago_iso(text: str | None, never: str = "never") -> str:
    """An ISO 8601 time (as reports carry it) as `ago` shows it."""
    from datetime import datetime

    if text is None:
        return never
    return ago(int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000))


def human_size(n: int) -> str:
    """Bytes with a binary unit: "512 B", "2.0 KiB"."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def count_of(n: int, noun: str) -> str:
    """ "1 session", "2 sessions"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def yes_no(value: bool) -> str:
    return "yes" if value else "no"


def table(headers: list[str], rows: list[list[Any]], empty: str) -> str:
    """A plain aligned text table (stable in logs and pipes, unlike a boxed one); `empty` is
    the line printed instead when there are no rows (bare headers read as a fault)."""
    if not rows:
        return empty
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
