"""`memoryd …` — thin: parse, call the domain, print. Errors map to exit codes here only:
0 ok, 1 operation failed, 2 usage or config error, 3 refused (hold, lock timeout).

Commands live in `daemon/commands/<group>.py`, each with `register(cli)`, and are imported
only when invoked: the table in `daemon/commands/__init__.py` names each command's module and
its one-line help, so `memoryd --help` and `memoryd --version` import no command at all.
"""

from __future__ import annotations

import gc
import importlib
import inspect
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import click

from memoryd import __version__
from memoryd.allocator import tune_allocator
from memoryd.commands import COMMANDS, ENQUEUE_COMMANDS, CliState
from memoryd.errors import MemorydError, OperationFailed

_loaded: set[tuple[str, bool]] = set()
_headed: set[int] = set()  # commands whose help the table's line heads (by identity: once each)


def load_family(module: str, *, enqueue: bool = False) -> None:
    """Import `daemon/commands/<module>.py` and let it register its commands (once). A family
    may register its `memoryd enqueue` twins apart (`register_enqueue_commands`), so that its
    direct commands do not load what only the twins need (the op registry's request models)."""
    family = importlib.import_module(f"memoryd.commands.{module}")
    if (module, False) not in _loaded:
        _loaded.add((module, False))
        family.register(cli)
    twins = getattr(family, "register_enqueue_commands", None)
    if enqueue and twins is not None and (module, True) not in _loaded:
        _loaded.add((module, True))
        twins(cli)
    _summarize(module)


def _summarize(module: str) -> None:
    """Head each command `module` registered with its line from the tables, the one place that
    line is written (a command's docstring says only what follows it)."""
    groups: list[tuple[click.Group, Mapping[str, tuple[str, str]]]] = [(cli, COMMANDS)]
    enqueue = cli.commands.get("enqueue")
    if isinstance(enqueue, click.Group):
        groups.append((enqueue, ENQUEUE_COMMANDS))
    for group, table in groups:
        for name, (owner, summary) in table.items():
            command = group.commands.get(name)
            if owner == module and command is not None and id(command) not in _headed:
                _headed.add(id(command))
                details = inspect.cleandoc(command.help) if command.help else ""
                command.help = f"{summary}\n\n{details}" if details else summary


def load_all() -> None:
    """Every command family (for tools that walk the whole command tree)."""
    for module, _summary in COMMANDS.values():
        load_family(module)
    for module, _summary in ENQUEUE_COMMANDS.values():
        load_family(module, enqueue=True)


class LazyGroup(click.Group):
    """A group whose commands are imported from their family's module on first use."""

    def __init__(
        self, *args: Any, table: Mapping[str, tuple[str, str]], enqueue: bool = False, **kwargs: Any
    ):
        super().__init__(*args, **kwargs)
        self.table = table
        self.enqueue = enqueue  # `memoryd enqueue`: its commands are the families' twins

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(self.table))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.table:
            load_family(self.table[cmd_name][0], enqueue=self.enqueue)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # From the table: listing the commands must not import them.
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max((len(n) for n in names), default=0)
        rows = []
        for name in names:
            command = self.commands.get(name) or click.Command(name, help=self.table[name][1])
            rows.append((name, command.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(
    cls=LazyGroup,
    table=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Config file (TOML). Default: $MEMORYD_CONFIG, else built-in defaults.",
)
@click.version_option(__version__, prog_name="memoryd")
@click.pass_context
def cli(ctx: click.Context, config_path: str | None) -> None:
    """memoryd: long-term memory for AI agents, with provenance and verified forgetting."""
    ctx.obj = CliState(config_path)


@cli.group("enqueue", cls=LazyGroup, table=ENQUEUE_COMMANDS, enqueue=True)
def enqueue() -> None:
    """Send a job to the daemon that owns the agent (validated like the direct command)."""


def main(argv: Sequence[str] | None = None) -> int:
    # Before any store thread starts (see daemon/allocator.py).
    tune_allocator()
    try:
        # Without standalone mode click returns ctx.exit()'s code instead of exiting.
        rv = cli.main(
            args=list(argv) if argv is not None else None, prog_name="memoryd", standalone_mode=False
        )
    except click.exceptions.Abort:
        click.echo("memoryd: aborted", err=True)
        return 1
    except click.exceptions.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except MemorydError as exc:
        click.echo(f"memoryd: error: {exc}", err=True)
        return exc.exit_code
    except OSError as exc:  # the state checks catch the usual ones first; this is one line too
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(f"memoryd: error: {where}{exc.strerror or exc}; fix it, then run again", err=True)
        return OperationFailed.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        # Imported here: --version and --help must not load SQLite.
        from memoryd.store.engine import ANY_SQLITE_ERROR

        if not isinstance(exc, ANY_SQLITE_ERROR):
            raise
        # A full disk or a broken file under a store: one line.
        click.echo(f"memoryd: error: database: {exc}; free space or fix the file, then run again", err=True)
        return OperationFailed.exit_code
    return rv if isinstance(rv, int) and not isinstance(rv, bool) else 0


def console_main() -> None:
    """The `memoryd` script and `python -m memoryd`: the process exits with main()'s code. Every
    object is frozen out of the cyclic collector first: a command is a process of its own, and
    the collection the interpreter runs at exit walked every object the command had made (about
    10 ms of a forget preview); memory is the system's to reclaim."""
    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    console_main()
