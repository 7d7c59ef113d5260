"""`memoryd demo init [DIR]`: write an example session store and a config that points at it."""

from __future__ import annotations

from pathlib import Path

import click

from memoryd.commands import emit, json_option, table
from memoryd.demo import DEFAULT_REDIS_URL, DemoReport, write_demo


def _human(report: DemoReport) -> str:
    rows = [[a.agent, a.sessions, a.archives, a.sessions_dir] for a in report.agents]
    return "\n".join(
        [
            f"wrote an example session store and config in {report.directory}",
            "",
            table(["agent", "sessions", "archives", "sessions dir"], rows, empty="no agents"),
            "",
            f"config:      {report.config}",
            f"state dir:   {report.state_dir} "
            + (
                "(earlier state removed; created again on first use)"
                if report.state_reset
                else "(created on first use)"
            ),
            f"redis:       {report.redis_url}",
            f"admission:   hook sources kept out: {', '.join(report.excluded_hook_sources)}",
            "",
            "next:",
            f"  memoryd --config {report.config} run",
            f"  memoryd --config {report.config} ingest --agent main",
        ]
    )


def register(cli: click.Group) -> None:
    @cli.group("demo")
    def demo_group() -> None:
        pass  # a group: its line is the table's (daemon/commands/__init__.py)

    @demo_group.command("init")
    @click.argument(
        "directory", type=click.Path(file_okay=False, path_type=Path), default="memoryd-demo", required=False
    )
    @click.option(
        "--redis-url",
        default=DEFAULT_REDIS_URL,
        show_default=True,
        help="Redis URL written into the example config.",
    )
    @click.option(
        "--force",
        is_flag=True,
        help="Rewrite the example even if DIRECTORY already holds one, and remove the state memoryd "
        "kept of it (the tour starts again from nothing).",
    )
    @json_option
    def init(directory: Path, redis_url: str, force: bool, as_json: bool) -> None:
        """Write a small example session store and a matching memoryd.toml into DIRECTORY.

        Two agents with direct and group chats, gmail/email/webhook hook sessions, cron runs,
        participants and a reset archive. DIRECTORY defaults to ./memoryd-demo; nothing
        outside it is touched. Refuses a directory that already holds one (exit 2) unless --force.
        """
        emit(write_demo(directory, redis_url=redis_url, force=force), as_json, _human)
