"""`forget`: purge what was derived from chosen sessions of one agent; `dry_run` previews;
`verify` runs the retention verifier over what the purge removed.

A preview reads a read-only store without Redis: no lock, no writes, not even a schema. A
purge holds the workspace lock for its whole run (plan, apply and, with `verify`, the
verifier's run), then deletes earlier job arguments and results in Redis that name what it
forgot (daemon/ops/forget_redis.py). A rerun of the same request converges, so arq's
at-least-once delivery is safe. A verification that fails is a report all the same (the purge
is done), which exits 1 however it was sent; its stored form names the kind of a workspace
file, never its path (which may name the subject).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from memoryd.errors import MemorydError, OperationFailed
from memoryd.forget.request import ForgetRequest
from memoryd.ops.op import JobContract, JobPolicy, LockPolicy, Op, OpContext, Report, Routing

if TYPE_CHECKING:
    from memoryd.forget.report import ForgetReport


async def _run(ctx: OpContext, request: ForgetRequest) -> Report:
    from memoryd.forget.run import preview_forget, purge

    if request.dry_run:
        return await preview_forget(ctx.agent_runtime(), request)
    # Imported here: it loads redis and arq, which a dry run never uses.
    from memoryd.ops.forget_redis import purge_forgotten_from_redis

    redis = ctx.require_redis()
    report = await purge(ctx.agent_runtime(), request, ctx.require_lease())
    await purge_forgotten_from_redis(ctx.settings, redis, request.agent, report.session_ids)
    if not request.verify:
        return report
    from memoryd.ops.verified_forget import verify_forgotten

    verification = await verify_forgotten(ctx.settings, redis, request.agent, report.session_ids)
    return dataclasses.replace(report, verification=verification)


def _result() -> type[ForgetReport]:
    from memoryd.forget.report import ForgetReport

    return ForgetReport


def _lock(request: ForgetRequest) -> LockPolicy:
    return LockPolicy.NONE if request.dry_run else LockPolicy.WHOLE_RUN


def _outcome(result: Mapping[str, Any]) -> MemorydError | None:
    from memoryd.ops.result import read_result

    report = read_result(_result(), result)  # None: another version's result, nothing to read
    verification = None if report is None else report.verification
    if verification is None or verification.verified:
        return None
    failed = ", ".join(c.name for c in verification.checks if not c.passed)
    return OperationFailed(
        f"forget --verify: the purge is done but the verifier failed ({failed}); "
        "see the report's verification for where"
    )


def _redacted(report: Report) -> Report:
    if not isinstance(report, _result()) or report.verification is None:
        return report
    return dataclasses.replace(report, verification=report.verification.stored_form())


OP = Op(
    contract=JobContract(
        name="forget",
        summary="purge what was derived from selected sessions of one agent; `dry_run` previews, "
        "`verify` runs the erasure verifier after the purge",
        request=ForgetRequest,
        result=_result,
        routing=Routing.AGENT,
        command="forget",
        purge=True,
        outcome=_outcome,
    ),
    run=_run,
    policy=JobPolicy(
        lock=_lock,
        redact_result=_redacted,
    ),
)
