"""Start-up of the `memoryd` command, as an operator meets it: `memoryd --version`, and a
forget dry run on a small agent (20 sessions, one ingest sweep), each a fresh process of the
installed console script. Baseline: `python -c "import click"` with the same interpreter,
the least a click command can cost. Targets: --version <= 1.5x, the dry run <= 4x (medians
of interleaved runs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bench.runner import Context, Row, at_most, timed
from bench.scenarios.forget import subset_sessions

NAME = "startup"
AGENT = "main"
SMALL_AGENT_SESSIONS = 20
REPS = {"tiny": 5, "small": 9, "medium": 15, "large": 15}  # a run is a fraction of a second


def missing() -> str | None:
    return None if _memoryd() else "no memoryd console script beside the interpreter"


def _memoryd() -> list[str] | None:
    script = Path(sys.executable).with_name("memoryd")
    return [str(script)] if script.exists() else None


# An installed memoryd starts from compiled bytecode (pip compiles on install), as the baseline's
# click does: with PYTHONDONTWRITEBYTECODE set, every run would compile memoryd's modules anew.
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _run(argv: list[str]) -> None:
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_ENV)


def _small_agent(ctx: Context, memoryd: list[str]) -> tuple[Path, str]:
    """A config over a 20-session copy of the agent, swept once; and the session to forget."""
    target = ctx.corpus.manifest.targets[AGENT]
    sessions_root = subset_sessions(ctx, target, others=SMALL_AGENT_SESSIONS - 1)
    state = ctx.scratch("state")
    config = ctx.workdir / "memoryd.toml"
    config.write_text(
        f'state_dir = "{state}"\nsessions_root = "{sessions_root}"\nredis_url = "{ctx.redis_url}"\n'
        f'[daemon]\nhost_id = "bench-{ctx.unique}"\n'
    )
    _run([*memoryd, "--config", str(config), "ingest", "--agent", AGENT])
    return config, target


def run(ctx: Context) -> list[Row]:
    memoryd = _memoryd()
    assert memoryd is not None
    config, target = _small_agent(ctx, memoryd)
    baseline = [sys.executable, "-c", "import click"]
    version = [*memoryd, "--version"]
    dry_run = [
        *memoryd,
        "--config",
        str(config),
        "forget",
        "--agent",
        AGENT,
        "--session",
        target,
        "--dry-run",
    ]
    for argv in (baseline, version, dry_run):  # writes the bytecode; not measured
        _run(argv)
    samples: list[list[float]] = [[], [], []]
    for _ in range(REPS[ctx.scale]):  # interleaved: a noisy neighbour hits all three alike
        for i, argv in enumerate((baseline, version, dry_run)):
            samples[i].append(timed(lambda argv=argv: _run(argv)))  # type: ignore[misc]
    base, version_s, dry_run_s = samples
    note = "wall time of a fresh process; baseline python -c 'import click'"
    return [
        at_most(NAME, "memoryd --version", "s", version_s, base, 1.5, note),
        at_most(
            NAME, f"forget --dry-run, {SMALL_AGENT_SESSIONS}-session agent", "s", dry_run_s, base, 4.0, note
        ),
    ]
