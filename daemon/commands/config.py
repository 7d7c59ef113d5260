"""`memoryd config check`."""

from __future__ import annotations

from typing import Any

import click

from memoryd.commands import CliState, emit, json_option, pass_state, warn_missing_sessions_root
from memoryd.redaction import redact_urls_in
from memoryd.settings import settings_as_dict


def _human(data: dict[str, Any]) -> str:
    lines: list[str] = []

    def walk(prefix: str, value: object) -> None:
        if isinstance(value, dict) and value:
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else k, v)
        else:
            lines.append(f"{prefix} = {value!r}")

    walk("", data)
    return "config OK\n" + "\n".join(lines)


def register(cli: click.Group) -> None:
    @cli.group("config")
    def config_group() -> None:
        pass  # a group: its line is the table's (daemon/commands/__init__.py)

    @config_group.command("check")
    @json_option
    @pass_state
    def check(state: CliState, as_json: bool) -> None:
        """Validate the config and print the effective settings (exit 2 naming a bad key);
        passwords and tokens in URLs are shown as ***."""
        warn_missing_sessions_root(state.settings)
        emit(redact_urls_in(settings_as_dict(state.settings)), as_json, _human)
