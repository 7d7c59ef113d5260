"""memoryd over the peer's state: a config whose sessions root is OpenClaw's state dir (the
agent database is read read-only) and whose workspace is the agent's, and the `memoryd`
command of this interpreter's environment, run as a process like OpenClaw's."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from bench.peer.generator import AGENT
from bench.peer.openclaw import OpenClawHome
from bench.peer.process import Measured, checked, measure

MEMORYD = Path(sys.executable).with_name("memoryd")


def config_path(home: OpenClawHome) -> Path:
    return home.root / "memoryd.toml"


def write_config(home: OpenClawHome, redis_url: str, host_id: str) -> Path:
    def q(value: object) -> str:
        return json.dumps(str(value))  # a TOML basic string

    lines = [
        f"state_dir = {q(home.root / 'memoryd')}",
        f"sessions_root = {q(home.state)}",
        f"redis_url = {q(redis_url)}",
        "",
        f"[agents.{AGENT}]",
        f"workspace = {q(home.workspace)}",
        'session_source = "openclaw"',
        "",
        "[index]",
        'sources = ["memory", "sessions"]',
        "",
        "[daemon]",
        f"host_id = {q(host_id)}",
    ]
    path = config_path(home)
    path.write_text("\n".join(lines) + "\n")
    return path


def compile_bytecode() -> None:
    """Compile memoryd's modules, so that every measured command runs from bytecode as an
    installed memoryd does (pip compiles at install; OpenClaw's side runs with its compile
    cache). An editable checkout under PYTHONDONTWRITEBYTECODE would otherwise compile every
    module it imports in each command, and that is start-up neither side ships with."""
    import compileall

    import memoryd

    compileall.compile_dir(Path(memoryd.__file__).parent, quiet=1, workers=0)


def env(home: OpenClawHome) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYD_")}
    return {**keep, "MEMORYD_CONFIG": str(config_path(home)), "NO_COLOR": "1"}


def argv(*args: str) -> list[str]:
    return [str(MEMORYD), *args]


def run(home: OpenClawHome, *args: str) -> Measured:
    return measure(argv(*args), env(home))


def run_checked(home: OpenClawHome, *args: str) -> Measured:
    return checked(argv(*args), env(home), what=f"memoryd {' '.join(args[:3])}")
