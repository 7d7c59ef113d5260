"""A purge is accepted only once a replica holds it: after its job is queued, the client writes
once more (it rings the queue's bell) and sends Redis `WAIT` on the same connection, which
returns when that many replicas have acknowledged every write before it, the job's included. A
failover after that cannot drop the job: Sentinel promotes a replica that has it.

Replication is asynchronous, so WAIT bounds loss, it does not make Redis synchronous: a replica
that acknowledged may still not be the one promoted (Sentinel prefers the most up-to-date one)."""

from __future__ import annotations

from redis.asyncio import Redis

from memoryd.constants import QUEUE_BELL_KEY, QUEUE_BELL_TTL_S
from memoryd.errors import OperationFailed


async def ring_replicated(redis: Redis, queue: str, replicas: int, timeout_ms: int) -> int:
    """Ring `queue`'s bell and wait until `replicas` replicas hold every write so far, or for
    `timeout_ms`; the number of replicas that acknowledged."""
    bell = QUEUE_BELL_KEY.format(queue=queue)
    # One connection, no MULTI: WAIT inside a transaction would not block, and WAIT counts the
    # writes of its own connection only (the bell stands for the job written just before it).
    async with redis.pipeline(transaction=False) as pipe:
        pipe.rpush(bell, 1)
        pipe.expire(bell, QUEUE_BELL_TTL_S)
        pipe.wait(replicas, timeout_ms)
        *_, acknowledged = await pipe.execute()
    return int(acknowledged)


def not_replicated(
    function: str, job_id: str, acknowledged: int, replicas: int, timeout_ms: int
) -> OperationFailed:
    return OperationFailed(
        f"{function} job {job_id}: queued, but {acknowledged} of {replicas} replica(s) confirmed it "
        f"within {timeout_ms} ms (redis.purge_replica_timeout_ms), so a failover now could lose it; "
        "check the replicas (`INFO replication`), then send it again under the same --request-id"
    )
