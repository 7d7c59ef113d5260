"""The README's commands work: the tour runs, in order, on the example store, and the two
top-level commands exist (the quickstart is exercised by test_quickstart.py, .ci/run by CI)."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from memoryd.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _block_after(heading: str) -> list[str]:
    section = README.split(heading, 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, f"no bash block after {heading!r}"
    return [line.split("  #", 1)[0].strip() for line in block[1].splitlines() if line.strip()]


def test_readme_names_two_commands_that_exist() -> None:
    commands = _block_after("## Two commands")
    assert commands == ["bash deploy/quickstart.sh", "bash .ci/run"]
    for cmd in commands:
        script = ROOT / cmd.split()[1]
        assert script.is_file() and script.read_text().startswith("#!/usr/bin/env bash")


def test_readme_tour_runs_in_order_on_the_example_store(
    tmp_path: Path,
    redis_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    unique: str,
) -> None:
    assert main(["demo", "init", str(tmp_path / "demo"), "--redis-url", redis_url]) == 0
    monkeypatch.setenv("MEMORYD_DAEMON__HOST_ID", f"test-{unique}")
    outputs: dict[str, str] = {}
    for line in _block_after("## A short tour"):
        if line.startswith("export "):
            name, value = line.removeprefix("export ").split("=", 1)
            if name == "MEMORYD_CONFIG":
                assert value == "~/.local/share/memoryd/demo/memoryd.toml"  # where the quickstart writes it
                monkeypatch.setenv(name, str(tmp_path / "demo" / "memoryd.toml"))
            continue
        argv = shlex.split(line)
        assert argv[0] == "memoryd", line
        capsys.readouterr()
        code = main(argv[1:])
        out, err = capsys.readouterr()
        assert code == 0, f"{line}: exit {code}: {err.strip()}"
        outputs[line] = out
    search = next(v for k, v in outputs.items() if k.startswith("memoryd search"))
    assert "lighthouse launch" in search.lower()
    preview = next(v for k, v in outputs.items() if k.endswith("--participant omar --dry-run"))
    assert "sig-omar-0001" in preview and "Dry run" in preview
    receipts = outputs["memoryd receipts"]
    assert "demo-1" in receipts
    erased = next(v for k, v in outputs.items() if k.endswith("--request-id demo-1"))
    assert "Verified: yes" in erased, erased
    preview = next(v for k, v in outputs.items() if k.startswith("memoryd erase") and k.endswith("--dry-run"))
    assert "rcpt-" not in preview and "complete" not in preview, preview
    last = list(outputs.values())[-1]
    assert "Verified: NO" not in last and "FAILED" not in last, last
    assert os.environ["MEMORYD_CONFIG"].startswith(str(tmp_path))
