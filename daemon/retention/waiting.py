"""Whether the queued purges an erasure receipt waits for have run (Redis reads only, so the
client's `memoryd erasure ID` and the daemon's settle loop apply one rule)."""

from __future__ import annotations

from arq.constants import job_key_prefix
from redis.asyncio import Redis

from memoryd.retention.receipts import ErasureReceipt


async def _still_queued(redis: Redis, job_ids: list[str]) -> bool:
    return bool(await redis.exists(*(job_key_prefix + job_id for job_id in job_ids)))


async def settled_if_run(redis: Redis, receipt: ErasureReceipt) -> ErasureReceipt:
    """`receipt` with its waiting check passed once none of the purges it waits for is queued,
    deferred or running any more; else as it is."""
    verification = receipt.verification
    if verification is None or not verification.waiting_for:
        return receipt
    if await _still_queued(redis, verification.waiting_for):
        return receipt
    return receipt.settled()
