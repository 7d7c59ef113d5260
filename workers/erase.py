"""`erase` job: an EraseRequest payload → daemon.ops.erasure.run_erase → ErasureReceipt JSON.

The payload names a data subject, so it must not outlive its delivery: the client enqueues it
with a job-key expiry and the worker keeps its result only `retention.erase_result_ttl_s`
(workers.worker). Erasure takes the workspace locks it needs inside the domain.
"""

from __future__ import annotations

from typing import Any

from daemon.jobs import ERASE
from workers.base import domain, dump, observed, parse_payload, settings_of


@observed(ERASE)
async def erase(ctx: dict[str, Any], payload: Any) -> dict[str, Any]:
    request_model = domain("daemon.retention.request", "EraseRequest", ERASE)
    run_erase = domain("daemon.ops.erasure", "run_erase", ERASE)
    request = parse_payload(request_model, payload, ERASE)
    return dump(await run_erase(settings_of(ctx), ctx["redis"], request))
