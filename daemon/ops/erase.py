"""`erase`: erase a data subject's scope (seed 001); the result is the erasure receipt.

The payload names a data subject, so it must not outlive its delivery: the client enqueues
it with a job-key expiry, and its result (even a job given up before it ran) is kept only
`retention.erase_result_ttl_s`. Erasure takes the retention lease and each agent's workspace
lock inside the domain. A refusal (a legal hold) is a receipt, and exits 3 however it was sent;
a subject nothing names is a `not_found` receipt and exits 2. Its result in Redis is the stored
form of the receipt: residue paths (which may name the subject) go to a direct caller only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from memoryd.errors import MemorydError, RefusedError, UsageError
from memoryd.ops.op import JobContract, JobPolicy, LockPolicy, Op, OpContext, Report, Routing
from memoryd.retention.request import EraseRequest

if TYPE_CHECKING:
    from memoryd.settings import Settings


async def _run(ctx: OpContext, request: EraseRequest) -> BaseModel:
    from memoryd.ops.erasure import run_erase

    return await run_erase(ctx.settings, ctx.redis, request)  # no Redis for a dry run (LockPolicy.NONE)


def _result() -> type[BaseModel]:
    from memoryd.retention.receipts import ErasureReceipt

    return ErasureReceipt


def _lock(request: EraseRequest) -> LockPolicy:
    return LockPolicy.NONE if request.dry_run else LockPolicy.IN_DOMAIN


def _result_ttl_s(settings: Settings) -> int:
    return settings.retention.erase_result_ttl_s


def _outcome(result: Mapping[str, Any]) -> MemorydError | None:
    from memoryd.ops.result import read_result
    from memoryd.retention.receipts import ErasureReceipt

    receipt = read_result(ErasureReceipt, result)
    if receipt is None:  # another version's result: nothing it says can be read
        return None
    if receipt.state == "not_found":
        return UsageError(
            "erasure not found: no scope, object, ingested session or pending erasure names this "
            "scope; nothing was erased (check its spelling: tenant:<t>:user:<u>)"
        )
    if receipt.state != "refused":
        return None
    holds = ", ".join(b.hold_id for b in receipt.blocked)
    return RefusedError(
        f"erasure refused: {receipt.hold_blocked} item(s) under legal hold ({holds}); "
        "nothing was changed. Release the hold(s) or pass --allow-partial"
    )


def _redacted(receipt: Report) -> Report:
    from memoryd.retention.receipts import ErasureReceipt

    return receipt.stored_form() if isinstance(receipt, ErasureReceipt) else receipt


OP = Op(
    contract=JobContract(
        name="erase",
        summary="erase a data subject's scope; the result is the erasure receipt",
        request=EraseRequest,
        result=_result,
        routing=Routing.HOST,
        outcome=_outcome,
        command="erase",
        purge=True,
    ),
    run=_run,
    policy=JobPolicy(
        lock=_lock,
        result_ttl_s=_result_ttl_s,
        payload_names_subject=True,
        redact_result=_redacted,
    ),
)
