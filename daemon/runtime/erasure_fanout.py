"""An erasure across the deployment (DESIGN §5): one erase job on the queue of every host that
serves an agent on this Redis, and one record that remembers them.

`memoryd enqueue erase` without `--queue` sends it here. The record `memoryd:erasure:<id>` (a
hash, queue -> job id: no subject data, no content hash) has no expiry while a host has not
run its job, so the erasure stays pending for a stopped host, durably: an erase job's record
waits without expiry until its host is back and runs it (memoryd.runtime.client). The receipt
of the whole (retention.receipts.DeploymentReceipt) is read from the hosts' results each time
it is asked for, so it updates as hosts finish; once every host has finished, the record
expires with their results (`retention.erase_result_ttl_s`).

A request sent again under its request id is the same erasure on every host (the per-host
request ids derive from it), so a retry after a failure or a timeout joins, never duplicates.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

from memoryd import derivations
from memoryd.constants import AGENT_OWNER_KEY, ERASURE_KEY, HEARTBEATS_KEY
from memoryd.errors import OperationFailed, UsageError
from memoryd.ops import erase as erase_op
from memoryd.retention.receipts import DeploymentReceipt, ErasureReceipt, deployment_receipt
from memoryd.retention.request import EraseRequest
from memoryd.retention.waiting import settled_if_run
from memoryd.runtime.client import JobReport, MemorydClient
from memoryd.runtime.hosts import host_of_queue, parse_heartbeat, parse_route


@dataclass(frozen=True, slots=True)
class SentErasure:
    erasure_id: str
    queues: tuple[str, ...]  # the hosts' queues it was sent to


def _erasure_id(request_id: str | None) -> str:
    if request_id is None:
        return secrets.token_hex(16)
    # The caller's request id is unguessable and names no subject (docs/jobs.md): a digest of it
    # keeps the same request one erasure without storing the id itself.
    return derivations.erasure_digest(request_id)


async def _served_queues(client: MemorydClient) -> list[str]:
    owners = await client.redis.hgetall(AGENT_OWNER_KEY)  # type: ignore[misc]
    return sorted({route.queue for value in owners.values() if (route := parse_route(value)) is not None})


async def _alive(client: MemorydClient, queue: str) -> bool:
    host = host_of_queue(queue)
    return parse_heartbeat(host, await client.redis.hget(HEARTBEATS_KEY, host)).alive(time.time())  # type: ignore[misc]


async def send_everywhere(
    client: MemorydClient, request: EraseRequest, *, request_id: str | None, queue_anyway: bool
) -> SentErasure:
    """Enqueue the erasure on every host that serves an agent. A host that is not alive gets it
    too: it runs when the host is back (the receipt says `partial` until then). With no host
    alive it is refused (OperationFailed naming the hosts) unless `queue_anyway`."""
    queues = await _served_queues(client)
    if not queues:
        raise UsageError(
            f"no memoryd host is registered in Redis hash {AGENT_OWNER_KEY}; start `memoryd run`"
        )
    if not queue_anyway and not any([await _alive(client, q) for q in queues]):
        await client.require_live(queues[0], "erase for every host")  # raises, naming the hosts alive
    erasure_id = _erasure_id(request_id)
    key = ERASURE_KEY.format(erasure_id=erasure_id)
    for queue in queues:
        host_request = None if request_id is None else f"{request_id}@{host_of_queue(queue)}"
        job = await client.enqueue(
            erase_op.OP.contract.name,
            erase_op.OP.contract.payload(request),
            queue=queue,
            request_id=host_request,
        )
        # Recorded as each is sent: an interrupted fan-out still knows what it sent.
        await client.redis.hset(key, queue, job.job_id)  # type: ignore[misc]
        await client.redis.persist(key)
    return SentErasure(erasure_id, tuple(queues))


async def deployment_state(
    client: MemorydClient, erasure_id: str, *, wait_s: float | None = None, result_ttl_s: int
) -> DeploymentReceipt:
    """The receipt of the whole, from each host's job. With `wait_s`, each job whose host is
    alive is waited for (until that long in all); a host that is not alive is not waited for:
    its erasure is pending."""
    key = ERASURE_KEY.format(erasure_id=erasure_id)
    jobs = {q.decode(): j.decode() for q, j in (await client.redis.hgetall(key)).items()}  # type: ignore[misc]
    if not jobs:
        raise UsageError(f"erasure {erasure_id}: no such deployment erasure (ended and expired, or mistyped)")
    deadline = None if wait_s is None else time.monotonic() + wait_s
    receipts: list[ErasureReceipt] = []
    pending = failed = 0
    for queue, job_id in sorted(jobs.items()):
        report = await client.job(job_id, queue)
        if not report.done and deadline is not None and await _alive(client, queue):
            report = await _wait(client, job_id, queue, max(0.0, deadline - time.monotonic()))
        if report.state == "complete" and report.result is not None:
            # A receipt that waited for queued purges is verified once they have run, as the
            # host's own stored receipt is (its job result is not rewritten).
            receipts.append(await settled_if_run(client.redis, ErasureReceipt.model_validate(report.result)))
        elif report.state in ("failed", "not_found"):
            failed += 1
        else:
            pending += 1
    if not pending:  # every host has finished: the record goes with their results
        await client.redis.expire(key, result_ttl_s)
    return deployment_receipt(erasure_id, receipts, pending, failed)


async def _wait(client: MemorydClient, job_id: str, queue: str, timeout_s: float) -> JobReport:
    try:
        return await client.wait(job_id, queue=queue, timeout_s=timeout_s)
    except OperationFailed:  # still queued or running when the time was up: pending
        return await client.job(job_id, queue)
