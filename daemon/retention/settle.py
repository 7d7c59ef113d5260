"""Receipts that wait for queued purges (I/O: the retention store and Redis).

No purge deletes another (a queued forget, erase or expire is still to run), so an erasure can
finish while such a job names its subject. Its redis check is then `waiting`, and its
verification lists the ids of those jobs. Once none of them is queued, deferred or running any
more, what they named has left Redis with them — a stored result keeps no argument
(daemon/runtime/wire.py) — and the check passes: the receipt is verified if every other check
passed. The daemon looks every RECEIPT_SETTLE_S and rewrites the stored receipt; a deployment's
receipt (`memoryd erasure ID`, read from the hosts' job results) applies the same rule as it
reads them.
"""

from __future__ import annotations

from redis.asyncio import Redis

from memoryd.retention.receipts import ErasureReceipt
from memoryd.retention.state import open_for_read, open_for_write
from memoryd.retention.waiting import settled_if_run
from memoryd.settings import Settings
from memoryd.store import retention as repo


async def settle_waiting_receipts(settings: Settings, redis: Redis) -> int:
    """Pass the waiting check of every receipt whose queued purges have all run; how many."""
    async with open_for_read(settings) as store:
        waiting = await store.read(repo.waiting_receipt_bodies) if store is not None else []
    if not waiting:
        return 0  # the usual case: no lease taken, nothing written
    settled = 0
    async with open_for_write(settings, redis) as (store, lease):
        for body in await store.read(repo.waiting_receipt_bodies):  # again, under the lease
            receipt = ErasureReceipt.model_validate_json(body)
            settled_receipt = await settled_if_run(redis, receipt)
            if settled_receipt is receipt:
                continue
            done = settled_receipt.model_dump_json(by_alias=True)
            await store.write(repo.update_receipt_body, receipt.receipt_id, done, fence=lease.fence)
            settled += 1
    return settled
