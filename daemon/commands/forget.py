"""`memoryd forget`: preview (--dry-run) or purge what memoryd derived from chosen sessions."""

from __future__ import annotations

import click

from daemon.commands import CliState, agent_option, emit, json_option, pass_state, run_async
from daemon.forget.report import ForgetReport, render_human
from daemon.forget.request import ForgetRequest
from daemon.forget.service import forget


def register(cli: click.Group) -> None:
    @cli.command("forget")
    @agent_option
    @click.option("--session", "sessions", multiple=True, metavar="ID-OR-KEY",
                  help="Session id or key (exact, case-sensitive); a key selects all its windows. Repeatable.")
    @click.option("--participant", "participants", multiple=True, metavar="ACTOR",
                  help="Recorded actor id; selects whole live sessions. Repeatable.")
    @click.option("--hook-source", "hook_sources", multiple=True, metavar="SRC",
                  help="Recorded hook source (gmail, email, webhook); live sessions. Repeatable.")
    @click.option("--since", default=None, metavar="DATE",
                  help="Only sessions created at or after DATE (ISO date or date-time, or Unix ms).")
    @click.option("--dry-run", is_flag=True, help="Report what would be removed; takes no lock, writes nothing.")
    @json_option
    @pass_state
    def forget_cmd(state: CliState, agent_id: str, sessions: tuple[str, ...], participants: tuple[str, ...],
                   hook_sources: tuple[str, ...], since: str | None, dry_run: bool, as_json: bool) -> None:
        """Remove everything memoryd derived from the selected sessions and record them as forgotten.

        Deletes immediately unless --dry-run is given (there is no confirmation prompt).
        Source transcripts and archives are never touched.
        """
        request = ForgetRequest.parse({"agent": agent_id, "sessions": list(sessions),
                                       "participants": list(participants), "hook_sources": list(hook_sources),
                                       "since": since, "dry_run": dry_run})
        report: ForgetReport = run_async(forget, state.settings, request)
        emit(report, as_json, render_human)
