"""`memoryd index` and `memoryd search`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from memoryd.agent_runtime import agent_runtime
from memoryd.commands import (
    CliState,
    agent_option,
    emit,
    emit_json,
    emit_report,
    json_option,
    pass_state,
    run_async,
    run_op,
    table,
)
from memoryd.index.search import run_search
from memoryd.sessions.admission import POLICY_REASON_PREFIXES

if TYPE_CHECKING:
    from memoryd.index.report import IndexReport, ResetReport
    from memoryd.index.search_report import SearchReport

# The index operation's command (memoryd.ops.index_sync): the op and its request model are
# loaded by `memoryd index` and its enqueue twin only, not by `memoryd search` or `reset`
# (tests/test_cli_help.py checks the name against the op).
INDEX = "index"

# What the index run's progress phases count (daemon/index/sync.py).
INDEX_UNITS = {"scan": "files", "chunk": "files", "chunks": "chunks", "embed": "texts", "publish": "chunks"}


def _index_human(report: IndexReport) -> str:
    f = report.files
    lines = [
        f"agent {report.agent_id}: {f.indexed} indexed, {f.unchanged} unchanged, {f.removed} removed, "
        f"{f.skipped} skipped, {f.discarded} discarded of {f.scanned} scanned; "
        f"{report.chunks_written} chunks written, {report.chunks_removed} removed "
        f"(model {report.model}, revision {report.revision_before} -> {report.revision_after})"
    ]
    notes = [[n.path, n.source, "discarded", n.reason] for n in report.discarded]
    notes += [[n.path, n.source, "removed", n.reason] for n in report.removed]
    # Transcripts the admission policy keeps out (internal ones, cron and the like, are many
    # and expected: counted above only).
    notes += [
        [n.path, n.source, "excluded", n.reason]
        for n in report.skipped
        if n.reason.startswith(POLICY_REASON_PREFIXES)
    ]
    if notes:
        lines.append(table(["path", "source", "action", "reason"], notes, empty=""))
    lines += [f"warning: {w}" for w in report.warnings]
    return "\n".join(lines)


def _reset_human(r: ResetReport) -> str:
    return (
        f"agent {r.agent_id}: index reset: removed {r.index_chunks} chunks of {r.index_sources} sources "
        f"({r.fts_rows} full-text rows, {r.vector_rows} vector rows) and {r.embedding_cache_rows} cached "
        "embeddings; lineage, staged entries and forgotten-session records are kept. "
        f"Run `memoryd index --agent {r.agent_id}` to rebuild."
    )


def _search_human(report: SearchReport) -> str:
    lines = []
    if report.stale:
        lines.append(f"warning: index is stale: {report.warning}; {report.action}")
    if not report.results:
        lines.append("no results")
        return "\n".join(lines)
    for hit in report.results:
        origin = hit.provenance.origin_class if hit.provenance else "?"
        lines.append(f"{hit.score:.3f}  {hit.path}#L{hit.start_line}-L{hit.end_line}  [{origin}]  {hit.key}")
        lines.append(f"       {hit.snippet}")
    if report.withheld:
        lines.append(f"({report.withheld} more not shown: not visible to participant {report.participant})")
    return "\n".join(lines)


def register(cli: click.Group) -> None:
    @cli.command(INDEX)
    @agent_option
    @click.option(
        "--force", is_flag=True, help="Rechunk every file; drop rows of forgotten and internal sessions."
    )
    @json_option
    @pass_state
    def index_cmd(state: CliState, agent_id: str, force: bool, as_json: bool) -> None:
        from memoryd.ops import index_sync as index_op

        request = index_op.OP.contract.parse({"agent": agent_id, "force": force})
        from memoryd.commands._progress import progress_bar

        with progress_bar(INDEX_UNITS, quiet=as_json) as progress:
            report = run_op(state, index_op.OP, request, progress)
        emit_report(index_op.OP, report, as_json, _index_human)

    @cli.command("reset")
    @agent_option
    @json_option
    @pass_state
    def reset_cmd(state: CliState, agent_id: str, as_json: bool) -> None:
        """Search finds nothing (and says the index is stale) until `memoryd index` rebuilds it."""
        from memoryd.index.reset import reset_index

        async def go() -> ResetReport:
            async with agent_runtime(state.settings, agent_id) as rt:
                return await reset_index(rt)

        emit(run_async(go), as_json, _reset_human)

    @cli.command("search")
    @agent_option
    @click.argument("query")
    @click.option("--limit", type=int, default=10, show_default=True, help="Results at most (1-100).")
    @click.option(
        "--participant",
        default=None,
        metavar="ACTOR",
        help="Only what this participant may recall (as `memoryd mcp` scopes an agent's recall).",
    )
    @json_option
    @pass_state
    def search_cmd(
        state: CliState, agent_id: str, query: str, limit: int, participant: str | None, as_json: bool
    ) -> None:

        async def go() -> SearchReport:
            async with agent_runtime(state.settings, agent_id, readonly=True, redis=False) as rt:
                return await run_search(rt, query, limit, participant=participant)

        report = run_async(go)
        if as_json:
            emit_json(report.to_json())  # plain data: a search loads no pydantic
        else:
            click.echo(_search_human(report))


def register_enqueue_commands(cli: click.Group) -> None:
    """`memoryd enqueue index` (the op's request model: loaded only for it)."""
    from memoryd.commands._enqueue import register_enqueue
    from memoryd.ops import index_sync as index_op

    register_enqueue(
        cli,
        index_op.OP,
        [
            click.option("--agent", "agent_id", required=True, help="The agent whose index to sync."),
            click.option("--force", is_flag=True, help="Re-chunk and re-embed even unchanged sources."),
        ],
        lambda agent_id, force: {"agent": agent_id, "force": force},
        _index_human,
    )
