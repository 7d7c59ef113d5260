"""`memoryd forget --dry-run` validates its flags without the forget op's request model (for
start-up) and builds the op's own report, plain data: it must print exactly what the op's report
is, and refuse exactly what the op's request model refuses, with the same words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from memoryd.cli import main
from memoryd.commands.forget import FORGET, _preview_selectors, forget_fields
from memoryd.constants import MAX_SELECTORS
from memoryd.errors import MemorydError
from memoryd.ops import forget as forget_op
from memoryd.ops.execute import run_locally
from memoryd.plain_report import report_json
from memoryd.settings import load_settings
from tests.builders import SessionStoreBuilder, conversation
from tests.conftest import REDIS_URL


@pytest.fixture
def config(tmp_path: Path, sessions_root: Path, store_builder: SessionStoreBuilder, unique: str) -> Path:
    store_builder.add("agent:main:telegram:direct:nora", "tg-nora", conversation("orchard", "tg-nora"))
    store_builder.add(
        "agent:main:slack:group:launch",
        "slack-launch",
        conversation("lighthouse", "slack-launch"),
        chatType="group",
        participants=[{"actorId": "nora"}, {"actorId": "omar"}],
    )
    store_builder.add(
        "hook:gmail:inv-1",
        "gmail-inv",
        conversation("invoice", "gmail-inv"),
        hookExternalContentSource="gmail",
    )
    path = tmp_path / "memoryd.toml"
    path.write_text(
        f'state_dir = "{tmp_path / "state"}"\nsessions_root = "{sessions_root}"\n'
        f'redis_url = "{REDIS_URL}"\n[retention]\ntenant = "t{unique}"\n'
    )
    assert main(["--config", str(path), "ingest", "--agent", "main"]) == 0
    return path


SELECTIONS = [
    ["--session", "tg-nora"],
    ["--session", "agent:main:slack:group:launch"],
    ["--participant", "omar"],
    ["--participant", "nobody", "--session", "missing"],
    ["--hook-source", "gmail", "--since", "2020-01-01"],
    ["--session", "tg-nora", "--session", "gmail-inv", "--since", "2999-01-01T00:00:00Z"],
]


@pytest.mark.parametrize("selection", SELECTIONS)
def test_a_dry_run_prints_the_forget_ops_report_byte_for_byte(
    config: Path, selection: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["--config", str(config), "forget", "--agent", "main", *selection, "--dry-run", "--json"]) == 0
    )
    printed = capsys.readouterr().out
    flags: dict[str, Any] = {"sessions": [], "participants": [], "hook_sources": [], "since": None}
    for flag, value in zip(selection[::2], selection[1::2], strict=True):
        if flag == "--since":
            flags["since"] = value
        else:
            flags[
                {"--session": "sessions", "--participant": "participants", "--hook-source": "hook_sources"}[
                    flag
                ]
            ].append(value)
    request = forget_op.OP.contract.parse({"agent": "main", **flags, "dry_run": True})
    report = anyio.run(run_locally, forget_op.OP, load_settings(config), request)
    expected = orjson.dumps(report_json(report), option=orjson.OPT_INDENT_2).decode()
    assert printed == expected + "\n"


BAD_FLAGS = [
    {"sessions": [], "participants": [], "hook_sources": []},
    {"sessions": ["a/b"]},
    {"sessions": [" spaced "]},
    {"participants": ["ok", ""]},
    {"hook_sources": ["gm\tail"]},
    {"sessions": ["s"], "since": "yesterday"},
    {"sessions": ["s"], "since": "nan"},
    {"sessions": ["s"] * 3, "participants": [f"p{i}" for i in range(MAX_SELECTORS)]},
    {"sessions": ["x" * 400 + str(i) for i in range(3000)]},
    {"sessions": ["\ud800"]},
    {"sessions": ["bad/one"], "since": "never"},
]


@pytest.mark.parametrize("bad", BAD_FLAGS)
def test_a_dry_run_refuses_what_the_forget_request_refuses_in_the_same_words(bad: dict[str, Any]) -> None:
    flags = {"sessions": (), "participants": (), "hook_sources": (), "since": None, **bad}
    fields = forget_fields(
        "main",
        tuple(flags["sessions"]),
        tuple(flags["participants"]),
        tuple(flags["hook_sources"]),
        flags["since"],
        True,
    )
    with pytest.raises(MemorydError) as by_op:
        forget_op.OP.contract.parse(fields)
    with pytest.raises(MemorydError) as by_preview:
        _preview_selectors(fields)
    assert (type(by_preview.value), str(by_preview.value)) == (type(by_op.value), str(by_op.value))
    assert by_preview.value.exit_code == 2


def test_the_preview_names_errors_as_the_forget_op_does() -> None:
    assert FORGET == forget_op.OP.contract.name == forget_op.OP.contract.command


def test_a_dry_run_builds_the_forget_ops_own_report(config: Path) -> None:
    # The report is declared once: the CLI's dry run builds the op's report type, not a copy of
    # its JSON form, so the two cannot drift.
    from memoryd.commands import CliState
    from memoryd.commands.forget import _preview

    fields = forget_fields("main", ("tg-nora",), ("omar",), (), None, True)
    report = _preview(CliState(str(config)), fields)
    assert type(report) is forget_op.OP.contract.result()
