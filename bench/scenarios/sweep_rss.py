"""Peak RSS of a first sweep, in a process of its own, with the scan processes it used counted
(the sum of their peaks). Target: <= 300 MB (the issue states it for 1M messages, which the
large scale has; smaller scales report their own message count)."""

from __future__ import annotations

import resource

from bench.runner import Context, Row, entry_point_missing, limit, not_available, run_async
from bench.scenarios._common import CONTEXT, INGEST, sweep_agents

NAME = "sweep_rss"


def missing() -> str | None:
    return entry_point_missing(CONTEXT, INGEST)


def run(ctx: Context) -> list[Row]:
    figure = f"peak RSS of a first sweep of {ctx.corpus.manifest.messages:,} messages"
    reason = missing()
    if reason:
        return [not_available(NAME, figure, reason)]
    settings = ctx.settings(ctx.scratch("state"))
    run_async(sweep_agents, settings, list(ctx.corpus.manifest.agents))
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    from memoryd.ingest.parallel import pool_pids

    workers = [_peak_mb(pid) for pid in pool_pids()]  # ingest.workers processes, if the sweep used them
    peak = own + sum(workers)
    note = "one run; peak RSS of the process" + (
        f" ({own:.0f} MB) plus each scan process's ({', '.join(f'{w:.0f}' for w in workers)} MB)"
        if workers
        else ""
    )
    row = limit(NAME, figure, "MB", [peak], 300.0, note=note)
    row.peak_rss_mb = peak
    return [row]


def _peak_mb(pid: int) -> float:
    """A live process's peak resident set (VmHWM), in MB."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0
