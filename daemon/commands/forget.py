"""`memoryd forget`: preview (--dry-run) or purge what memoryd derived from chosen sessions."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from memoryd.commands import CliState, agent_option, emit, json_option, pass_state, run_async
from memoryd.errors import JobPayloadError, UsageError

if TYPE_CHECKING:
    from memoryd.forget.report import ForgetReport
    from memoryd.forget.select import Selectors

# The forget operation's name (memoryd.ops.forget), which prefixes its request errors. A dry run
# checks its flags without the op's request model (see `_preview`);
# tests/test_cli_forget_preview.py checks that both ways give the same report and the same errors.
FORGET = "forget"

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
                "--entry",
                "entries",
                multiple=True,
                metavar="KEY",
                help="Entry key (exact, as search shows it): forget this one fact and what was derived "
                "from it; its sessions keep their other memory and never stage it again. Repeatable.",
            ),
            click.option(
                "--match",
                default=None,
                metavar="TEXT",
                help="The whole text of a staged or promoted entry (exact; `User: ` may be left out): "
                "forget every entry with that text, as --entry does.",
            ),
            click.option(
                "--dry-run", is_flag=True, help="Report what would be removed; takes no lock, writes nothing."
            ),
        )
    ):
        fn = option(fn)
    return fn


verify_option = click.option(
    "--verify",
    is_flag=True,
    help="After the purge, run the erasure verifier over the forgotten sessions' content, add its "
    "result to the report and exit 1 if it fails (not with --dry-run, --entry or --match).",
)


def forget_fields(
    agent_id: str,
    sessions: tuple[str, ...],
    participants: tuple[str, ...],
    hook_sources: tuple[str, ...],
    since: str | None,
    dry_run: bool,
    entries: tuple[str, ...] = (),
    match: str | None = None,
    verify: bool = False,
) -> dict[str, Any]:
    """The request the selector flags describe (validated by the forget operation). The entry
    fields and `verify` are sent only when given, so a plain session forget's payload stays as
    it was."""
    fields: dict[str, Any] = {
        "agent": agent_id,
        "sessions": list(sessions),
        "participants": list(participants),
        "hook_sources": list(hook_sources),
        "since": since,
        "dry_run": dry_run,
    }
    if entries:
        fields["entries"] = list(entries)
    if match is not None:
        fields["match"] = match
    if verify:
        fields["verify"] = True
    return fields


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _done(report: ForgetReport) -> str:
    """One line saying what an applied forget did (a preview says so itself)."""
    a, c = report.artifacts, report.counts  # counts: a stored result keeps no lists
    if c.suppressed_claims is not None:
        recorded = f"suppressed {_count(c.suppressed_claims, 'claim')} from their sessions"
    else:
        recorded = f"recorded {_count(c.sessions_recorded_forgotten, 'session')} as forgotten"
    removed = [
        _count(c.entries_removed, "memory entry").replace("entrys", "entries"),
        _count(a.session_corpus_lines, "session-corpus line"),
        _count(a.index_chunks, "index chunk"),
        _count(a.vector_rows, "vector row"),
        _count(a.short_term_entries, "short-term entry").replace("entrys", "entries"),
        _count(a.origin_rows, "origin row"),
    ]
    return f"Done: {recorded}; removed " + ", ".join(removed) + "; transcripts and archives untouched"


def _human(report: ForgetReport) -> str:
    """The report for a reader."""
    from memoryd.forget.summary import render_human

    lines = [render_human(report)]
    if not report.dry_run:
        lines.append(_done(report))
    if report.verification is not None:
        from memoryd.ops.verified_forget import render_verification

        lines += render_verification(report.verification)
    return "\n".join(lines)


def _preview_selectors(fields: dict[str, Any]) -> tuple[str, Selectors]:
    """The agent and selectors of a dry run, checked by the request's rules in the request
    model's order (the payload's size, each field, then the selectors together), each error
    worded as the op's (`forget: <field>: …`)."""
    from memoryd.forget import rules
    from memoryd.forget.select import Selectors
    from memoryd.ops.payload import check_payload_size

    check_payload_size(FORGET, fields)
    try:
        agent = rules.check_agent(fields["agent"])
        sessions = rules.clean_sessions(fields["sessions"])
        participants = rules.clean_values("participants", fields["participants"])
        hook_sources = rules.clean_values("hook_sources", fields["hook_sources"])
        since = fields["since"]
        since_ms = None if since is None else rules.parse_since(since)
        entries = rules.clean_values("entries", fields.get("entries", []))
        match = rules.clean_match(fields.get("match"))
        rules.check_selector_count(sessions, participants, hook_sources, entries, match, since)
        rules.check_verify(fields.get("verify", False), True, entries, match)
    except UsageError as exc:
        raise JobPayloadError(f"{FORGET}: {exc}") from None
    return agent, Selectors(
        tuple(sessions), tuple(participants), tuple(hook_sources), since_ms, tuple(entries), match
    )


def _preview(state: CliState, fields: dict[str, Any]) -> ForgetReport:
    """A dry run in this process, as the forget op runs one (a read-only store, no Redis, no
    lock), with the op's report: plain data, and the flags checked by the request's rules
    instead of its model, so the preview an operator runs before every forget loads no pydantic."""
    agent, selectors = _preview_selectors(fields)
    from memoryd.agent_runtime import agent_runtime
    from memoryd.forget.report import build_report
    from memoryd.forget.run import preview_plan

    async def go() -> ForgetReport:
        async with agent_runtime(state.settings, agent, readonly=True, redis=False) as rt:
            return build_report(await preview_plan(rt, selectors), dry_run=True)

    return run_async(go)


def register(cli: click.Group) -> None:
    @cli.command(FORGET)
    @agent_option
    @selector_options
    @verify_option
    @json_option
    @pass_state
    def forget_cmd(
        state: CliState,
        agent_id: str,
        sessions: tuple[str, ...],
        participants: tuple[str, ...],
        hook_sources: tuple[str, ...],
        since: str | None,
        entries: tuple[str, ...],
        match: str | None,
        dry_run: bool,
        verify: bool,
        as_json: bool,
    ) -> None:
        """With --entry or --match, remove one fact instead (the entry and what was derived from it)
        and suppress it from the sessions it came from, which keep their other memory.
        Deletes immediately unless --dry-run is given (there is no confirmation prompt).
        Source transcripts and archives are never touched.
        """
        fields = forget_fields(
            agent_id, sessions, participants, hook_sources, since, dry_run, entries, match, verify
        )
        if dry_run:  # the forget op's outcome of a report is always None: nothing to raise
            emit(_preview(state, fields), as_json, _human)
            return
        from memoryd.commands import emit_report, run_op
        from memoryd.ops import forget as forget_op

        request = forget_op.OP.contract.parse(fields)
        # A failed verification is a report all the same (the purge is done): its outcome exits 1.
        emit_report(forget_op.OP, run_op(state, forget_op.OP, request), as_json, _human)


def register_enqueue_commands(cli: click.Group) -> None:
    """`memoryd enqueue forget` (the op's request model: loaded only for it)."""
    from memoryd.commands._enqueue import register_enqueue
    from memoryd.ops import forget as forget_op

    register_enqueue(
        cli,
        forget_op.OP,
        [
            click.option("--agent", "agent_id", required=True, help="The agent whose memory to purge."),
            selector_options,
            verify_option,
        ],
        forget_fields,
        _human,
    )
