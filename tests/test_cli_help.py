"""`memoryd --help` and every subcommand's help are complete: each command says what it does,
each option says what it is for, and help works with -h as with --help."""

from __future__ import annotations

import inspect
from pathlib import Path

import click
import pytest

from memoryd.cli import cli, main
from tests.builders import SessionStoreBuilder, conversation
from tests.conftest import REDIS_URL


def _commands() -> list[tuple[list[str], click.Command]]:
    out: list[tuple[list[str], click.Command]] = []

    def walk(cmd: click.Command, path: list[str], parent: click.Context | None) -> None:
        ctx = click.Context(cmd, info_name=path[-1] if path else "memoryd", parent=parent)
        out.append((path, cmd))
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None
                walk(sub, [*path, name], ctx)

    walk(cli, [], None)
    return out


def test_every_command_and_option_has_help_text() -> None:
    gaps = []
    for path, cmd in _commands():
        name = " ".join(["memoryd", *path])
        if not (cmd.help or "").strip():
            gaps.append(f"{name}: no description")
        for param in cmd.params:
            if (
                isinstance(param, click.Option)
                and not (param.help or "").strip()
                and "--help" not in param.opts
            ):
                gaps.append(f"{name} {'/'.join(param.opts)}: no help")
    assert gaps == [], "\n".join(gaps)


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_flags_work_on_every_command(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    for path, _ in _commands():
        assert main([*path, flag]) == 0, path
        out = capsys.readouterr().out
        assert out.startswith(f"Usage: memoryd {' '.join(path)}".rstrip()), path


def test_the_command_table_names_each_commands_module_and_help() -> None:
    """`memoryd --help` lists commands from the table in daemon/commands/__init__.py without
    importing them: the table's line heads each command's help, and is written nowhere else."""
    from memoryd.cli import load_all
    from memoryd.commands import COMMANDS, ENQUEUE_COMMANDS

    load_all()
    enqueue = cli.commands["enqueue"]
    assert isinstance(enqueue, click.Group)
    for group, table in ((cli, COMMANDS), (enqueue, ENQUEUE_COMMANDS)):
        assert set(group.commands) - {"enqueue"} == set(table)
        for name, (module, summary) in table.items():
            command = group.commands[name]
            callback = command.callback
            if isinstance(command, click.Group):  # a group's subcommands come from the same module
                callback = next(iter(command.commands.values())).callback
            assert callback is not None and callback.__module__ in (
                f"memoryd.commands.{module}",
                "memoryd.commands._enqueue",
            ), name
            assert command.get_short_help_str(1000) == summary, name
            assert (command.help or "").startswith(summary), name
            own = inspect.getdoc(inspect.unwrap(command.callback)) if command.callback else None
            assert not " ".join((own or "").split()).startswith(" ".join(summary.split())), (
                f"{name}: its docstring repeats the table's line"
            )


def _imported_after(*args: str) -> set[str]:
    import subprocess
    import sys

    code = (
        "import sys\nfrom memoryd.cli import main\n"
        f"code = main({list(args)!r})\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.splitlines()[-1].split())


def test_version_and_help_import_no_command() -> None:
    for args in (["--version"], ["--help"]):
        modules = _imported_after(*args)
        assert not {m for m in modules if m.startswith("memoryd.commands.")}, args
        assert not modules & {"pydantic", "anyio", "redis", "numpy", "httpx", "orjson"}, args


def test_a_command_imports_its_own_module_only() -> None:
    modules = _imported_after("ingest", "--help")
    commands = {m for m in modules if m.startswith("memoryd.commands.")}
    assert "memoryd.commands.ingest" in commands
    assert not commands & {"memoryd.commands.forget", "memoryd.commands.retention", "memoryd.commands.dream"}
    assert not modules & {"numpy", "httpx"}


def test_a_forget_dry_run_imports_neither_redis_nor_arq(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, unique: str
) -> None:
    # A dry run never connects to Redis, so its start-up must not pay for the client.
    store_builder.add("agent:main:main", "direct-1", conversation("orchard", "direct-1"), chatType="direct")
    config = tmp_path / "memoryd.toml"
    config.write_text(
        f'state_dir = "{tmp_path / "state"}"\nsessions_root = "{sessions_root}"\n'
        f'redis_url = "{REDIS_URL}"\n[retention]\ntenant = "t{unique}"\n'
    )
    assert main(["--config", str(config), "ingest", "--agent", "main"]) == 0
    modules = _imported_after(
        "--config", str(config), "forget", "--agent", "main", "--session", "direct-1", "--dry-run"
    )
    assert "memoryd.commands.forget" in modules
    assert not modules & {"redis", "arq"}


def test_a_forget_dry_run_imports_no_pydantic(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, unique: str
) -> None:
    # The preview an operator runs before each forget: settings, the request's rules and the
    # report are plain data, so its start-up does not pay for pydantic and its models.
    store_builder.add("agent:main:main", "direct-1", conversation("orchard", "direct-1"), chatType="direct")
    config = tmp_path / "memoryd.toml"
    config.write_text(
        f'state_dir = "{tmp_path / "state"}"\nsessions_root = "{sessions_root}"\n'
        f'redis_url = "{REDIS_URL}"\n[retention]\ntenant = "t{unique}"\n'
    )
    assert main(["--config", str(config), "ingest", "--agent", "main"]) == 0
    for extra in ([], ["--json"]):
        modules = _imported_after(
            "--config", str(config), "forget", "--agent", "main", "--session", "direct-1", "--dry-run", *extra
        )
        assert "memoryd.commands.forget" in modules
        assert not {m for m in modules if m.split(".")[0] in ("pydantic", "pydantic_core")}, extra


def test_an_fts_only_search_imports_neither_httpx_numpy_nor_redis(
    tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, unique: str
) -> None:
    # A search without an embedder compares no vector and writes nothing: its start-up must
    # not pay for the embedding client, numpy, the Redis client or the enqueue twins' models.
    store_builder.add("agent:main:main", "direct-1", conversation("orchard", "direct-1"), chatType="direct")
    config = tmp_path / "memoryd.toml"
    config.write_text(
        f'state_dir = "{tmp_path / "state"}"\nsessions_root = "{sessions_root}"\n'
        f'redis_url = "{REDIS_URL}"\n[retention]\ntenant = "t{unique}"\n'
        '[index]\nsources = ["memory", "sessions"]\n'
    )
    assert main(["--config", str(config), "ingest", "--agent", "main"]) == 0
    assert main(["--config", str(config), "index", "--agent", "main"]) == 0
    for extra in ([], ["--json"]):
        modules = _imported_after("--config", str(config), "search", "--agent", "main", "orchard", *extra)
        assert "memoryd.commands.index" in modules
        assert not modules & {"httpx", "numpy", "redis", "memoryd.ops.op", "memoryd.lock", "pydantic"}, extra


def test_families_name_their_ops_commands() -> None:
    # Families that load their op only when it runs name its command themselves.
    from memoryd.commands.forget import FORGET
    from memoryd.commands.index import INDEX
    from memoryd.ops import forget as forget_op
    from memoryd.ops import index_sync as index_op

    assert (index_op.OP.contract.command, forget_op.OP.contract.command) == (INDEX, FORGET)


def test_shell_completion_completes_lazy_commands_and_is_documented() -> None:
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "_MEMORYD_COMPLETE": "bash_complete",
        "COMP_WORDS": "memoryd ingest --un",
        "COMP_CWORD": "2",
    }
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from memoryd.cli import main; sys.exit(main())"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "plain,--until-done" in done.stdout, done.stdout + done.stderr
    guide = (Path(__file__).resolve().parent.parent / "docs" / "operator-guide.md").read_text()
    assert "_MEMORYD_COMPLETE=bash_source memoryd" in guide and "_MEMORYD_COMPLETE=zsh_source" in guide
