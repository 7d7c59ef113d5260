"""`ingest_sweep` job: {"agent"} → daemon.ingest.sweep.run_ingest_sweep → IngestReport JSON.
The sweep takes the workspace lock itself, only around staging (slow parsing runs outside it)."""

from __future__ import annotations

import time
from typing import Any

from daemon.jobs import INGEST_SWEEP, SweepRequest
from daemon.runtime import metrics
from workers.base import domain, dump, ensure_served, observed, parse_payload, runtime, sweep_done

# Report fields that count sessions looked at, by the names the ingest report may use.
_SCANNED_FIELDS = ("sessionsScanned", "sessions_scanned", "scanned")


@observed(INGEST_SWEEP)
async def ingest_sweep(ctx: dict[str, Any], payload: Any) -> dict[str, Any]:
    run_ingest_sweep = domain("daemon.ingest.sweep", "run_ingest_sweep", INGEST_SWEEP)
    request = parse_payload(SweepRequest, payload, INGEST_SWEEP)
    ensure_served(ctx, request.agent, INGEST_SWEEP)
    started = time.monotonic()
    async with runtime(ctx, request.agent) as rt:
        report = dump(await run_ingest_sweep(rt))
    sweep_done(INGEST_SWEEP, request.agent, time.monotonic() - started)
    for name in _SCANNED_FIELDS:
        value = report.get(name)
        if isinstance(value, int):
            metrics.SESSIONS_SCANNED.labels(agent=request.agent).inc(value)
            break
    return report
