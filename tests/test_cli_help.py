"""`memoryd --help` and every subcommand's help are complete: each command says what it does,
each option says what it is for, and help works with -h as with --help."""

from __future__ import annotations

import click
import pytest

from daemon.cli import cli, main


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
