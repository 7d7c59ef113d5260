"""`memoryd dream`, `memoryd promote` and `memoryd backfill` (reference §5.5–§5.8)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from memoryd.agent_runtime import agent_runtime
from memoryd.commands import (
    CliState,
    agent_name_option,
    agent_option,
    command_name,
    emit,
    emit_report,
    json_option,
    pass_state,
    run_async,
    run_op,
    table,
)
from memoryd.commands._enqueue import register_enqueue
from memoryd.dreaming.promote import run_promote
from memoryd.dreaming.rank import PromotionGates
from memoryd.dreaming.report import BackfillReport, DreamReport, PromoteExplanation, PromoteReport
from memoryd.dreaming.sweep import PHASES
from memoryd.errors import UsageError
from memoryd.ops import backfill as backfill_op
from memoryd.ops import dream as dream_op
from memoryd.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])


def _promote_human(r: PromoteReport) -> str:
    lines = [
        f"agent {r.agent_id}: {len(r.promoted)} promoted to {r.memory_path} ({r.mode}), "
        f"{r.eligible} eligible of {r.considered} staged"
    ]
    if r.promoted:
        lines.append(
            table(
                ["entry", "score", "sessions"],
                [[p.entry_key, f"{p.score:.3f}", ",".join(p.session_ids)] for p in r.promoted],
                empty="nothing promoted",
            )
        )
    for s in r.skipped:
        lines.append(f"skipped {s.entry_key}: {s.reason}")
    if r.rejected:
        lines.append("held back by gates: " + ", ".join(f"{k}={v}" for k, v in sorted(r.rejected.items())))
    if r.fallback_reason:
        lines.append(f"consolidation fell back to append-only: {r.fallback_reason}")
    lines.extend(f"warning: {w}" for w in r.warnings)
    return "\n".join(lines)


def _dream_human(r: DreamReport) -> str:
    lines = [f"agent {r.agent_id}: dreaming sweep at {r.sweep_at} ({', '.join(r.phases)})"]
    if r.light is not None:
        lines.append(f"light: {r.light.candidates} candidates of {r.light.considered} staged")
    if r.rem is not None:
        lines.append(f"rem: {len(r.rem.themes)} themes, {r.rem.truths} possible lasting truths")
    if r.deep is not None:
        lines.append("deep: " + _promote_human(r.deep))
    lines.extend(f"warning: {w}" for w in r.warnings)
    return "\n".join(lines)


def _backfill_human(r: BackfillReport) -> str:
    lines = [
        f"agent {r.agent_id}: backfill {r.mode}: {r.claims} claims from {r.candidates} messages "
        f"in {len(r.days)} days ({r.sessions_scanned} sessions scanned)"
    ]
    if r.days:
        lines.append(
            table(
                ["day", "sessions", "messages", "claims"],
                [[d.day, d.sessions, d.candidates, d.claims] for d in r.days],
                empty="no days",
            )
        )
    if r.mode in ("apply", "rem"):
        lines.append(
            f"staged {r.staged_entries}, diary lines {r.diary_lines}, origin rows {r.origin_rows}"
            + (f", run {r.run_id}" if r.run_id is not None else "")
        )
    if r.rolled_back_runs:
        lines.append("rolled back runs: " + ", ".join(str(i) for i in r.rolled_back_runs))
    lines.extend(f"warning: {w}" for w in r.warnings)
    return "\n".join(lines)


_VERDICTS = {
    "expired": "its origin scopes expired: retention hides it from promotion",
    "untrusted": "it did not come from the owner (an untrusted origin is never promoted)",
    "promoted": "it is promoted already",
    "empty": "it has no text",
    "too_old": "it was last recalled longer ago than dreaming.max_age_days",
}
_COMPARISON = {"max_age_days": "<="}


def _explain_human(r: PromoteExplanation) -> str:
    if r.would_promote:
        head = f"{r.entry_key}: would promote (score {r.score:.3f})"
    else:
        why = _VERDICTS.get(r.verdict, f"it misses the {r.verdict} gate")
        head = f"{r.entry_key}: would not promote: {why}"
    lines = [head]
    if len(r.claim_keys) > 1:
        lines.append("same claim as: " + ", ".join(k for k in r.claim_keys if k != r.entry_key))
    if r.parts:
        lines.append(f"score {r.score:.3f} =")
        lines += [f"  {p.name:<14} {p.value:.3f} x {p.weight:.2f} = {p.contribution:.3f}" for p in r.parts]
    if r.gates:
        lines.append("gates:")
        lines += [
            f"  {g.name:<19} {g.actual:g} {_COMPARISON.get(g.name, '>=')} {g.required:g}: "
            + ("pass" if g.passed else "FAIL")
            for g in r.gates
        ]
    return "\n".join(lines)


async def _explain(settings: Settings, agent_id: str, key: str, gates: PromotionGates) -> PromoteExplanation:
    from memoryd.dreaming.explain import explain_promotion

    async with agent_runtime(settings, agent_id, readonly=True, redis=False) as rt:
        report = await explain_promotion(rt, key, gates)
    if report.verdict == "not_staged":
        raise UsageError(
            f"promote --explain: agent {agent_id} has no staged entry {key!r} "
            "(the keys are in `memoryd promote --json` and the dreaming diary)"
        )
    return report


async def _promote(settings: Settings, agent_id: str, gates: PromotionGates) -> PromoteReport:
    async with agent_runtime(settings, agent_id) as rt:
        return await run_promote(rt, gates)


phase_option = click.option(
    "--phase",
    type=click.Choice([*PHASES, "all"]),
    default="all",
    show_default=True,
    help="Run one phase, or light → REM → deep.",
)


def dream_fields(agent_id: str, phase: str) -> dict[str, Any]:
    return {"agent": agent_id, "phases": list(PHASES) if phase == "all" else [phase]}


def backfill_options(fn: F) -> F:
    """The flags of a backfill (`memoryd backfill` and `memoryd enqueue backfill`)."""
    for option in reversed(
        (
            click.option(
                "--from", "from_day", default=None, metavar="YYYY-MM-DD", help="First day to backfill."
            ),
            click.option("--to", "to_day", default=None, metavar="YYYY-MM-DD", help="Last day to backfill."),
            click.option(
                "--limit-days", type=click.IntRange(min=1), default=None, help="Days per run (default 92)."
            ),
            click.option("--rem", "rem", is_flag=True, help="Write the grounded diary lines only."),
            click.option(
                "--apply", "apply", is_flag=True, help="Stage the claims and write the diary lines."
            ),
            click.option("--rollback", "rollback", is_flag=True, help="Undo earlier backfill runs."),
        )
    ):
        fn = option(fn)
    return fn


def backfill_fields(
    agent_id: str,
    from_day: str | None,
    to_day: str | None,
    limit_days: int | None,
    rem: bool,
    apply: bool,
    rollback: bool,
) -> dict[str, Any]:
    chosen = [name for name, on in (("rem", rem), ("apply", apply), ("rollback", rollback)) if on]
    if len(chosen) > 1:
        raise click.UsageError(f"--{chosen[0]} cannot be combined with --{chosen[1]}")
    fields: dict[str, Any] = {
        "agent": agent_id,
        "from_day": from_day,
        "to_day": to_day,
        "mode": chosen[0] if chosen else "preview",
    }
    if limit_days is not None:
        fields["limit_days"] = limit_days
    return fields


def register(cli: click.Group) -> None:
    @cli.command(command_name(dream_op.OP))
    @agent_option
    @phase_option
    @json_option
    @pass_state
    def dream(state: CliState, agent_id: str, phase: str, as_json: bool) -> None:
        request = dream_op.OP.contract.parse(dream_fields(agent_id, phase))
        emit_report(dream_op.OP, run_op(state, dream_op.OP, request), as_json, _dream_human)

    @cli.command("promote")
    @agent_option
    @click.option("--min-score", type=click.FloatRange(min=0), default=None, help="Override the score gate.")
    @click.option(
        "--min-recall-count", type=click.IntRange(min=0), default=None, help="Override the recall-count gate."
    )
    @click.option(
        "--min-unique-queries",
        type=click.IntRange(min=0),
        default=None,
        help="Override the distinct-queries gate.",
    )
    @click.option(
        "--explain",
        "explain_key",
        default=None,
        metavar="KEY",
        help="Write nothing; say why staged entry KEY would or would not promote, with its score's parts.",
    )
    @json_option
    @pass_state
    def promote(
        state: CliState,
        agent_id: str,
        min_score: float | None,
        min_recall_count: int | None,
        min_unique_queries: int | None,
        explain_key: str | None,
        as_json: bool,
    ) -> None:
        gates = PromotionGates(
            min_score=min_score, min_recall_count=min_recall_count, min_unique_queries=min_unique_queries
        )
        if explain_key is not None:
            emit(run_async(_explain, state.settings, agent_id, explain_key, gates), as_json, _explain_human)
            return
        emit(run_async(_promote, state.settings, agent_id, gates), as_json, _promote_human)

    @cli.command(command_name(backfill_op.OP))
    @agent_option
    @backfill_options
    @json_option
    @pass_state
    def backfill(
        state: CliState,
        agent_id: str,
        from_day: str | None,
        to_day: str | None,
        limit_days: int | None,
        rem: bool,
        apply: bool,
        rollback: bool,
        as_json: bool,
    ) -> None:
        """Preview (writes nothing) unless a mode is given."""
        fields = backfill_fields(agent_id, from_day, to_day, limit_days, rem, apply, rollback)
        request = backfill_op.OP.contract.parse(fields)
        emit_report(backfill_op.OP, run_op(state, backfill_op.OP, request), as_json, _backfill_human)

    register_enqueue(
        cli,
        dream_op.OP,
        [agent_name_option, phase_option],
        dream_fields,
        _dream_human,
    )
    register_enqueue(
        cli,
        backfill_op.OP,
        [agent_name_option, backfill_options],
        backfill_fields,
        _backfill_human,
    )
