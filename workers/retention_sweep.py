"""`retention_sweep` job: the scheduled form of `expire` (one per host per interval; retention
state is host-wide, in state_dir/retention.sqlite). Same payload, same report."""

from __future__ import annotations

import time
from typing import Any

from daemon.jobs import RETENTION_SWEEP
from workers.base import observed, sweep_done
from workers.expire import run_expiry

HOST_SCOPE = "host"  # the `agent` label of host-wide sweeps in metrics


@observed(RETENTION_SWEEP)
async def retention_sweep(ctx: dict[str, Any], payload: Any) -> dict[str, Any]:
    started = time.monotonic()
    report = await run_expiry(ctx, payload, RETENTION_SWEEP)
    sweep_done(RETENTION_SWEEP, HOST_SCOPE, time.monotonic() - started)
    return report
