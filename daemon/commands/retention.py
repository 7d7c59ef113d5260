"""Scoped retention commands: `mem write|read|lineage`, `hold add|release|list`, `expire`,
`erase`, `receipts`, `verify`. Retention state is host-wide: none of them takes --agent."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click

from memoryd.commands import (
    CliState,
    ago,
    command_name,
    emit,
    emit_json,
    emit_report,
    iso_time,
    json_option,
    pass_state,
    run_async,
    run_op,
    table,
    yes_no,
)
from memoryd.commands._enqueue import register_enqueue
from memoryd.errors import OperationFailed, RefusedError, UsageError
from memoryd.ops import erase as erase_op
from memoryd.ops import expire as expire_op
from memoryd.ops.verification import run_verify
from memoryd.redis_conn import connect_redis
from memoryd.retention import api
from memoryd.retention.models import ExpireReport, HoldList, LineageReport, ReadResult, WriteResult
from memoryd.retention.receipts import DeploymentReceipt, ErasureReceipt, ReceiptList, Verification
from memoryd.retention.request import ExpireRequest
from memoryd.settings import Settings

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def erase_options(request_id_help: str) -> Callable[[F], F]:
    """The flags of an erasure (`memoryd erase` and `memoryd enqueue erase`)."""
    options = (
        click.option("--scope", required=True, help="The scope to erase, with everything under it."),
        click.option("--allow-partial", is_flag=True, help="Erase what no legal hold blocks; list the rest."),
        click.option("--request-id", default=None, help=request_id_help),
        click.option("--dry-run", is_flag=True, help="Plan and report only; no lock, no writes, no receipt."),
    )

    def apply(fn: F) -> F:
        for option in reversed(options):
            fn = option(fn)
        return fn

    return apply


def erase_fields(scope: str, allow_partial: bool, request_id: str | None, dry_run: bool) -> dict[str, Any]:
    """The request the erasure flags describe (validated by the erase operation)."""
    return {"scope": scope, "allow_partial": allow_partial, "request_id": request_id, "dry_run": dry_run}


def _with_redis(settings: Settings, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    async def main() -> T:
        redis = await connect_redis(settings)
        try:
            return await fn(settings, redis, *args, **kwargs)
        finally:
            await redis.aclose()

    return run_async(main)


# --- human renderings ---------------------------------------------------------------------------


def _write_human(r: WriteResult) -> str:
    lines = [f"Wrote {r.object_id} in {r.scope}"]
    if r.created_scopes:
        lines.append("Created scopes: " + ", ".join(r.created_scopes))
    expires = "never" if r.expires_at is None else f"{iso_time(r.expires_at)} ({ago(r.expires_at)})"
    lines.append(f"Expires at: {expires}" + (" (cut to the parent's)" if r.clamped else ""))
    if r.provenance:
        lines.append(f"Provenance: {r.provenance.parent} ({r.provenance.parent_hash})")
    lines += [f"Note: {n}" for n in r.notes]
    return "\n".join(lines)


def _read_human(r: ReadResult) -> str:
    if r.state != "live":
        return f"{r.scope}: {r.state}" + (f" (hidden by {r.hidden_by})" if r.hidden_by else "")
    rows = [
        [
            o.object_id,
            o.content[:60],
            o.provenance.parent if o.provenance else "",
            o.provenance.parent_state if o.provenance else "",
        ]
        for o in r.objects
    ]
    return table(["object", "content", "provenance", "parent"], rows, empty=f"{r.scope}: no objects")


def _lineage_human(r: LineageReport) -> str:
    rows = [
        [
            s.object_id,
            s.scope,
            s.object_state,
            s.provenance.parent if s.provenance else "",
            s.provenance.parent_state if s.provenance else "",
        ]
        for s in r.steps
    ]
    return table(["object", "scope", "state", "cites", "cited"], rows, empty="no lineage") + (
        "\n(truncated)" if r.truncated else ""
    )


def _holds_human(r: HoldList) -> str:
    return table(
        ["hold", "scope", "reason", "since"],
        [[h.hold_id, h.scope, h.reason, ago(h.created_at)] for h in r.holds],
        empty="no holds",
    )


def _expire_human(r: ExpireReport) -> str:
    return (
        f"Expired scopes: {r.expired_scopes}\nHeld (skipped): {r.held_skipped}\n"
        f"Purged: {r.purged_objects} objects, {r.purged_scopes} scopes, "
        f"{r.provenance_rewritten} provenance edges rewritten"
    )


def _verification_lines(v: Verification | None) -> list[str]:
    if v is None:
        return ["Verified: not run"]
    lines = [v.headline]
    for c in v.checks:
        status = {"passed": "passed", "failed": "FAILED", "skipped": "skipped"}[c.status]
        count = f", {c.count} findings" if c.status == "failed" else ""
        lines.append(f"  {c.name}: {status}{count}" + (f" — {c.note}" if c.note else ""))
        lines += [f"    at {where}" for where in c.locations]
    return lines


# What a dry run's planned state means; a preview stores no receipt, so it shows no id and
# never says "complete" of something that did not happen.
_PREVIEW_OUTCOME = {
    "complete": "everything under the scope would be erased",
    "partial": "would be partial: held scopes would stay",
    "refused": "would be refused: a legal hold covers the scope",
    "not_found": "nothing is stored under the scope",
}


def _receipt_human(r: ErasureReceipt) -> str:
    if r.dry_run:
        lines = [
            f"Erasure preview (dry run: nothing changed, no receipt stored): {_PREVIEW_OUTCOME[r.state]}",
            f"Structural to delete: {r.structural_deleted}",
            f"Provenance to rewrite: {r.provenance_rewritten}",
            f"Hold blocked: {r.hold_blocked}",
        ]
    else:
        lines = [
            f"Erasure {r.receipt_id} ({r.day}): {r.state}"
            + (" [resumed an interrupted erasure]" if r.resumed else ""),
            f"Structural deleted: {r.structural_deleted}",
            f"Provenance rewritten: {r.provenance_rewritten}",
            f"Hold blocked: {r.hold_blocked}",
        ]
    lines += [
        f"  blocked by {b.hold_id}: {b.structural} scopes, {b.provenance} provenance children, "
        f"{b.sessions} sessions"
        for b in r.blocked
    ]
    a = r.artifacts
    lines.append(
        f"Artifacts: {a.scopes} scopes, {a.objects} objects, {a.sessions} sessions "
        f"({a.shared_sessions_removed} shared, removed whole with the other participants' "
        f"contributions), {a.forgotten_records_hashed} hashed forgotten records, "
        f"{a.curated_writes} curated writes, {a.participant_rows} participant rows, "
        f"{a.times_coarsened} times cut to the day, {a.redis_values_purged} Redis values purged"
    )
    if a.forget:
        lines.append("Forget: " + ", ".join(f"{k} {v}" for k, v in a.forget.items()))
    if r.dry_run:
        return "\n".join(lines)
    return "\n".join(lines + _verification_lines(r.verification))


def _deployment_human(r: DeploymentReceipt) -> str:
    lines = [
        f"Erasure {r.erasure_id} on every host: {r.state} "
        f"({r.hosts_done} of {r.hosts} host(s) done, {r.hosts_pending} pending, {r.hosts_failed} failed)",
        f"Verified: {'yes' if r.verified else 'NO'}",
    ]
    if r.hosts_pending:
        lines.append(
            f"It waits for {r.hosts_pending} host(s) that have not run it (stopped, or still running it); "
            f"`memoryd erasure {r.erasure_id}` shows this receipt as they finish."
        )
    if r.hosts_failed:
        lines.append("A host's erasure failed: send the same request (same --request-id) again.")
    for i, receipt in enumerate(r.receipts, start=1):
        lines.append(f"--- host {i} of {r.hosts}")
        lines.append(_receipt_human(receipt))
    return "\n".join(lines)


def _deployment_outcome(r: DeploymentReceipt) -> None:
    """The exit code a deployment receipt means: 0 complete, 1 pending or failed on a host, 3
    refused by a hold, 2 nothing found anywhere (the direct command's codes)."""
    if r.hosts_pending or r.hosts_failed:
        raise OperationFailed(
            f"erasure {r.erasure_id}: not finished on every host ({r.hosts_pending} pending, "
            f"{r.hosts_failed} failed); `memoryd erasure {r.erasure_id} --wait` follows it"
        )
    if r.state == "refused":
        raise RefusedError(
            f"erasure {r.erasure_id}: refused by a legal hold on a host; nothing was changed there"
        )
    if r.state == "not_found":
        raise UsageError(
            f"erasure {r.erasure_id}: no host found anything this scope names; nothing was erased "
            "(check its spelling: tenant:<t>:user:<u>)"
        )


def _erase_everywhere(
    state: CliState,
    request: Any,
    request_id: str | None,
    queue_anyway: bool,
    wait: bool,
    timeout_s: float | None,
    as_json: bool,
) -> None:
    """`memoryd enqueue erase` without --queue: the erasure on every host (runtime/erasure_fanout)."""
    from memoryd.runtime.client import MemorydClient
    from memoryd.runtime.erasure_fanout import deployment_state, send_everywhere

    ttl = state.settings.retention.erase_result_ttl_s

    async def go() -> tuple[str, DeploymentReceipt | None]:
        async with MemorydClient.connect(state.settings) as client:
            sent = await send_everywhere(
                client, request, request_id=request_id or request.request_id, queue_anyway=queue_anyway
            )
            if not wait:
                return sent.erasure_id, None
            return sent.erasure_id, await deployment_state(
                client,
                sent.erasure_id,
                wait_s=timeout_s if timeout_s is not None else 3600.0,
                result_ttl_s=ttl,
            )

    erasure_id, receipt = run_async(go)
    if receipt is None:
        if as_json:
            emit_json({"erasureId": erasure_id})
        else:
            click.echo(erasure_id)
        return
    emit(receipt, as_json, _deployment_human)
    _deployment_outcome(receipt)


def _local_receipt_human(r: ErasureReceipt) -> str:
    return _receipt_human(r) + "\nThis host only: `memoryd enqueue erase` reaches every host on this Redis."


def _receipts_human(r: ReceiptList) -> str:
    return table(
        ["receipt", "day", "state", "structural", "rewritten", "blocked", "verified", "request"],
        [
            [
                x.receipt_id,
                x.day,
                x.state,
                x.structural_deleted,
                x.provenance_rewritten,
                x.hold_blocked,
                yes_no(x.verified),
                x.request_id or "",
            ]
            for x in r.receipts
        ],
        empty="no receipts: no erasure has run on this host",
    )


# --- commands -------------------------------------------------------------------------------------


def register(cli: click.Group) -> None:
    @cli.group("mem")
    def mem() -> None:
        pass  # a group: its line is the table's (daemon/commands/__init__.py)

    @mem.command("write")
    @click.option("--scope", required=True, help="Scope to write to (missing ancestors are created).")
    @click.option("--content", required=True, help="The memory text.")
    @click.option(
        "--provenance-parent", default=None, metavar="SCOPE", help="Scope this memory derives from."
    )
    @click.option("--retention-days", type=int, default=None, help="TTL in days (clamped to the parent's).")
    @json_option
    @pass_state
    def mem_write(
        state: CliState,
        scope: str,
        content: str,
        provenance_parent: str | None,
        retention_days: int | None,
        as_json: bool,
    ) -> None:
        """Store one object in a scope, optionally citing the scope it derives from."""
        result = _with_redis(
            state.settings, api.write_object, scope, content, provenance_parent, retention_days
        )
        emit(result, as_json, _write_human)

    @mem.command("read")
    @click.option("--scope", required=True, help="Scope to read (its live objects and their provenance).")
    @json_option
    @pass_state
    def mem_read(state: CliState, scope: str, as_json: bool) -> None:
        """The live objects of a scope with their provenance (an expired scope reads as empty)."""
        emit(run_async(api.read_scope, state.settings, scope), as_json, _read_human)

    @mem.command("lineage")
    @click.option(
        "--object", "object_id", required=True, metavar="ID", help="Object whose provenance chain to show."
    )
    @json_option
    @pass_state
    def mem_lineage(state: CliState, object_id: str, as_json: bool) -> None:
        """Follow an object's provenance edges (through expired scopes, for audit)."""
        emit(run_async(api.lineage, state.settings, object_id), as_json, _lineage_human)

    @cli.group("hold")
    def hold() -> None:
        pass  # a group: its line is the table's (daemon/commands/__init__.py)

    @hold.command("add")
    @click.option("--scope", required=True, help="Scope to hold; the hold covers everything under it.")
    @click.option(
        "--reason", required=True, help="Why the hold exists (e.g. a case number); shown in hold list."
    )
    @json_option
    @pass_state
    def hold_add(state: CliState, scope: str, reason: str, as_json: bool) -> None:
        """Place a legal hold (no expiry)."""
        result = _with_redis(state.settings, api.add_hold, scope, reason)
        emit(
            result,
            as_json,
            lambda h: f"Hold {h.hold_id} on {h.scope} since {iso_time(h.created_at)}: {h.reason}",
        )

    @hold.command("release")
    @click.option("--scope", required=True, help="Scope whose hold to release.")
    @json_option
    @pass_state
    def hold_release(state: CliState, scope: str, as_json: bool) -> None:
        """Release the legal hold on a scope."""
        result = _with_redis(state.settings, api.release_hold, scope)
        emit(result, as_json, lambda h: f"Released {h.hold_id} on {h.scope}")

    @hold.command("list")
    @json_option
    @pass_state
    def hold_list(state: CliState, as_json: bool) -> None:
        """Every legal hold."""
        emit(run_async(api.list_holds, state.settings), as_json, _holds_human)

    @cli.command(command_name(expire_op.OP))
    @json_option
    @pass_state
    def expire(state: CliState, as_json: bool) -> None:
        report = run_op(state, expire_op.OP, ExpireRequest())
        emit_report(expire_op.OP, report, as_json, _expire_human)

    @cli.command(command_name(erase_op.OP))
    @erase_options("Your reference, copied to the receipt.")
    @json_option
    @pass_state
    def erase(
        state: CliState, scope: str, allow_partial: bool, request_id: str | None, dry_run: bool, as_json: bool
    ) -> None:
        """On this host only: other hosts on the same Redis are not reached (`memoryd enqueue
        erase` sends the erasure to every host).

        Exit 3 when a legal hold refuses the erasure (nothing was changed); the receipt is
        printed either way.
        """
        request = erase_op.OP.contract.parse(erase_fields(scope, allow_partial, request_id, dry_run))
        emit_report(erase_op.OP, run_op(state, erase_op.OP, request), as_json, _local_receipt_human)

    register_enqueue(
        cli,
        expire_op.OP,
        [],
        dict,
        _expire_human,
    )
    register_enqueue(
        cli,
        erase_op.OP,
        [
            erase_options(
                "Your reference, copied to the receipts; the same reference again joins the same erasure."
            )
        ],
        erase_fields,
        _receipt_human,
        _erase_everywhere,
        details="Without --queue it prints the erasure's id (`memoryd erasure ID` shows its receipt); "
        "with --wait the receipt of the whole: complete only when every host has erased. A host "
        "that is not alive gets it when it is back; until then the receipt says partial (exit 1).",
    )

    @cli.command("erasure")
    @click.argument("erasure_id")
    @click.option("--wait", is_flag=True, help="Wait for the hosts that are alive to finish it.")
    @click.option("--timeout", "timeout_s", type=float, default=None, help="Wait at most this many seconds.")
    @json_option
    @pass_state
    def erasure(state: CliState, erasure_id: str, wait: bool, timeout_s: float | None, as_json: bool) -> None:
        """An erasure `memoryd enqueue erase` sent without --queue is complete only when every
        host has erased; this exits 1 while any has not (a stopped host runs it once it is back).
        """
        from memoryd.runtime.client import MemorydClient
        from memoryd.runtime.erasure_fanout import deployment_state

        async def go() -> DeploymentReceipt:
            async with MemorydClient.connect(state.settings) as client:
                return await deployment_state(
                    client,
                    erasure_id,
                    wait_s=(timeout_s if timeout_s is not None else 3600.0) if wait else None,
                    result_ttl_s=state.settings.retention.erase_result_ttl_s,
                )

        receipt = run_async(go)
        emit(receipt, as_json, _deployment_human)
        _deployment_outcome(receipt)

    @cli.command("receipts")
    @json_option
    @pass_state
    def receipts(state: CliState, as_json: bool) -> None:
        emit(run_async(api.list_receipts, state.settings), as_json, _receipts_human)

    @cli.command("verify")
    @click.option(
        "--receipt",
        "receipt_id",
        default=None,
        metavar="ID",
        help="Record this run on a receipt (its verified flag can only go down).",
    )
    @json_option
    @pass_state
    def verify(state: CliState, receipt_id: str | None, as_json: bool) -> None:
        """The subject of an erasure is never stored, so subject checks (ids, hashes, snippets,
        embeddings) run inside `erase` and are on its receipt; here they are `skipped`, and
        the run is not `verified`. Exit 1 only when a check failed.
        """
        result = _with_redis(state.settings, run_verify, None, receipt_id=receipt_id)
        emit(result, as_json, lambda v: "\n".join(_verification_lines(v)))
        if result.failed:  # a skipped check (no subject) is reported, not an error
            raise click.exceptions.Exit(1)
