"""`memoryd forget`: preview (--dry-run) or purge what memoryd derived from chosen sessions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from daemon.commands import (
    CliState,
    agent_option,
    command_name,
    emit_report,
    json_option,
    pass_state,
    run_async,
    run_op,
)
from daemon.commands._enqueue import register_enqueue
from daemon.errors import OperationFailed, UsageError
from daemon.forget.report import ForgetReport, render_human
from daemon.forget.request import ForgetRequest
from daemon.ops import forget as forget_op

F = TypeVar("F", bound=Callable[..., Any])


def selector_options(fn: F) -> F:
    """The selector flags of a forget (`memoryd forget` and `memoryd enqueue forget`)."""
    for option in reversed(
        (
            click.option(
                "--session",
                "sessions",
                multiple=True,
                metavar="ID-OR-KEY",
                help="Session id or key (exact, case-sensitive); a key selects all its windows. Repeatable.",
            ),
            click.option(
                "--participant",
                "participants",
                multiple=True,
                metavar="ACTOR",
                help="Recorded actor id; selects whole live sessions. Repeatable.",
            ),
            click.option(
                "--hook-source",
                "hook_sources",
                multiple=True,
                metavar="SRC",
                help="Recorded hook source (gmail, email, webhook); live sessions. Repeatable.",
            ),
            click.option(
                "--since",
                default=None,
                metavar="DATE",
                help="Only sessions created at or after DATE (ISO date or date-time, or Unix ms).",
            ),
            click.option(
                "--dry-run", is_flag=True, help="Report what would be removed; takes no lock, writes nothing."
            ),
        )
    ):
        fn = option(fn)
    return fn


def forget_fields(
    agent_id: str,
    sessions: tuple[str, ...],
    participants: tuple[str, ...],
    hook_sources: tuple[str, ...],
    since: str | None,
    dry_run: bool,
) -> dict[str, Any]:
    """The request the selector flags describe (validated by the forget operation)."""
    return {
        "agent": agent_id,
        "sessions": list(sessions),
        "participants": list(participants),
        "hook_sources": list(hook_sources),
        "since": since,
        "dry_run": dry_run,
    }


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _done(report: ForgetReport) -> str:
    """One line saying what an applied forget did (a preview says so itself)."""
    a = report.artifacts
    removed = [
        _count(len(report.entryKeys), "memory entry").replace("entrys", "entries"),
        _count(a.sessionCorpusLines, "session-corpus line"),
        _count(a.indexChunks, "index chunk"),
        _count(a.vectorRows, "vector row"),
        _count(a.shortTermEntries, "short-term entry").replace("entrys", "entries"),
        _count(a.originRows, "origin row"),
    ]
    return (
        f"Done: recorded {_count(len(report.sessionIds), 'session')} as forgotten; removed "
        + ", ".join(removed)
        + "; transcripts and archives untouched"
    )


def _human(report: ForgetReport) -> str:
    lines = [render_human(report)]
    if not report.dryRun:
        lines.append(_done(report))
    if getattr(report, "verification", None) is not None:  # forget --verify: the verifier is loaded
        from daemon.ops.verified_forget import render_verification

        lines += render_verification(report)  # type: ignore[arg-type]
    return "\n".join(lines)


def register(cli: click.Group) -> None:
    @cli.command(command_name(forget_op.OP))
    @agent_option
    @selector_options
    @click.option(
        "--verify",
        is_flag=True,
        help="After the purge, run the erasure verifier over the forgotten sessions' content, add its "
        "result to the report and exit 1 if it fails (not with --dry-run).",
    )
    @json_option
    @pass_state
    def forget_cmd(
        state: CliState,
        agent_id: str,
        sessions: tuple[str, ...],
        participants: tuple[str, ...],
        hook_sources: tuple[str, ...],
        since: str | None,
        dry_run: bool,
        verify: bool,
        as_json: bool,
    ) -> None:
        """Remove everything memoryd derived from the selected sessions and record them as forgotten.

        Deletes immediately unless --dry-run is given (there is no confirmation prompt).
        Source transcripts and archives are never touched.
        """
        if verify and dry_run:
            raise UsageError(
                "--verify: cannot be combined with --dry-run (a preview removes nothing to verify)"
            )
        request: ForgetRequest = forget_op.OP.parse(
            forget_fields(agent_id, sessions, participants, hook_sources, since, dry_run)
        )
        if not verify:
            emit_report(forget_op.OP, run_op(state, forget_op.OP, request), as_json, _human)
            return
        from daemon.ops.verified_forget import forget_verified

        report = run_async(forget_verified, state.settings, request)
        emit_report(forget_op.OP, report, as_json, _human)
        if not report.verification.verified:
            failed = ", ".join(c.name for c in report.verification.checks if not c.passed)
            raise OperationFailed(
                f"forget --verify: the purge is done but the verifier failed ({failed}); "
                "see the report's verification for where"
            )

    register_enqueue(
        cli,
        forget_op.OP,
        [
            click.option("--agent", "agent_id", required=True, help="The agent whose memory to purge."),
            selector_options,
        ],
        forget_fields,
        "Enqueue a forget (same selectors as `memoryd forget`).",
        _human,
    )
