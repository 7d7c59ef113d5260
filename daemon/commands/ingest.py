"""`memoryd sessions`, `memoryd ingest`, `memoryd checkpoints`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from memoryd.agent_runtime import agent_runtime
from memoryd.commands import (
    CliState,
    agent_option,
    ago,
    command_name,
    emit,
    emit_report,
    human_size,
    json_option,
    pass_state,
    run_async,
    run_op,
    table,
)
from memoryd.commands._enqueue import register_enqueue
from memoryd.errors import OperationFailed, UsageError
from memoryd.ingest.report import (
    CheckpointRow,
    CheckpointsReport,
    CursorView,
    ExplainedSession,
    FingerprintView,
    IngestReport,
    RuleView,
    SessionExplanation,
    SessionRow,
    SessionsReport,
    combine_sweeps,
)
from memoryd.ops import ingest_sweep as ingest_op
from memoryd.sessions.admission import (
    AdmissionPolicy,
    RuleCheck,
    admission_reason,
    explain_admission,
    explain_key,
    policy_of,
)
from memoryd.settings import Settings
from memoryd.store.checkpoints import Checkpoint, load_checkpoints
from memoryd.store.tombstones import forgotten_ids

if TYPE_CHECKING:
    from memoryd.ops.op import ProgressFn

# What the sweep's progress phases count (daemon/ingest/sweep.py).
INGEST_UNITS = {"sessions": "sessions", "messages": "messages", "backlog": "sessions"}


def _parse_limit(value: str) -> int | None:
    if value == "all":
        return None
    try:
        n = int(value)
    except ValueError:
        n = -1
    if n < 1:
        raise UsageError(f"--limit: expected a positive number or 'all', got {value!r}")
    return n


async def _sessions(settings: Settings, agent_id: str, limit: int | None) -> SessionsReport:
    async with agent_runtime(settings, agent_id, readonly=True, redis=False) as rt:
        listing = rt.sessions.list_sessions()
        ids = [s.session_id for s in listing.sessions]
        forgotten: set[str] = set()
        if rt.store is not None:
            forgotten = await rt.store.read(forgotten_ids, ids, rt.secret())
        policy = AdmissionPolicy.from_settings(settings.memory_policy.exclude_sessions)
        ordered = sorted(listing.sessions, key=lambda s: (-(s.updated_at or 0), s.session_id))
        shown = ordered if limit is None else ordered[:limit]
        rows = [
            SessionRow(
                session_id=s.session_id,
                session_key=s.session_key,
                session_kind=s.session_kind,
                chat_type=s.chat_type,
                channel=s.channel,
                hook_external_content_source=s.hook_source,
                participants=[p.actor_id for p in s.participants],
                created_at=s.created_at,
                updated_at=s.updated_at,
                excluded_reason=admission_reason(s, policy, forgotten),
            )
            for s in shown
        ]
        return SessionsReport(
            agent_id=agent_id,
            total=len(ordered),
            shown=len(rows),
            sessions=rows,
            archives=len(rt.sessions.list_archives()),
            errors=list(listing.errors),
        )


def _checkpoint_row(cp: Checkpoint) -> CheckpointRow:
    return CheckpointRow(
        session_id=cp.session_id,
        session_key=cp.session_key,
        state_key=cp.state_key,
        fingerprint=FingerprintView(mtime_ms=cp.mtime_ms, size=cp.size, content_hash=cp.content_hash),
        cursor=CursorView(line_count=cp.line_count, last_content_line=cp.last_content_line, at_end=cp.at_end),
        excluded_reason=cp.excluded_reason,
        updated_at=cp.updated_at,
    )


def _views(checks: tuple[RuleCheck, ...]) -> list[RuleView]:
    return [
        RuleView(
            rule=c.rule,
            value=c.value or "-",
            result="passes" if c.reason is None else "keeps out",
            reason=c.reason,
        )
        for c in checks
    ]


async def _explain(settings: Settings, agent_id: str, query: str) -> SessionExplanation:
    """Why a session (by id or key) is in or out: every admission rule, its checkpoint, whether
    it is forgotten. Metadata and the store only; no transcript is read."""
    from memoryd.forget.select import Selectors, select_sessions, suggest_close
    from memoryd.forget.snapshot import read_recorded
    from memoryd.store.checkpoints import checkpoint_keys_of_sessions, load_checkpoints_by_key

    async with agent_runtime(settings, agent_id, readonly=True, redis=False) as rt:
        listing = rt.sessions.list_sessions()
        archives = rt.sessions.list_archives()
        recorded = await rt.store.read(read_recorded, agent_id, [query]) if rt.store is not None else ()
        selection = select_sessions(listing.sessions, archives, Selectors((query,), (), ()), recorded)
        if selection.unmatched:
            close = suggest_close(selection, listing.sessions, archives, recorded).unmatched[0].close_matches
            hint = (" Did you mean: " + ", ".join(repr(c) for c in close) + "?") if close else ""
            raise UsageError(
                f"sessions --explain: no session {query!r} is known to agent {agent_id} (no live session, "
                f"archive or ingestion record of it).{hint}"
            )
        ids = [t.session_id for t in selection.targets]
        forgotten: set[str] = set()
        checkpoints: dict[str, Checkpoint] = {}
        if rt.store is not None:
            forgotten = await rt.store.read(forgotten_ids, ids, rt.secret())
            keys = [k for k, _ in await rt.store.read(checkpoint_keys_of_sessions, ids)]
            checkpoints = {
                cp.session_id: cp for cp in (await rt.store.read(load_checkpoints_by_key, keys)).values()
            }
        policy = policy_of(settings)
        live = {s.session_id: s for s in listing.sessions}
        out: list[ExplainedSession] = []
        for t in selection.targets:
            session = live.get(t.session_id)
            if session is not None:
                checks = explain_admission(session, policy, forgotten)
                decision = admission_reason(session, policy, forgotten) or "admitted"
            else:
                checks = explain_key(t.session_id, t.session_key, policy, forgotten)
                decision = next((c.reason for c in checks if c.reason), None) or (
                    "archive: never ingested" if t.resolution == "archived" else "not listed: nothing to read"
                )
            cp = checkpoints.get(t.session_id)
            out.append(
                ExplainedSession(
                    session_id=t.session_id,
                    session_key=t.session_key,
                    source=t.resolution,  # type: ignore[arg-type]
                    decision=decision,
                    rules=_views(checks),
                    checkpoint=None if cp is None else _checkpoint_row(cp),
                    forgotten=t.session_id in forgotten,
                )
            )
        return SessionExplanation(agent_id=agent_id, query=query, sessions=out)


def _human_explain(r: SessionExplanation) -> str:
    parts: list[str] = []
    for s in r.sessions:
        lines = [
            f"session {s.session_id} (key {s.session_key or '-'}; {s.source})",
            f"decision: {s.decision}",
            table(
                ["rule", "session has", "result", "reason"],
                [[c.rule, c.value, c.result, c.reason or ""] for c in s.rules],
                empty="no admission rules apply",
            ),
        ]
        cp = s.checkpoint
        if cp is None:
            lines.append("checkpoint: none (never swept)")
        else:
            lines.append(
                f"checkpoint: {cp.cursor.line_count} lines consumed, size {human_size(cp.fingerprint.size)}, "
                f"recorded reason {cp.excluded_reason or '-'}, updated {ago(cp.updated_at)}"
            )
        lines.append(f"forgotten: {'yes' if s.forgotten else 'no'}")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


async def _checkpoints(settings: Settings, agent_id: str) -> CheckpointsReport:
    async with agent_runtime(settings, agent_id, readonly=True, redis=False) as rt:
        found = {}
        if rt.store is not None:
            found = await rt.store.read(load_checkpoints, agent_id)
        rows = [_checkpoint_row(cp) for cp in found.values()]
        return CheckpointsReport(agent_id=agent_id, checkpoints=rows)


def _human_sessions(r: SessionsReport) -> str:
    rows = [
        [
            s.session_id,
            s.session_key,
            s.session_kind,
            s.chat_type,
            s.channel,
            s.hook_external_content_source,
            ",".join(s.participants),
            s.excluded_reason or "admitted",
        ]
        for s in r.sessions
    ]
    out = table(
        ["session", "key", "kind", "chat", "channel", "hook", "participants", "admission"],
        rows,
        empty="no sessions in the agent's metadata",
    )
    out += f"\n{r.shown} of {r.total} sessions; {r.archives} archives (never ingested)"
    return out + "".join(f"\nskipped: {e}" for e in r.errors)


def _deferred_note(r: IngestReport, settings: Settings | None) -> list[str]:
    if not r.sessions_deferred:
        return []
    if settings is None:
        return [
            f"deferred: {r.sessions_deferred} admitted sessions wait for the next sweep "
            "(one sweep stages at most ingest.max_messages_per_sweep messages)"
        ]
    return [
        f"deferred: {r.sessions_deferred} admitted sessions wait for the next sweep (one sweep stages "
        f"at most {settings.ingest.max_messages_per_sweep} messages, ingest.max_messages_per_sweep); "
        f"the daemon sweeps every {settings.ingest.interval_s:g} s, or run "
        f"`memoryd ingest --agent {r.agent_id}` again"
    ]


def _human_ingest(r: IngestReport, settings: Settings | None) -> str:
    lines = [
        f"agent {r.agent_id}: {r.sessions_seen} sessions seen, {r.sessions_scanned} scanned, "
        f"{r.sessions_unchanged} unchanged, {sum(r.sessions_excluded.values())} excluded, "
        f"{r.sessions_missing} missing, {r.sessions_deferred} deferred",
        f"messages staged: {r.messages_staged}; checkpoints removed: {r.checkpoints_removed}",
    ]
    lines += _deferred_note(r, settings)
    lines += [f"excluded {reason}: {n}" for reason, n in r.sessions_excluded.items()]
    lines += [f"lines skipped ({kind}): {n}" for kind, n in r.lines_skipped.items()]
    lines += [f"error: {e}" for e in r.errors]
    return "\n".join(lines)


def _human_checkpoints(r: CheckpointsReport) -> str:
    rows = [
        [
            c.session_id,
            c.session_key,
            ago(c.fingerprint.mtime_ms),
            human_size(c.fingerprint.size),
            c.fingerprint.content_hash[:12],
            f"{c.cursor.line_count}/{c.cursor.last_content_line}",
            c.excluded_reason or "",
        ]
        for c in r.checkpoints
    ]
    return table(
        ["session", "key", "modified", "size", "hash", "lines/messages", "excluded"],
        rows,
        empty=f"no checkpoints: no sweep has recorded a session of agent {r.agent_id} yet",
    )


def _sweep_until_done(
    state: CliState, request: Any, first: IngestReport, progress: ProgressFn | None
) -> IngestReport:
    """Sweeps after `first` until none is left for the next; stops early when one reads
    nothing (what is left then cannot be read: its errors say why)."""
    reports = [first]
    total = first.sessions_scanned + first.backlog  # the backlog as the first sweep found it
    while reports[-1].backlog:
        if progress is not None:
            progress("backlog", max(total - reports[-1].backlog, 0), total)
        report = run_op(state, ingest_op.OP, request, progress)
        reports.append(report)
        if not (report.sessions_scanned or report.messages_staged):
            break
    if progress is not None:
        progress("backlog", max(total - reports[-1].backlog, 0), total)
    return combine_sweeps(reports)


def register(cli: click.Group) -> None:
    @cli.command("sessions")
    @agent_option
    @click.option("--limit", "limit", default="50", show_default=True, help="Sessions to show, or 'all'.")
    @click.option(
        "--explain",
        "explain",
        default=None,
        metavar="ID-OR-KEY",
        help="Why one session (by id or key) is in or out: every admission rule, its checkpoint, "
        "whether it is forgotten.",
    )
    @json_option
    @pass_state
    def sessions(state: CliState, agent_id: str, limit: str, explain: str | None, as_json: bool) -> None:
        if explain is not None:
            emit(run_async(_explain, state.settings, agent_id, explain), as_json, _human_explain)
            return
        report = run_async(_sessions, state.settings, agent_id, _parse_limit(limit))
        emit(report, as_json, _human_sessions)

    @cli.command(command_name(ingest_op.OP))
    @agent_option
    @click.option(
        "--until-done",
        is_flag=True,
        help="Sweep again until no session is left for a next sweep (a large backlog takes several: "
        "each stages at most ingest.max_messages_per_sweep messages); one report of them all.",
    )
    @json_option
    @pass_state
    def ingest(state: CliState, agent_id: str, until_done: bool, as_json: bool) -> None:
        from memoryd.commands._progress import progress_bar

        request = ingest_op.OP.contract.parse({"agent": agent_id})
        with progress_bar(INGEST_UNITS, quiet=as_json) as progress:
            report = run_op(state, ingest_op.OP, request, progress)
            if until_done:
                report = _sweep_until_done(state, request, report, progress)
        emit_report(ingest_op.OP, report, as_json, lambda r: _human_ingest(r, state.settings))
        if until_done and report.backlog:
            raise OperationFailed(
                f"agent {agent_id}: a sweep read nothing while {report.backlog} sessions were left; "
                "see the errors above, then run again"
            )

    @cli.command("checkpoints")
    @agent_option
    @json_option
    @pass_state
    def checkpoints(state: CliState, agent_id: str, as_json: bool) -> None:
        emit(run_async(_checkpoints, state.settings, agent_id), as_json, _human_checkpoints)

    register_enqueue(
        cli,
        ingest_op.OP,
        [click.option("--agent", "agent_id", required=True, help="The agent to sweep.")],
        lambda agent_id: {"agent": agent_id},
        lambda report: _human_ingest(report, None),  # the serving host's limits are its own
    )
