"""Peak RSS of a first sweep, in a process of its own. Target: <= 300 MB (the issue states it
for 1M messages, which the large scale has; smaller scales report their own message count)."""

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
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    row = limit(NAME, figure, "MB", [peak], 300.0, note="one run; RSS of the whole process")
    row.peak_rss_mb = peak
    return [row]
