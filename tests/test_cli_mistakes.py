"""Mistakes an operator makes, refused with one line: an unknown agent, an unusable state
directory, no config file, a typo in the environment."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from memoryd.cli import cli, main
from memoryd.commands._environment import state_dir_problem
from tests.builders import SessionStoreBuilder, conversation
from tests.conftest import REDIS_URL

AGENT = ["--agent", "main"]
SCOPE = ["--scope", "tenant:default:user:nora"]

# Every command that reads settings, with the least it needs to get that far.
COMMAND_ARGS: dict[str, list[str]] = {
    "backfill": AGENT,
    "checkpoints": AGENT,
    "config check": [],
    "dream": AGENT,
    "enqueue backfill": AGENT,
    "enqueue dream": AGENT,
    "enqueue erase": SCOPE,
    "enqueue expire": [],
    "enqueue forget": [*AGENT, "--session", "direct-1"],
    "enqueue index": AGENT,
    "enqueue ingest": AGENT,
    "erase": SCOPE,
    "expire": [],
    "forget": [*AGENT, "--session", "direct-1"],
    "hold add": [*SCOPE, "--reason", "case 7"],
    "hold list": [],
    "hold release": SCOPE,
    "index": AGENT,
    "ingest": AGENT,
    "jobs": [],
    "mcp": AGENT,
    "mem lineage": ["--object", "o1"],
    "mem read": SCOPE,
    "mem write": [*SCOPE, "--content", "likes tea"],
    "promote": AGENT,
    "reset": AGENT,
    "receipts": [],
    "erasure": ["0123456789abcdef0123456789abcdef"],
    "run": [],
    "search": [*AGENT, "orchard"],
    "sessions": AGENT,
    "status": [],
    "verify": [],
}
NEEDS_NO_SETTINGS = {"demo init"}
AGENT_COMMANDS = [name for name, args in COMMAND_ARGS.items() if args[:1] == ["--agent"]]
DIRECT_AGENT_COMMANDS = [name for name in AGENT_COMMANDS if not name.startswith("enqueue ")]


def _command_names(group: click.Group, prefix: str = "") -> Iterator[str]:
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            yield from _command_names(command, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}"


def test_every_command_is_in_the_bad_environment_table() -> None:
    assert set(_command_names(cli)) == set(COMMAND_ARGS) | NEEDS_NO_SETTINGS


def _unwritable_dir() -> Path | None:
    """A directory this process cannot create files in (as root: a sysfs directory)."""
    for candidate in (Path("/sys/kernel"), Path("/proc/self")):
        if candidate.is_dir() and state_dir_problem(candidate) is not None:
            return candidate
    return None


BAD_STATE_DIRS = ["under-a-file", "is-a-file", "unwritable-parent"]


def _bad_state_dir(case: str, tmp_path: Path) -> Path:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory\n")
    if case == "under-a-file":
        return a_file / "state"
    if case == "is-a-file":
        return a_file
    if os.geteuid() != 0:
        locked = Path(tempfile.mkdtemp(dir=tmp_path))
        locked.chmod(0o500)
        return locked / "state"
    unwritable = _unwritable_dir()
    if unwritable is None:
        pytest.skip("no directory root cannot write to on this machine")
    return unwritable / "memoryd-state"


def _config(tmp_path: Path, sessions_root: Path, state_dir: Path) -> Path:
    path = tmp_path / "memoryd.toml"
    path.write_text(
        f'state_dir = "{state_dir}"\nsessions_root = "{sessions_root}"\nredis_url = "{REDIS_URL}"\n'
    )
    return path


@pytest.fixture
def agent_main(store_builder: SessionStoreBuilder) -> None:
    store_builder.add("agent:main:main", "direct-1", conversation("orchard", "direct-1"), chatType="direct")


@pytest.mark.usefixtures("agent_main")
@pytest.mark.parametrize("case", BAD_STATE_DIRS)
@pytest.mark.parametrize("command", sorted(COMMAND_ARGS))
def test_an_unusable_state_dir_is_one_line_and_exit_1_from_every_command(
    command: str, case: str, tmp_path: Path, sessions_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state_dir = _bad_state_dir(case, tmp_path)
    config = _config(tmp_path, sessions_root, state_dir)
    code = main(["--config", str(config), *command.split(), *COMMAND_ARGS[command]])
    captured = capsys.readouterr()
    assert code == 1, captured
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"memoryd: error: state_dir {state_dir} is unusable ("), (
        lines
    )
    assert "Traceback" not in captured.err + captured.out


@pytest.mark.usefixtures("agent_main")
@pytest.mark.parametrize("command", DIRECT_AGENT_COMMANDS + ["status"])
def test_an_unknown_agent_is_refused_and_no_store_is_created(
    command: str, tmp_path: Path, sessions_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state_dir = tmp_path / "state"
    config = _config(tmp_path, sessions_root, state_dir)
    args = [a if a != "main" else "mian" for a in COMMAND_ARGS[command]] or ["--agent", "mian"]
    code = main(["--config", str(config), *command.split(), *args])
    err = capsys.readouterr().err
    assert code == 2
    assert f"agent 'mian' not found under sessions_root {sessions_root} (known: main)" in err
    assert not (state_dir / "agents" / "mian").exists()


@pytest.fixture
def no_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh account: no config file, nothing set; the defaults live under a new home."""
    home = tmp_path / "home"
    home.mkdir()
    for name in [n for n in os.environ if n.startswith("MEMORYD_")] + ["STATE_DIRECTORY", "XDG_STATE_HOME"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("MEMORYD_REDIS_URL", REDIS_URL)
    return home


def test_without_a_config_the_defaults_are_named_and_a_missing_sessions_root_refused(
    no_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["sessions", "--agent", "main"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[0] == (
        f"memoryd: no config file; using defaults: state_dir={no_config / '.local/state/memoryd'}, "
        f"sessions_root={no_config / '.openclaw'} (pass --config FILE or set MEMORYD_CONFIG)"
    )
    assert err[1].startswith(f"memoryd: error: no config file, and the default sessions_root {no_config}")
    assert len(err) == 2


def test_without_a_config_an_existing_default_root_works_after_one_notice(
    no_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    SessionStoreBuilder(no_config / ".openclaw").add(
        "agent:main:main", "direct-1", conversation("orchard", "direct-1")
    )
    assert main(["sessions", "--agent", "main"]) == 0
    err = capsys.readouterr().err
    assert err.count("no config file; using defaults") == 1
