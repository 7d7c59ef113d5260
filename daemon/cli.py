"""`memoryd …` — thin: parse, call the domain, print. Errors map to exit codes here only:
0 ok, 1 operation failed, 2 usage or config error, 3 refused (hold, lock timeout).

Commands live in `daemon/commands/<group>.py`, each with `register(cli)`; they are found by
module discovery, so adding a command family never edits this file.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Sequence

import click

from daemon import __version__
from daemon.allocator import tune_allocator
from daemon.commands import CliState
from daemon.errors import MemorydError, OperationFailed
from daemon.store.engine import ANY_SQLITE_ERROR


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
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


def _register_commands() -> None:
    import daemon.commands as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"daemon.commands.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(cli)


_register_commands()


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
    except ANY_SQLITE_ERROR as exc:  # a full disk or a broken file under a store: one line
        click.echo(f"memoryd: error: database: {exc}; free space or fix the file, then run again", err=True)
        return OperationFailed.exit_code
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(f"memoryd: error: {where}{exc.strerror or exc}; fix it, then run again", err=True)
        return OperationFailed.exit_code
    except KeyboardInterrupt:
        return 130
    return rv if isinstance(rv, int) and not isinstance(rv, bool) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
